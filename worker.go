package worqr

import (
	"context"
	"fmt"
	"time"

	"github.com/worqr/worqr/internal/engine"
	"github.com/worqr/worqr/internal/store"
	"github.com/worqr/worqr/internal/wiring"
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
// worker-wide components around them, held by its core (engine.Core,
// which owns the worker's mu, its lifecycle, internal/lifecycle, its
// sessions, its slot schedulers and its life): its registry entry
// (engine.Registry: its id, the queues and slots recorded, and the lock
// serialising changes to them), the lease keeper (engine.Keeper: its
// membership of its client's beat, internal/beat, what a round renews
// and its answers, the fencing deadline, engine.Deadline, the fence of
// the whole worker, the evidence of a lease gone, the reconciliation
// pass, and the loop that registers a fenced worker again) and the
// closer (engine.Closer), which drains the worker and stops them all.
// Around the core, the Worker holds what needs the client or the public
// types: the reclaimer of dead peers (internal/reclaim, shared with the
// client's workers of the same options), the application's handlers
// given to the slot schedulers of its Handle and HandleQueues calls
// (engine.Scheduler; runtime.go, pool.go), its periodic schedules
// (periodic.go, internal/periodic), and internal/wiring's Worker, the
// core's host (engine.CoreHost), which makes processes and tells the
// application and the observers of what the engine does. A session owns
// its lease deadline, its processes, its dispatcher
// (internal/subscription, engine.Session.Dispatch), its timer of delayed
// tasks (internal/delayed) and, for Handle, its runtime (engine.Runtime),
// which also takes the tasks enqueues hand it; a fence of one queue, its
// rejoin and its reconciliation are the session's, in the engine
// (internal/engine: fence.go, rejoin.go, reconcile.go), over the core as
// their host. internal/wiring gives each component under internal/
// what it takes of the client and the worker.
//
// The order in which the mutexes of the package and of its packages
// under internal/ are taken is engine.Core's.
type Worker struct {
	c    *Client
	opts WorkerOptions

	// core is the worker as its engine holds it (engine.Core): its mu,
	// its lifecycle, its sessions and pools, its life, its registry
	// entry, lease keeper, closer and environment.
	core *engine.Core
	// parts are its components besides, wired to its client's
	// (wiring.Worker): its reclaimer, its estimate of the Redis clock,
	// its periodic schedules; they are its core's host.
	parts *wiring.Worker
}

// NewWorker registers a new worker and starts its components: the lease
// keeper and the reclaimer of dead peers. Call StartWork or Handle to
// serve queues, and Shutdown or Close when done.
//
// ctx bounds the registration only: cancelling it later does not stop the
// worker (that is what Shutdown and Close are for), so a worker can
// outlive the request or setup code that made it.
func (c *Client) NewWorker(ctx context.Context, opts WorkerOptions) (*Worker, error) {
	if err := c.core.ValidateCtx(ctx, "new worker"); err != nil {
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
	w := &Worker{c: c, opts: opts, core: new(engine.Core)}
	parts, err := c.core.NewWorker(ctx, w.core, wiring.WorkerConfig{
		TTL: opts.TTL, RenewInterval: opts.RenewInterval, StayFenced: opts.StayFenced,
		NewProc: func(queue string, sp store.Proc, started time.Time) *engine.Proc {
			return &newProcessAt(w, queue, sp, started).rec
		},
		Fenced: w.fenced,
	})
	if err != nil {
		return nil, err
	}
	w.parts = parts
	return w, nil
}

// fenced tells the application and the observer that the worker (queue
// empty) or its session of queue fenced itself, ending lost. Each is told
// on a goroutine of its own: a fence happens on the lease keeper's
// goroutine and under the worker's locks, and either may well call
// StopWork or Close.
func (w *Worker) fenced(id, queue string, cause error, lost []*engine.Proc) {
	ev := FenceEvent{WorkerID: id, Queue: queue, Cause: fmt.Errorf("%w: %w", ErrWorkerFenced, cause), Lost: processesOf(lost)}
	if w.opts.OnFenced != nil {
		go w.opts.OnFenced(ev)
	}
	if o, ok := w.c.core.Observer.(FenceObserver); ok {
		go o.ObserveFence(ev)
	}
}

// ID is the worker's current id. It changes when a fenced worker registers
// again.
func (w *Worker) ID() string { return w.core.ID() }

// Queues lists the queues the worker serves.
func (w *Worker) Queues() []string { return w.core.Queues() }
