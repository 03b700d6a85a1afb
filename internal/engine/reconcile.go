package engine

import (
	"context"

	"github.com/worqr/worqr/internal/store"
)

// Reconcile gives back the processes of the queue that Redis says worker
// id holds and the session does not: a dequeue whose reply was lost, or
// a hand-off whose event was missed or is still on its way. Dequeues and
// hand-offs on the queue wait meanwhile, so no process is in between.
func (s *Session) Reconcile(ctx context.Context, id string) error {
	h := s.host
	s.Gate.Lock()
	defer s.Gate.Unlock()
	h.Lock()
	if w := h.Worker(); w.ID() != id || w.IsFenced() {
		h.Unlock()
		return nil
	}
	// Only the session serving the queue now knows which of the worker's
	// processes there are live (see Keep).
	keep, ok := s.Keep()
	ok = ok && h.Session(s.Name) == s
	h.Unlock()
	if !ok {
		return nil
	}
	env := s.env
	r := env.Store.ReleaseOne(ctx, store.Release{Queue: s.Name, Worker: id, Mode: store.ReleaseOrphans, Keep: keep, Poison: env.HealthyAfter()})
	if r.Err != nil {
		return env.Fail("reconcile", s.Name, r.Err)
	}
	n := r.Returned
	s.Books.Reconciled(r.UpTo)
	if n > 0 {
		env.logger().Info("worqr: returned processes whose dequeue reply was lost", "queue", s.Name, "tasks", n)
	}
	return nil
}
