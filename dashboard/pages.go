package dashboard

import (
	"context"
	"encoding/hex"
	"errors"
	"net/http"
	"strconv"
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
	qs, err := readQueues(ctx, h.c)
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

func offsetParam(r *http.Request, key string) int {
	n, err := strconv.Atoi(r.URL.Query().Get(key))
	if err != nil || n < 0 {
		return 0
	}
	return n
}

type queueData struct {
	Info        worqr.QueueInfo
	Waiting     []worqr.TaskInfo
	WaitingFrom int
	Delayed     []worqr.TaskInfo
	Procs       []worqr.ProcessInfo
	Dead        []worqr.DeadLetter
	DeadFrom    int
	PageSize    int
	Stats       statsView
}

func (d queueData) title() string { return "queue " + display(d.Info.Name) }

// Prev and next offsets for the pagers.
func (d queueData) WaitingPrev() int { return max(d.WaitingFrom-pageSize, 0) }
func (d queueData) WaitingNext() int { return d.WaitingFrom + pageSize }
func (d queueData) DeadPrev() int    { return max(d.DeadFrom-pageSize, 0) }
func (d queueData) DeadNext() int    { return d.DeadFrom + pageSize }

func (h *handler) queue(w http.ResponseWriter, r *http.Request) {
	name, ok := queueParam(r, "q")
	if !ok {
		h.fail(w, r, http.StatusBadRequest, "no queue given (q, the name in hex)")
		return
	}
	ctx, cancel := h.ctx(r)
	defer cancel()
	d := queueData{WaitingFrom: offsetParam(r, "wo"), DeadFrom: offsetParam(r, "do"), PageSize: pageSize}
	var err error
	read := func(f func() error) {
		if err == nil {
			err = f()
		}
	}
	read(func() (e error) { d.Info, e = h.c.QueueInfo(ctx, name); return })
	cut := worqr.PayloadPrefix(rowPreview)
	read(func() (e error) {
		d.Waiting, e = h.c.Tasks(ctx, name, int64(d.WaitingFrom), int64(d.WaitingFrom+pageSize-1), cut)
		return
	})
	read(func() (e error) { d.Delayed, e = h.c.Delayed(ctx, name, 0, pageSize-1, cut); return })
	read(func() (e error) { d.Procs, e = h.c.Processes(ctx, name, cut); return })
	read(func() (e error) { d.Dead, e = h.c.DeadLetters(ctx, name, d.DeadFrom, pageSize, cut); return })
	read(func() error {
		res, n := statsWindow(r)
		s, e := h.c.Stats(ctx, name, worqr.StatsOptions{Resolution: res})
		d.Stats = newStatsView(s, res, n)
		return e
	})
	if err != nil {
		h.fail(w, r, http.StatusBadGateway, err.Error())
		return
	}
	h.render(w, r, "queue", http.StatusOK, d)
}

type workerRow struct {
	worqr.WorkerInfo
	Queues   []string
	InFlight int
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
	held := map[string]int{}
	names, err := h.c.Queues(ctx)
	for _, q := range names {
		if err != nil {
			break
		}
		var ps []worqr.ProcessInfo
		ps, err = h.c.Processes(ctx, q, worqr.PayloadPrefix(0)) // counted, not shown
		for _, p := range ps {
			held[p.Owner]++
		}
	}
	d := workersData{Workers: make([]workerRow, len(ws))}
	for i, wi := range ws {
		d.Workers[i] = workerRow{WorkerInfo: wi, InFlight: held[wi.ID]}
		if err == nil {
			d.Workers[i].Queues, err = h.c.WorkerQueues(ctx, wi.ID)
		}
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
	Outcome *worqr.TaskOutcome
}

func (d taskData) title() string { return "task " + d.ID }

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
	return preview(b, size, taskPreview)
}

// HasPayload says whether Payload was found.
func (d taskData) HasPayload() bool {
	return d.Process != nil || d.Waiting != nil || d.Delayed != nil || d.Dead != nil
}

// Cancellable says whether the task waits, is delayed or in flight.
func (d taskData) Cancellable() bool { return d.Waiting != nil || d.Delayed != nil || d.Process != nil }

func (h *handler) task(w http.ResponseWriter, r *http.Request) {
	name, ok := queueParam(r, "q")
	id := r.URL.Query().Get("id")
	if !ok || id == "" || len(id) > 64 {
		h.fail(w, r, http.StatusBadRequest, "give a queue (q, in hex) and a task id (id)")
		return
	}
	var d taskData
	var err error
	if !h.lookup(w, r, func(ctx context.Context) { d, err = h.findTask(ctx, name, id) }) {
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
// taskPreview bytes; its retained outcome is read apart.
func (h *handler) findTask(ctx context.Context, queue, id string) (taskData, error) {
	d := taskData{Queue: queue, ID: id}
	var err error
	if d.TaskLocation, err = h.c.FindTask(ctx, queue, id, worqr.PayloadPrefix(taskPreview)); err != nil {
		return d, err
	}
	o, err := h.c.TaskResult(ctx, queue, id)
	switch {
	case err == nil:
		d.Outcome = &o
	case !errors.Is(err, worqr.ErrNoTask):
		return d, err
	}
	return d, nil
}
