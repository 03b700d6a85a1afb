package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/worqr/worqr"
)

func taskCommands() []*command {
	return []*command{
		{name: "enqueue", synopsis: "<queue> <payload>|-", group: "Change", summary: "add a task and print its id", run: cmdEnqueue, help: `
Adds a task to the back of a queue (the front with --front) and prints its
id. The payload is the argument as given, or standard input read to its end
with "-". A payload that starts with "-" goes after "--":
worqr enqueue q -- -x. With --in or --at the task waits in the delayed set
until it is due, by the Redis clock.`},
		{name: "cancel", synopsis: "<queue> <id>\n--payload <queue> <payload>|-", group: "Change", summary: "cancel a task by id, or every task with a payload", run: cmdCancel, help: `
Cancels the task with this id: removes it if it is waiting or delayed, or
marks it cancelled if it is in flight, and its worker's handler is stopped.
With --payload, cancels every task whose payload is the argument (or
standard input with "-"). Cancelling reads the queue's waiting list.
Exits 1 when no task matched.`},
		{name: "delete", synopsis: "<queue> --yes", group: "Change", summary: "delete a queue and everything in it", run: cmdDelete, help: `
Deletes a queue: its waiting and delayed tasks, its dead letters and
retained outcomes. Tasks in flight are marked so that their workers drop
them when they end. Without --yes it changes nothing, prints what it would
delete, and exits 2. Exits 1 when there is no such queue.`},
		{name: "result", synopsis: "<queue> <id>", group: "Outcomes", summary: "a retained task's outcome", run: cmdResult, help: `
Shows the outcome of a task enqueued with --retain (or worqr.Retain):
succeeded, with the result its handler set, or dead, with its error and
reason. Exits 1 when there is none: the task has not ended, was not
retained, or its retention ran out.`},
		{name: "wait", synopsis: "<queue> <id>", group: "Outcomes", summary: "wait for a retained task's outcome", noLimit: true, run: cmdWait, help: `
Waits until a task enqueued with --retain has ended and shows its outcome,
as result does. It waits without a limit unless --timeout is given, and
exits 1 when that runs out. It exits 0 once the outcome is read, whether
the task succeeded or died: look at "status". It waits only while an
outcome will come, and exits 1 at once, saying why, when none will: the
task was not enqueued with --retain, was cancelled, or its queue deleted,
or the queue knows no task of that id and keeps no outcome of it (never
enqueued, or ended and gone: without --retain, or its retention ran
out).`},
	}
}

func cmdEnqueue(e *env, args []string) error {
	fs := e.flags()
	in := duration(fs, "in", "delay the task by this `duration`")
	at := fs.String("at", "", "delay the task until this `time` (RFC 3339: 2026-01-02T15:04:05Z)")
	front := fs.Bool("front", false, "add the task at the front of the queue, to be dequeued next")
	maxAttempts := fs.Int("max-attempts", 0, "the task's own attempt `budget`, overriding the queue's (negative: no limit)")
	retain := duration(fs, "retain", "keep the task's outcome for this `duration` after it ends (for result and wait)")
	taskTimeout := duration(fs, "task-timeout", "bound each attempt's run to this `duration`, overriding the queue's")
	kind := fs.String("kind", "", "the task's `kind`, for a Router (letters, digits and -_./)")
	group := fs.String("group", "", "the task's `group` key: groups take turns, each under its own concurrency limit")
	pos, err := e.parse(fs, args, 2, 2)
	if err != nil {
		return err
	}
	queue, err := queueArg(pos[0])
	if err != nil {
		return err
	}
	var opts []worqr.EnqueueOption
	switch {
	case *maxAttempts == 0 && flagGiven(fs, "max-attempts"):
		// 0 would silently mean the queue's budget, as if the flag were
		// not given: refused, so that no one gets that by mistake.
		return usagef("--max-attempts 0 is not a budget: leave the flag out for the queue's, give -1 for no limit")
	case *in > 0 && *at != "":
		return usagef("give --in or --at, not both")
	case *front && (*in > 0 || *at != ""):
		return usagef("--front does not apply to a delayed task: it joins the back when due")
	case *taskTimeout > 0 && *taskTimeout < time.Millisecond:
		return usagef("--task-timeout must be at least 1ms")
	}
	if *in > 0 {
		opts = append(opts, worqr.In(*in))
	}
	if *at != "" {
		t, err := time.Parse(time.RFC3339Nano, *at)
		if err != nil {
			return usagef("--at %q: not an RFC 3339 time like 2026-01-02T15:04:05Z", *at)
		}
		opts = append(opts, worqr.At(t))
	}
	if *front {
		opts = append(opts, worqr.AtFront())
	}
	if *maxAttempts != 0 {
		opts = append(opts, worqr.MaxAttempts(*maxAttempts))
	}
	if *retain > 0 {
		opts = append(opts, worqr.Retain(*retain))
	}
	if *taskTimeout > 0 {
		opts = append(opts, worqr.Timeout(*taskTimeout))
	}
	if *kind != "" {
		opts = append(opts, worqr.Kind(*kind))
	}
	if *group != "" {
		opts = append(opts, worqr.Group(*group))
	}
	payload, err := e.payload(pos[1])
	if err != nil {
		return err
	}
	c, err := e.client()
	if err != nil {
		return err
	}
	id, err := c.Enqueue(e.ctx, queue, payload, opts...)
	if err != nil {
		return err
	}
	if e.g.json {
		return e.printJSON(struct {
			Queue string `json:"queue"`
			ID    string `json:"id"`
		}{queue, id})
	}
	_, err = fmt.Fprintln(e.stdout, id)
	return err
}

// payload is a payload argument: as given, or stdin for "-".
func (e *env) payload(arg string) ([]byte, error) {
	if arg != "-" {
		return []byte(arg), nil
	}
	const limit = worqr.DefaultMaxTaskSize
	b, err := io.ReadAll(io.LimitReader(e.stdin, limit+1))
	if err != nil {
		return nil, fmt.Errorf("reading the payload from stdin: %w", err)
	}
	if len(b) > limit {
		// Say how large it is: count the rest without keeping it, up to a
		// bound (stdin need not end).
		const counted = 1 << 30
		rest, err := io.CopyN(io.Discard, e.stdin, counted)
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("reading the payload from stdin: %w", err)
		}
		size := fmt.Sprintf("%d bytes", int64(len(b))+rest)
		if rest == counted {
			size = "over " + size
		}
		return nil, fmt.Errorf("the payload on stdin is %s, over the limit of %d bytes (1 MiB)", size, limit)
	}
	return b, nil
}

func cmdCancel(e *env, args []string) error {
	fs := e.flags()
	byPayload := fs.Bool("payload", false, "cancel every task whose payload is the argument, not a task id")
	pos, err := e.parse(fs, args, 2, 2)
	if err != nil {
		return err
	}
	queue, err := queueArg(pos[0])
	if err != nil {
		return err
	}
	var payload []byte
	if *byPayload {
		if payload, err = e.payload(pos[1]); err != nil {
			return err
		}
	}
	c, err := e.client()
	if err != nil {
		return err
	}
	var res worqr.CancelResult
	if *byPayload {
		res, err = c.Cancel(e.ctx, queue, payload)
	} else {
		res, err = c.CancelTask(e.ctx, queue, pos[1])
	}
	if err != nil {
		return err
	}
	if res.Removed+res.Marked == 0 {
		if *byPayload {
			return notFoundf("no task waiting, delayed or in flight in %q has that payload", escape(queue))
		}
		return notFoundf("no task %s waiting, delayed or in flight in %q", escape(pos[1]), escape(queue))
	}
	if e.g.json {
		id := pos[1]
		if *byPayload {
			id = ""
		}
		return e.printJSON(struct {
			Queue   string `json:"queue"`
			ID      string `json:"id,omitempty"`
			Removed int64  `json:"removed"`
			Marked  int64  `json:"marked"`
		}{queue, id, res.Removed, res.Marked})
	}
	_, err = fmt.Fprintf(e.stdout, "cancelled in %q: %d removed (waiting or delayed), %d marked in flight\n", escape(queue), res.Removed, res.Marked)
	return err
}

func cmdDelete(e *env, args []string) error {
	fs := e.flags()
	yes := fs.Bool("yes", false, "really delete")
	pos, err := e.parse(fs, args, 1, 1)
	if err != nil {
		return err
	}
	c, queue, err := e.queueClient(pos[0])
	if err != nil {
		return err
	}
	names, err := c.Queues(e.ctx)
	if err != nil {
		return err
	}
	before, err := countQueue(e.ctx, c, queue)
	if err != nil {
		return err
	}
	exists := false
	for _, n := range names {
		exists = exists || n == queue
	}
	if !exists && before.Waiting+before.Delayed+before.InFlight+before.Dead == 0 {
		return notFoundf("no queue %q (worqr queues lists them)", escape(queue))
	}
	if !*yes {
		e.note("would delete queue %q: %d waiting, %d delayed, %d dead letters; %d in flight would be dropped when they end",
			escape(queue), before.Waiting, before.Delayed, before.Dead, before.InFlight)
		return usagef("delete needs --yes; nothing was changed")
	}
	dropped, err := c.DeleteQueue(e.ctx, queue)
	if err != nil {
		return err
	}
	if e.g.json {
		return e.printJSON(struct {
			Queue    string `json:"queue"`
			Dropped  int64  `json:"dropped"`
			Dead     int64  `json:"dead"`
			InFlight int64  `json:"inFlight"`
		}{queue, dropped, before.Dead, before.InFlight})
	}
	_, err = fmt.Fprintf(e.stdout, "deleted queue %q: %d waiting or delayed tasks and %d dead letters dropped; %d in flight marked\n",
		escape(queue), dropped, before.Dead, before.InFlight)
	return err
}

// outcomeJSON is a retained outcome.
type outcomeJSON struct {
	ID           string     `json:"id"`
	Queue        string     `json:"queue"`
	Status       string     `json:"status"`
	Attempts     int        `json:"attempts"`
	EnqueuedAt   *time.Time `json:"enqueuedAt"`
	StartedAt    *time.Time `json:"startedAt"`
	EndedAt      *time.Time `json:"endedAt"`
	ExpiresAt    *time.Time `json:"expiresAt"`
	Result       *string    `json:"result,omitempty"`
	ResultBase64 string     `json:"resultBase64,omitempty"`
	Error        string     `json:"error,omitempty"`
	Reason       string     `json:"reason,omitempty"`
}

func (e *env) printOutcome(o worqr.TaskOutcome) error {
	if e.g.json {
		j := outcomeJSON{ID: o.ID, Queue: o.Queue, Status: string(o.Status), Attempts: o.Attempts,
			EnqueuedAt: jsonTime(o.EnqueuedAt), StartedAt: jsonTime(o.StartedAt), EndedAt: jsonTime(o.EndedAt), ExpiresAt: jsonTime(o.ExpiresAt),
			Error: o.Error, Reason: o.Reason}
		if o.Status == worqr.OutcomeSucceeded {
			j.Result, j.ResultBase64 = textOrBase64(o.Result)
		}
		return e.printJSON(j)
	}
	lines := []string{"task", o.ID, "queue", escape(o.Queue), "status", string(o.Status), "attempts", itoa(o.Attempts),
		"enqueued", stamp(o.EnqueuedAt), "started", stamp(o.StartedAt), "ended", stamp(o.EndedAt), "expires", stamp(o.ExpiresAt)}
	if o.Status == worqr.OutcomeSucceeded {
		lines = append(lines, "result", fmt.Sprintf("%s (%d bytes)", preview(o.Result, 4*previewLen), len(o.Result)))
	} else {
		lines = append(lines, "reason", escape(o.Reason), "error", preview([]byte(o.Error), 4*previewLen))
	}
	return writeLines(e.stdout, lines...)
}

func cmdResult(e *env, args []string) error {
	pos, err := e.parse(e.flags(), args, 2, 2)
	if err != nil {
		return err
	}
	c, queue, err := e.queueClient(pos[0])
	if err != nil {
		return err
	}
	o, err := c.TaskResult(e.ctx, queue, pos[1])
	if errors.Is(err, worqr.ErrNoTask) {
		return notFoundf("no outcome of task %s in %q: not ended yet, not enqueued with --retain, or expired", escape(pos[1]), escape(queue))
	}
	if err != nil {
		return err
	}
	return e.printOutcome(o)
}

func cmdWait(e *env, args []string) error {
	pos, err := e.parse(e.flags(), args, 2, 2)
	if err != nil {
		return err
	}
	c, queue, err := e.queueClient(pos[0])
	if err != nil {
		return err
	}
	id := pos[1]
	o, err := c.Wait(e.ctx, queue, id)
	switch {
	case errors.Is(err, worqr.ErrNotRetained):
		return notFoundf("task %s in %q was not enqueued with --retain: it will have no outcome to wait for", escape(id), escape(queue))
	case errors.Is(err, worqr.ErrTaskCancelled):
		return notFoundf("task %s in %q was cancelled: it will have no outcome", escape(id), escape(queue))
	case errors.Is(err, worqr.ErrQueueDeleted):
		return notFoundf("queue %q was deleted: task %s will have no outcome", escape(queue), escape(id))
	case errors.Is(err, worqr.ErrNoTask):
		return notFoundf("no task %s in %q and no outcome of it: never enqueued, cancelled, or ended without --retain or past its retention", escape(id), escape(queue))
	case err != nil:
		return err
	}
	return e.printOutcome(o)
}

func controlCommands() []*command {
	return []*command{
		{name: "pause", synopsis: "<queue> [--create]", group: "Change", summary: "stop the whole fleet taking a queue's tasks", run: cmdPause, help: `
Pauses a queue for every worker: enqueues are accepted and tasks in flight
finish, but nothing more is handed out until resume. Exits 1, changing
nothing, when there is no such queue, unless --create is given.`},
		{name: "resume", synopsis: "<queue> [--create]", group: "Change", summary: "undo pause and wake the workers", run: cmdResume, help: `
Resumes a paused queue and wakes every worker serving it. Exits 1 when
there is no such queue, unless --create is given.`},
		{name: "limit", synopsis: "<queue> <n> [--create]", group: "Change", summary: "limit a queue's tasks in flight across the fleet (0: none)", run: cmdLimit, help: `
Sets the most tasks of a queue in flight at once across all workers; 0
removes the limit. Enforced in Redis, for every worker. n is a whole
number from 0 to 9007199254740991 (2^53 - 1, the largest the scripts hold
exactly). Exits 1, changing nothing, when there is no such queue, unless
--create is given.`},
		{name: "aggregate", synopsis: "<queue> <max-size> <max-delay> [--create]", group: "Change", summary: "set when a queue's gatherings of aggregated tasks are flushed", run: cmdAggregate, help: `
Sets a queue's aggregation settings, for the whole fleet: the tasks
enqueued with an aggregation key (the Aggregate option) gather until
max-size of them have arrived, or max-delay (a duration, such as 10m, in
whole milliseconds) has passed since the first, and then go to the queue
as one task. 0 for either puts back its default (100 tasks, 1m). Prints
the settings and the open gatherings. Exits 1, changing nothing, when
there is no such queue, unless --create is given.`},
	}
}

// aggregateRow is what aggregate prints: the settings in force and the
// gatherings open.
type aggregateRow struct {
	Queue      string `json:"queue"`
	MaxSize    int    `json:"max_size"`
	MaxDelayMs int64  `json:"max_delay_ms"`
	Gatherings int64  `json:"gatherings"`
	Gathering  int64  `json:"gathering"`
}

func cmdAggregate(e *env, args []string) error {
	fs := e.flags()
	opts := createFlag(fs)
	pos, err := e.parse(fs, args, 3, 3)
	if err != nil {
		return err
	}
	queue, err := queueArg(pos[0])
	if err != nil {
		return err
	}
	n, err := strconv.ParseInt(pos[1], 10, 64)
	if err != nil || n < 0 || n > worqr.MaxLimit {
		return usagef("aggregate: %q is not a count from 0 (the default) to %d", pos[1], int64(worqr.MaxLimit))
	}
	d, err := time.ParseDuration(pos[2])
	if err != nil || d < 0 || d%time.Millisecond != 0 {
		return usagef("aggregate: %q is not a duration of whole milliseconds from 0 (the default)", pos[2])
	}
	c, err := e.client()
	if err != nil {
		return err
	}
	if err := c.SetAggregation(e.ctx, queue, worqr.AggregateSettings{MaxSize: int(n), MaxDelay: d}, opts()...); err != nil {
		return noQueue(err, queue)
	}
	info, err := c.QueueInfo(e.ctx, queue)
	if err != nil {
		return err
	}
	r := aggregateRow{Queue: queue, MaxSize: info.Aggregation.MaxSize, MaxDelayMs: info.Aggregation.MaxDelay.Milliseconds(), Gatherings: info.Gatherings, Gathering: info.Gathering}
	if e.g.json {
		return e.printJSON(r)
	}
	_, err = fmt.Fprintf(e.stdout, "queue %q: aggregated tasks of up to %d, flushed %v after the first; %d gatherings open, holding %d tasks\n",
		escape(queue), r.MaxSize, info.Aggregation.MaxDelay, r.Gatherings, r.Gathering)
	return err
}

func cmdPause(e *env, args []string) error { return control(e, args, "paused", (*worqr.Client).Pause) }
func cmdResume(e *env, args []string) error {
	return control(e, args, "resumed", (*worqr.Client).Resume)
}

// createFlag defines --create, and returns the control options it asks
// for once the flags are parsed.
func createFlag(fs *flag.FlagSet) func() []worqr.ControlOption {
	create := fs.Bool("create", false, "make the queue if it does not exist (else: exit 1, changing nothing)")
	return func() []worqr.ControlOption {
		if *create {
			return []worqr.ControlOption{worqr.CreateQueue()}
		}
		return nil
	}
}

// noQueue turns a control's ErrNoQueue into a not-found error.
func noQueue(err error, queue string) error {
	if errors.Is(err, worqr.ErrNoQueue) {
		return notFoundf("no queue %q (worqr queues lists them; --create makes it)", escape(queue))
	}
	return err
}

func control(e *env, args []string, done string, op func(*worqr.Client, context.Context, string, ...worqr.ControlOption) error) error {
	fs := e.flags()
	opts := createFlag(fs)
	pos, err := e.parse(fs, args, 1, 1)
	if err != nil {
		return err
	}
	c, queue, err := e.queueClient(pos[0])
	if err != nil {
		return err
	}
	if err := op(c, e.ctx, queue, opts()...); err != nil {
		return noQueue(err, queue)
	}
	return controlled(e, c, queue, done)
}

func cmdLimit(e *env, args []string) error {
	fs := e.flags()
	opts := createFlag(fs)
	pos, err := e.parse(fs, args, 2, 2)
	if err != nil {
		return err
	}
	queue, err := queueArg(pos[0])
	if err != nil {
		return err
	}
	n, err := strconv.ParseInt(pos[1], 10, 64)
	if err != nil || n < 0 || n > worqr.MaxLimit {
		return usagef("limit: %q is not a count from 0 (no limit) to %d", pos[1], int64(worqr.MaxLimit))
	}
	c, err := e.client()
	if err != nil {
		return err
	}
	if err := c.SetConcurrency(e.ctx, queue, int(n), opts()...); err != nil {
		return noQueue(err, queue)
	}
	return controlled(e, c, queue, "limited")
}

// controlled prints a queue's controls after a change.
func controlled(e *env, c *worqr.Client, queue, done string) error {
	r, err := countQueue(e.ctx, c, queue)
	if err != nil {
		return err
	}
	if e.g.json {
		return e.printJSON(r)
	}
	limit := "no limit"
	if r.Concurrency > 0 {
		limit = "limit " + strconv.Itoa(r.Concurrency)
	}
	_, err = fmt.Fprintf(e.stdout, "%s queue %q: paused=%v, %s, %d in flight\n", done, escape(queue), r.Paused, limit, r.InFlight)
	return err
}
