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
	w.leaseAt = w.clk.Now().Add(time.Minute)

	done, err := s.RejoinOnce(ctx, staleID)
	assert.True(t, done)
	assert.NoError(t, err)
	assert.Len(t, w.held(t, "q", testID, ps), 2, "a rejoin under a stale id gave tasks back")
	assert.Empty(t, w.joined.C(), "a rejoin under a stale id took a lease")

	w.joinErr = errors.New("node down")
	done, err = s.RejoinOnce(ctx, testID)
	assert.False(t, done, "a node that could not be reached ended the rejoin")
	assert.ErrorIs(t, err, w.joinErr)
	assert.True(t, s.IsFenced())
	assert.Empty(t, w.held(t, "q", testID, ps), "the tasks were not given back")
	w.joined.WaitOrTimeout()

	w.joinErr = fmt.Errorf("join: %w", errs.ErrWorkerFenced)
	done, err = s.RejoinOnce(ctx, testID)
	assert.True(t, done, "a registry lease found gone did not end the rejoin")
	assert.ErrorIs(t, err, errs.ErrWorkerFenced)
	w.joined.WaitOrTimeout()

	w.joinErr = nil
	done, err = s.RejoinOnce(ctx, testID)
	require.NoError(t, err)
	assert.True(t, done)
	w.joined.WaitOrTimeout()
	assert.False(t, s.IsFenced())
	at, serving := s.Deadline()
	assert.True(t, serving)
	assert.Equal(t, w.leaseAt, at, "the queue lease does not derive from the registry lease")
	assert.Equal(t, 1, w.armed, "the deadline timer was not armed")
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
	w.joinErr = errors.New("node down")

	ctx, cancel := context.WithTimeout(context.Background(), testsignal.Wait)
	defer cancel()
	w.Go(func(life context.Context) { s.Rejoin(life, testID, w.clk.Now().Add(time.Second)) })
	require.NoError(t, w.clk.WaitTimers(ctx, 1))
	assert.Empty(t, w.joined.C(), "the rejoin did not wait for the old lease to run out")
	w.clk.Advance(time.Second)
	w.joined.WaitOrTimeout()

	require.NoError(t, w.clk.WaitTimers(ctx, 1)) // the backoff
	w.mu.Lock()
	w.joinErr = nil
	w.mu.Unlock()
	w.clk.Advance(w.RenewInterval())
	w.joined.WaitOrTimeout()
	assert.Equal(t, "q", w.rejoined.WaitOrTimeout())
	assert.False(t, s.IsFenced())
}
