package worqr

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/worqr/worqr/internal/clock"
	"github.com/worqr/worqr/internal/proc"
	"github.com/worqr/worqr/internal/store"
)

// Process is a task taken from a queue by a Worker. Exactly one of Finish
// and Requeue can succeed for it, and only while it still belongs to the
// worker that dequeued it. (A detached one, for unit tests, belongs to no
// worker: see NewDetachedProcess.)
type Process struct {
	w          *Worker
	id         string
	seq        uint64 // id as a number: ids count up in dequeue order
	queue      string
	owner      string
	taskID     string
	kind       string
	trace      string // the trace context the task carries
	flow       string // the workflow step it runs, '<workflow id>.<step>'; "" if none
	aggregated int    // the tasks it gathers, for an aggregated task (see Aggregate); else 0
	attempt    int
	budget     int           // the task's own attempt budget; 0 if none, negative for no limit
	failures   int           // its earlier attempts that failed
	timeout    time.Duration // the task's own handler timeout; 0 if none
	lastError  string        // the error its previous attempt recorded
	enqueuedAt time.Time
	dueAt      time.Time // when the task became due for this start
	task       []byte
	started    time.Time // on the worker's clock

	// st is its state: how it ends, its result and progress reports.
	st proc.State
}

// ID is the process id: unique among the processes of its queue, ever,
// and increasing in dequeue order: the Redis clock in microseconds at the
// dequeue, in hex, bumped by one when taken. Each start of a task is a new
// process.
func (p *Process) ID() string { return p.id }

// TaskID is the id Enqueue returned for the task.
func (p *Process) TaskID() string { return p.taskID }

// Kind is the task's kind (see the Kind enqueue option), "" if it has
// none: what a Router dispatches on.
func (p *Process) Kind() string { return p.kind }

// Trace is the trace context the task carries from the enqueue that made
// it (see Tracer), "" if none: the same on every attempt.
func (p *Process) Trace() string { return p.trace }

// Attempt is the task's attempt this process runs: 1 the first time the
// task is started, counting every start since (retries, reclaims after a
// worker died, tasks given back by StopWork or shutdown).
func (p *Process) Attempt() int { return p.attempt }

// SetResult sets the result kept with the task's outcome when it
// finishes, if it was enqueued with Retain (Client.TaskResult and Wait
// return it); without Retain it is dropped. Keep it small: it lives in
// Redis for the retention time.
func (p *Process) SetResult(result []byte) { p.st.SetResult(result) }

// Result is what SetResult set, nil if it was not called. Callers must
// not modify it.
func (p *Process) Result() []byte { return p.st.Result() }

func (p *Process) resultText() string { return p.st.ResultText() }

// LastError is the error the task's previous attempt failed with, as
// text, or "" (the first attempt, or one after a reclaim only).
func (p *Process) LastError() string { return p.lastError }

// EnqueuedAt is when the task was enqueued, by the Redis clock.
func (p *Process) EnqueuedAt() time.Time { return p.enqueuedAt }

// DueAt is when the task became due for this start, by the Redis clock
// (to the microsecond): its enqueue (EnqueuedAt), unless it was enqueued
// delayed (In, At: its due time) or went back to wait since (a retry: its
// backoff's due time, or the retry's time without one; a Requeue, a
// reclaim after its worker died, a task given back by StopWork or
// shutdown, a dead letter requeued: when that happened). The time it
// waited for this start is the process's start minus DueAt.
func (p *Process) DueAt() time.Time { return p.dueAt }

// Queue is the queue the task came from.
func (p *Process) Queue() string { return p.queue }

// Task is the task's payload. Callers must not modify it.
func (p *Process) Task() []byte { return p.task }

// Owner is the id of the worker that dequeued the process.
func (p *Process) Owner() string { return p.owner }

// Done is closed when the worker learns that the process should end: it was
// finished or requeued, its task was cancelled, its queue was deleted, or
// it was lost (the worker fenced itself, closed or stopped work on the
// queue). Err says which.
func (p *Process) Done() <-chan struct{} { return p.st.Done() }

// Err is nil until Done is closed, then ErrTaskCancelled, ErrQueueDeleted,
// ErrProcessLost, or ErrProcessEnded after the process's own Finish,
// Requeue, Retry or DeadLetter.
func (p *Process) Err() error { return p.st.Err() }

// end closes Done with a reason; the first reason wins. It reports whether
// this call ended the process. A process lost (settled, ErrProcessLost) is
// reported to the observer as lost.
func (p *Process) end(reason error, settled bool) bool {
	// A process ended by a cancel or delete event (not settled: Finish
	// still works) that is lost later is reported then.
	first, newlySettled := p.st.End(reason, settled)
	if newlySettled && errors.Is(reason, ErrProcessLost) {
		p.observeEnd(OutcomeLost, "", reason)
	}
	return first
}

func (p *Process) isUnwritten() bool { return p.st.IsUnwritten() }

// onEnd arranges for fn to be called with the reason when the process
// ends, at once if it already has.
func (p *Process) onEnd(fn func(reason error)) { p.st.OnEnd(fn) }

// interrupt ends the context of the handler running the process, if any,
// with cause, without ending the process.
func (p *Process) interrupt(cause error) { p.st.Interrupt(cause) }

func (p *Process) isSettled() bool { return p.st.IsSettled() }

// Finish deletes the process: the task is done. Finish calls on processes
// of the same queue that overlap are sent together, as one script call
// (see Client.Enqueue). It returns ErrProcessLost, and changes nothing, if
// the process no longer belongs to this worker (reclaimed by peers, given
// back, or already finished or requeued). Finishing a cancelled process,
// or one whose queue was deleted, succeeds.
func (p *Process) Finish(ctx context.Context) error {
	return p.finish(ctx, OutcomeSucceeded, nil)
}

// Retry puts the task back to run again after delay (at once when 0: at
// the back of the queue), recording cause as its error (Process.LastError
// of the next attempt); it counts against the attempt budget only when it
// starts again. Retry calls on processes of the same queue that overlap
// are sent together, as one script call, as Finish calls are. Dropped tasks (cancelled, queue deleted) and a process no
// longer this worker's give the same errors as Requeue.
func (p *Process) Retry(ctx context.Context, delay time.Duration, cause error) error {
	if delay < 0 {
		return fmt.Errorf("worqr: retry %q process %s: negative delay: %w", p.queue, p.id, ErrInvalidOptions)
	}
	return p.retry(ctx, delay, cause)
}

// DeadLetter moves the task to its queue's dead letters now, with cause
// as its error and cause's reason (see WithReason; ReasonManual if it has
// none).
// Dropped tasks and a process no longer this worker's give the same errors
// as Requeue.
func (p *Process) DeadLetter(ctx context.Context, cause error) error {
	return p.bury(ctx, reasonOf(cause, ReasonManual), cause)
}

// Requeue puts the task back at the back of its queue, to run again (a
// retry), and wakes the queue. If the task was cancelled, or its queue
// deleted, it is dropped instead and Requeue returns ErrTaskCancelled or
// ErrQueueDeleted. It returns ErrProcessLost, and changes nothing, if the
// process no longer belongs to this worker.
func (p *Process) Requeue(ctx context.Context) error {
	return p.requeue(ctx, nil)
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
		task, aggregated = encodeAggregated(opts.Members), len(opts.Members)
	}
	p := &Process{
		id: opts.TaskID, queue: opts.Queue, taskID: opts.TaskID, kind: opts.Kind, trace: opts.Trace, attempt: opts.Attempt, aggregated: aggregated,
		lastError: opts.LastError, enqueuedAt: opts.EnqueuedAt, dueAt: opts.DueAt, task: task,
		started: now,
	}
	p.st.MakeDone()
	return p
}

// Status asks Redis what became of the process: nil while it is active and
// still this worker's, else ErrTaskCancelled, ErrQueueDeleted or
// ErrProcessLost. A holder that may have missed events uses it.
func (p *Process) Status(ctx context.Context) error {
	if p.w == nil {
		return fmt.Errorf("worqr: status %q process %s: %w", p.queue, p.id, ErrDetached)
	}
	c := p.w.c
	if err := c.validateCtx(ctx, "status"); err != nil {
		return err
	}
	if p.isSettled() {
		return fmt.Errorf("worqr: status %q process %s: already ended: %w", p.queue, p.id, ErrProcessLost)
	}
	states, err := c.store.States(ctx, p.queue, p.owner, []string{p.id})
	if err != nil {
		return c.fail("status", p.queue, err)
	}
	if err := stateErr(states[0]); err != nil {
		if errors.Is(err, ErrProcessLost) {
			forget(p, ErrProcessLost)
		} else {
			p.end(err, false)
		}
		return fmt.Errorf("worqr: status %q process %s: %w", p.queue, p.id, err)
	}
	return nil
}

// stateErr maps a state from the states script to an error.
func stateErr(s store.State) error {
	switch s {
	case store.Active:
		return nil
	case store.Cancelled:
		return ErrTaskCancelled
	case store.Deleted:
		return ErrQueueDeleted
	default:
		return ErrProcessLost
	}
}
