package engine

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/worqr/worqr/internal/errs"
	"github.com/worqr/worqr/internal/subscription"
	"github.com/worqr/worqr/internal/testsignal"
)

// A fence of the whole worker needs its current id; it ends every process
// it holds, leaves nothing to reconcile, stops the deadline timer, tells
// the application (no queue: the whole worker) and wakes the loop that
// registers it again.
func TestKeeperFence(t *testing.T) {
	t.Parallel()
	w := newFakeWorker(t, testID)
	var k Keeper
	w.env.TTL = time.Second
	k.Init(w, &w.env, nil)
	var events testsignal.Signal[subscription.Event]
	s := w.serve(t, "q", w.clk.Now().Add(time.Second), &events)
	ps := w.hold(t, "q", testID, 1)
	p := adopt(t, s, ps[0])
	s.Books.MarkUnsure(1, false)
	w.Lock()
	k.Extend(w.clk.Now())
	w.Unlock()
	require.Equal(t, 1, w.clk.Timers())

	k.Fence(staleID, errTestCause)
	assert.False(t, w.state.IsFenced(), "a fence under a stale id fenced the worker")
	assert.NoError(t, p.St.Err())

	k.Fence(testID, errTestCause)
	assert.True(t, w.state.IsFenced())
	assert.ErrorIs(t, p.St.Err(), errs.ErrProcessLost)
	assert.Empty(t, s.Books.Processes())
	assert.False(t, s.Books.IsUnsure(), "a fence of the worker left a reconciliation to run")
	assert.Zero(t, w.clk.Timers(), "the deadline timer runs on")
	told := w.fenced.WaitOrTimeout()
	assert.Equal(t, fenceTold{id: testID, cause: errTestCause, lost: []*Proc{p}}, told)
	assert.Len(t, k.kick, 1, "the loop that registers the worker again was not woken")
}

// A script finding the lease gone fences the worker only when the session
// it was sent for still serves the queue and holds the process it was
// about: the worker may have left the queue, or fenced it, meanwhile.
func TestKeeperLeaseLostNeedsEvidence(t *testing.T) {
	t.Parallel()
	w := newFakeWorker(t, testID)
	var k Keeper
	w.env.TTL = time.Second
	k.Init(w, &w.env, nil)
	var events testsignal.Signal[subscription.Event]
	s := w.serve(t, "q", w.clk.Now().Add(time.Second), &events)
	p := adopt(t, s, w.hold(t, "q", testID, 1)[0])
	other := &Session{}
	other.Init(w, &w.env, "q", Events{}, nil, w.clk.Now(), nil)

	k.LeaseLost(testID, "elsewhere", nil, nil, errTestCause)
	k.LeaseLost(testID, "q", other, nil, errTestCause)
	k.LeaseLost(testID, "q", s, &Proc{ID: "not-held"}, errTestCause)
	assert.False(t, w.state.IsFenced(), "a lease lost on a queue the worker left, or of a process it no longer holds, fenced it")
	s.Lease.Leaving()
	k.LeaseLost(testID, "q", s, p, errTestCause)
	assert.False(t, w.state.IsFenced(), "a lease lost on a queue the worker is leaving fenced it")
	s.Lease.Left(false)

	k.LeaseLost(testID, "q", s, p, errTestCause)
	assert.True(t, w.state.IsFenced())
}

// The keeper's pass reconciles only the sessions that have processes to
// look for.
func TestKeeperReconcilesTheUnsure(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newFakeWorker(t, testID)
	var k Keeper
	w.env.TTL = time.Second
	k.Init(w, &w.env, nil)
	var events testsignal.Signal[subscription.Event]
	s := w.serve(t, "q", w.clk.Now().Add(time.Second), &events)
	ps := w.hold(t, "q", testID, 1)

	assert.False(t, AnyUnsure([]*Session{s}))
	k.Reconcile(ctx, testID, []*Session{s})
	assert.Len(t, w.held(t, "q", testID, ps), 1, "a session sure of its processes was reconciled")

	s.Books.MarkUnsure(1, false)
	assert.True(t, AnyUnsure([]*Session{s}))
	k.Reconcile(ctx, testID, []*Session{s})
	assert.Empty(t, w.held(t, "q", testID, ps), "an unsure session was not reconciled")
	assert.False(t, AnyUnsure([]*Session{s}))
}
