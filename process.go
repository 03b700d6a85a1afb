package worqr

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/worqr/worqr/internal/clock"
	"github.com/worqr/worqr/internal/engine"
	"github.com/worqr/worqr/internal/store"
)

// Process is a task taken from a queue by a Worker. Exactly one of Finish
// and Requeue can succeed for it, and only while it still belongs to the
// worker that dequeued it. (A detached one, for unit tests, belongs to no
// worker: see NewDetachedProcess.)
type Process struct {
	w *Worker // nil for a detached process
	// rec is the engine's record of it: its identity and its state.
	rec engine.Proc
}

// newProcess is the process Redis made for sp (a dequeue's or a
// hand-off's), started now.
func newProcess(w *Worker, queue string, sp store.Proc) *Process {
	return newProcessAt(w, queue, sp, w.c.core.Clock.Now())
}

// newProcessAt is newProcess for a process that started at started (the
// processes of one dequeue share one reading of the clock).
func newProcessAt(w *Worker, queue string, sp store.Proc, started time.Time) *Process {
	p := &Process{w: w}
	p.rec.Init((*procHost)(p), queue, sp, started)
	return p
}

// procHost is a process as its record's host (a conversion, not an
// allocation).
type procHost Process

func (h *procHost) Env() *engine.Env { return &h.w.core.Env }

func (h *procHost) LeaseLost(cause error) {
	p := (*Process)(h)
	h.w.core.Lease.LeaseLost(p.rec.Owner, p.rec.Queue, nil, &p.rec, cause)
}

func (h *procHost) Observe(outcome engine.Outcome, reason string, err error) {
	h.w.c.core.Finished(&h.rec, outcome, reason, err)
}

// ID is the process id: unique among the processes of its queue, ever,
// and increasing in dequeue order: the Redis clock in microseconds at the
// dequeue, in hex, bumped by one when taken. Each start of a task is a new
// process.
func (p *Process) ID() string { return p.rec.ID }

// TaskID is the id Enqueue returned for the task.
func (p *Process) TaskID() string { return p.rec.TaskID }

// Kind is the task's kind (see the Kind enqueue option), "" if it has
// none: what a Router dispatches on.
func (p *Process) Kind() string { return p.rec.Kind }

// Trace is the trace context the task carries from the enqueue that made
// it (see Tracer), "" if none: the same on every attempt.
func (p *Process) Trace() string { return p.rec.Trace }

// Attempt is the task's attempt this process runs: 1 the first time the
// task is started, counting every start since (retries, reclaims after a
// worker died, tasks given back by StopWork or shutdown).
func (p *Process) Attempt() int { return p.rec.Attempt }

// SetResult sets the result kept with the task's outcome when it
// finishes, if it was enqueued with Retain (Client.TaskResult and Wait
// return it); without Retain it is dropped. Keep it small: it lives in
// Redis for the retention time.
func (p *Process) SetResult(result []byte) { p.rec.St.SetResult(result) }

// Result is what SetResult set, nil if it was not called. Callers must
// not modify it.
func (p *Process) Result() []byte { return p.rec.St.Result() }

// LastError is the error the task's previous attempt failed with, as
// text, or "" (the first attempt, or one after a reclaim only).
func (p *Process) LastError() string { return p.rec.LastError }

// EnqueuedAt is when the task was enqueued, by the Redis clock.
func (p *Process) EnqueuedAt() time.Time { return p.rec.EnqueuedAt }

// DueAt is when the task became due for this start, by the Redis clock
// (to the microsecond): its enqueue (EnqueuedAt), unless it was enqueued
// delayed (In, At: its due time) or went back to wait since (a retry: its
// backoff's due time, or the retry's time without one; a Requeue, a
// reclaim after its worker died, a task given back by StopWork or
// shutdown, a dead letter requeued: when that happened). The time it
// waited for this start is the process's start minus DueAt.
func (p *Process) DueAt() time.Time { return p.rec.DueAt }

// Queue is the queue the task came from.
func (p *Process) Queue() string { return p.rec.Queue }

// Task is the task's payload. Callers must not modify it.
func (p *Process) Task() []byte { return p.rec.Task }

// Owner is the id of the worker that dequeued the process.
func (p *Process) Owner() string { return p.rec.Owner }

// Done is closed when the worker learns that the process should end: it was
// finished or requeued, its task was cancelled, its queue was deleted, or
// it was lost (the worker fenced itself, closed or stopped work on the
// queue). Err says which.
func (p *Process) Done() <-chan struct{} { return p.rec.St.Done() }

// Err is nil until Done is closed, then ErrTaskCancelled, ErrQueueDeleted,
// ErrProcessLost, or ErrProcessEnded after the process's own Finish,
// Requeue, Retry or DeadLetter.
func (p *Process) Err() error { return p.rec.St.Err() }

// Finish deletes the process: the task is done. Finish calls on processes
// of the same queue that overlap are sent together, as one script call
// (see Client.Enqueue). It returns ErrProcessLost, and changes nothing, if
// the process no longer belongs to this worker (reclaimed by peers, given
// back, or already finished or requeued). Finishing a cancelled process,
// or one whose queue was deleted, succeeds.
func (p *Process) Finish(ctx context.Context) error {
	if p.w == nil {
		return p.detached("finish")
	}
	return p.rec.Finish(ctx, engine.Succeeded, nil)
}

// Retry puts the task back to run again after delay (at once when 0: at
// the back of the queue), recording cause as its error (Process.LastError
// of the next attempt); it counts against the attempt budget only when it
// starts again. Retry calls on processes of the same queue that overlap
// are sent together, as one script call, as Finish calls are. Dropped tasks (cancelled, queue deleted) and a process no
// longer this worker's give the same errors as Requeue.
func (p *Process) Retry(ctx context.Context, delay time.Duration, cause error) error {
	if delay < 0 {
		return fmt.Errorf("worqr: retry %q process %s: negative delay: %w", p.rec.Queue, p.rec.ID, ErrInvalidOptions)
	}
	if p.w == nil {
		return p.detached("retry")
	}
	return p.rec.Retry(ctx, delay, cause)
}

// DeadLetter moves the task to its queue's dead letters now, with cause
// as its error and cause's reason (see WithReason; ReasonManual if it has
// none).
// Dropped tasks and a process no longer this worker's give the same errors
// as Requeue.
func (p *Process) DeadLetter(ctx context.Context, cause error) error {
	if p.w == nil {
		return p.detached("dead-letter")
	}
	return p.rec.Bury(ctx, engine.Reason(cause, ReasonManual), cause)
}

// Requeue puts the task back at the back of its queue, to run again (a
// retry), and wakes the queue. If the task was cancelled, or its queue
// deleted, it is dropped instead and Requeue returns ErrTaskCancelled or
// ErrQueueDeleted. It returns ErrProcessLost, and changes nothing, if the
// process no longer belongs to this worker.
func (p *Process) Requeue(ctx context.Context) error {
	if p.w == nil {
		return p.detached("requeue")
	}
	return p.rec.Requeue(ctx, nil)
}

// ErrDetached is returned by the methods of a detached process (see
// NewDetachedProcess) that would change or read its state in Redis:
// Finish, Requeue, Retry, DeadLetter and Status.
var ErrDetached = errors.New("detached process (no worker, no Redis)")

// DetachedOptions set what a detached process's accessors return (see
// NewDetachedProcess). The zero value is a first attempt at a task of
// queue "detached", enqueued now, with an id made from the clock.
type DetachedOptions struct {
	// Queue is Process.Queue. Default "detached".
	Queue string
	// TaskID is Process.TaskID, and Process.ID too. Default an id as
	// Enqueue makes them: the clock in microseconds, in hex.
	TaskID string
	// Kind is Process.Kind. Default none.
	Kind string
	// Trace is Process.Trace. Default none.
	Trace string
	// Attempt is Process.Attempt. Default 1.
	Attempt int
	// LastError is Process.LastError: the error the previous attempt
	// failed with.
	LastError string
	// EnqueuedAt is Process.EnqueuedAt. Default now.
	EnqueuedAt time.Time
	// DueAt is Process.DueAt. Default EnqueuedAt.
	DueAt time.Time
	// Members, when not nil, make the process an aggregated task's (see
	// Aggregate): Process.Aggregated returns them, and Process.Task
	// holds them encoded; the task NewDetachedProcess is given is not
	// used.
	Members []AggregateMember
}

// NewDetachedProcess makes a Process for a task with this payload that
// belongs to no worker and never touches Redis, so that a Handler can be
// called directly in a unit test (the worqrtest package does so). Its
// accessors, SetResult and Result work; Finish, Requeue, Retry,
// DeadLetter and Status return ErrDetached; Done is never closed (the
// context given to the handler stands for every reason to stop).
func NewDetachedProcess(task []byte, opts DetachedOptions) *Process {
	now := clock.Real().Now() // no client, so no client's clock: the system's

	if opts.Queue == "" {
		opts.Queue = "detached"
	}
	if opts.TaskID == "" {
		opts.TaskID = strconv.FormatInt(now.UnixMicro(), 16)
	}
	if opts.Attempt == 0 {
		opts.Attempt = 1
	}
	if opts.EnqueuedAt.IsZero() {
		opts.EnqueuedAt = now
	}
	if opts.DueAt.IsZero() {
		opts.DueAt = opts.EnqueuedAt
	}
	aggregated := 0
	if opts.Members != nil {
		task, aggregated = store.EncodeAggregated(opts.Members), len(opts.Members)
	}
	p := &Process{rec: engine.Proc{
		ID: opts.TaskID, Queue: opts.Queue, TaskID: opts.TaskID, Kind: opts.Kind, Trace: opts.Trace, Attempt: opts.Attempt, Aggregated: aggregated,
		LastError: opts.LastError, EnqueuedAt: opts.EnqueuedAt, DueAt: opts.DueAt, Task: task,
		Started: now,
	}}
	p.rec.St.MakeDone()
	return p
}

// Status asks Redis what became of the process: nil while it is active and
// still this worker's, else ErrTaskCancelled, ErrQueueDeleted or
// ErrProcessLost. A holder that may have missed events uses it.
func (p *Process) Status(ctx context.Context) error {
	if p.w == nil {
		return p.detached("status")
	}
	return p.rec.Status(ctx)
}

// processOf is the public Process whose record p is: its host.
func processOf(p *engine.Proc) *Process { return (*Process)(p.Host.(*procHost)) }

// processesOf is the public Processes of records ps.
func processesOf(ps []*engine.Proc) []*Process {
	out := make([]*Process, len(ps))
	for i, p := range ps {
		out[i] = processOf(p)
	}
	return out
}

// detached is the error of op on a detached process.
func (p *Process) detached(op string) error {
	return fmt.Errorf("worqr: %s %q process %s: %w", op, p.rec.Queue, p.rec.ID, ErrDetached)
}
