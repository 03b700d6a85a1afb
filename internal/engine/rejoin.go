package engine

import (
	"context"
	"errors"
	"time"

	"github.com/worqr/worqr/internal/backoff"
	"github.com/worqr/worqr/internal/errs"
	"github.com/worqr/worqr/internal/store"
	"github.com/worqr/worqr/internal/subscription"
)

// Rejoin brings a fenced queue back: after the old lease has surely run
// out (after), it gives back every task the worker still holds there
// (release, mode force) and takes a new lease, retrying with backoff
// until the queue's node answers. It gives up when the worker left the
// queue, was closed, or fenced itself as a whole (re-registration
// rejoins then).
func (s *Session) Rejoin(ctx context.Context, id string, after time.Time) {
	env := s.env
	clk := env.Clock
	if !backoff.SleepCtx(ctx, clk, clk.Until(after)) {
		return
	}
	b := backoff.New(50*time.Millisecond, env.RenewInterval).On(clk)
	for {
		// Each attempt is bounded: it holds the registry's lock and the
		// queue's gate, and the node may hang rather than refuse.
		actx, cancel := context.WithTimeout(ctx, env.TTL)
		sent := env.Writer.Outage().Begin()
		done, err := s.RejoinOnce(actx, id)
		cancel()
		if done || ctx.Err() != nil {
			return
		}
		if !env.Writer.Outage().Failed(sent, "rejoin", err) {
			env.logger().Warn("worqr: taking a lease on the queue again failed; retrying", "queue", s.Name, "err", err)
		}
		if !b.Wait(ctx) {
			return
		}
	}
}

// RejoinOnce is one attempt of Rejoin: it reports whether the rejoin is
// over (the lease taken again, or nothing left to rejoin), and why not.
func (s *Session) RejoinOnce(ctx context.Context, id string) (done bool, err error) {
	h, env := s.host, s.env
	reg := h.Registry()
	reg.Lock()
	defer reg.Unlock()
	s.Gate.Lock() // no dequeue in between
	defer s.Gate.Unlock()
	h.Lock()
	current := h.Worker().IsCurrent(id) && h.Session(s.Name) == s && s.Lease.IsFenced()
	before := h.Deadline().At() // the registry lease the new queue lease derives from
	h.Unlock()
	if !current || ctx.Err() != nil {
		return true, nil
	}
	r := env.Store.ReleaseOne(ctx, store.Release{Queue: s.Name, Worker: id, Mode: store.ReleaseForce, Poison: env.HealthyAfter()})
	if r.Err != nil {
		return false, env.Fail("rejoin", s.Name, r.Err)
	}
	if err := reg.Join(ctx, id, s.Name); err != nil {
		return errors.Is(err, errs.ErrWorkerFenced), err
	}
	h.Lock()
	if w := h.Worker(); w.ID() == id && !w.IsClosed() {
		s.Rejoined(r.UpTo, before)
		h.Deadline().Arm()
	}
	h.Unlock()
	env.logger().Info("worqr: lease on the queue taken again", "queue", s.Name)
	s.Sub.Push(subscription.Event{Subscribed: true}) // look for work at once
	env.Signals.Rejoined.Signal(s.Name)
	return true, nil
}
