package worqr

import (
	"context"
	"errors"
	"time"

	"github.com/worqr/worqr/internal/backoff"
	"github.com/worqr/worqr/internal/store"
	"github.com/worqr/worqr/internal/subscription"
)

// rejoin brings a fenced queue back: after the old lease has surely run
// out, it gives back every task the worker still holds there (release,
// mode force) and takes a new lease, retrying with backoff until the
// queue's node answers. It gives up when the worker left the queue, was
// closed, or fenced itself as a whole (re-registration rejoins then).
func (s *session) rejoin(ctx context.Context, id string, after time.Time) {
	w := s.w
	clk := w.c.clock
	if !backoff.SleepCtx(ctx, clk, clk.Until(after)) {
		return
	}
	b := backoff.New(50*time.Millisecond, w.opts.RenewInterval).On(clk)
	for {
		// Each attempt is bounded: it holds the registry's lock and the
		// queue's gate, and the node may hang rather than refuse.
		actx, cancel := context.WithTimeout(ctx, w.opts.TTL)
		sent := w.c.outage.Begin()
		done, err := s.tryRejoin(actx, id)
		cancel()
		if done || ctx.Err() != nil {
			return
		}
		if !w.c.outage.Failed(sent, "rejoin", err) {
			w.logger().Warn("worqr: taking a lease on the queue again failed; retrying", "queue", s.Name, "err", err)
		}
		if !b.Wait(ctx) {
			return
		}
	}
}

func (s *session) tryRejoin(ctx context.Context, id string) (done bool, err error) {
	w := s.w
	w.registry.mu.Lock()
	defer w.registry.mu.Unlock()
	s.Gate.Lock() // no dequeue in between
	defer s.Gate.Unlock()
	w.mu.Lock()
	current := w.state.IsCurrent(id) && w.sessions[s.Name] == s && s.IsFenced()
	before := w.lease.at // the registry lease the new queue lease derives from
	w.mu.Unlock()
	if !current || ctx.Err() != nil {
		return true, nil
	}
	c := w.c
	r := c.store.ReleaseOne(ctx, store.Release{Queue: s.Name, Worker: id, Mode: store.ReleaseForce, Poison: w.reclaimer.HealthyAfter()})
	if r.Err != nil {
		return false, c.fail("rejoin", s.Name, r.Err)
	}
	if err := w.registry.join(ctx, id, s.Name); err != nil {
		return errors.Is(err, ErrWorkerFenced), err
	}
	w.mu.Lock()
	if w.state.ID() == id && !w.state.IsClosed() {
		s.Rejoined(r.UpTo, before)
		w.lease.arm()
	}
	w.mu.Unlock()
	w.logger().Info("worqr: lease on the queue taken again", "queue", s.Name)
	s.Sub.Push(subscription.Event{Subscribed: true}) // look for work at once
	c.signals.rejoined.Signal(s.Name)
	return true, nil
}

// reregister registers the worker under a new id and takes leases on its
// queues again, retrying with backoff until Redis answers or ctx ends.
// It reports whether the worker is registered again.
func (k *leaseKeeper) reregister(ctx context.Context) bool {
	w := k.w
	b := backoff.New(50*time.Millisecond, w.opts.RenewInterval).On(w.c.clock)
	for {
		sent := w.c.outage.Begin()
		ok, err := k.tryReregister(ctx)
		if ok {
			w.c.outage.OK(sent)
			return true
		}
		if ctx.Err() != nil {
			return false
		}
		if !w.c.outage.Failed(sent, "register", err) {
			w.logger().Warn("worqr: registering again failed; retrying", "err", err)
		}
		if !b.Wait(ctx) {
			return false
		}
	}
}

func (k *leaseKeeper) tryReregister(ctx context.Context) (bool, error) {
	w := k.w
	w.registry.mu.Lock()
	defer w.registry.mu.Unlock()
	if ctx.Err() != nil {
		return false, ctx.Err()
	}
	id, sent, err := w.registry.register(ctx)
	if err != nil {
		return false, err
	}
	w.mu.Lock()
	ss := w.sessions.list()
	w.mu.Unlock()
	var joined, unreachable []*session
	for _, s := range ss {
		sent := w.c.outage.Begin()
		err := w.registry.join(ctx, id, s.Name)
		switch {
		case errors.Is(err, ErrWorkerFenced) || ctx.Err() != nil:
			// The new id is abandoned: its lease expires and the
			// reclaimers remove it; it never held a process.
			return false, err
		case err != nil:
			// Its node cannot be reached (on a cluster, a shard failing
			// over): serve the other queues, and rejoin this one once
			// the node answers, as after losing only its lease.
			if !w.c.outage.Failed(sent, "rejoin", err) {
				w.logger().Warn("worqr: could not take a lease on the queue when registering again; will retry", "queue", s.Name, "err", err)
			}
			unreachable = append(unreachable, s)
		default:
			joined = append(joined, s)
		}
	}
	w.mu.Lock()
	old := w.state.ID()
	if !w.state.ToRegistered(id) {
		w.mu.Unlock()
		return false, ErrWorkerClosed
	}
	for _, s := range joined {
		s.Rejoined(0, k.deadline(sent))
	}
	for _, s := range unreachable {
		s.Lost()
		after := w.c.clock.Now()
		w.closer.tasks.Go(func() { s.rejoin(w.life, id, after) })
	}
	k.extend(sent)
	w.mu.Unlock()
	w.registry.recordSlots(ctx, id) // under the new id: the old one's went with it
	w.logger().Info("worqr: worker registered again after fencing", "previous", old)
	for _, s := range joined {
		s.Sub.Push(subscription.Event{Subscribed: true})
	}
	w.c.signals.registered.Signal(id)
	return true, nil
}
