package worqr

// The reconciliation (internal/engine's reconcile.go) on its own, called directly: it gives
// back what Redis says the worker holds in a queue and the session does
// not (a dequeue whose reply was lost), and only while passes are left.

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/worqr/worqr/internal/engine"
)

func TestReconcileGivesBackWhatTheSessionDoesNotHold(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	w := newWorker(t, c, WorkerOptions{})
	require.NoError(t, w.StartWork(ctx, "q", Events{}))
	enqueueNumbered(t, c, "q", 3)
	ps := dequeueAll(t, w, "q", 2) // t0000, t0001
	s, id := sessionOf(w, "q"), w.ID()
	unsure := func() int { return s.Books.View().Unsure }

	s.Books.Drop(&ps[0].rec) // as if its dequeue's reply had been lost
	w.core.Lease.Reconcile(ctx, id, []*engine.Session{s})
	assert.Equal(t, []string{"t0002"}, waiting(t, c, "q"), "no pass left: nothing looked for")

	s.Books.MarkUnsure(2, false)
	w.core.Lease.Reconcile(ctx, id, []*engine.Session{s})
	assert.Equal(t, []string{"t0000", "t0002"}, waiting(t, c, "q"), "the unknown process's task back at the front")
	assert.Nil(t, ps[1].Err(), "the process the session holds is kept")
	assert.Equal(t, 1, unsure(), "one pass used")

	w.core.Lease.Reconcile(ctx, "stale-id", []*engine.Session{s})
	assert.Equal(t, 1, unsure(), "an id no longer current reconciles nothing")

	s.Books.Drop(&ps[1].rec)
	w.core.Lease.Reconcile(ctx, id, []*engine.Session{s})
	assert.Equal(t, []string{"t0001", "t0000", "t0002"}, waiting(t, c, "q"))
	assert.Zero(t, unsure())
	assert.False(t, engine.AnyUnsure([]*engine.Session{s}))
}
