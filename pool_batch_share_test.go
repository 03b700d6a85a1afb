package worqr

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Under OrderShared a batched queue gets its share of the pool's slots,
// counted in tasks as any queue's: with shares 3:1 and both queues backed
// up, three task starts in four are the batched queue's, whose batches
// are filled from those slots.
func TestPoolSharesSlotsBetweenABatchedAndAPlainQueue(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	const n = 200
	enqueueNumbered(t, c, "rows", n)
	enqueueNumbered(t, c, "mail", n)
	var log startLog
	var handled atomic.Int32
	logged := func(next Handler) Handler {
		return func(ctx context.Context, p *Process) error {
			log.add(p)
			return next(ctx, p)
		}
	}
	w := newWorker(t, c, WorkerOptions{})
	require.NoError(t, w.HandleQueues(ctx, []QueueSpec{
		{Queue: "rows", Batch: func(_ context.Context, batch []*Process) error {
			handled.Add(int32(len(batch)))
			return nil
		}, BatchOptions: BatchOptions{Size: 2, Batches: 2, MaxWait: 10 * time.Millisecond, Middleware: []Middleware{logged}}, Share: 3},
		{Queue: "mail", Handler: func(_ context.Context, p *Process) error {
			log.add(p)
			handled.Add(1)
			return nil
		}, Share: 1},
	}, PoolOptions{Concurrency: 4, Order: OrderShared}))
	eventually(t, 20*time.Second, "all handled", func() bool { return handled.Load() == 2*n })
	settledQueue(t, c, "rows")
	settledQueue(t, c, "mail")

	// The first 200 starts, while both queues hold tasks (rows gives up
	// 150 of its 200).
	first := queuesOf(log.get()[:n])
	var rows int
	for _, q := range first {
		if q == "rows" {
			rows++
		}
	}
	share := float64(rows) / float64(len(first))
	assert.InDelta(t, 0.75, share, 0.05, "share of starts from the batched share-3 queue: %d of %d", rows, len(first))
}

// StopWork of a pool's batched queue while its batch fills starts that
// batch at once and cancels it: each of its tasks is either finished (the
// handler was called and returned nil for it) or given back to the front
// of its queue, none both and none lost; the slots the batch held are
// the pool's again, and the pool's other queue is served on.
func TestPoolStopWorkOfABatchedQueueWhileItsBatchFills(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	c.core.Signals.Joined.Init(t)
	var ran attempts
	var finished atomic.Int32
	mailStarted, gate := make(chan string, 4), make(chan struct{})
	w := newWorker(t, c, WorkerOptions{})
	require.NoError(t, w.HandleQueues(ctx, []QueueSpec{
		{Queue: "rows", Batch: func(_ context.Context, batch []*Process) error {
			for _, p := range batch {
				ran.add(string(p.Task()))
			}
			return nil
		}, BatchOptions: BatchOptions{Size: 10, MaxWait: time.Hour}},
		{Queue: "mail", Handler: func(_ context.Context, p *Process) error {
			mailStarted <- string(p.Task())
			<-gate
			return nil
		}},
	}, PoolOptions{Concurrency: 4, Order: OrderShared}))
	all := enqueueNumbered(t, c, "rows", 3)
	waitJoined(t, c, "rows", 3) // three tasks in the filling batch, three of the pool's four slots

	require.NoError(t, w.StopWork(ctx, "rows"))
	procs, err := c.Processes(ctx, "rows")
	require.NoError(t, err)
	assert.Empty(t, procs, "nothing in flight once StopWork returned")
	back := waiting(t, c, "rows")
	for _, task := range all {
		assert.Equal(t, 1, ran.get(task)+countOf(back, task), "%s: run by the batch or given back, once", task)
	}

	// Every slot is the pool's again: four mails run at once.
	enqueueNumbered(t, c, "mail", 4)
	for range 4 {
		recv(t, mailStarted, 5*time.Second, "a mail started")
	}
	close(gate)
	settledQueue(t, c, "mail")

	// The tasks given back run once more, elsewhere.
	again := newWorker(t, c, WorkerOptions{})
	require.NoError(t, again.Handle(ctx, "rows", func(_ context.Context, p *Process) error {
		ran.add(string(p.Task()))
		finished.Add(1)
		return nil
	}, HandleOptions{}))
	settledQueue(t, c, "rows")
	assert.EqualValues(t, len(back), finished.Load())
	for _, task := range all {
		assert.Equal(t, 1, ran.get(task), "%s ran once", task)
	}
}

// countOf is how many times s holds v.
func countOf(s []string, v string) int {
	n := 0
	for _, x := range s {
		if x == v {
			n++
		}
	}
	return n
}

// A pool's worker fenced while a batch of its batched queue runs: the
// batch's context ends with ErrWorkerFenced once every process of it is
// lost, nothing is written for them (the handler's nil finishes nothing),
// and the tasks run again after the reclaim, as under HandleBatch.
func TestPoolBatchFencedWorkerWritesNothing(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	var a attempts
	running := make(chan []*Process, 1)
	causes := make(chan error, 1)
	w := newWorker(t, c, fast)
	require.NoError(t, w.HandleQueues(ctx, []QueueSpec{
		{Queue: "mail", Handler: func(context.Context, *Process) error { return nil }},
		{Queue: "rows", Batch: func(bctx context.Context, batch []*Process) error {
			if a.add("batch") > 1 {
				return nil // the second run, after the reclaim
			}
			running <- batch
			<-bctx.Done()
			causes <- context.Cause(bctx)
			return nil // would finish them, were the worker not fenced
		}, BatchOptions: BatchOptions{Size: 2, MaxWait: time.Hour}},
	}, PoolOptions{Concurrency: 4, Order: OrderShared}))
	enqueueNumbered(t, c, "rows", 2)
	batch := recv(t, running, 5*time.Second, "the batch")

	w.core.Lease.Fence(w.ID(), errors.New("lease lost (test)"))
	cause := recv(t, causes, 5*time.Second, "the batch's context ended")
	assert.ErrorIs(t, cause, ErrWorkerFenced)
	for _, p := range batch {
		assert.ErrorIs(t, p.Err(), ErrProcessLost)
	}
	eventually(t, 10*time.Second, "run again after the reclaim", func() bool { return a.get("batch") == 2 })
	settledQueue(t, c, "rows")
	assert.Empty(t, deadPayloads(t, c, "rows"))
}
