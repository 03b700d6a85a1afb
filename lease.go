package worqr

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/worqr/worqr/internal/store"
)

// The lease keeper renews the worker's leases, one in the registry and one in
// each queue it serves, every RenewInterval (on its client's beat, together
// with the client's other workers), and judges its own liveness on
// its own monotonic clock: the leases Redis holds were set when Redis ran
// the renewal, which is after the worker sent it, so a worker that counts
// TTL from the send time of its last successful renewal always believes
// itself dead no later than Redis does. The margin adds room for the
// timer firing late and for clocks that run at slightly different rates.

// leaseKeeper is the worker's lease component: its loop renews the
// leases every RenewInterval (or registers the worker again once it was
// fenced), and its timer fences the worker, or one of its queues, when a
// lease may have run out. Its deadlines are guarded by the worker's mu.
type leaseKeeper struct {
	w *Worker
	// kick wakes the loop early: a fenced worker registers again at once.
	kick chan struct{}
	// timer fires at the earliest deadline (arm).
	timer *time.Timer
	// at is when the registry lease may expire, by the worker's clock,
	// less the margin. Guarded by w.mu. (Each queue lease has its own,
	// serving.deadlineAt.)
	at  time.Time
	svc *service
}

func newLeaseKeeper(w *Worker) *leaseKeeper {
	k := &leaseKeeper{w: w, kick: make(chan struct{}, 1)}
	k.timer = time.AfterFunc(time.Hour, w.onDeadline)
	return k
}

// start runs the renewal loop on life.
func (k *leaseKeeper) start(life context.Context) { k.svc = startService(life, k.w.keepalive) }

// stop stops the timer and the loop, and waits for the loop. (Queue
// renewals it started run on, counted by the worker's wg.)
func (k *leaseKeeper) stop() {
	k.timer.Stop()
	k.svc.stop()
}

// wake asks the loop to run now.
func (k *leaseKeeper) wake() {
	select {
	case k.kick <- struct{}{}:
	default:
	}
}

// margin is how long before the lease's earliest expiry a worker fences
// itself.
func (k *leaseKeeper) margin() time.Duration { return k.w.opts.TTL / 10 }

// extend moves the registry lease's deadline to TTL minus the margin after
// sent, the time a registry renewal that succeeded was sent, and arms the
// timer. Callers hold w.mu.
func (k *leaseKeeper) extend(sent time.Time) {
	k.at = k.deadline(sent)
	k.arm()
}

// deadline is when a lease renewed at sent may expire, by the worker's
// clock, less the margin.
func (k *leaseKeeper) deadline(sent time.Time) time.Time {
	return sent.Add(k.w.opts.TTL - k.margin())
}

// arm sets the timer to the earliest deadline: the registry lease's, or
// that of one of the queue leases still held. Callers hold w.mu.
func (k *leaseKeeper) arm() {
	earliest := k.at
	for _, s := range k.w.serving {
		if !s.fenced && !s.leaving && s.deadlineAt.Before(earliest) {
			earliest = s.deadlineAt
		}
	}
	k.timer.Reset(time.Until(earliest))
}

// onDeadline fences the worker under its current id when its registry
// lease may have expired, or just the queues whose lease may have (their
// node could not be reached: on a cluster, a shard failing over), unless
// renewals have moved the deadlines since the timer was set.
func (w *Worker) onDeadline() {
	w.mu.Lock()
	if w.isClosed() || w.isFenced() {
		w.mu.Unlock()
		return
	}
	id, now := w.id, time.Now()
	if !now.Before(w.lease.at) {
		w.mu.Unlock()
		w.fence(id, errors.New("lease not renewed in time"))
		return
	}
	var due []*serving
	for _, s := range w.serving {
		if !s.fenced && !s.leaving && !now.Before(s.deadlineAt) {
			due = append(due, s)
		}
	}
	w.mu.Unlock()
	for _, s := range due {
		w.fenceQueue(id, s, fmt.Errorf("lease on %q not renewed in time", s.name))
	}
	w.mu.Lock()
	if !w.isClosed() {
		w.lease.arm()
	}
	w.mu.Unlock()
}

// beat is how long until the client's next beat of period every: the
// workers of one client that share a RenewInterval renew at the same
// moments, so their calls share round trips to Redis (rueidis pipelines
// calls made together), which then reads and answers many at a time. The
// workers of different processes still renew at moments of their own.
func (c *Client) beat(every time.Duration) time.Duration {
	return every - time.Since(c.born)%every
}

// keepalive is the lease keeper's loop.
func (w *Worker) keepalive(ctx context.Context) {
	// A ticker keeps renewals on a fixed schedule however long each takes.
	// It starts on the client's beat (see beat), within one RenewInterval
	// of the registration.
	first := time.NewTimer(w.c.beat(w.opts.RenewInterval))
	defer first.Stop()
	var t *time.Ticker
	tick := first.C
	defer func() {
		if t != nil {
			t.Stop()
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick:
			if t == nil {
				t = time.NewTicker(w.opts.RenewInterval)
				tick = t.C
			}
		case <-w.lease.kick:
		}
		w.mu.Lock()
		fenced := w.isFenced()
		w.mu.Unlock()
		if fenced {
			if w.opts.StayFenced || !w.reregister(ctx) {
				return
			}
		} else {
			w.renew(ctx)
		}
	}
}

// renew extends every lease the worker holds. Each deadline moves only
// with its own lease. On a single Redis one script renews them all (see
// store.JointRenewals), with those of the client's other workers that
// renew at the same moment (see beat and Client.keepalives): an idle
// worker costs Redis one short script a RenewInterval, or a share of one.
// On a Cluster a shard that cannot be reached must cost the worker its
// work on that shard's queues, not the rest: so each queue lease is
// renewed on a goroutine of its own, which the registry renewal and the
// next round do not wait for. A pipeline answers when its slowest node
// does, and a node that hangs (rather than refusing) would otherwise hold
// up the answers about every other lease, the registry's included, until
// the worker fenced itself as a whole. (rueidis pipelines concurrent calls
// to one node, so this costs no extra round trips.)
//
// The registry renewal also tells the reclaimer when the next peer's lease
// runs out, and whether a dead worker waits (see reclaim.go): a healthy
// fleet makes no other call.
func (w *Worker) renew(ctx context.Context) {
	c := w.c
	joint := c.store.JointRenewals()
	w.mu.Lock()
	id := w.id
	var with []queueRenewal
	for _, s := range w.serving {
		switch {
		case s.fenced: // its lease is abandoned until the queue is rejoined
		case joint:
			with = append(with, queueRenewal{s: s, gen: s.leaseGen})
		default:
			w.wg.Add(1)
			go w.renewQueue(ctx, id, s, s.leaseGen)
		}
	}
	w.mu.Unlock()
	names := make([]string, len(with))
	for i, r := range with {
		names[i] = r.s.name
	}

	// A renewal answered after the deadline is useless: do not wait longer.
	rctx, cancel := context.WithTimeout(ctx, w.opts.TTL)
	defer cancel()
	sent := time.Now()
	k, err := c.keepalives.do(rctx, strconv.FormatInt(w.opts.TTL.Milliseconds(), 10), store.Keepalive{Worker: id, Queues: names})
	switch {
	case err != nil:
		if ctx.Err() == nil {
			w.logger().Warn("worqr: lease renewal failed", "err", err)
		}
		return
	case k.Gone:
		w.fence(id, errors.New("renewal found the registry lease gone"))
		return
	}
	w.mu.Lock()
	if w.isCurrent(id) {
		w.lease.extend(sent)
	}
	w.mu.Unlock()
	w.reclaimer.heard(k.Next, k.Dead)
	if len(with) == 0 {
		return
	}
	for i := range with {
		with[i].gone = k.QueueGone[i]
	}
	if renewed := w.queuesRenewed(id, sent, with); w.anyUnsure(renewed) {
		// Not on the lease keeper's goroutine: a reconciliation waits for
		// the dequeues on its queue.
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			w.reconcile(ctx, id, renewed)
		}()
	}
}

// keepaliveJoined renews the leases of workers that share a TTL (ttl, in
// ms) in one call (see keepalive.lua). It bounds the call by the TTL, as
// each worker does its own: a batch goes out on the context of its first
// caller, without its deadline.
func (c *Client) keepaliveJoined(ctx context.Context, ttl string, ks []store.Keepalive) ([]store.KeptAlive, error) {
	n, err := strconv.ParseInt(ttl, 10, 64)
	if err != nil {
		return nil, err
	}
	d := time.Duration(n) * time.Millisecond
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	return c.store.Keepalive(ctx, d, ks)
}

// queueRenewal is the answer to the renewal of the lease on queue s, sent
// while its lease generation was gen.
type queueRenewal struct {
	s    *serving
	gen  uint64
	gone bool // the lease was gone
}

// renewQueue extends the worker's lease on the queue s, whose lease
// generation was gen when the round began, then reconciles the queue.
func (w *Worker) renewQueue(ctx context.Context, id string, s *serving, gen uint64) {
	defer w.wg.Done()
	c := w.c
	rctx, cancel := context.WithTimeout(ctx, w.opts.TTL)
	defer cancel()
	sent := time.Now()
	err := c.store.RenewQueueLease(rctx, s.name, id, w.opts.TTL)
	gone := errors.Is(err, store.ErrLeaseGone)
	if err != nil && !gone {
		if ctx.Err() == nil {
			w.logger().Warn("worqr: lease renewal failed", "queue", s.name, "err", err)
		}
		return
	}
	w.reconcile(ctx, id, w.queuesRenewed(id, sent, []queueRenewal{{s: s, gen: gen, gone: gone}}))
}

// queuesRenewed takes the answers to renewals of queue leases sent at
// sent, and returns the queues whose lease was renewed. A renewal may still
// be in flight when the next round sends another, so a deadline only ever
// moves later, and an answer about a lease the worker has since given up
// (fenceQueue) is ignored. A lease found gone fences the worker, unless
// the worker left the queue meanwhile (see leaseLost).
func (w *Worker) queuesRenewed(id string, sent time.Time, rs []queueRenewal) []*serving {
	var renewed, lost []*serving
	w.mu.Lock()
	for _, r := range rs {
		s := r.s
		switch current := w.isCurrent(id) && !s.fenced && s.leaseGen == r.gen; {
		case !current:
		case r.gone:
			lost = append(lost, s)
		default:
			if d := w.lease.deadline(sent); d.After(s.deadlineAt) {
				s.deadlineAt = d
			}
			renewed = append(renewed, s)
		}
	}
	if len(renewed) > 0 {
		w.lease.arm()
	}
	w.mu.Unlock()
	for _, s := range lost {
		// Sent for this service of the queue: if the worker left the queue
		// meanwhile (and maybe started on it again), it is no evidence.
		w.leaseLost(id, s.name, s, nil, fmt.Errorf("renewal found the lease on %q gone", s.name))
	}
	return renewed
}
