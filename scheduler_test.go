package worqr

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/worqr/worqr/internal/pacer"
	"github.com/worqr/worqr/internal/store"
)

// The scheduler's loop runs while a member takes work and stops with the
// last one; once the worker closes, none of the goroutines it started
// (handler goroutines, outcome writes) outlives the close, and it starts
// no more.
func TestSchedulerStopsWithItsMembersAndItsGoroutinesWithTheWorker(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	w := newWorker(t, c, WorkerOptions{})
	done := make(chan string, 10)
	h := func(_ context.Context, p *Process) error { done <- string(p.Task()); return nil }
	require.NoError(t, w.Handle(ctx, "one", h, HandleOptions{Concurrency: 2}))
	require.NoError(t, w.HandleQueues(ctx, []QueueSpec{{Queue: "a", Handler: h}, {Queue: "b", Handler: h}}, PoolOptions{}))
	one, a, b := runnerOf(w, "one").Sched(), runnerOf(w, "a").Sched(), runnerOf(w, "b").Sched()
	require.Same(t, a, b, "a pool is one scheduler")
	recv(t, one.Started(), 5*time.Second, "Handle's loop started")
	recv(t, a.Started(), 5*time.Second, "the pool's loop started")

	poolStopped, oneStopped := a.Stopped(), one.Stopped() // this run's
	require.NoError(t, w.StopWork(ctx, "a"))
	select {
	case <-poolStopped:
		t.Fatal("the pool's loop stopped while b is served")
	default:
	}
	require.NoError(t, w.StopWork(ctx, "b"))
	recv(t, poolStopped, 5*time.Second, "the pool's loop stopped with its last member")

	for _, task := range []string{"x", "y", "z"} {
		require.NoError(t, second(c.Enqueue(ctx, "one", []byte(task))))
		recv(t, done, 5*time.Second, "handled")
	}
	settledQueue(t, c, "one")
	require.NoError(t, w.Close(ctx))
	recv(t, oneStopped, 5*time.Second, "Handle's loop stopped")
	assert.False(t, one.Jobs().Go(func() {}), "the handler goroutines were waited for and no more start")
}

// Slots reports each pool's busy and free slots exactly while handlers
// are held, per worker and for the client, and the slots freed when they
// return; a pool whose queues are all left is not reported.
func TestSlotsReportBusyAndFreeHandlersPerPool(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	started := make(chan string, 10)
	release := make(chan struct{})
	hold := func(ctx context.Context, p *Process) error {
		started <- p.Queue()
		<-release
		return nil
	}
	w := newWorker(t, c, lasting)
	require.NoError(t, w.Handle(ctx, "a", hold, HandleOptions{Concurrency: 3}))
	require.NoError(t, w.HandleQueues(ctx, []QueueSpec{{Queue: "b", Handler: hold}, {Queue: "c", Handler: hold}}, PoolOptions{Concurrency: 4}))
	other := newWorker(t, c, lasting)
	require.NoError(t, other.Handle(ctx, "d", hold, HandleOptions{Concurrency: 2}))

	for _, q := range []string{"a", "a", "b", "c", "c", "d"} {
		_, err := c.Enqueue(ctx, q, []byte("t"))
		require.NoError(t, err)
	}
	for range 6 {
		recv(t, started, 5*time.Second, "a handler started")
	}
	want := []PoolSlots{
		{Worker: w.ID(), Queues: []string{"b", "c"}, Size: 4, Busy: 3, Free: 1},
		{Worker: w.ID(), Queues: []string{"a"}, Size: 3, Busy: 2, Free: 1},
	}
	assert.Equal(t, want, w.Slots())
	assert.Equal(t, []PoolSlots{{Worker: other.ID(), Queues: []string{"d"}, Size: 2, Busy: 1, Free: 1}}, other.Slots())
	all := c.Slots()
	assert.Len(t, all, 3)
	assert.Subset(t, all, append(want, other.Slots()...))

	close(release)
	eventually(t, 5*time.Second, "the slots freed", func() bool {
		for _, ps := range c.Slots() {
			if ps.Busy != 0 || ps.Free != ps.Size {
				return false
			}
		}
		return true
	})
	require.NoError(t, w.StopWork(ctx, "a"))
	assert.Equal(t, []PoolSlots{{Worker: w.ID(), Queues: []string{"b", "c"}, Size: 4, Busy: 0, Free: 4}}, w.Slots())
	require.NoError(t, other.Close(ctx))
	assert.Empty(t, other.Slots())
	assert.Len(t, c.Slots(), 1)
}

// A runtime's dequeue that failed on the connection is tried again after
// a backoff timed on the client's clock (the worker's engine.Env
// clocks): the backoff's timer is the fake clock's, and the task starts.
func TestAFailedDequeueIsRetriedOnTheClientsClock(t *testing.T) {
	t.Parallel()
	k := setupClocked(t)
	c, ctx := k.c, k.ctx
	w := newWorker(t, c, WorkerOptions{})
	enqueueNumbered(t, c, "q", 1)
	// The first dequeue fails; it tells the timers pending as it is
	// sent, before its failure arms the backoff's.
	var once atomic.Bool
	failed := make(chan int, 1)
	c.core.Store.SetFault(func(_ context.Context, op store.Op, queue string) error {
		if op != store.OpDequeue || queue != "q" || !once.CompareAndSwap(false, true) {
			return nil
		}
		failed <- k.clk.Timers()
		return errInjected
	})
	started := make(chan struct{}, 1)
	require.NoError(t, w.Handle(ctx, "q", func(context.Context, *Process) error {
		started <- struct{}{}
		return nil
	}, HandleOptions{Concurrency: 1}))
	base := recv(t, failed, 5*time.Second, "the failed dequeue")
	wait, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	require.NoError(t, k.clk.WaitTimers(wait, base+1), "the backoff's timer on the client's clock")
	k.clk.Advance(pacer.RetryMin)
	recv(t, started, 5*time.Second, "the task")
	settledQueue(t, c, "q")
}
