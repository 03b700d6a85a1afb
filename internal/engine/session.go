package engine

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/worqr/worqr/internal/delayed"
	"github.com/worqr/worqr/internal/subscription"
)

// Session is one queue a worker serves, from StartWork (or Handle,
// HandleQueues; Serve) to StopWork (Unserve) or the worker's close: the
// queue's gate, its books of in-flight processes (Books, books.go), its
// lease (Lease, lease.go), its dispatcher (dispatch.go), its timer of
// delayed tasks and the application's callbacks (events.go), its fence,
// rejoin and reconciliation (fence.go, rejoin.go, reconcile.go), leaving
// the queue (sessions.go), and the Handle runtime serving the queue, if
// any. The root's adapter of the worker, its host, makes one per queue
// served (ServeHost.NewSession).
//
// Name, Events, Sub, Sched, Runtime, the host and env are set when the
// session is made and never change. The books and the lease guard their own state; a
// decision over both is the lease's, taking its lock before the books'.
// A session reads the worker's state (its id, its lifecycle) only where a
// decision must be atomic with it, taking the worker's mu before either
// (see the lock order on Core).
type Session struct {
	Name string
	// Events are the application's callbacks for the queue.
	Events Events
	Sub    *subscription.Subscription
	// Sched moves the queue's delayed tasks when they are due.
	Sched *delayed.Scheduler
	// Runtime is the Handle runtime serving the queue, nil if the
	// application dequeues itself.
	Runtime *Runtime

	// Gate lets a reconciliation, a rejoin or leaving the queue stop
	// dequeues on it while they decide which processes in Redis the worker
	// really holds (dequeues hold it shared). It is taken before the
	// worker's mu, the lease's and the books'.
	Gate sync.RWMutex

	// Books are the worker's in-flight processes in the queue.
	Books Books
	// Lease is the session's side of its lease on the queue.
	Lease Lease

	// host is the worker serving the queue, as the session's fence,
	// rejoin and reconciliation take it; env is its environment.
	host SessionHost
	env  *Env

	// inCallback is set while the dispatcher runs one of the application's
	// callbacks, which may itself call StopWork or Close: stopping the
	// subscription then does not wait for the dispatcher. It is not set
	// during the dispatcher's own Redis calls (the catch-up), so stopping
	// waits for those.
	inCallback atomic.Bool
}

// SessionHost is the worker serving a session, as the session's fence,
// rejoin and reconciliation take it: its mu and what the mu guards (the
// decisions atomic with its identity), its lease keeper's deadline, its
// registry entry, its tasks, and the application's ears.
type SessionHost interface {
	Locked
	// Deadline is the worker's fencing deadline, from whose registry
	// lease a queue's new lease derives. Its At and Arm want the
	// worker's mu held.
	Deadline() *Deadline
	// Registry is the worker's registry entry, as a rejoin takes it.
	Registry() Joiner
	// Go runs f on a goroutine of the worker's tasks, with the worker's
	// life.
	Go(f func(life context.Context))
	// Fenced tells the application (and the observer) that worker id
	// gave up its lease on queue (the whole worker: queue is empty) for
	// cause, ending lost.
	Fenced(id, queue string, cause error, lost []*Proc)
	// Served is the worker's sessions. The caller holds the worker's mu.
	Served() Sessions
}

// Joiner is the worker's registry entry (Registry) as a rejoin takes it:
// its lock, serialising changes to what the worker is registered as and
// serves (taken before a session's Gate), and the join of a queue.
type Joiner interface {
	sync.Locker
	// Join records the queue in the registry entry of worker id and
	// takes a lease on it; a registry lease found gone fences the worker
	// (the error is ErrWorkerFenced then). The caller holds the lock.
	Join(ctx context.Context, id, queue string) error
}

// Init sets up the session of queue, for the worker host of environment
// env, with the application's events and the Handle runtime r serving
// the queue (nil if the application dequeues itself), serving under a
// lease whose deadline is deadline, with sched as its timer of delayed
// tasks. The caller subscribes it (Subscribe) once it is set.
func (s *Session) Init(host SessionHost, env *Env, queue string, events Events, r *Runtime, deadline time.Time, sched *delayed.Scheduler) {
	s.host, s.env = host, env
	s.Name, s.Events, s.Runtime, s.Sched = queue, events, r, sched
	s.Books.procs = make(map[string]*Proc)
	s.Lease.deadline = deadline
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

// The decisions over the session's lease and books at once (the lease's,
// lease.go; adopting a process is books.go's, with the books' intake).

// Holds reports whether the session serves under its lease and, when p
// is not nil, holds p: otherwise a script finding the lease gone is no
// evidence against the worker, which gave that lease up, or the process.
func (s *Session) Holds(p *Proc) bool { return s.Lease.holds(&s.Books, p) }

// Keep lists the ids of the processes the session holds, which a
// reconciliation must not give back; ok is false once the session has
// left: only the session serving the queue now knows which of the
// worker's processes there are live, and one that has left would give
// back those of a session that followed it.
func (s *Session) Keep() (keep []string, ok bool) { return s.Lease.keep(&s.Books) }

// Rejoined records a new lease on the queue, held until deadline, after
// the worker gave back every process it held there up to the queue's
// process id upTo (0 if it gave back none): hand-off events for those
// may still come, and are ignored.
func (s *Session) Rejoined(upTo uint64, deadline time.Time) {
	s.Lease.rejoined(&s.Books, upTo, deadline)
}
