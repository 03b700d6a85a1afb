package worqr

// The lease keeper: the client's beat renews the worker's leases, one in
// the registry and one in each queue it serves, every RenewInterval,
// together with the client's other workers of the same options; the
// keeper's loop registers a fenced worker again. The deadline the
// renewals move, and the timer that fences, are the engine's
// (engine.Deadline).

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/worqr/worqr/internal/beat"
	"github.com/worqr/worqr/internal/engine"
	"github.com/worqr/worqr/internal/startstop"
	"github.com/worqr/worqr/internal/store"
)

// leaseKeeper is the worker's lease component: its client's beat renews
// the leases every RenewInterval, its loop registers the worker again
// once it was fenced, and its timer fences the worker, or one of its
// queues, when a lease may have run out. Its deadlines are guarded by the
// worker's mu.
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
	beat *beat.Beat[renewal, beatMember]
	// beatMu is held while the beat reads what to renew or takes in an
	// answer; left, guarded by it, is set when the keeper stops, after
	// which the beat does neither.
	beatMu sync.Mutex
	left   bool
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
	k.beatMu.Lock()
	k.left = true
	k.beatMu.Unlock()
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

// renewal is one worker's part of a round: the leases it renews.
type renewal struct {
	id        string
	keepalive store.Keepalive
	with      []queueRenewal // the queue leases renewed with the registry lease
}

// renewal reads which leases the worker renews, unless it has left the
// beat, its life has ended, or it is fenced (its loop registers it again)
// or closed. Each
// deadline moves only with its own lease. On a single Redis one script
// renews them all (see store.JointRenewals), with those of the client's
// other workers on the beat: an idle worker costs Redis a share of one
// short script a RenewInterval. On a Cluster a shard that cannot be
// reached must cost the worker its work on that shard's queues, not the
// rest: so each queue lease is renewed on a goroutine of its own, which
// the registry renewal and the next round do not wait for. A pipeline
// answers when its slowest node does, and a node that hangs (rather than
// refusing) would otherwise hold up the answers about every other lease,
// the registry's included, until the worker fenced itself as a whole.
// (rueidis pipelines concurrent calls to one node, so this costs no extra
// round trips.)
func (k *leaseKeeper) renewal() (renewal, bool) {
	w := k.w
	k.beatMu.Lock()
	defer k.beatMu.Unlock()
	if k.left || w.life.Err() != nil {
		return renewal{}, false
	}
	joint := w.c.store.JointRenewals()
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.state.IsFenced() || w.state.IsClosed() {
		return renewal{}, false
	}
	r := renewal{id: w.state.ID()}
	var names []string
	for _, s := range w.sessions {
		leased, gen := s.Leased()
		switch {
		case !leased: // its lease is abandoned until the queue is rejoined
		case joint:
			r.with = append(r.with, queueRenewal{s: s, gen: gen})
			names = append(names, s.Name)
		default:
			id := r.id
			w.closer.tasks.Go(func() { s.renew(w.life, id, gen) })
		}
	}
	r.keepalive = store.Keepalive{Worker: r.id, Queues: names}
	return r, true
}

// renewed takes in the answer to a renewal sent at sent (err, or k),
// unless the worker has left the beat meanwhile.
//
// The registry renewal also tells the reclaimer when the next peer's lease
// runs out, and whether a dead worker waits (see internal/reclaim): a healthy
// fleet makes no other call.
func (lk *leaseKeeper) renewed(r renewal, sent time.Time, k store.KeptAlive, err error) {
	w := lk.w
	lk.beatMu.Lock()
	defer lk.beatMu.Unlock()
	if lk.left {
		return
	}
	id, with := r.id, r.with
	switch {
	case err != nil: // logged by the beat, once for its workers
		return
	case k.Gone:
		lk.Fence(id, errors.New("renewal found the registry lease gone"))
		return
	}
	w.mu.Lock()
	if w.state.IsCurrent(id) {
		lk.Extend(sent)
	}
	w.mu.Unlock()
	w.reclaimer.Heard(k.Next, k.Dead, k.Workers)
	if len(with) == 0 {
		return
	}
	for i := range with {
		with[i].gone = k.QueueGone[i]
	}
	if renewed := lk.queuesRenewed(id, sent, with); anyUnsure(renewed) {
		// Not on the beat's goroutine: a reconciliation waits for the
		// dequeues on its queue. (The worker is not closed: closing
		// leaves the beat first, and this runs under beatMu.)
		w.closer.tasks.Go(func() { lk.reconcile(w.life, id, renewed) })
	}
}

// queueRenewal is the answer to the renewal of the lease on the queue of
// session s, sent while its lease generation was gen.
type queueRenewal struct {
	s    *session
	gen  uint64
	gone bool // the lease was gone
}

// renew extends the worker's lease on the queue, whose lease generation
// was gen when the round began, then reconciles the queue.
func (s *session) renew(ctx context.Context, id string, gen uint64) {
	w := s.w
	c := w.c
	defer c.signals.queueRenewed.Signal(s.Name)
	rctx, cancel := context.WithTimeout(ctx, w.opts.TTL)
	defer cancel()
	sent, at := c.clock.Now(), c.outage.Begin()
	err := c.store.RenewQueueLease(rctx, s.Name, id, w.opts.TTL)
	gone := errors.Is(err, store.ErrLeaseGone)
	if err != nil && !gone {
		if ctx.Err() == nil {
			if err = c.fail("renew", s.Name, err); !c.outage.Failed(at, "renewal", err) {
				w.logger().Warn("worqr: lease renewal failed", "queue", s.Name, "err", err)
			}
		}
		return
	}
	c.outage.OK(at)
	w.lease.reconcile(ctx, id, w.lease.queuesRenewed(id, sent, []queueRenewal{{s: s, gen: gen, gone: gone}}))
}

// queuesRenewed takes the answers to renewals of queue leases sent at
// sent, and returns the sessions whose lease was renewed. A renewal may
// still be in flight when the next round sends another, so a deadline only
// ever moves later, and an answer about a lease the worker has since given
// up (a session's fence) is ignored. A lease found gone fences the worker,
// unless the worker left the queue meanwhile (see leaseLost).
func (k *leaseKeeper) queuesRenewed(id string, sent time.Time, rs []queueRenewal) []*session {
	w := k.w
	var renewed, lost []*session
	w.mu.Lock()
	current, deadline := w.state.IsCurrent(id), k.Of(sent)
	for _, r := range rs {
		switch ok, gone := r.s.Renewed(current, r.gen, r.gone, deadline); {
		case gone:
			lost = append(lost, r.s)
		case ok:
			renewed = append(renewed, r.s)
		}
	}
	if len(renewed) > 0 {
		k.Arm()
	}
	w.mu.Unlock()
	for _, s := range lost {
		// Sent for this session of the queue: if the worker left the queue
		// meanwhile (and maybe started on it again), it is no evidence.
		k.leaseLost(id, s.Name, s, nil, fmt.Errorf("renewal found the lease on %q gone", s.Name))
	}
	return renewed
}
