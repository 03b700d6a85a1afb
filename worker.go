package worqr

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/worqr/worqr/internal/delayed"
	"github.com/worqr/worqr/internal/engine"
	"github.com/worqr/worqr/internal/lifecycle"
	"github.com/worqr/worqr/internal/periodic"
	"github.com/worqr/worqr/internal/reclaim"
	"github.com/worqr/worqr/internal/writedeadline"
)

// Worker defaults and limits.
const (
	// DefaultTTL is how long a worker's lease lasts without renewal.
	DefaultTTL = 3 * time.Second
	// DefaultRenewInterval is how often the lease is renewed: half the
	// DefaultTTL.
	DefaultRenewInterval = 1500 * time.Millisecond
	// MinTTL is the shortest TTL accepted.
	MinTTL = time.Second
)

// WorkerOptions configure a Worker.
type WorkerOptions struct {
	// TTL is the lease length: a worker that has not renewed its lease for
	// this long is dead, and its peers return its tasks to their queues.
	// Default DefaultTTL, at least MinTTL.
	TTL time.Duration
	// RenewInterval is how often the lease is renewed (each renewal also
	// tells the worker when to look for dead peers: when the next peer's
	// lease runs out). Default DefaultRenewInterval, or TTL/2 if that is less;
	// it must be at most TTL/2: a renewal that fails at once is tried again a
	// quarter of a RenewInterval later, at least twice more before the
	// worker fences itself (at 0.9 TTL). A renewal answered late is not
	// tried again: one answered more than 0.9 TTL - RenewInterval after it
	// was sent (1.2 s at the defaults) fences the worker, so a Redis that
	// can stall longer than that needs a longer TTL or a shorter
	// RenewInterval.
	RenewInterval time.Duration
	// OnFenced is called, on a goroutine of its own, when the worker treats
	// itself as dead: it could not renew its lease in time (judged on its
	// own clock from when it sent the last renewal that succeeded) or found
	// the lease gone. Every process it held has already ended with
	// ErrProcessLost: their tasks belong to the peers now. It is called
	// too when only the lease on one queue was lost (FenceEvent.Queue set):
	// the worker keeps its id and serves that queue again later.
	OnFenced func(FenceEvent)
	// Middleware wraps the handler of every queue served with Handle, the
	// first outermost, outside HandleOptions.Middleware.
	Middleware []Middleware
	// StayFenced stops a fenced worker from registering again under a new
	// id once Redis answers, which it does by default. A worker that stays
	// fenced returns ErrWorkerFenced until it is closed.
	StayFenced bool
}

// FenceEvent tells the application that a worker fenced itself.
type FenceEvent struct {
	// WorkerID is the id the worker had; it will not be used again,
	// unless Queue is set (the worker keeps its id then).
	WorkerID string
	// Cause says why.
	Cause error
	// Queue is set when only the lease on this queue was lost (its Redis
	// node could not be reached in time, as when a cluster shard fails
	// over): the worker keeps its id and other queues, and takes a new
	// lease on this one once the node answers. It is empty when the whole
	// worker fenced itself.
	Queue string
	// Lost are the processes the worker held (in Queue, when set); each
	// has ended.
	Lost []*Process
}

// Worker takes tasks from the queues it serves. It holds a lease in Redis,
// renews it, fences itself when it cannot, and reclaims dead peers' work.
// It is safe for concurrent use.
//
// A worker is the set of its sessions, one per queue it serves
// (engine.Session, made by engine.Serve; engine.Sessions), and the
// worker-wide components around them: its lifecycle (internal/lifecycle),
// its registry entry (engine.Registry: its id, the queues and slots
// recorded, and the lock serialising changes to them), the lease keeper
// (engine.Keeper: its membership of its client's beat, internal/beat,
// what a round renews and its answers, the fencing deadline,
// engine.Deadline, the fence of the whole worker, the evidence of a lease
// gone, the reconciliation pass, and the loop that registers a fenced
// worker again; engine.go's workerHost tells the application of a
// fence), the
// reclaimer of dead peers (internal/reclaim, shared with the client's
// workers of the same options), the slot schedulers of its Handle and
// HandleQueues calls (engine.Scheduler, internal/engine; runtime.go,
// pool.go give them the application's handlers) and its periodic schedules
// (periodic.go, internal/periodic); the closer (engine.Closer) drains the
// worker and stops them all. A session owns its lease deadline, its processes, its
// dispatcher (internal/subscription, engine.Session.Dispatch), its timer of delayed
// tasks (internal/delayed) and, for Handle, its runtime (engine.Runtime),
// which also takes the tasks enqueues hand it; a fence of
// one queue, its rejoin and its reconciliation are the session's, in the
// engine (internal/engine: fence.go, rejoin.go, reconcile.go), over the
// worker as their host. engine.go gives each component under internal/
// what it takes of the client and the worker (its engine's components
// take the worker through one adapter, workerHost, whose lock is
// Worker.mu).
//
// # Lock order
//
// Every mutex of the package and of its packages under internal/ (named
// by package where they are not the root's), in the one order they are
// taken: a goroutine holding one takes only those after it. Each edge of
// the nesting (a lock taken while another is held) goes forward in this
// list, so the order is acyclic. The engine's hosts lock no mutex of
// their own: engine.Locked's Lock is Worker.mu, engine.Joiner's is
// engine.Registry.mu.
//
//  1. engine.Registry.mu (the worker's registry entry: changes to what
//     it serves; held across its Redis calls)
//  2. engine.Scheduler.turn (held while it dequeues for a member and starts
//     its handlers)
//  3. engine.Session.Gate (a queue's gate; dequeues hold it shared)
//  4. engine.Keeper.beatMu (the beat reads what to renew, and takes in
//     answers, under it: it is held around Worker.mu, engine.Lease.mu,
//     engine.Books.mu, proc.State.mu, reclaim.Reclaimer.mu and the
//     worker's tasks)
//  5. Worker.mu
//  6. engine.Lease.mu, then engine.Books.mu (a session's lease and its
//     books of processes: taken under Worker.mu where a session's
//     decision must be atomic with the worker's identity and lifecycle,
//     or alone; the lease takes its books' mu under its own for a
//     decision over both. A session never takes Worker.mu while holding
//     either, and holds one session's at a time; under the books' mu
//     only proc.State.mu is taken, by engine.Runtime.CancelAll through
//     engine.Books.InterruptAll)
//  7. beat.Beats.mu, then reclaim.Reclaimers.mu (each around its loops'
//     members.Set.mu)
//  8. store.Store.hubsMu (the channels' hubs), then store.hub.mu (an
//     RWMutex, held shared while the hub's listeners are called: they
//     take subscription.Mailbox.mu, or waiters.Waiters.mu)
//  9. waiters.Waiters.mu, then waiters.Waiter.mu
//  10. periodic.Set.mu (the worker's schedules: it starts one under it),
//     statsflush.Flusher.mu (it takes the store's statsBuf.mu, and starts
//     a run), delayed.Scheduler.mu (a queue's timer of delayed tasks:
//     it starts its loop under it), Client.mu then flows.Flows.mu (a new
//     worker is counted in under both; the workflow sweeper starts and
//     stops under flows.Flows.mu), engine.Batcher.mu (a HandleBatch's batch
//     filling: it asks the runtime under it whether it takes work, which
//     takes engine.Scheduler.mu)
//  11. startstop.Base.mu of a service (taken to start one: under
//     periodic.Set.mu for a periodic schedule, under delayed.Scheduler.mu for
//     a timer of delayed tasks, under beat.Beats.mu or
//     reclaim.Reclaimers.mu for their loops, under waiters.Waiters.mu for
//     a Wait's subscription, under statsflush.Flusher.mu for the
//     flusher's run, under flows.Flows.mu for the sweeper), then startstop.Group.mu (the worker's tasks, taken
//     under Worker.mu and engine.Keeper.beatMu; a coalescer's senders)
//  12. reclaim.Reclaimer.mu (a reclaimer's next look), then members.Set.mu
//     (its loop's draw counts the members under it: reclaim.Reclaimer.share)
//  13. The leaves, under which nothing else is locked: engine.Scheduler.mu
//     (the slots and every member's work flags), pacer.Pacer.mu (a
//     member's retry and rate-limit timers), proc.State.mu (a process's
//     end, result and progress), subscription.Mailbox.mu (a dispatcher's
//     events), outage.Outage.mu (the client's outage), coalesce.Coalescer.mu
//     (the batches waiting), flows.Flows.qmu (the workflow sweeper's
//     queues), Router.mu (its registrations), connect.boundDials.mu (the
//     dials made while a client is made), store.statsBuf.mu (the stats
//     counts pending), store.idHints.mu (an enqueue's guess of its ids),
//     queuestats.Reader.mu (held across a stats read's Redis calls, which
//     lock none of these) and queuestats.bound.mu (the admission of a new
//     label value), the last two taken by the exporters under no other
//     lock. (The worker's delayed.RedisClock takes no lock:
//     engine.Scheduler.mu and delayed.Scheduler.mu read it.)
//  14. In tests, clock.Fake.mu: timers are set and stopped under any of
//     the above, and its AfterFunc callbacks run on goroutines of their
//     own.
//
// A service's Stop holds its Base.mu until the run has ended, so it is
// called holding no lock its run takes: the worker stops its services
// (engine.Closer.StopComponents) holding none, and the stats flusher is stopped only
// after it was closed under statsflush.Flusher.mu, so that pending, which
// starts a run under that lock, no longer does. The workflow sweeper is
// stopped under flows.Flows.mu, which its run never takes.
type Worker struct {
	c    *Client
	opts WorkerOptions

	// registry registers the worker and records what it serves; its
	// lock serialises changes to those (engine.Registry).
	registry engine.Registry

	mu sync.Mutex // guards the fields below, and the lease keeper's deadlines
	// state is the worker's lifecycle: its id, its phase, its fence.
	// Guarded by mu.
	state lifecycle.Worker
	// sessions are the queues served, by name; each holds its in-flight
	// processes (engine.Books, the one map of them). Guarded by mu.
	sessions engine.Sessions

	lease     engine.Keeper                     // renews the leases; fences the worker
	reclaimer *reclaim.Reclaimer[reclaimMember] // returns dead peers' work (the client's, shared)
	clock     delayed.RedisClock                // the Redis clock, as far as the worker knows it (its own lock)
	// periodics are the schedules registered (Periodic), each a running
	// component (periodic.go, internal/periodic; their own lock).
	periodics periodic.Set
	// pools are the slot schedulers of HandleQueues, each a running loop
	// (Handle's are reached through the queues served). Guarded by mu.
	pools []*engine.Scheduler

	// life is the worker's run context: every loop and one-shot
	// goroutine of the worker runs on it (or on a context derived from
	// it), and the closer ends it before it stops them.
	life context.Context
	// closer drains and closes the worker (engine.Closer): it owns
	// life's end and the worker's one-shot goroutines.
	closer engine.Closer
	// writes bounds the outcome writes after handlers (engine.Settler).
	writes writedeadline.Deadline
	// env is what its processes take of it (engine.Env; engine.go).
	env engine.Env
}

// NewWorker registers a new worker and starts its components: the lease
// keeper and the reclaimer of dead peers. Call StartWork or Handle to
// serve queues, and Shutdown or Close when done.
//
// ctx bounds the registration only: cancelling it later does not stop the
// worker (that is what Shutdown and Close are for), so a worker can
// outlive the request or setup code that made it.
func (c *Client) NewWorker(ctx context.Context, opts WorkerOptions) (*Worker, error) {
	if err := c.validateCtx(ctx, "new worker"); err != nil {
		return nil, err
	}
	if opts.TTL == 0 {
		opts.TTL = DefaultTTL
	}
	if opts.TTL < MinTTL {
		return nil, fmt.Errorf("worqr: new worker: %w: TTL %v is below %v", ErrInvalidOptions, opts.TTL, MinTTL)
	}
	if opts.RenewInterval == 0 {
		opts.RenewInterval = min(DefaultRenewInterval, opts.TTL/2)
	}
	if opts.RenewInterval < 0 || opts.RenewInterval > opts.TTL/2 {
		return nil, fmt.Errorf("worqr: new worker: %w: RenewInterval %v must be positive and at most TTL/2 (%v)", ErrInvalidOptions, opts.RenewInterval, opts.TTL/2)
	}
	w := &Worker{c: c, opts: opts, sessions: make(engine.Sessions)}
	w.registry.Init(registryEnv(w))
	id, sent, err := w.registry.Register(ctx)
	if err != nil {
		return nil, err
	}
	w.state.ToRegistered(id)
	// ctx bounds only the registration: the worker's life keeps its
	// values but not its end.
	life, end := context.WithCancel(context.WithoutCancel(ctx))
	w.life = life
	w.env = processEnv(w)
	w.closer.Init((*workerHost)(w), &w.env, end)
	w.lease.Init((*workerHost)(w), &w.env, &w.registry)
	w.reclaimer = c.reclaimers.Join(reclaimMember{w}, w.opts.TTL, w.opts.RenewInterval)

	w.mu.Lock()
	w.lease.Extend(sent)
	w.mu.Unlock()
	w.lease.Start(w.life, c.beats, w.opts.TTL, w.opts.RenewInterval)

	c.mu.Lock()
	if c.closed.Load() {
		c.mu.Unlock()
		_ = w.Close(ctx)
		return nil, fmt.Errorf("worqr: new worker: %w", ErrClientClosed)
	}
	c.workers[w] = struct{}{}
	c.flows.Joined()
	c.mu.Unlock()
	return w, nil
}

// ID is the worker's current id. It changes when a fenced worker registers
// again.
func (w *Worker) ID() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.state.ID()
}

// logger is the client's logger with the worker's current id. Never call
// it while holding w.mu.
func (w *Worker) logger() *slog.Logger {
	return w.c.log.With("worker", w.ID())
}

// Queues lists the queues the worker serves.
func (w *Worker) Queues() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]string, 0, len(w.sessions))
	for q := range w.sessions {
		out = append(out, q)
	}
	return out
}
