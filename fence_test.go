package worqr

// The fences (fence.go) on their own, called directly: the lease keeper's
// fence of the whole worker, the evidence leaseLost takes, and a session's
// fence of its queue alone.

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/worqr/worqr/internal/engine"
	"github.com/worqr/worqr/internal/lifecycle"
)

// isFenced reports whether the worker as a whole is fenced.
func isFenced(w *Worker) bool {
	w.core.Lock()
	defer w.core.Unlock()
	return w.core.Worker().IsFenced()
}

// fencedWorker is a worker that stays fenced once fenced, whose fence
// events come on the channel returned.
func fencedWorker(t *testing.T, c *Client) (*Worker, chan FenceEvent) {
	fences := make(chan FenceEvent, 4)
	return newWorker(t, c, WorkerOptions{StayFenced: true, OnFenced: func(ev FenceEvent) { fences <- ev }}), fences
}

var errTestLease = errors.New("lease lost (test)")

// The worker's fence ends every process it holds, in every queue, at once
// (ErrProcessLost, ErrWorkerFenced), tells the application once with the
// processes lost, and takes no more work; a second fence under the same
// id does nothing.
func TestFenceOfTheWorkerEndsEveryProcess(t *testing.T) {
	t.Parallel()
	k := setupClocked(t)
	c, ctx := k.c, k.ctx
	w, fences := fencedWorker(t, c)
	for _, q := range []string{"a", "b"} {
		require.NoError(t, w.StartWork(ctx, q, Events{}))
		enqueueNumbered(t, c, q, 1)
	}
	ps := append(dequeueAll(t, w, "a", 1), dequeueAll(t, w, "b", 1)...)
	id := w.ID()

	w.core.Lease.Fence(id, errTestLease)
	for _, p := range ps {
		assert.True(t, isClosed(p.Done()), "ended by the fence itself")
		assert.ErrorIs(t, p.Err(), ErrProcessLost)
		assert.ErrorIs(t, p.Err(), ErrWorkerFenced)
	}
	ev := recv(t, fences, 5*time.Second, "the fence event")
	assert.Equal(t, id, ev.WorkerID)
	assert.Empty(t, ev.Queue, "the whole worker")
	assert.ErrorIs(t, ev.Cause, ErrWorkerFenced)
	assert.ErrorIs(t, ev.Cause, errTestLease)
	assert.ElementsMatch(t, ps, ev.Lost)
	_, err := w.Dequeue(ctx, "a")
	assert.ErrorIs(t, err, ErrWorkerFenced)

	w.core.Lock()
	at := w.core.Worker().FencedAt()
	w.core.Unlock()
	k.clk.Advance(time.Millisecond)
	w.core.Lease.Fence(id, errTestLease)
	w.core.Lock()
	assert.Equal(t, at, w.core.Worker().FencedAt(), "the second fence changed nothing")
	w.core.Unlock()
}

// A dequeue that finds the worker's lease on its queue gone is evidence:
// it fails with ErrWorkerFenced and fences the whole worker, whose
// processes, the one held from an earlier dequeue too, are lost. On the
// fake clock, so that no renewal finds the lease gone first.
func TestDequeueThatFindsTheLeaseGoneFencesTheWorker(t *testing.T) {
	t.Parallel()
	k := setupClocked(t)
	c, ctx := k.c, k.ctx
	w, fences := fencedWorker(t, c)
	require.NoError(t, w.StartWork(ctx, "q", Events{}))
	enqueueNumbered(t, c, "q", 2)
	held := dequeueAll(t, w, "q", 1)[0]
	id := w.ID()
	require.NoError(t, c.core.Redis.Do(ctx, c.core.Redis.B().Zrem().Key(c.core.Store.Keys().Queue("q").Leases).Member(id).Build()).Error())

	_, err := w.Dequeue(ctx, "q")
	assert.ErrorIs(t, err, ErrWorkerFenced)
	ev := recv(t, fences, 5*time.Second, "the fence event")
	assert.Equal(t, id, ev.WorkerID)
	assert.Empty(t, ev.Queue, "the whole worker")
	assert.ErrorContains(t, ev.Cause, `dequeue found the lease on "q" gone`)
	assert.Equal(t, []*Process{held}, ev.Lost)
	assert.ErrorIs(t, held.Err(), ErrProcessLost)
	assert.True(t, isFenced(w))
}

// leaseLost fences the worker only on evidence about the service it was
// sent for: not for a queue it does not serve, a session it no longer
// has, or a process its session no longer holds.
func TestFenceLeaseLostNeedsEvidence(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	w, fences := fencedWorker(t, c)
	require.NoError(t, w.StartWork(ctx, "q", Events{}))
	enqueueNumbered(t, c, "q", 2)
	ps := dequeueAll(t, w, "q", 2)
	s, id := sessionOf(w, "q"), w.ID()

	w.core.Lease.LeaseLost(id, "other", nil, nil, errTestLease)
	assert.False(t, isFenced(w), "a queue it does not serve")
	w.core.Lease.LeaseLost(id, "q", &engine.Session{}, nil, errTestLease)
	assert.False(t, isFenced(w), "sent for another session of the queue")
	s.Books.Drop(&ps[0].rec)
	w.core.Lease.LeaseLost(id, "q", nil, &ps[0].rec, errTestLease)
	assert.False(t, isFenced(w), "about a process the session no longer holds")
	require.Nil(t, ps[1].Err())

	w.core.Lease.LeaseLost(id, "q", s, &ps[1].rec, errTestLease)
	assert.True(t, isFenced(w), "about the session and a process it holds")
	assert.ErrorIs(t, ps[1].Err(), ErrWorkerFenced)
	assert.Equal(t, id, recv(t, fences, 5*time.Second, "the fence event").WorkerID)
}

// A session's fence ends the processes of its queue only, keeps the
// worker's id and its other queues, and tells the application with Queue
// set; one under an id no longer current does nothing.
func TestFenceOfASessionEndsOnlyItsQueue(t *testing.T) {
	t.Parallel()
	k := setupClocked(t) // the rejoin it starts waits for the clock
	c, ctx := k.c, k.ctx
	w, fences := fencedWorker(t, c)
	for _, q := range []string{"a", "b"} {
		require.NoError(t, w.StartWork(ctx, q, Events{}))
		enqueueNumbered(t, c, q, 1)
	}
	pa, pb := dequeueAll(t, w, "a", 1)[0], dequeueAll(t, w, "b", 1)[0]
	sa, id := sessionOf(w, "a"), w.ID()

	sa.Fence("not-the-id", errTestLease)
	assert.Nil(t, pa.Err(), "a stale id fences nothing")

	sa.Fence(id, errTestLease)
	assert.ErrorIs(t, pa.Err(), ErrProcessLost)
	assert.Nil(t, pb.Err(), "the other queue's process goes on")
	ev := recv(t, fences, 5*time.Second, "the fence event")
	assert.Equal(t, "a", ev.Queue)
	assert.Equal(t, []*Process{pa}, ev.Lost)
	assert.Equal(t, id, w.ID(), "the worker keeps its id")
	assert.False(t, isFenced(w))
	assert.Equal(t, lifecycle.SessionFenced, sa.Lease.View().State)
	assert.Empty(t, sa.Books.Processes())
}
