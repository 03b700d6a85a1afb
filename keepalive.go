package worqr

// The lease keeper: the client's beat renews the worker's leases, one in
// the registry and one in each queue it serves, every RenewInterval,
// together with the client's other workers of the same options; the
// keeper's loop registers a fenced worker again. What the beat renews,
// its answers, the deadline they move, the timer that fences and the
// re-registration are the engine's (engine.Keeper): here are the beat's
// membership and the loop.

import (
	"context"

	"github.com/worqr/worqr/internal/beat"
	"github.com/worqr/worqr/internal/engine"
	"github.com/worqr/worqr/internal/startstop"
)

// leaseKeeper is the worker's lease component: its client's beat renews
// the leases every RenewInterval, its loop registers the worker again
// once it was fenced, and its timer fences the worker, or one of its
// queues, when a lease may have run out (engine.Keeper). Its deadlines
// are guarded by the worker's mu.
type leaseKeeper struct {
	w *Worker
	// kick wakes the loop: a fenced worker registers again at once.
	kick chan struct{}
	// Keeper is the engine's side of the keeper: the fencing deadline of
	// the registry lease and the timer that fences the worker, or a
	// session, when a lease may have run out (engine.Deadline; guarded by
	// w.mu; each queue lease has its own deadline, in its session's
	// engine.Lease), the fence of the worker and the reconciliations.
	engine.Keeper
	// loop registers the worker again once it was fenced (run).
	loop *startstop.Loop
	// beat renews the leases, with those of the client's other workers
	// of the same options (see internal/beat).
	beat *beat.Beat[engine.Renewal, beatMember]
}

func newLeaseKeeper(w *Worker) *leaseKeeper {
	k := &leaseKeeper{w: w, kick: make(chan struct{}, 1)}
	k.loop = startstop.NewLoop(k.run)
	k.Keeper.Init((*sessionHost)(w), w.c.clock, w.opts.TTL, &w.registry)
	return k
}

// start joins the client's beat, which renews the leases, and runs the
// loop that registers a fenced worker again, on life.
func (k *leaseKeeper) start(life context.Context) {
	k.beat = k.w.c.beats.Join(beatMember{k}, k.w.opts.TTL, k.w.opts.RenewInterval)
	_ = k.loop.Start(life) // a Loop's Start does not fail
}

// stop stops the timer, leaves the beat and stops the loop, waiting for
// it. Once it returns, the beat neither sends nor takes in a renewal of
// this worker (one already sent may still reach Redis). Queue renewals
// started before run on, tracked by the worker's tasks.
func (k *leaseKeeper) stop() {
	k.Stop()
	k.Leave()
	k.beat.Leave(beatMember{k})
	k.loop.Stop()
}

// wake asks the loop to run now.
func (k *leaseKeeper) wake() {
	select {
	case k.kick <- struct{}{}:
	default:
	}
}

// run is the lease keeper's loop: it registers the worker again once it
// fenced itself (fence wakes it), unless it stays fenced. The renewals
// themselves are the beat's.
func (k *leaseKeeper) run(ctx context.Context) {
	w := k.w
	for {
		select {
		case <-ctx.Done():
			return
		case <-k.kick:
		}
		w.mu.Lock()
		fenced := w.state.IsFenced()
		w.mu.Unlock()
		if fenced && (w.opts.StayFenced || !k.Reregister(ctx)) {
			return
		}
	}
}
