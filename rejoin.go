package worqr

import (
	"context"
	"errors"
	"time"

	"github.com/worqr/worqr/internal/store"
)

// rejoin brings a fenced queue back: after the old lease has surely run
// out, it gives back every task the worker still holds there (release,
// mode force) and takes a new lease, retrying with backoff until the
// queue's node answers. It gives up when the worker left the queue, was
// closed, or fenced itself as a whole (re-registration rejoins then).
func (w *Worker) rejoin(ctx context.Context, id string, s *serving, after time.Time) {
	clk := w.c.clock
	if !sleepCtx(ctx, clk, clk.Until(after)) {
		return
	}
	b := newBackoff(50*time.Millisecond, w.opts.RenewInterval).on(clk)
	for {
		// Each attempt is bounded: it holds the membership lock and the
		// queue's gate, and the node may hang rather than refuse.
		actx, cancel := context.WithTimeout(ctx, w.opts.TTL)
		sent := w.c.outage.begin()
		done, err := w.tryRejoin(actx, id, s)
		cancel()
		if done || ctx.Err() != nil {
			return
		}
		if !w.c.outage.failed(sent, "rejoin", err) {
			w.logger().Warn("worqr: taking a lease on the queue again failed; retrying", "queue", s.name, "err", err)
		}
		if !b.wait(ctx) {
			return
		}
	}
}

func (w *Worker) tryRejoin(ctx context.Context, id string, s *serving) (done bool, err error) {
	w.membership.Lock()
	defer w.membership.Unlock()
	s.gate.Lock() // no dequeue in between
	defer s.gate.Unlock()
	w.mu.Lock()
	current := w.isCurrent(id) && s.fenced && w.serving[s.name] == s
	before := w.lease.at // the registry lease the new queue lease derives from
	w.mu.Unlock()
	if !current || ctx.Err() != nil {
		return true, nil
	}
	c := w.c
	r := c.store.ReleaseOne(ctx, store.Release{Queue: s.name, Worker: id, Mode: store.ReleaseForce, Poison: w.healthyAfter()})
	if r.Err != nil {
		return false, c.fail("rejoin", s.name, r.Err)
	}
	if err := w.join(ctx, id, s.name); err != nil {
		return errors.Is(err, ErrWorkerFenced), err
	}
	w.mu.Lock()
	if w.id == id && !w.isClosed() {
		// Hand-off events for the processes given back may still come.
		s.releasedUpTo = max(s.releasedUpTo, r.UpTo)
		s.fenced, s.deadlineAt = false, before
		w.lease.arm()
	}
	w.mu.Unlock()
	w.logger().Info("worqr: lease on the queue taken again", "queue", s.name)
	s.sub.box.push(event{subscribed: true}) // look for work at once
	c.signals.rejoined.Signal(s.name)
	return true, nil
}

// reregister registers the worker under a new id and takes leases on its
// queues again, retrying with backoff until Redis answers or ctx ends.
// It reports whether the worker is registered again.
func (w *Worker) reregister(ctx context.Context) bool {
	b := newBackoff(50*time.Millisecond, w.opts.RenewInterval).on(w.c.clock)
	for {
		sent := w.c.outage.begin()
		ok, err := w.tryReregister(ctx)
		if ok {
			w.c.outage.ok(sent)
			return true
		}
		if ctx.Err() != nil {
			return false
		}
		if !w.c.outage.failed(sent, "register", err) {
			w.logger().Warn("worqr: registering again failed; retrying", "err", err)
		}
		if !b.wait(ctx) {
			return false
		}
	}
}

func (w *Worker) tryReregister(ctx context.Context) (bool, error) {
	w.membership.Lock()
	defer w.membership.Unlock()
	if ctx.Err() != nil {
		return false, ctx.Err()
	}
	id, sent, err := w.register(ctx)
	if err != nil {
		return false, err
	}
	w.mu.Lock()
	ss := w.served()
	w.mu.Unlock()
	var joined, unreachable []*serving
	for _, s := range ss {
		sent := w.c.outage.begin()
		err := w.join(ctx, id, s.name)
		switch {
		case errors.Is(err, ErrWorkerFenced) || ctx.Err() != nil:
			// The new id is abandoned: its lease expires and the
			// reclaimers remove it; it never held a process.
			return false, err
		case err != nil:
			// Its node cannot be reached (on a cluster, a shard failing
			// over): serve the other queues, and rejoin this one once
			// the node answers, as after losing only its lease.
			if !w.c.outage.failed(sent, "rejoin", err) {
				w.logger().Warn("worqr: could not take a lease on the queue when registering again; will retry", "queue", s.name, "err", err)
			}
			unreachable = append(unreachable, s)
		default:
			joined = append(joined, s)
		}
	}
	w.mu.Lock()
	old := w.id
	if !w.toRegistered(id) {
		w.mu.Unlock()
		return false, ErrWorkerClosed
	}
	for _, s := range joined {
		s.fenced, s.deadlineAt = false, w.lease.deadline(sent)
	}
	for _, s := range unreachable {
		s.fenced = true
		s.leaseGen++
		after := w.c.clock.Now()
		w.tasks.Go(func() { w.rejoin(w.life, id, s, after) })
	}
	w.lease.extend(sent)
	w.mu.Unlock()
	w.logger().Info("worqr: worker registered again after fencing", "previous", old)
	for _, s := range joined {
		s.sub.box.push(event{subscribed: true})
	}
	return true, nil
}
