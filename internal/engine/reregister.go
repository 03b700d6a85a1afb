package engine

// The re-registration of a fenced worker, by its lease keeper's loop
// (which a fence wakes): a new id, and a lease again on each queue it
// serves.

import (
	"context"
	"errors"
	"time"

	"github.com/worqr/worqr/internal/backoff"
	"github.com/worqr/worqr/internal/errs"
	"github.com/worqr/worqr/internal/subscription"
)

// Reregister registers the worker under a new id and takes leases on its
// queues again, retrying with backoff until Redis answers or ctx ends.
// It reports whether the worker is registered again.
func (k *Keeper) Reregister(ctx context.Context) bool {
	env := k.env
	out := env.Writer.Outage()
	b := backoff.New(50*time.Millisecond, env.RenewInterval).On(k.clock)
	for {
		sent := out.Begin()
		ok, err := k.ReregisterOnce(ctx)
		if ok {
			out.OK(sent)
			return true
		}
		if ctx.Err() != nil {
			return false
		}
		if !out.Failed(sent, "register", err) {
			env.logger().Warn("worqr: registering again failed; retrying", "err", err)
		}
		if !b.Wait(ctx) {
			return false
		}
	}
}

// ReregisterOnce is one attempt of Reregister: it reports whether the
// worker is registered again, and why not.
func (k *Keeper) ReregisterOnce(ctx context.Context) (bool, error) {
	h, reg, env := k.host, k.registry, k.env
	out := env.Writer.Outage()
	reg.Lock()
	defer reg.Unlock()
	if ctx.Err() != nil {
		return false, ctx.Err()
	}
	id, sent, err := reg.Register(ctx)
	if err != nil {
		return false, err
	}
	h.Lock()
	ss := h.Sessions(nil)
	h.Unlock()
	var joined, unreachable []*Session
	for _, s := range ss {
		sent := out.Begin()
		err := reg.Join(ctx, id, s.Name)
		switch {
		case errors.Is(err, errs.ErrWorkerFenced) || ctx.Err() != nil:
			// The new id is abandoned: its lease expires and the
			// reclaimers remove it; it never held a process.
			return false, err
		case err != nil:
			// Its node cannot be reached (on a cluster, a shard failing
			// over): serve the other queues, and rejoin this one once
			// the node answers, as after losing only its lease.
			if !out.Failed(sent, "rejoin", err) {
				env.logger().Warn("worqr: could not take a lease on the queue when registering again; will retry", "queue", s.Name, "err", err)
			}
			unreachable = append(unreachable, s)
		default:
			joined = append(joined, s)
		}
	}
	h.Lock()
	old := h.Worker().ID()
	if !h.Worker().ToRegistered(id) {
		h.Unlock()
		return false, errs.ErrWorkerClosed
	}
	for _, s := range joined {
		s.Rejoined(0, k.Of(sent))
	}
	for _, s := range unreachable {
		s.Lease.Lost()
		after := k.clock.Now()
		h.Go(func(life context.Context) { s.Rejoin(life, id, after) })
	}
	k.Extend(sent)
	h.Unlock()
	reg.RecordSlots(ctx, id) // under the new id: the old one's went with it
	env.logger().Info("worqr: worker registered again after fencing", "previous", old)
	for _, s := range joined {
		s.Sub.Push(subscription.Event{Subscribed: true})
	}
	env.Signals.Registered.Signal(id)
	return true, nil
}

// Wake asks the loop to run now.
func (k *Keeper) Wake() {
	select {
	case k.kick <- struct{}{}:
	default:
	}
}

// run is the keeper's loop: it registers the worker again once it fenced
// itself (Fence wakes it), unless it stays fenced. The renewals
// themselves are the beat's.
func (k *Keeper) run(ctx context.Context) {
	h := k.host
	for {
		select {
		case <-ctx.Done():
			return
		case <-k.kick:
		}
		h.Lock()
		fenced := h.Worker().IsFenced()
		h.Unlock()
		if fenced && (k.env.StayFenced || !k.Reregister(ctx)) {
			return
		}
	}
}
