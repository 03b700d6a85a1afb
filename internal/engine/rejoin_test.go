package engine

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/worqr/worqr/internal/errs"
	"github.com/worqr/worqr/internal/subscription"
	"github.com/worqr/worqr/internal/testsignal"
)

// One attempt at a rejoin gives back every task the worker holds in the
// queue, then takes the lease again: the session serves until the
// registry lease's deadline, ignores hand-offs of the tasks given back,
// and looks for work at once. Under a stale id it does nothing; a node
// that cannot be reached leaves it to try again, a registry lease found
// gone ends it.
func TestSessionRejoinOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newFakeWorker(t, testID)
	var events testsignal.Signal[subscription.Event]
	s := w.serve(t, "q", w.clk.Now(), &events)
	ps := w.hold(t, "q", testID, 2)
	adopt(t, s, ps[0])
	_, _, ok := s.Lease.fence(&s.Books)
	require.True(t, ok)
	w.mu.Lock()
	w.dl.at = w.dlClk.Now().Add(time.Minute) // the registry lease's deadline, its timer not armed
	w.mu.Unlock()

	done, err := s.RejoinOnce(ctx, staleID)
	assert.True(t, done)
	assert.NoError(t, err)
	assert.Len(t, w.held(t, "q", testID, ps), 2, "a rejoin under a stale id gave tasks back")
	assert.Empty(t, w.reg.joined.C(), "a rejoin under a stale id took a lease")

	w.reg.joinErr = errors.New("node down")
	done, err = s.RejoinOnce(ctx, testID)
	assert.False(t, done, "a node that could not be reached ended the rejoin")
	assert.ErrorIs(t, err, w.reg.joinErr)
	assert.True(t, s.Lease.IsFenced())
	assert.Empty(t, w.held(t, "q", testID, ps), "the tasks were not given back")
	w.reg.joined.WaitOrTimeout()

	w.reg.joinErr = fmt.Errorf("join: %w", errs.ErrWorkerFenced)
	done, err = s.RejoinOnce(ctx, testID)
	assert.True(t, done, "a registry lease found gone did not end the rejoin")
	assert.ErrorIs(t, err, errs.ErrWorkerFenced)
	w.reg.joined.WaitOrTimeout()

	w.reg.joinErr = nil
	done, err = s.RejoinOnce(ctx, testID)
	require.NoError(t, err)
	assert.True(t, done)
	w.reg.joined.WaitOrTimeout()
	assert.False(t, s.Lease.IsFenced())
	at, serving := s.Lease.Deadline()
	assert.True(t, serving)
	assert.Equal(t, w.dlClk.Now().Add(time.Minute), at, "the queue lease does not derive from the registry lease")
	w.dlClk.Advance(time.Minute)
	assert.Equal(t, testID, w.workerFenced.WaitOrTimeout(), "the deadline timer was not armed")
	assert.Equal(t, "q", w.rejoined.WaitOrTimeout())
	assert.True(t, lookedForWork(&events), "the rejoin did not look for work")
	late := &Proc{ID: ps[1].PID, Seq: ps[1].Seq(), Queue: "q", Host: &fakeHost{}}
	assert.False(t, s.Adopt(late), "a hand-off of a task given back was taken")
}

// Rejoin waits until the old lease ran out, then tries again with backoff
// until the queue's node answers.
func TestSessionRejoinRetries(t *testing.T) {
	t.Parallel()
	w := newFakeWorker(t, testID)
	var events testsignal.Signal[subscription.Event]
	s := w.serve(t, "q", w.clk.Now(), &events)
	_, _, ok := s.Lease.fence(&s.Books)
	require.True(t, ok)
	w.reg.joinErr = errors.New("node down")

	ctx, cancel := context.WithTimeout(context.Background(), testsignal.Wait)
	defer cancel()
	w.Go(func(life context.Context) { s.Rejoin(life, testID, w.clk.Now().Add(time.Second)) })
	require.NoError(t, w.clk.WaitTimers(ctx, 1))
	assert.Empty(t, w.reg.joined.C(), "the rejoin did not wait for the old lease to run out")
	w.clk.Advance(time.Second)
	w.reg.joined.WaitOrTimeout()

	require.NoError(t, w.clk.WaitTimers(ctx, 1)) // the backoff
	w.mu.Lock()
	w.reg.joinErr = nil
	w.mu.Unlock()
	w.clk.Advance(w.env.RenewInterval)
	w.reg.joined.WaitOrTimeout()
	assert.Equal(t, "q", w.rejoined.WaitOrTimeout())
	assert.False(t, s.Lease.IsFenced())
}
