package worqr

import "context"

// unsurePasses is how many renewals look for processes after a dequeue's
// reply was lost.
const unsurePasses = 3

// reconcile gives back (engine.Session.Reconcile), in each session of ss
// that has processes to look for, the processes that Redis says worker id holds but the worker does
// not know of: a dequeue whose reply was lost, or a hand-off whose event
// was missed or is still on its way.
func (k *leaseKeeper) reconcile(ctx context.Context, id string, ss []*session) {
	c := k.w.c
	for _, s := range ss {
		if !s.IsUnsure() {
			continue
		}
		sent := c.outage.Begin()
		switch err := s.Reconcile(ctx, id); {
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
