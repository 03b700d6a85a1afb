package worqr

import (
	"context"

	"github.com/worqr/worqr/internal/store"
)

// unsurePasses is how many renewals look for processes after a dequeue's
// reply was lost.
const unsurePasses = 3

// reconcile gives back, in each session of ss that has processes to look
// for, the processes that Redis says worker id holds but the worker does
// not know of: a dequeue whose reply was lost, or a hand-off whose event
// was missed or is still on its way.
func (k *leaseKeeper) reconcile(ctx context.Context, id string, ss []*session) {
	c := k.w.c
	for _, s := range ss {
		if !s.IsUnsure() {
			continue
		}
		sent := c.outage.Begin()
		switch err := s.reconcile(ctx, id); {
		case err == nil:
			c.outage.OK(sent)
		case !c.outage.Failed(sent, "reconcile", err):
			k.w.logger().Warn("worqr: reconciling processes failed; will retry", "queue", s.Name, "err", err)
		}
	}
}

// anyUnsure reports whether one of ss has processes to look for.
func anyUnsure(ss []*session) bool {
	for _, s := range ss {
		if s.IsUnsure() {
			return true
		}
	}
	return false
}

// reconcile gives back the processes of the queue that Redis says worker
// id holds and the session does not. Dequeues and hand-offs on the queue
// wait meanwhile, so no process is in between.
func (s *session) reconcile(ctx context.Context, id string) error {
	w := s.w
	s.Gate.Lock()
	defer s.Gate.Unlock()
	w.mu.Lock()
	if w.state.ID() != id || w.state.IsFenced() {
		w.mu.Unlock()
		return nil
	}
	// Only the session serving the queue now knows which of the worker's
	// processes there are live (see Keep).
	keep, ok := s.Keep()
	ok = ok && w.sessions[s.Name] == s
	w.mu.Unlock()
	if !ok {
		return nil
	}
	c := w.c
	r := c.store.ReleaseOne(ctx, store.Release{Queue: s.Name, Worker: id, Mode: store.ReleaseOrphans, Keep: keep, Poison: w.reclaimer.HealthyAfter()})
	if r.Err != nil {
		return c.fail("reconcile", s.Name, r.Err)
	}
	n := r.Returned
	s.Reconciled(r.UpTo)
	if n > 0 {
		w.logger().Info("worqr: returned processes whose dequeue reply was lost", "queue", s.Name, "tasks", n)
	}
	return nil
}
