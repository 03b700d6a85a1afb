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
	// scanLimit bounds how many waiting, delayed or dead tasks the task
	// page reads to find one by id.
	scanLimit = 20000
	scanChunk = 1000
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
	read(func() (e error) {
		d.Waiting, e = h.c.Tasks(ctx, name, int64(d.WaitingFrom), int64(d.WaitingFrom+pageSize-1))
		return
	})
	read(func() (e error) { d.Delayed, e = h.c.Delayed(ctx, name, 0, pageSize-1); return })
	read(func() (e error) { d.Procs, e = h.c.Processes(ctx, name); return })
	read(func() (e error) { d.Dead, e = h.c.DeadLetters(ctx, name, d.DeadFrom, pageSize); return })
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
		ps, err = h.c.Processes(ctx, q)
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
	// Where the task was found: any of waiting, delayed, in flight, dead,
	// and a retained outcome.
	Waiting  *worqr.TaskInfo
	Position int
	Delayed  *worqr.TaskInfo
	Proc     *worqr.ProcessInfo
	Dead     *worqr.DeadLetter
	Outcome  *worqr.TaskOutcome
	// Partial is set when the search stopped at scanLimit.
	Partial bool
}

func (d taskData) title() string { return "task " + d.ID }

// Found says whether the task was found anywhere.
func (d taskData) Found() bool {
	return d.Waiting != nil || d.Delayed != nil || d.Proc != nil || d.Dead != nil || d.Outcome != nil
}

// Payload is the task's payload, from wherever it was found.
func (d taskData) Payload() []byte {
	switch {
	case d.Proc != nil:
		return d.Proc.Task
	case d.Waiting != nil:
		return d.Waiting.Payload
	case d.Delayed != nil:
		return d.Delayed.Payload
	case d.Dead != nil:
		return d.Dead.Payload
	}
	return nil
}

// HasPayload says whether Payload was found.
func (d taskData) HasPayload() bool {
	return d.Proc != nil || d.Waiting != nil || d.Delayed != nil || d.Dead != nil
}

// Cancellable says whether the task waits, is delayed or in flight.
func (d taskData) Cancellable() bool { return d.Waiting != nil || d.Delayed != nil || d.Proc != nil }

func (h *handler) task(w http.ResponseWriter, r *http.Request) {
	name, ok := queueParam(r, "q")
	id := r.URL.Query().Get("id")
	if !ok || id == "" || len(id) > 64 {
		h.fail(w, r, http.StatusBadRequest, "give a queue (q, in hex) and a task id (id)")
		return
	}
	ctx, cancel := h.ctx(r)
	defer cancel()
	d, err := h.findTask(ctx, name, id)
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

// findTask looks for a task everywhere it can be. There is no index by
// id, so waiting, delayed and dead tasks are scanned, up to scanLimit of
// each.
func (h *handler) findTask(ctx context.Context, queue, id string) (taskData, error) {
	d := taskData{Queue: queue, ID: id}
	ps, err := h.c.Processes(ctx, queue)
	if err != nil {
		return d, err
	}
	for i := range ps {
		if ps[i].TaskID == id {
			d.Proc = &ps[i]
		}
	}
	for from := 0; from < scanLimit && d.Waiting == nil; from += scanChunk {
		ts, err := h.c.Tasks(ctx, queue, int64(from), int64(from+scanChunk-1))
		if err != nil {
			return d, err
		}
		for i := range ts {
			if ts[i].ID == id {
				d.Waiting, d.Position = &ts[i], from+i
			}
		}
		if len(ts) < scanChunk {
			break
		}
		d.Partial = d.Partial || from+scanChunk >= scanLimit
	}
	for from := 0; from < scanLimit && d.Delayed == nil; from += scanChunk {
		ts, err := h.c.Delayed(ctx, queue, int64(from), int64(from+scanChunk-1))
		if err != nil {
			return d, err
		}
		for i := range ts {
			if ts[i].ID == id {
				d.Delayed = &ts[i]
			}
		}
		if len(ts) < scanChunk {
			break
		}
		d.Partial = d.Partial || from+scanChunk >= scanLimit
	}
	for from := 0; from < scanLimit && d.Dead == nil; from += scanChunk {
		ds, err := h.c.DeadLetters(ctx, queue, from, scanChunk)
		if err != nil {
			return d, err
		}
		for i := range ds {
			if ds[i].ID == id {
				d.Dead = &ds[i]
			}
		}
		if len(ds) < scanChunk {
			break
		}
		d.Partial = d.Partial || from+scanChunk >= scanLimit
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
