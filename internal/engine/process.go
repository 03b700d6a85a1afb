// Package engine is the worker's engine: the record of a process, the
// scripts that end it and write its progress, the settler writing a
// handler's outcome, and the Handle runtime (its slot scheduler, the
// start of handlers and the hand-off, the dequeue). The root package's
// Process holds a Proc by value, so a process is one allocation, and
// gives it a Host: the worker's side of what the record does (its
// lease, its observer); the runtime takes the worker as a RuntimeHost,
// and the application's handler as a Call.
package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/worqr/worqr/internal/clock"
	"github.com/worqr/worqr/internal/coalesce"
	"github.com/worqr/worqr/internal/delayed"
	"github.com/worqr/worqr/internal/errs"
	"github.com/worqr/worqr/internal/proc"
	"github.com/worqr/worqr/internal/store"
	"github.com/worqr/worqr/internal/testsignal"
)

// Outcome is how a process ended; the root package's Outcome holds the
// same words.
type Outcome string

// The outcomes.
const (
	Succeeded Outcome = "succeeded"
	Retried   Outcome = "retried"
	Dead      Outcome = "dead"
	Cancelled Outcome = "cancelled"
	Deleted   Outcome = "deleted"
	Lost      Outcome = "lost"
)

// Proc is a process: one attempt at a task, held by one worker. Its
// identity is set when it is made and never changes.
type Proc struct {
	// Host is the worker's side of the process; nil for a detached one.
	Host Host

	ID     string
	Seq    uint64 // ID as a number: ids count up in dequeue order
	Queue  string
	Owner  string
	TaskID string
	Kind   string
	Trace  string // the trace context the task carries
	Flow   string // the workflow step it runs, '<workflow id>.<step>'; "" if none
	Plain  bool   // its task has no weight, group or priority (store.Proc.Plain)
	// NoticeAt is the stamp (µs, Redis clock) of the notice its finish
	// wrote, and NoticeResult the result that finish retained (the
	// result at the call's send: a SetResult later retains nothing), set
	// by the finish's call before its outcome is recorded; 0 and "" before.
	NoticeAt     int64
	NoticeResult string
	Aggregated   int // the tasks it gathers, for an aggregated task; else 0
	Attempt      int
	Budget       int           // the task's own attempt budget; 0 if none, negative for no limit
	Failures     int           // its earlier attempts that failed
	Timeout      time.Duration // the task's own handler timeout; 0 if none
	LastError    string        // the error its previous attempt recorded
	EnqueuedAt   time.Time
	DueAt        time.Time // when the task became due for this start
	Task         []byte
	Started      time.Time // on the worker's clock

	// St is its state: how it ends, its result and progress reports.
	St proc.State
	// books are the books of the session that adopted it, nil until
	// then (books.go), which it leaves when it ends (Forget). Set once,
	// before the process is shared.
	books *Books
}

// Init sets up the record of the process Redis made for sp (a
// dequeue's or a hand-off's) in queue, started at started, held by host.
func (p *Proc) Init(host Host, queue string, sp store.Proc, started time.Time) {
	*p = Proc{
		Host: host, ID: sp.PID, Seq: sp.Seq(), Queue: queue, Owner: sp.Owner,
		TaskID: sp.Task.ID, Kind: sp.Task.Kind, Trace: sp.Task.Trace, Flow: sp.Task.Flow, Aggregated: sp.Task.Aggregated, Attempt: sp.Task.Attempts, Budget: sp.Task.MaxAttempts, Failures: sp.Task.Failures, Timeout: sp.Task.Timeout, LastError: sp.Task.LastError, Plain: sp.Plain,
		EnqueuedAt: sp.Task.EnqueuedAt(), Task: []byte(sp.Task.Payload),
		Started: started,
	}
	p.DueAt = p.EnqueuedAt
	if sp.Task.Due > 0 {
		p.DueAt = time.UnixMicro(sp.Task.Due)
	}
}

// Host is the worker a process belongs to, as the process's record takes
// it: a conversion of the root's Process, not an allocation.
type Host interface {
	// Env is the worker's environment, shared by its processes.
	Env() *Env
	// LeaseLost is told that a script found the lease of the process's
	// worker on its queue gone (cause says which).
	LeaseLost(cause error)
	// Observe tells the observer how the process ended (once: the
	// record asks only the first time).
	Observe(outcome Outcome, reason string, err error)
}

// Env is what a worker's processes take of it and its client.
type Env struct {
	Clock  clock.Clock
	Store  *store.Store
	Log    *slog.Logger
	Writer proc.Writer // the outcome writes' outage, life and context
	// WorkerID is the worker's current id.
	WorkerID func() string
	// Validate tells why a call op on ctx cannot be made (a closed
	// client, a done ctx), if it cannot.
	Validate func(ctx context.Context, op string) error
	// Fail wraps a failed script call's error.
	Fail func(op, queue string, err error) error
	// FlowEnded tells the workflow of a task that ended (succeeded or
	// dead) so that its next steps go; read is what reading its notice
	// would answer, if the end's script told it (nil: to be read).
	FlowEnded func(queue, flow, taskID string, outcome Outcome, read *store.NoticeRead)
	// Finishes and Retries join overlapping Finish and retry calls of
	// a queue into one script call.
	Finishes *coalesce.Coalescer[*Proc, store.Outcome]
	Retries  *coalesce.Coalescer[store.RetryRef, store.Outcome]

	DeadBounds       store.DeadBounds
	TTL              time.Duration // the worker's lease: the bound on a held progress write
	ProgressInterval time.Duration
	MaxAttempts      int // the attempt budget when neither the policy nor the task sets one
	// UnsurePasses is how many renewals look for processes Redis says
	// the worker holds but it does not know of, after a call whose reply
	// may have been lost (Books.MarkUnsure).
	UnsurePasses int
	// CancelWait is how long a stop waits for handlers to return once
	// their contexts were cancelled (the root's ShutdownCancelWait).
	CancelWait time.Duration

	// What the worker's sessions and lease keeper take besides.

	// Redis is the worker's estimate of the Redis clock, in which a
	// queue's rate limit gives its times.
	Redis *delayed.RedisClock
	// RenewInterval is how often the worker renews its leases: the
	// longest wait between two attempts at a rejoin or a registration.
	RenewInterval time.Duration
	// StayFenced keeps a fenced worker fenced rather than registering it
	// again.
	StayFenced bool
	// HealthyAfter is the poison-pill guard of the worker giving its own
	// work back (the reclaimer's).
	HealthyAfter func() store.Poison
	// Signals are the tests' ears; each is off unless a test turns it on.
	Signals Signals
}

// Signals are the test signals of the sessions and the lease keeper.
type Signals struct {
	// Rejoined: a fenced queue's lease was taken again; the queue.
	Rejoined *testsignal.Signal[string]
	// Registered: a fenced worker registered again; its new id.
	Registered *testsignal.Signal[string]
	// QueueRenewed: a renewal of a queue lease sent apart from the
	// registry's was answered, or failed; the queue.
	QueueRenewed *testsignal.Signal[string]
}

// Status asks Redis what became of the process: nil while it is active
// and still this worker's, else ErrTaskCancelled, ErrQueueDeleted or
// ErrProcessLost.
func (p *Proc) Status(ctx context.Context) error {
	env := p.Host.Env()
	if err := env.Validate(ctx, "status"); err != nil {
		return err
	}
	if p.St.IsSettled() {
		return fmt.Errorf("worqr: status %q process %s: already ended: %w", p.Queue, p.ID, errs.ErrProcessLost)
	}
	states, err := env.Store.States(ctx, p.Queue, p.Owner, []string{p.ID})
	if err != nil {
		return env.Fail("status", p.Queue, err)
	}
	if err := StateErr(states[0]); err != nil {
		if errors.Is(err, errs.ErrProcessLost) {
			p.Forget(errs.ErrProcessLost)
		} else {
			p.End(err, false)
		}
		return fmt.Errorf("worqr: status %q process %s: %w", p.Queue, p.ID, err)
	}
	return nil
}

// StateErr maps a state from the states script to an error.
func StateErr(s store.State) error {
	switch s {
	case store.Active:
		return nil
	case store.Cancelled:
		return errs.ErrTaskCancelled
	case store.Deleted:
		return errs.ErrQueueDeleted
	default:
		return errs.ErrProcessLost
	}
}
