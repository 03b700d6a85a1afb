package worqr

import (
	"context"

	"github.com/worqr/worqr/internal/engine"
)

// unsurePasses is how many renewals look for processes after a dequeue's
// reply was lost.
const unsurePasses = 3

// reconcile gives back, in each session of ss that has processes to look
// for, the processes that Redis says worker id holds but the worker does
// not know of (engine.Keeper.Reconcile).
func (k *leaseKeeper) reconcile(ctx context.Context, id string, ss []*session) {
	k.Reconcile(ctx, id, engineSessions(ss))
}

// anyUnsure reports whether one of ss has processes to look for.
func anyUnsure(ss []*session) bool { return engine.AnyUnsure(engineSessions(ss)) }

// engineSessions are the engine's parts of ss.
func engineSessions(ss []*session) []*engine.Session {
	out := make([]*engine.Session, len(ss))
	for i, s := range ss {
		out[i] = &s.Session
	}
	return out
}
