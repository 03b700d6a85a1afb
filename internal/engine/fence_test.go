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

// A fence of one session needs the worker's current id and the session
// still the queue's; it ends the session's processes, tells the
// application, and rejoins only once a peer could have taken the tasks:
// the lease's deadline plus the margin.
func TestSessionFenceEndsItsQueueAndRejoinsAfterTheLease(t *testing.T) {
	t.Parallel()
	w := newFakeWorker(t, testID)
	deadline := w.clk.Now().Add(time.Second)
	var events testsignal.Signal[subscription.Event]
	s := w.serve(t, "q", deadline, &events)
	ps := w.hold(t, "q", testID, 1)
	p := adopt(t, s, ps[0])

	s.Fence(staleID, errTestCause)
	other := &Session{}
	other.Init(w, &w.env, "q", Events{}, nil, deadline, nil)
	other.Fence(testID, errTestCause)
	assert.False(t, s.Lease.IsFenced() || other.Lease.IsFenced(), "a fence under a stale id, or of a session not the queue's, fenced it")
	assert.NoError(t, p.St.Err())
	assert.Empty(t, w.fenced.C(), "a fence that did nothing told the application")

	s.Fence(testID, errTestCause)
	require.True(t, s.Lease.IsFenced())
	assert.ErrorIs(t, p.St.Err(), errs.ErrProcessLost)
	assert.Empty(t, s.Books.Processes())
	told := w.fenced.WaitOrTimeout()
	assert.Equal(t, fenceTold{id: testID, queue: "q", cause: errTestCause, lost: []*Proc{p}}, told)
	s.Fence(testID, errTestCause)
	assert.Empty(t, w.fenced.C(), "a fenced session was fenced again")

	// The rejoin waits on the clock until the lease surely ran out.
	ctx, cancel := context.WithTimeout(context.Background(), testsignal.Wait)
	defer cancel()
	require.NoError(t, w.clk.WaitTimers(ctx, 1))
	wait := w.clk.Until(deadline.Add(w.dl.Margin()))
	w.clk.Advance(wait - time.Millisecond)
	assert.Equal(t, 1, w.clk.Timers(), "the rejoin began before the lease could have run out")
	assert.Equal(t, []string{ps[0].PID}, w.held(t, "q", testID, ps))
	w.clk.Advance(time.Millisecond)
	assert.Equal(t, "q", w.rejoined.WaitOrTimeout())
	assert.False(t, s.Lease.IsFenced())
	assert.Empty(t, w.held(t, "q", testID, ps), "the rejoin did not give the task back")
}
