package dashboard

import (
	"bytes"
	"cmp"
	"context"
	"encoding/hex"
	"errors"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/worqr/worqr"
)

const (
	pageSize = 50
	// rowPreview is the bytes of each payload the queue page's tables
	// read (short shows at most these), and taskPreview those the task
	// page reads: both cut in Redis, so that a page's memory does not grow
	// with the payloads.
	rowPreview  = 80
	taskPreview = 64 << 10
)

func (h *handler) ctx(r *http.Request) (context.Context, context.CancelFunc) {
	return context.WithTimeout(r.Context(), 10*time.Second)
}

type overviewData struct {
	Queues []worqr.QueueInfo
	Poll   int64 // milliseconds
}

func (h *handler) overview(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := h.ctx(r)
	defer cancel()
	qs, err := readQueues(ctx, h.c) // sorted by name
	if err != nil {
		h.fail(w, r, http.StatusBadGateway, err.Error())
		return
	}
	h.render(w, r, "overview", http.StatusOK, overviewData{Queues: qs, Poll: h.opts.PollInterval.Milliseconds()})
}

// queueParam reads the queue name, given in hex as q.
func queueParam(r *http.Request, key string) (string, bool) {
	b, err := hex.DecodeString(r.FormValue(key))
	if err != nil || len(b) == 0 || len(b) > worqr.MaxQueueNameLen {
		return "", false
	}
	return string(b), true
}

// maxIDLen bounds a task id taken from a request.
const maxIDLen = 64

// folded says whether a path segment is one that browsers and servers
// fold away ("." and "..", or empty): such a name is linked to by its hex.
func folded(s string) bool { return s == "" || s == "." || s == ".." }

// queuePath is a queue page's address: /queue/<name>, the name escaped as
// one path segment, or /queue?q=<hex> for a name a path cannot carry.
func queuePath(base, name string) string {
	if folded(name) {
		return base + "/queue?q=" + hex.EncodeToString([]byte(name))
	}
	return base + "/queue/" + url.PathEscape(name)
}

// taskPath is a task page's address: /task/<queue>/<id>, or the query
// form for names a path cannot carry.
func taskPath(base, queue, id string) string {
	if folded(queue) || folded(id) {
		return base + "/task?" + url.Values{"q": {hex.EncodeToString([]byte(queue))}, "id": {id}}.Encode()
	}
	return base + "/task/" + url.PathEscape(queue) + "/" + url.PathEscape(id)
}

// pathSegments returns the escaped segments of r's path after prefix
// (such as "/queue/"), unescaped: ok false if the path does not start
// with prefix or a segment is not a valid escape.
func pathSegments(r *http.Request, prefix string) ([]string, bool) {
	rest, ok := strings.CutPrefix(r.URL.EscapedPath(), prefix)
	if !ok {
		return nil, false
	}
	parts := strings.Split(rest, "/")
	for i, p := range parts {
		u, err := url.PathUnescape(p)
		if err != nil {
			return nil, false
		}
		parts[i] = u
	}
	return parts, true
}

// queueFrom reads the queue a page is for: /queue/<name>, or q in hex.
func queueFrom(r *http.Request) (string, bool) {
	if !strings.HasPrefix(r.URL.Path, "/queue/") {
		return queueParam(r, "q")
	}
	parts, ok := pathSegments(r, "/queue/")
	if !ok || len(parts) != 1 || parts[0] == "" || len(parts[0]) > worqr.MaxQueueNameLen {
		return "", false
	}
	return parts[0], true
}

// taskFrom reads the task a page is for: /task/<queue>/<id>, or q in hex
// and id.
func taskFrom(r *http.Request) (queue, id string, ok bool) {
	if !strings.HasPrefix(r.URL.Path, "/task/") {
		queue, ok = queueParam(r, "q")
		id = r.URL.Query().Get("id")
	} else if parts, pok := pathSegments(r, "/task/"); pok && len(parts) == 2 {
		queue, id, ok = parts[0], parts[1], parts[0] != "" && len(parts[0]) <= worqr.MaxQueueNameLen
	}
	if !ok || id == "" || len(id) > maxIDLen {
		return "", "", false
	}
	return queue, id, true
}

// maxOffset bounds a position taken from a request: past any list Redis
// keeps (2³² - 1 entries), and far from overflowing the sums of positions
// the reads and the pages' links make; where an int has 32 bits, a
// quarter of its range.
const maxOffset = min(1<<32, math.MaxInt>>2)

// offsetParam reads a position: 0 if missing, bad or negative, at most
// maxOffset.
func offsetParam(r *http.Request, key string) int {
	n, err := strconv.Atoi(r.URL.Query().Get(key))
	if err != nil || n < 0 {
		if errors.Is(err, strconv.ErrRange) && !strings.HasPrefix(r.URL.Query().Get(key), "-") {
			return maxOffset
		}
		return 0
	}
	return min(n, maxOffset)
}

// gatheringsShown is how many open gatherings a queue's page lists.
const gatheringsShown = 20

type queueData struct {
	Base        string // the mount prefix, for links
	Info        worqr.QueueInfo
	Waiting     []worqr.TaskInfo
	WaitingFrom int
	Delayed     []worqr.TaskInfo
	DelayedFrom int
	// DelayedOnly is "retries" or "scheduled" when the delayed list shows
	// only those; DelayedNext is where its next page starts, 0 if none.
	DelayedOnly string
	DelayedNext int
	Procs       []worqr.ProcessInfo
	Dead        []worqr.DeadLetter
	DeadFrom    int
	// Finished are the kept outcomes (retained tasks that ended), latest
	// to expire first, from FinishedFrom.
	Finished     []worqr.KeptOutcome
	FinishedFrom int
	PageSize     int
	// Kind, when set, shows only the tasks of that kind (noKind: those
	// without one) in the waiting, delayed, in-flight and dead lists, each
	// page read by a bounded scan (see filtered); WaitingNext and DeadNext
	// are where their next pages start, 0 if none.
	Kind                  string
	WaitingNext, DeadNext int
	// Kinds counts the tasks by kind (see kindCounts); KindsMore says a
	// list held more than was counted.
	Kinds     []kindCount
	KindsMore bool
	// Groups is the queue's groups (see worqr.Client.Groups), read only
	// when it has some. GroupsWait, when above zero, says they were not
	// read, the lookups' budget being spent, and in how many seconds it
	// has room again: Groups is then empty.
	Groups     *worqr.GroupsReport
	GroupsWait int64
	// Gatherings is the first gatheringsShown of the queue's open
	// gatherings of aggregated tasks, the next to flush first (see
	// worqr.Client.Gatherings: counted, no payload read), read only when
	// it has some.
	Gatherings []worqr.GatheringInfo
	Stats      statsView
	// The choices the bulk forms offer: the kinds of the waiting tasks
	// shown, and the kinds and errors of the dead letters shown.
	WaitingKinds, DeadKinds []string
	DeadErrors              []errorChoice
}

func (d queueData) title() string { return "queue " + display(d.Info.Name) }

func (d queueData) queueName() string { return d.Info.Name }

// Page is the address of this queue's page with one list moved: list is
// "wo" (waiting), "lo" (delayed) or "do" (dead), by pages pages (-1 back,
// 1 on); the other lists stay where they are.
func (d queueData) Page(list string, pages int) string {
	v := url.Values{}
	at := map[string]int{"wo": d.WaitingFrom, "lo": d.DelayedFrom, "do": d.DeadFrom, "fo": d.FinishedFrom}
	at[list] = max(at[list]+pages*pageSize, 0)
	next := map[string]int{"wo": d.WaitingNext, "lo": d.DelayedNext, "do": d.DeadNext}
	if pages > 0 && next[list] > 0 {
		at[list] = next[list]
	}
	for _, k := range []string{"wo", "lo", "do", "fo"} {
		if at[k] > 0 {
			v.Set(k, strconv.Itoa(at[k]))
		}
	}
	if d.DelayedOnly != "" {
		v.Set("only", d.DelayedOnly)
	}
	return d.link(v)
}

// First is the address of this queue's page with one list ("wo", "lo" or
// "do") back at its start: a filtered list cannot page back.
func (d queueData) First(list string) string {
	v := url.Values{}
	for k, at := range map[string]int{"wo": d.WaitingFrom, "lo": d.DelayedFrom, "do": d.DeadFrom, "fo": d.FinishedFrom} {
		if at > 0 && k != list {
			v.Set(k, strconv.Itoa(at))
		}
	}
	if d.DelayedOnly != "" {
		v.Set("only", d.DelayedOnly)
	}
	return d.link(v)
}

// OfKind is the address of this queue's page showing only the tasks of
// kind (noKind: those without one; "": all), every list from its start.
func (d queueData) OfKind(kind string) string {
	v := url.Values{}
	if d.DelayedOnly != "" {
		v.Set("only", d.DelayedOnly)
	}
	d.Kind = kind
	return d.link(v)
}

// Filtered says whether the lists show only some kind.
func (d queueData) Filtered() bool { return d.Kind != "" }

// Only is the address of this queue's page with the delayed list showing
// only retries or scheduled tasks ("" for all), from its start.
func (d queueData) Only(only string) string {
	v := url.Values{}
	for k, at := range map[string]int{"wo": d.WaitingFrom, "do": d.DeadFrom, "fo": d.FinishedFrom} {
		if at > 0 {
			v.Set(k, strconv.Itoa(at))
		}
	}
	if only != "" {
		v.Set("only", only)
	}
	return d.link(v)
}

func (d queueData) link(v url.Values) string {
	if d.Kind != "" {
		v.Set("kind", d.Kind)
	}
	u := queuePath(d.Base, d.Info.Name)
	if len(v) == 0 {
		return u
	}
	if strings.Contains(u, "?") {
		return u + "&" + v.Encode()
	}
	return u + "?" + v.Encode()
}

func (h *handler) queue(w http.ResponseWriter, r *http.Request) {
	name, ok := queueFrom(r)
	if !ok {
		h.fail(w, r, http.StatusBadRequest, "no queue given (/queue/<name>, or q, the name in hex)")
		return
	}
	d := queueData{Base: base(r), WaitingFrom: offsetParam(r, "wo"), DelayedFrom: offsetParam(r, "lo"), DeadFrom: offsetParam(r, "do"), FinishedFrom: offsetParam(r, "fo"), PageSize: pageSize}
	d.Kind = r.URL.Query().Get("kind")
	if len(d.Kind) > worqr.MaxKindLen {
		h.fail(w, r, http.StatusBadRequest, "the kind is too long")
		return
	}
	switch d.DelayedOnly = r.URL.Query().Get("only"); d.DelayedOnly {
	case "retries", "scheduled":
	default:
		d.DelayedOnly = ""
	}
	var err error
	if d.Filtered() || d.DelayedOnly != "" {
		// A filtered page may read a thousand tasks of each list: a
		// lookup, as a search is.
		if !h.lookup(w, r, func(ctx context.Context) { err = h.readQueue(ctx, r, name, &d, true) }) {
			return
		}
	} else {
		ctx, cancel := h.ctx(r)
		defer cancel()
		err = h.readQueue(ctx, r, name, &d, false)
	}
	if err != nil {
		h.fail(w, r, http.StatusBadGateway, err.Error())
		return
	}
	d.Kinds = addKindStats(d.Kinds, d.Stats)
	d.WaitingKinds = kinds(d.Waiting)
	d.DeadKinds, d.DeadErrors = deadChoices(d.Dead)
	h.render(w, r, "queue", http.StatusOK, d)
}

// readQueue reads what a queue's page shows into d, whose positions,
// kind and delayed filter are set. Each list is read in calls of about
// callBytes (see sized). inLookup says the page is a lookup already,
// whose budget its groups' read is part of.
func (h *handler) readQueue(ctx context.Context, r *http.Request, name string, d *queueData, inLookup bool) error {
	ofKind := func(kind string) bool { return d.Kind == "" || kind == d.Kind || d.Kind == noKind && kind == "" }
	var err error
	read := func(f func() error) {
		if err == nil {
			err = f()
		}
	}
	read(func() (e error) { d.Info, e = h.c.QueueInfo(ctx, name); return })
	cut := worqr.PayloadPrefix(rowPreview)
	tasks := func(from, n int) ([]worqr.TaskInfo, error) {
		return h.c.Tasks(ctx, name, int64(from), int64(from+n-1), cut)
	}
	delayed := func(from, n int) ([]worqr.TaskInfo, error) {
		return h.c.Delayed(ctx, name, int64(from), int64(from+n-1), cut)
	}
	dead := func(from, n int) ([]worqr.DeadLetter, error) { return h.c.DeadLetters(ctx, name, from, n, cut) }
	read(func() (e error) {
		d.Waiting, d.WaitingNext, e = pageOf(d.WaitingFrom, d.Filtered(), tasks, func(t worqr.TaskInfo) bool { return ofKind(t.Kind) }, taskSize)
		return
	})
	read(func() (e error) {
		retries := d.DelayedOnly == "retries"
		d.Delayed, d.DelayedNext, e = pageOf(d.DelayedFrom, d.Filtered() || d.DelayedOnly != "", delayed, func(t worqr.TaskInfo) bool {
			return ofKind(t.Kind) && (d.DelayedOnly == "" || (t.Attempts > 0) == retries)
		}, taskSize)
		return
	})
	var procs []worqr.ProcessInfo // all of them, for the kinds' counts
	read(func() (e error) {
		procs, e = h.c.Processes(ctx, name, cut)
		for _, p := range procs {
			if ofKind(p.TaskKind) {
				d.Procs = append(d.Procs, p)
			}
		}
		return
	})
	read(func() (e error) {
		d.Dead, d.DeadNext, e = pageOf(d.DeadFrom, d.Filtered(), dead, func(t worqr.DeadLetter) bool { return ofKind(t.Kind) }, deadSize)
		return
	})
	read(func() (e error) { d.Kinds, d.KindsMore, e = h.kindCounts(ctx, name, procs); return })
	read(func() error {
		// A sequence hold on shows the section, to turn it off.
		if d.Info.Groups == 0 && d.Info.GroupsHeldOnDead == 0 && !d.Info.SequenceHold {
			return nil
		}
		// One script over up to 2 * worqr.MaxGroupsRead groups, however
		// many pages ask at once: a lookup, but the page is shown
		// without it when the budget is spent.
		var g worqr.GroupsReport
		var e error
		read := func(ctx context.Context) { g, e = h.c.Groups(ctx, name, groupsShown) }
		if inLookup {
			read(ctx)
		} else if wait := h.tryLookup(ctx, read); wait > 0 {
			g, d.GroupsWait = worqr.GroupsReport{Queue: name}, int64((wait+time.Second-1)/time.Second)
		}
		d.Groups = &g
		return e
	})
	read(func() (e error) {
		if d.Info.Gatherings == 0 {
			return nil
		}
		d.Gatherings, _, e = h.c.Gatherings(ctx, name, 0, gatheringsShown)
		return
	})
	read(func() (e error) { d.Finished, e = h.c.Outcomes(ctx, name, d.FinishedFrom, pageSize, cut); return })
	read(func() error {
		res, n := statsWindow(r)
		s, e := h.c.Stats(ctx, name, worqr.StatsOptions{Resolution: res})
		d.Stats = newStatsView(s, res, n)
		return e
	})
	return err
}

// maxRunningShown bounds the tasks in flight the workers page lists for
// each worker (it counts them all).
const maxRunningShown = 20

// workerQueue is a queue a worker serves: the tasks it holds there, the
// queue's concurrency limit (0: none), and the worker's handler slots
// there as it recorded them (worqr.WorkerInfo.Slots; 0: none known).
type workerQueue struct {
	Name     string
	InFlight int
	Limit    int
	Slots    int
}

type workerRow struct {
	worqr.WorkerInfo
	Queues   []workerQueue
	InFlight int
	// Running are its tasks in flight, the first maxRunningShown by queue
	// name; More counts the rest.
	Running []worqr.ProcessInfo
	More    int
	// Pools are its handler pools' slots, busy and free, known only for a
	// worker of the dashboard's own client (worqr.Client.Slots); every
	// worker's slots per queue are in Queues.
	Pools []worqr.PoolSlots
}

type workersData struct{ Workers []workerRow }

func (h *handler) workers(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := h.ctx(r)
	defer cancel()
	ws, err := h.c.Workers(ctx)
	if err != nil {
		h.fail(w, r, http.StatusBadGateway, err.Error())
		return
	}
	qs, err := readQueues(ctx, h.c)
	// Processes by worker, and by worker and queue; the payloads are not
	// read.
	procs := map[string][]worqr.ProcessInfo{}
	held := map[[2]string]int{}
	limits := map[string]int{}
	for _, qi := range qs {
		if err != nil {
			break
		}
		limits[qi.Name] = qi.Concurrency
		var ps []worqr.ProcessInfo
		ps, err = h.c.Processes(ctx, qi.Name, worqr.PayloadPrefix(0))
		for _, p := range ps {
			procs[p.Owner] = append(procs[p.Owner], p)
			held[[2]string{p.Owner, qi.Name}]++
		}
	}
	slices.SortFunc(ws, func(a, b worqr.WorkerInfo) int {
		return cmp.Or(cmp.Compare(a.Host, b.Host), cmp.Compare(a.PID, b.PID), cmp.Compare(a.ID, b.ID))
	})
	pools := map[string][]worqr.PoolSlots{}
	for _, ps := range h.c.Slots() {
		pools[ps.Worker] = append(pools[ps.Worker], ps)
	}
	d := workersData{Workers: make([]workerRow, len(ws))}
	for i, wi := range ws {
		row := workerRow{WorkerInfo: wi, InFlight: len(procs[wi.ID]), Pools: pools[wi.ID]}
		row.Running = procs[wi.ID]
		if len(row.Running) > maxRunningShown {
			row.Running, row.More = row.Running[:maxRunningShown], len(row.Running)-maxRunningShown
		}
		var names []string
		if err == nil {
			names, err = h.c.WorkerQueues(ctx, wi.ID)
		}
		slices.Sort(names)
		slots := make(map[string]int, len(wi.Slots))
		for _, s := range wi.Slots {
			slots[s.Queue] = s.Slots
		}
		for _, q := range names {
			row.Queues = append(row.Queues, workerQueue{Name: q, InFlight: held[[2]string{wi.ID, q}], Limit: limits[q], Slots: slots[q]})
		}
		d.Workers[i] = row
	}
	if err != nil {
		h.fail(w, r, http.StatusBadGateway, err.Error())
		return
	}
	h.render(w, r, "workers", http.StatusOK, d)
}

type taskData struct {
	Queue, ID string
	// Where the task was found: any of waiting, delayed, in flight, dead
	// (with Partial set when the search stopped at its bounds), and a
	// retained outcome.
	worqr.TaskLocation
	Outcome *worqr.KeptOutcome
	step    *flowRef // see stepOf
}

func (d taskData) title() string { return "task " + d.ID }

func (d taskData) queueName() string { return d.Queue }

// Found says whether the task was found anywhere.
func (d taskData) Found() bool { return d.TaskLocation.Found() || d.Outcome != nil }

// Payload is the task's payload (its first taskPreview bytes), from
// wherever it was found, and its whole size.
func (d taskData) Payload() ([]byte, int) {
	switch {
	case d.Process != nil:
		return d.Process.Task, d.Process.TaskSize
	case d.Waiting != nil:
		return d.Waiting.Payload, d.Waiting.Size
	case d.Delayed != nil:
		return d.Delayed.Payload, d.Delayed.Size
	case d.Dead != nil:
		return d.Dead.Payload, d.Dead.Size
	}
	return nil, 0
}

// Preview is the payload as the page shows it.
func (d taskData) Preview() previewed {
	b, size := d.Payload()
	return pretty(preview(b, size, taskPreview))
}

// HasPayload says whether Payload was found.
func (d taskData) HasPayload() bool {
	return d.Process != nil || d.Waiting != nil || d.Delayed != nil || d.Dead != nil
}

// Cancellable says whether the task waits, is delayed or in flight.
func (d taskData) Cancellable() bool { return d.Waiting != nil || d.Delayed != nil || d.Process != nil }

func (h *handler) task(w http.ResponseWriter, r *http.Request) {
	name, id, ok := taskFrom(r)
	if !ok {
		h.fail(w, r, http.StatusBadRequest, "give a queue and a task id (/task/<queue>/<id>, or q in hex and id)")
		return
	}
	var d taskData
	var err error
	if !h.lookup(w, r, func(ctx context.Context) {
		if d, err = h.findTask(ctx, name, id); err == nil {
			h.stepOf(ctx, &d, r.URL.Query().Get("wf"), offsetParam(r, "at"))
		}
	}) {
		return
	}
	if err != nil {
		h.fail(w, r, http.StatusBadGateway, err.Error())
		return
	}
	status := http.StatusOK
	if !d.Found() {
		status = http.StatusNotFound
	}
	h.render(w, r, "task", status, d)
}

// findTask looks for a task everywhere it can be: FindTask searches the
// queue in Redis and returns only the task, its payload cut to
// taskPreview bytes; its retained outcome is read apart, its result (or
// error) cut in Redis too, so that a page being made holds some KiB of
// it, not all.
func (h *handler) findTask(ctx context.Context, queue, id string) (taskData, error) {
	d := taskData{Queue: queue, ID: id}
	var err error
	if d.TaskLocation, err = h.c.FindTask(ctx, queue, id, worqr.PayloadPrefix(taskPreview)); err != nil {
		return d, err
	}
	o, err := h.c.FindOutcome(ctx, queue, id, worqr.PayloadPrefix(taskPreview))
	switch {
	case err == nil:
		d.Outcome = &o
	case !errors.Is(err, worqr.ErrNoTask):
		return d, err
	}
	return d, nil
}

// searchQueues bounds the queues a search by id without a queue looks in,
// all within one lookup of the budget.
const searchQueues = 50

// search finds a task by id, from the box on every page: in the queue
// given, else in each queue (the first searchQueues, by name) until found,
// and answers with a redirect to its page.
func (h *handler) search(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	queue, id := strings.TrimSpace(q.Get("queue")), strings.TrimSpace(q.Get("id"))
	if text := q.Get("payload"); text != "" || q.Has("payload") {
		switch {
		case queue == "" || len(queue) > worqr.MaxQueueNameLen:
			h.fail(w, r, http.StatusBadRequest, "give the queue whose payloads to search")
		case text == "" || len(text) > maxNeedle:
			h.fail(w, r, http.StatusBadRequest, "give a text to look for (at most 256 bytes)")
		default:
			h.searchPayloads(w, r, queue, text)
		}
		return
	}
	switch {
	case id == "" || len(id) > maxIDLen:
		h.fail(w, r, http.StatusBadRequest, "give a task id (at most 64 characters)")
		return
	case len(queue) > worqr.MaxQueueNameLen:
		h.fail(w, r, http.StatusBadRequest, "the queue name is too long")
		return
	case queue != "":
		http.Redirect(w, r, taskPath(base(r), queue, id), http.StatusSeeOther)
		return
	}
	var found string
	var looked int
	var more bool
	var err error
	if !h.lookup(w, r, func(ctx context.Context) { found, looked, more, err = h.findAnywhere(ctx, id) }) {
		return
	}
	if err != nil {
		h.fail(w, r, errorStatus(err), err.Error())
		return
	}
	if looked > 0 && found != "" {
		http.Redirect(w, r, taskPath(base(r), found, id), http.StatusSeeOther)
		return
	}
	msg := "No task " + strconv.Quote(id) + " in any of the " + strconv.Itoa(looked) + " queues."
	if more {
		msg = "No task " + strconv.Quote(id) + " in the first " + strconv.Itoa(looked) + " queues by name: give its queue to look further."
	}
	h.fail(w, r, http.StatusNotFound, msg)
}

// findAnywhere looks for a task by id in each queue, by name, up to
// searchQueues of them: it returns the queue it is in ("" if none), the
// queues looked in, and whether there were more.
func (h *handler) findAnywhere(ctx context.Context, id string) (queue string, looked int, more bool, err error) {
	names, err := h.c.Queues(ctx)
	if err != nil {
		return "", 0, false, err
	}
	slices.Sort(names)
	if len(names) > searchQueues {
		names, more = names[:searchQueues], true
	}
	for _, name := range names {
		looked++
		l, err := h.c.FindTask(ctx, name, id, worqr.PayloadPrefix(0))
		if err != nil {
			return "", looked, more, err
		}
		if l.Found() {
			return name, looked, more, nil
		}
		if _, err := h.c.FindOutcome(ctx, name, id, worqr.PayloadPrefix(0)); err == nil {
			return name, looked, more, nil
		} else if !errors.Is(err, worqr.ErrNoTask) {
			return "", looked, more, err
		}
	}
	return "", looked, more, nil
}

// Hourly is the address of this queue's page with its stats per hour.
func (d queueData) Hourly() string {
	u := queuePath(d.Base, d.Info.Name)
	if strings.Contains(u, "?") {
		return u + "&res=h"
	}
	return u + "?res=h"
}

type periodicData struct {
	Schedules []worqr.ScheduleInfo
}

func (periodicData) title() string { return "periodic" }

// periodic lists every queue's periodic schedules, by queue and name.
func (h *handler) periodic(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := h.ctx(r)
	defer cancel()
	names, err := h.c.Queues(ctx)
	slices.Sort(names)
	var d periodicData
	for _, q := range names {
		if err != nil {
			break
		}
		var ss []worqr.ScheduleInfo
		ss, err = h.c.Schedules(ctx, q)
		d.Schedules = append(d.Schedules, ss...)
	}
	if err != nil {
		h.fail(w, r, http.StatusBadGateway, err.Error())
		return
	}
	h.render(w, r, "periodic", http.StatusOK, d)
}

// A search of payloads reads, in its queue, the first searchScan waiting
// and delayed tasks and dead letters each, the first searchPrefix bytes
// of each payload (cut in Redis), a chunk at a time, within one lookup of
// the budget, and lists the first pageSize that hold the text.
const (
	searchScan   = 5000
	searchPrefix = 1024
	searchChunk  = 500
	maxNeedle    = 256
	// searchBytes bounds the bytes of the payloads a search reads in all
	// (the scripts read each whole: see sized).
	searchBytes = 64 << 20
)

// foundTask is a task whose payload holds the text searched for.
type foundTask struct {
	Where string // "waiting", "delayed" or "dead"
	worqr.TaskInfo
}

type foundData struct {
	Queue, Text string
	Found       []foundTask
	// Full is set when the search stopped at pageSize matches, Cut when
	// it stopped at searchBytes; Scanned says how many tasks it read.
	Full, Cut bool
	Scanned   int
}

func (d foundData) title() string     { return "search " + display(d.Queue) }
func (d foundData) queueName() string { return d.Queue }

// searchPayloads lists a queue's tasks whose payload's first searchPrefix
// bytes hold text.
func (h *handler) searchPayloads(w http.ResponseWriter, r *http.Request, queue, text string) {
	d := foundData{Queue: queue, Text: text}
	var err error
	if !h.lookup(w, r, func(ctx context.Context) { err = h.scanPayloads(ctx, &d) }) {
		return
	}
	if err != nil {
		h.fail(w, r, errorStatus(err), err.Error())
		return
	}
	h.render(w, r, "found", http.StatusOK, d)
}

func (h *handler) scanPayloads(ctx context.Context, d *foundData) error {
	cut := worqr.PayloadPrefix(searchPrefix)
	return scanLists(d, searchBytes, []payloadList{
		{"waiting", func(from, n int) ([]worqr.TaskInfo, error) {
			return h.c.Tasks(ctx, d.Queue, int64(from), int64(from+n-1), cut)
		}},
		{"delayed", func(from, n int) ([]worqr.TaskInfo, error) {
			return h.c.Delayed(ctx, d.Queue, int64(from), int64(from+n-1), cut)
		}},
		{"dead", func(from, n int) ([]worqr.TaskInfo, error) {
			ds, err := h.c.DeadLetters(ctx, d.Queue, from, n, cut)
			ts := make([]worqr.TaskInfo, len(ds))
			for i, dl := range ds {
				ts[i] = dl.TaskInfo
			}
			return ts, err
		}},
	})
}

// payloadList is a list a search reads: where its tasks are, and how.
type payloadList struct {
	where string
	read  func(from, n int) ([]worqr.TaskInfo, error)
}

// scanLists is scanPayloads' search of lists, up to limit bytes of
// payloads in all.
func scanLists(d *foundData, limit int, lists []payloadList) error {
	needle := []byte(d.Text)
	read := 0 // payload bytes, for limit
	for _, l := range lists {
		for from := 0; from < searchScan; from += searchChunk {
			if read >= limit {
				// Used up (the last chunk's last read ended past it):
				// sized would take what is left, 0 or less, as no limit.
				d.Cut = true
				return nil
			}
			ts, stop, err := sized(l.read, taskSize, limit-read)(from, searchChunk)
			if err != nil {
				return err
			}
			d.Scanned += len(ts)
			for _, t := range ts {
				read += t.Size + entryOverhead
				if bytes.Contains(t.Payload, needle) {
					d.Found = append(d.Found, foundTask{Where: l.where, TaskInfo: t})
					if len(d.Found) == pageSize {
						d.Full = true
						return nil
					}
				}
			}
			if stop {
				d.Cut = true
				return nil
			}
			if len(ts) < searchChunk {
				break
			}
		}
	}
	return nil
}
