package worqr

import (
	"context"

	"github.com/worqr/worqr/internal/store"
)

// unsurePasses is how many renewals look for processes after a dequeue's
// reply was lost.
const unsurePasses = 3

// reconcile gives back processes that Redis says this worker holds but the
// worker does not know of: a dequeue whose reply was lost, or a hand-off
// whose event was missed or is still on its way. Dequeues and hand-offs on
// the queue wait meanwhile, so no process is in between.
func (w *Worker) reconcile(ctx context.Context, id string, ss []*serving) {
	for _, s := range ss {
		w.mu.Lock()
		unsure := s.unsure > 0
		w.mu.Unlock()
		if !unsure {
			continue
		}
		sent := w.c.outage.begin()
		switch err := w.reconcileQueue(ctx, id, s); {
		case err == nil:
			w.c.outage.ok(sent)
		case !w.c.outage.failed(sent, "reconcile", err):
			w.logger().Warn("worqr: reconciling processes failed; will retry", "queue", s.name, "err", err)
		}
	}
}

// anyUnsure reports whether one of ss has processes to look for.
func (w *Worker) anyUnsure(ss []*serving) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, s := range ss {
		if s.unsure > 0 {
			return true
		}
	}
	return false
}

func (w *Worker) reconcileQueue(ctx context.Context, id string, s *serving) error {
	s.gate.Lock()
	defer s.gate.Unlock()
	w.mu.Lock()
	if w.id != id || w.isFenced() {
		w.mu.Unlock()
		return nil
	}
	keep := make([]string, 0, len(s.procs))
	for pid := range s.procs {
		keep = append(keep, pid)
	}
	w.mu.Unlock()
	c := w.c
	r := c.store.ReleaseOne(ctx, store.Release{Queue: s.name, Worker: id, Mode: store.ReleaseOrphans, Keep: keep, Poison: w.healthyAfter()})
	if r.Err != nil {
		return c.fail("reconcile", s.name, r.Err)
	}
	n := r.Returned
	w.mu.Lock()
	s.unsure--
	s.releasedUpTo = max(s.releasedUpTo, r.UpTo)
	w.mu.Unlock()
	if n > 0 {
		w.logger().Info("worqr: returned processes whose dequeue reply was lost", "queue", s.name, "tasks", n)
	}
	return nil
}
