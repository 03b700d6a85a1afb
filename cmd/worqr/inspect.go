package main

import (
	"context"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/worqr/worqr"
)

// parallel bounds the reads a command has in flight at once (the Redis
// client pipelines them).
const parallel = 16

// pageSize is how many tasks range and delayed show without a stop.
const pageSize = 100

func inspectCommands() []*command {
	return []*command{
		{name: "queues", group: "Inspect", summary: "every queue: waiting, delayed, in flight, dead, paused, limit", run: cmdQueues, help: `
Lists every queue the registry knows, by name, with its tasks waiting,
delayed, in flight (processes held by workers) and dead (dead letters),
whether it is paused and its concurrency limit (one round trip a queue).`},
		{name: "workers", group: "Inspect", summary: "live workers: lease left, in flight, queues, handler slots", run: cmdWorkers, help: `
Lists the workers whose lease is live, with the time their lease has left
by the Redis clock, how many processes each holds, the queues it serves,
and the handler slots it has in each queue it handles (queue:slots, "-"
for a worker that handles none). Counting processes reads every queue's
processes.`},
		{name: "processes", synopsis: "<queue>", group: "Inspect", summary: "a queue's in-flight processes", run: cmdProcesses, help: `
Lists a queue's in-flight processes in dequeue order: process id, task id,
attempt, the worker that holds it, its state (active, or cancelled or
deleted while its holder has not let go), its handler's last progress
report (percent and note, "-" if none; with --json also when it was
made) and a preview of the payload. A KIND column after the task id shows
each task's kind once any process listed has one ("-" for a task without;
taskKind with --json).`},
		{name: "peek", synopsis: "<queue>", group: "Inspect", summary: "the task dequeued next", run: cmdPeek, help: `
Shows the task that would be dequeued next: id, its kind in a KIND column
if it has one, attempts, when it was enqueued, and a preview of its
payload. --json prints a list of at most one task, as range does, with
the payload whole.`},
		{name: "range", synopsis: "<queue> [start] [stop]", group: "Inspect", summary: "waiting tasks by position (0 is next out)", run: cmdRange, help: `
Lists waiting tasks in dequeue order from position start to stop,
inclusive (tasks waiting in groups come after the others, group by group:
see Client.Range); 0 is the next task out and negative positions count from the
back (-1 is the last), as in LRANGE. start defaults to 0 and stop to a page
of 100 after start (to -1 when start is negative). Each row: position, id,
attempts, when it was enqueued, size and a preview of the payload, and a
KIND column after the id once any task listed has a kind ("-" for a task
without; kind with --json).`},
		{name: "delayed", synopsis: "<queue> [start] [stop]", group: "Inspect", summary: "delayed tasks by due time", run: cmdDelayed, help: `
Lists delayed tasks, the next due first, from position start to stop as
range does, with when each is due by the Redis clock, and a KIND column
as in range.`},
	}
}

// queueRow is one queue's counts.
type queueRow struct {
	Queue       string `json:"queue"`
	Waiting     int64  `json:"waiting"`
	Delayed     int64  `json:"delayed"`
	InFlight    int64  `json:"inFlight"`
	Dead        int64  `json:"dead"`
	Paused      bool   `json:"paused"`
	Concurrency int    `json:"concurrency"` // 0: no limit
	// InFlightWeight is the slots in use (weighted tasks hold several).
	InFlightWeight int64 `json:"inFlightWeight"`
}

// countQueue reads a queue's counts and controls, in one round trip.
func countQueue(ctx context.Context, c *worqr.Client, queue string) (queueRow, error) {
	info, err := c.QueueInfo(ctx, queue)
	if err != nil {
		return queueRow{}, err
	}
	return queueRow{Queue: queue, Waiting: info.Waiting, Delayed: info.Delayed, InFlight: info.InFlight, Dead: info.Dead,
		Paused: info.Paused, Concurrency: info.Concurrency, InFlightWeight: info.InFlightWeight}, nil
}

func cmdQueues(e *env, args []string) error {
	if _, err := e.parse(e.flags(), args, 0, 0); err != nil {
		return err
	}
	c, err := e.client()
	if err != nil {
		return err
	}
	names, err := c.Queues(e.ctx)
	if err != nil {
		return err
	}
	slices.Sort(names)
	rows := make([]queueRow, len(names))
	g, ctx := errgroup.WithContext(e.ctx)
	g.SetLimit(parallel / 4)
	for i, q := range names {
		g.Go(func() (err error) { rows[i], err = countQueue(ctx, c, q); return err })
	}
	if err := g.Wait(); err != nil {
		return err
	}
	if e.g.json {
		return e.printJSON(rows)
	}
	if len(rows) == 0 {
		e.note("no queues (prefix %q)", e.g.prefix)
		return nil
	}
	t := e.table("QUEUE", "WAITING", "DELAYED", "IN-FLIGHT", "DEAD", "PAUSED", "LIMIT")
	for _, r := range rows {
		paused, limit := "", ""
		if r.Paused {
			paused = "yes"
		}
		if r.Concurrency > 0 {
			limit = strconv.Itoa(r.Concurrency)
		}
		t.row(escape(r.Queue), itoa(r.Waiting), itoa(r.Delayed), itoa(r.InFlight), itoa(r.Dead), paused, limit)
	}
	return t.flush()
}

// workerRow is one live worker.
type workerRow struct {
	ID          string   `json:"id"`
	LeaseLeftMs int64    `json:"leaseLeftMs"`
	InFlight    int      `json:"inFlight"`
	Queues      []string `json:"queues"`
	// Slots are the handler slots the worker has in each queue it
	// handles (Handle, HandleQueues), as it recorded them.
	Slots map[string]int `json:"slots,omitempty"`
}

func cmdWorkers(e *env, args []string) error {
	if _, err := e.parse(e.flags(), args, 0, 0); err != nil {
		return err
	}
	c, err := e.client()
	if err != nil {
		return err
	}
	live, err := c.Workers(e.ctx)
	if err != nil {
		return err
	}
	rows := make([]workerRow, len(live))
	g, ctx := errgroup.WithContext(e.ctx)
	g.SetLimit(parallel)
	for i, w := range live {
		rows[i] = workerRow{ID: w.ID, LeaseLeftMs: w.LeaseLeftMillis}
		for _, qs := range w.Slots {
			if rows[i].Slots == nil {
				rows[i].Slots = make(map[string]int, len(w.Slots))
			}
			rows[i].Slots[qs.Queue] = qs.Slots
		}
		g.Go(func() error {
			qs, err := c.WorkerQueues(ctx, w.ID)
			slices.Sort(qs)
			rows[i].Queues = qs
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	// Processes are counted in every registered queue and every queue a
	// worker lists, in case one is missing from the registry.
	queues, err := c.Queues(e.ctx)
	if err != nil {
		return err
	}
	for _, r := range rows {
		queues = append(queues, r.Queues...)
	}
	slices.Sort(queues)
	held, err := owners(e.ctx, c, slices.Compact(queues))
	if err != nil {
		return err
	}
	for i := range rows {
		rows[i].InFlight = held[rows[i].ID]
	}
	slices.SortFunc(rows, func(a, b workerRow) int { return strings.Compare(a.ID, b.ID) })
	if e.g.json {
		return e.printJSON(rows)
	}
	if len(rows) == 0 {
		e.note("no live workers (prefix %q)", e.g.prefix)
		return nil
	}
	t := e.table("WORKER", "LEASE-LEFT", "IN-FLIGHT", "QUEUES", "SLOTS")
	for _, r := range rows {
		names := make([]string, len(r.Queues))
		for i, q := range r.Queues {
			names[i] = escape(q)
		}
		slots := "-"
		if len(r.Slots) > 0 {
			each := make([]string, 0, len(r.Slots))
			for _, q := range slices.Sorted(maps.Keys(r.Slots)) {
				each = append(each, escape(q)+":"+itoa(r.Slots[q]))
			}
			slots = strings.Join(each, ",")
		}
		t.row(r.ID, span(time.Duration(r.LeaseLeftMs)*time.Millisecond), itoa(r.InFlight), strings.Join(names, ","), slots)
	}
	return t.flush()
}

// owners counts the processes each worker holds in these queues.
func owners(ctx context.Context, c *worqr.Client, queues []string) (map[string]int, error) {
	procs := make([][]worqr.ProcessInfo, len(queues))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(parallel)
	for i, q := range queues {
		g.Go(func() (err error) { procs[i], err = c.Processes(gctx, q, worqr.PayloadPrefix(0)); return err }) // counted, not shown
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	held := make(map[string]int)
	for _, ps := range procs {
		for _, p := range ps {
			held[p.Owner]++
		}
	}
	return held, nil
}

// processRow is one in-flight process.
type processRow struct {
	ID     string `json:"id"`
	Queue  string `json:"queue"`
	TaskID string `json:"taskId"`
	// TaskKind is its task's kind, if it has one.
	TaskKind string `json:"taskKind,omitempty"`
	Attempt  int    `json:"attempt"`
	Owner    string `json:"owner"`
	State    string `json:"state"`
	// Progress is the process's last progress report, if it made one.
	Progress *progressJSON `json:"progress,omitempty"`
	payloadJSON
}

// progressJSON is a progress report.
type progressJSON struct {
	Percent int       `json:"percent"`
	Note    string    `json:"note"`
	At      time.Time `json:"at"`
}

// progressText is a process's last progress report for the table: the
// percentage and the note, "-" if it made none.
func progressText(p *worqr.TaskProgress) string {
	if p == nil {
		return "-"
	}
	s := itoa(p.Percent) + "%"
	if p.Note != "" {
		s += " " + preview([]byte(p.Note), previewLen)
	}
	return s
}

func cmdProcesses(e *env, args []string) error {
	pos, err := e.parse(e.flags(), args, 1, 1)
	if err != nil {
		return err
	}
	c, queue, err := e.queueClient(pos[0])
	if err != nil {
		return err
	}
	ps, err := c.Processes(e.ctx, queue)
	if err != nil {
		return err
	}
	if e.g.json {
		rows := make([]processRow, len(ps))
		for i, p := range ps {
			rows[i] = processRow{ID: p.ID, Queue: p.Queue, TaskID: p.TaskID, TaskKind: p.TaskKind, Attempt: p.Attempt, Owner: p.Owner, State: string(p.State), payloadJSON: payloadOf(p.Task)}
			if pr := p.Progress; pr != nil {
				rows[i].Progress = &progressJSON{Percent: pr.Percent, Note: pr.Note, At: pr.At}
			}
		}
		return e.printJSON(rows)
	}
	if len(ps) == 0 {
		e.note("no tasks in flight in %q", escape(queue))
		return nil
	}
	kinds := anyKind(ps, func(p worqr.ProcessInfo) string { return p.TaskKind })
	t := e.table(withKind([]string{"PROCESS", "TASK", "ATTEMPT", "OWNER", "STATE", "PROGRESS", "SIZE", "PAYLOAD"}, 2, kinds, "KIND")...)
	for _, p := range ps {
		t.row(withKind([]string{p.ID, p.TaskID, itoa(p.Attempt), p.Owner, string(p.State), progressText(p.Progress), itoa(len(p.Task)), preview(p.Task, previewLen)}, 2, kinds, p.TaskKind)...)
	}
	return t.flush()
}

// taskRow is one waiting or delayed task.
type taskRow struct {
	Position    int64      `json:"position"`
	ID          string     `json:"id"`
	Queue       string     `json:"queue"`
	Kind        string     `json:"kind,omitempty"`
	Attempts    int        `json:"attempts"`
	MaxAttempts int        `json:"maxAttempts,omitempty"`
	EnqueuedAt  *time.Time `json:"enqueuedAt"`
	DueAt       *time.Time `json:"dueAt,omitempty"`
	payloadJSON
}

// anyKind reports whether any of kinds is set: a listing shows a KIND
// column only then, so a queue of tasks without kinds reads as before.
func anyKind[T any](rows []T, kind func(T) string) bool {
	for _, r := range rows {
		if kind(r) != "" {
			return true
		}
	}
	return false
}

// withKind is cells with kind inserted at i when shown.
func withKind(cells []string, i int, shown bool, kind string) []string {
	if !shown {
		return cells
	}
	if kind == "" {
		kind = "-"
	}
	return append(cells[:i:i], append([]string{escape(kind)}, cells[i:]...)...)
}

func cmdPeek(e *env, args []string) error {
	pos, err := e.parse(e.flags(), args, 1, 1)
	if err != nil {
		return err
	}
	return listTasks(e, pos[0], []string{"0", "0"}, listPeek)
}

func cmdRange(e *env, args []string) error {
	pos, err := e.parse(e.flags(), args, 1, 3)
	if err != nil {
		return err
	}
	return listTasks(e, pos[0], pos[1:], listRange)
}

func cmdDelayed(e *env, args []string) error {
	pos, err := e.parse(e.flags(), args, 1, 3)
	if err != nil {
		return err
	}
	return listTasks(e, pos[0], pos[1:], listDelayed)
}

// bounds reads range's and delayed's [start] [stop].
func bounds(args []string) (start, stop int64, err error) {
	if len(args) > 0 {
		if start, err = strconv.ParseInt(args[0], 10, 64); err != nil {
			return 0, 0, usagef("start %q is not a whole number", args[0])
		}
	}
	switch {
	case len(args) > 1:
		if stop, err = strconv.ParseInt(args[1], 10, 64); err != nil {
			return 0, 0, usagef("stop %q is not a whole number", args[1])
		}
	case start < 0:
		stop = -1
	default:
		stop = start + pageSize - 1
	}
	return start, stop, nil
}

// What listTasks lists.
const (
	listPeek    = iota // the next waiting task
	listRange          // waiting tasks
	listDelayed        // delayed tasks
)

// listTasks prints a queue's waiting or delayed tasks from start to stop.
func listTasks(e *env, queueName string, args []string, list int) error {
	delayed := list == listDelayed
	queue, err := queueArg(queueName)
	if err != nil {
		return err
	}
	start, stop, err := bounds(args)
	if err != nil {
		return err
	}
	c, err := e.client()
	if err != nil {
		return err
	}
	var tasks []worqr.TaskInfo
	var total int64
	g, ctx := errgroup.WithContext(e.ctx)
	if delayed {
		g.Go(func() (err error) { tasks, err = c.Delayed(ctx, queue, start, stop); return err })
		g.Go(func() (err error) { total, err = c.DelayedLen(ctx, queue); return err })
	} else {
		g.Go(func() (err error) { tasks, err = c.Tasks(ctx, queue, start, stop); return err })
		g.Go(func() (err error) { total, err = c.QueueLen(ctx, queue); return err })
	}
	if err := g.Wait(); err != nil {
		return err
	}
	first := start
	if first < 0 {
		first = max(total+first, 0)
	}
	rows := make([]taskRow, len(tasks))
	for i, t := range tasks {
		rows[i] = taskRow{Position: first + int64(i), ID: t.ID, Queue: t.Queue, Kind: t.Kind, Attempts: t.Attempts, MaxAttempts: t.MaxAttempts,
			EnqueuedAt: jsonTime(t.EnqueuedAt), DueAt: jsonTime(t.DueAt), payloadJSON: payloadOf(t.Payload)}
	}
	if e.g.json {
		return e.printJSON(rows)
	}
	what := "waiting"
	if delayed {
		what = "delayed"
	}
	switch {
	case len(rows) == 0 && (list == listPeek || total == 0):
		e.note("no %s tasks in %q", what, escape(queue))
		return nil
	case len(rows) == 0:
		e.note("no %s tasks in %q at positions %d to %d (%d in all)", what, escape(queue), start, stop, total)
		return nil
	}
	now := time.Now()
	kinds := anyKind(rows, func(r taskRow) string { return r.Kind })
	var t *table
	if delayed {
		t = e.table(withKind([]string{"POS", "ID", "ATTEMPTS", "ENQUEUED", "DUE", "SIZE", "PAYLOAD"}, 2, kinds, "KIND")...)
	} else {
		t = e.table(withKind([]string{"POS", "ID", "ATTEMPTS", "ENQUEUED", "SIZE", "PAYLOAD"}, 2, kinds, "KIND")...)
	}
	for i, r := range rows {
		attempts := itoa(r.Attempts)
		switch {
		case r.MaxAttempts > 0:
			attempts += "/" + itoa(r.MaxAttempts)
		case r.MaxAttempts < 0:
			attempts += "/∞" // its own budget: no limit
		}
		cells := []string{itoa(r.Position), r.ID, attempts, ago(now, tasks[i].EnqueuedAt)}
		if delayed {
			cells = append(cells, ago(now, tasks[i].DueAt))
		}
		t.row(withKind(append(cells, itoa(r.Size), preview(tasks[i].Payload, previewLen)), 2, kinds, r.Kind)...)
	}
	if err := t.flush(); err != nil {
		return err
	}
	if last := rows[len(rows)-1].Position; list != listPeek && (rows[0].Position > 0 || last < total-1) {
		e.note("positions %d to %d of %d %s", rows[0].Position, last, total, what)
	}
	return nil
}
