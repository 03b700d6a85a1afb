package engine

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/worqr/worqr/internal/delayed"
	"github.com/worqr/worqr/internal/lifecycle"
	"github.com/worqr/worqr/internal/outage"
	"github.com/worqr/worqr/internal/store"
	"github.com/worqr/worqr/internal/subscription"
)

// Session is the engine's part of one queue a worker serves: the queue's
// gate, its lease deadline, its books of in-flight processes, its
// dispatcher, its timer of delayed tasks and the application's callbacks.
// The root package's session holds one by value (one allocation per queue
// served) and adds the worker's side: the worker and the Handle runtime.
//
// Name, Events, Sub and Sched are set when the session is made and never change;
// the fields marked so are guarded by Mu. A session reads the worker's
// state (its id, its lifecycle) only where a decision must be atomic with
// it, taking the worker's mu before Mu (see the lock order in the root's
// worker.go).
type Session struct {
	Name string
	// Events are the application's callbacks for the queue.
	Events Events
	Sub    *subscription.Subscription
	// Sched moves the queue's delayed tasks when they are due.
	Sched *delayed.Scheduler

	// Gate lets a reconciliation, a rejoin or leaving the queue stop
	// dequeues on it while they decide which processes in Redis the worker
	// really holds (dequeues hold it shared). It is taken before the
	// worker's mu and Mu.
	Gate sync.RWMutex

	Mu sync.Mutex // guards the fields below
	// State is where the session stands with its lease (see
	// lifecycle.Session). Guarded by Mu.
	State lifecycle.Session
	// Procs are the worker's in-flight processes in this queue, by process
	// id: the one map of them. Guarded by Mu.
	Procs map[string]*Proc
	// Unsure counts the renewals that will still look for processes Redis
	// says the worker holds but it does not know of. A dequeue whose reply
	// was lost sets it; it stays set for more than one pass because the
	// lost command may still run late on another pooled connection.
	// Guarded by Mu.
	Unsure int
	// ReleasedUpTo is the queue's last process id (as a number) when the
	// worker last gave back processes Redis said it held that it did not
	// know of (a reconciliation, a rejoin): a hand-off event for one of
	// them that comes later is ignored (see the root's start.go). Guarded
	// by Mu.
	ReleasedUpTo uint64
	// DeadlineAt is when the worker's lease on this queue may expire, by
	// its own clock, less the fence margin (see the root's lease.go).
	// Guarded by Mu.
	DeadlineAt time.Time
	// LeaseGen counts the times the worker gave up its lease on this
	// queue (fence, or a re-registration that could not reach it): an
	// answer to a renewal sent before says nothing about the lease it
	// holds now. Guarded by Mu.
	LeaseGen uint64

	// host is the worker serving the queue, as the session's fence,
	// rejoin and reconciliation take it. Set by Init, never changed.
	host SessionHost

	// inCallback is set while the dispatcher runs one of the application's
	// callbacks, which may itself call StopWork or Close: stopping the
	// subscription then does not wait for the dispatcher. It is not set
	// during the dispatcher's own Redis calls (the catch-up), so stopping
	// waits for those.
	inCallback atomic.Bool
}

// SessionHost is the worker serving a session, as the session's fence,
// rejoin and reconciliation take it: its mu and lifecycle (the decisions
// atomic with its identity), its environment, its registry lease and
// registry entry, its tasks, and the application's and tests' ears.
type SessionHost interface {
	// Lock and Unlock take and release the worker's mu, which is taken
	// before a session's Mu.
	sync.Locker
	// Worker is the worker's lifecycle: its id, its phase, its fence.
	// The caller holds the worker's mu.
	Worker() *lifecycle.Worker
	// Serves reports whether s is the session of its queue. The caller
	// holds the worker's mu.
	Serves(s *Session) bool
	// Env is the worker's environment: its clock, store, failure
	// wrapping and TTL.
	Env() *Env
	// Outage is the client's tally of failed calls, which logs an
	// outage once.
	Outage() *outage.Outage
	// RenewInterval is how often the worker renews its leases: the
	// longest wait between two attempts at a rejoin.
	RenewInterval() time.Duration
	// Logger is the client's logger with the worker's id. The caller
	// does not hold the worker's mu.
	Logger() *slog.Logger
	// HealthyAfter is the poison-pill guard of the worker giving its own
	// work back (the reclaimer's).
	HealthyAfter() store.Poison
	// Margin is how long before a lease's earliest expiry the worker
	// fences itself.
	Margin() time.Duration
	// LeaseAt is the registry lease's deadline, from which a queue's new
	// lease derives. The caller holds the worker's mu.
	LeaseAt() time.Time
	// Arm sets the worker's deadline timer to its earliest deadline. The
	// caller holds the worker's mu.
	Arm()
	// Registry is the lock serialising changes to what the worker is
	// registered as and serves; it is taken before a session's Gate.
	Registry() sync.Locker
	// Join records the queue in the registry entry of worker id and
	// takes a lease on it; a registry lease found gone fences the worker
	// (the error is ErrWorkerFenced then). The caller holds Registry.
	Join(ctx context.Context, id, queue string) error
	// Go runs f on a goroutine of the worker's tasks, with the worker's
	// life.
	Go(f func(life context.Context))
	// Fenced tells the application (and the observer) that worker id
	// gave up its lease on queue for cause, ending lost.
	Fenced(id, queue string, cause error, lost []*Proc)
	// Rejoined tells the tests that the worker took a lease on queue
	// again.
	Rejoined(queue string)
}

// Init sets up the session of queue, for the worker host, with the
// application's events, serving under a lease whose deadline is
// deadline, with sched as its timer of delayed tasks. The caller
// subscribes it (Sub) once the rest of its session is set.
func (s *Session) Init(host SessionHost, queue string, events Events, deadline time.Time, sched *delayed.Scheduler) {
	s.host = host
	s.Name, s.Events, s.DeadlineAt, s.Sched = queue, events, deadline, sched
	s.Procs = make(map[string]*Proc)
}

// InCallback reports whether the dispatcher is running an application
// callback (the subscription's stop does not wait for it then).
func (s *Session) InCallback() bool { return s.inCallback.Load() }

// Call runs an application callback, unless the subscription was stopped.
// Setting inCallback before checking ctx means a stop that cancelled ctx
// first skips the callback, and one that cancelled it later does not wait.
func (s *Session) Call(ctx context.Context, f func()) {
	s.inCallback.Store(true)
	defer s.inCallback.Store(false)
	if ctx.Err() == nil {
		f()
	}
}

// Processes is a copy of the session's in-flight processes. Callers may
// hold the worker's mu.
func (s *Session) Processes() []*Proc {
	s.Mu.Lock()
	defer s.Mu.Unlock()
	ps := make([]*Proc, 0, len(s.Procs))
	for _, p := range s.Procs {
		ps = append(ps, p)
	}
	return ps
}

// TakeAll empties the session's books and returns what they held, with
// no reconciliation left to run (whoever takes them gives back everything
// under the worker's id). Callers may hold the worker's mu.
func (s *Session) TakeAll() []*Proc {
	s.Mu.Lock()
	defer s.Mu.Unlock()
	lost := make([]*Proc, 0, len(s.Procs))
	for _, p := range s.Procs {
		lost = append(lost, p)
	}
	s.Procs = make(map[string]*Proc)
	s.Unsure = 0
	return lost
}

// EndAll ends every process the session holds, once it has ended (the
// worker no longer serves the queue).
func (s *Session) EndAll(reason error) {
	s.Mu.Lock()
	procs := s.Procs
	s.Procs = make(map[string]*Proc)
	s.Mu.Unlock()
	for _, p := range procs {
		p.End(reason, true)
	}
}

// EndMatching ends (without settling: Finish still works) the processes
// of the queue that match.
func (s *Session) EndMatching(match func(*Proc) bool, reason error) {
	s.Mu.Lock()
	var hit []*Proc
	for _, p := range s.Procs {
		if match(p) {
			hit = append(hit, p)
		}
	}
	s.Mu.Unlock()
	for _, p := range hit {
		p.End(reason, false)
	}
}

// Drop takes p out of the session's books, if it is there.
func (s *Session) Drop(p *Proc) {
	s.Mu.Lock()
	if s.Procs[p.ID] == p {
		delete(s.Procs, p.ID)
	}
	s.Mu.Unlock()
}

// MarkUnsure makes the next passes renewals look for processes Redis
// says the worker holds that it does not know of: at least, or (exactly)
// reset to passes.
func (s *Session) MarkUnsure(passes int, atLeast bool) {
	s.Mu.Lock()
	if atLeast {
		s.Unsure = max(s.Unsure, passes)
	} else {
		s.Unsure = passes
	}
	s.Mu.Unlock()
}

// IsUnsure reports whether the session has processes to look for.
func (s *Session) IsUnsure() bool {
	s.Mu.Lock()
	defer s.Mu.Unlock()
	return s.Unsure > 0
}
