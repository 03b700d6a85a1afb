package worqr

// The re-registration of a fenced worker, by its lease keeper. The
// rejoin of one fenced queue is the engine's (engine.Session.Rejoin).

import (
	"context"
	"errors"
	"time"

	"github.com/worqr/worqr/internal/backoff"
	"github.com/worqr/worqr/internal/subscription"
)

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
	w.registry.Lock()
	defer w.registry.Unlock()
	if ctx.Err() != nil {
		return false, ctx.Err()
	}
	id, sent, err := w.registry.Register(ctx)
	if err != nil {
		return false, err
	}
	w.mu.Lock()
	ss := w.sessions.list()
	w.mu.Unlock()
	var joined, unreachable []*session
	for _, s := range ss {
		sent := w.c.outage.Begin()
		err := w.registry.Join(ctx, id, s.Name)
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
		s.Rejoined(0, k.Of(sent))
	}
	for _, s := range unreachable {
		s.Lost()
		after := w.c.clock.Now()
		w.closer.tasks.Go(func() { s.Rejoin(w.life, id, after) })
	}
	k.Extend(sent)
	w.mu.Unlock()
	w.registry.RecordSlots(ctx, id) // under the new id: the old one's went with it
	w.logger().Info("worqr: worker registered again after fencing", "previous", old)
	for _, s := range joined {
		s.Sub.Push(subscription.Event{Subscribed: true})
	}
	w.c.signals.registered.Signal(id)
	return true, nil
}
