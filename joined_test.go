package worqr

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/worqr/worqr/internal/engine"
	"github.com/worqr/worqr/internal/store"
)

func TestConcurrentEnqueuesAllArriveInOrderPerCaller(t *testing.T) {
	_, c, ctx := setup(t)
	const callers, each = 20, 25
	var wg sync.WaitGroup
	for g := range callers {
		wg.Go(func() {
			for i := range each {
				require.NoError(t, second(c.Enqueue(ctx, "q", fmt.Appendf(nil, "%02d-%02d", g, i))))
			}
		})
	}
	wg.Wait()
	tasks, err := c.Range(ctx, "q", 0, -1)
	require.NoError(t, err)
	require.Len(t, tasks, callers*each)
	next := make([]int, callers)
	for _, task := range tasks {
		var g, i int
		_, err := fmt.Sscanf(string(task), "%02d-%02d", &g, &i)
		require.NoError(t, err)
		require.Equal(t, next[g], i, "caller %d's tasks out of order", g)
		next[g]++
	}
}

// twoHolders starts two workers on queue q and hands them a task each of
// owners names (0 the first worker, 1 the second), in order: the tasks
// "a", "b", ... enqueued at once and dequeued one at a time.
func twoHolders(t *testing.T, c *Client, owners ...int) ([2]*Worker, []*Process) {
	t.Helper()
	ctx := context.Background()
	ws := [2]*Worker{newWorker(t, c, WorkerOptions{}), newWorker(t, c, WorkerOptions{})}
	tasks := make([][]byte, len(owners))
	for i := range tasks {
		tasks[i] = []byte{byte('a' + i)}
	}
	require.NoError(t, second(c.EnqueueBatch(ctx, "q", tasks)))
	for _, w := range ws {
		require.NoError(t, w.StartWork(ctx, "q", Events{}))
	}
	ps := make([]*Process, len(owners))
	for i, o := range owners {
		p, err := ws[o].Dequeue(ctx, "q")
		require.NoError(t, err)
		ps[i] = p
	}
	return ws, ps
}

// One finish script call settles processes of several workers; a process
// listed twice is finished once, and one that is not the worker's is lost.
func TestJoinedFinishSettlesEachProcessOnce(t *testing.T) {
	_, c, ctx := setup(t)
	ws, ps := twoHolders(t, c, 0, 1, 1)
	w1, p1, p2, p3 := ws[0], ps[0], ps[1], ps[2]
	stolen := newProcess(w1, "q", store.Proc{PID: p3.ID(), Owner: w1.ID(), Task: store.Task{ID: p3.TaskID(), Payload: string(p3.Task())}}) // w1 claims w2's process
	codes, err := engine.FinishJoined(ctx, c.core.Store, "q", []*engine.Proc{&p1.rec, &p2.rec, &p1.rec, &stolen.rec})
	require.NoError(t, err)
	require.Equal(t, []store.Outcome{store.WasActive, store.WasActive, store.NotOwned, store.NotOwned}, codes)
	procs, err := c.Processes(ctx, "q")
	require.NoError(t, err)
	require.Len(t, procs, 1)
	require.Equal(t, p3.ID(), procs[0].ID)
}

// One retry script call settles processes of several workers, each its
// own way (at once, delayed, with and without an error); a process listed
// twice is retried once, one that is not the worker's is lost, and a
// cancelled one is dropped.
func TestJoinedRetrySettlesEachProcessOnce(t *testing.T) {
	_, c, ctx := setup(t)
	ws, ps := twoHolders(t, c, 0, 1, 1, 0)
	w1, p1, p2, p3, p4 := ws[0], ps[0], ps[1], ps[2], ps[3]
	_, err := c.CancelTask(ctx, "q", p4.TaskID())
	require.NoError(t, err)
	ref := func(p *Process, d time.Duration, e string) store.RetryRef {
		return store.RetryRef{ProcRef: store.ProcRef{Worker: p.Owner(), PID: p.ID()}, Delay: d, Err: e}
	}
	stolen := ref(p3, 0, "")
	stolen.Worker = w1.ID() // w1 claims w2's process
	codes, err := c.core.Store.Retry(ctx, "q", []store.RetryRef{
		ref(p1, 0, "first"), ref(p2, time.Hour, "second"), ref(p1, 0, "again"), stolen, ref(p4, 0, "x"),
	})
	require.NoError(t, err)
	require.Equal(t, []store.Outcome{store.WasActive, store.WasActive, store.NotOwned, store.NotOwned, store.WasCancelled}, codes)
	procs, err := c.Processes(ctx, "q")
	require.NoError(t, err)
	require.Len(t, procs, 1)
	require.Equal(t, p3.ID(), procs[0].ID)
	assert.Equal(t, []string{"a"}, waiting(t, c, "q"), "p1's task is back; p4's was cancelled")
	delayed, err := c.core.Store.DelayedLen(ctx, "q")
	require.NoError(t, err)
	assert.EqualValues(t, 1, delayed, "p2's task waits an hour")
	again, err := w1.Dequeue(ctx, "q")
	require.NoError(t, err)
	assert.Equal(t, "first", again.LastError())
	assert.Equal(t, 2, again.Attempt())
}

// Retry calls that arrive while one is in flight go out together, in one
// script call, each caller getting its own outcome.
func TestOverlappingRetriesAreJoined(t *testing.T) {
	_, c, ctx := setup(t)
	w := newWorker(t, c, WorkerOptions{})
	require.NoError(t, w.StartWork(ctx, "q", Events{}))
	const n = 20
	enqueueNumbered(t, c, "q", n)
	ps := dequeueAll(t, w, "q", n)
	var calls atomic.Int64
	first, release := make(chan struct{}), make(chan struct{})
	c.core.Store.SetFault(func(_ context.Context, op store.Op, _ string) error {
		if op == store.OpRequeue && calls.Add(1) == 1 {
			close(first)
			<-release
		}
		return nil
	})
	errs := make(chan error, n)
	go func() { errs <- ps[0].Retry(ctx, 0, errors.New("e0")) }()
	<-first
	for _, p := range ps[1:] {
		go func() { errs <- p.Retry(ctx, 0, errors.New("e")) }()
	}
	eventually(t, 5*time.Second, "the other retries wait behind the first", func() bool {
		items, _ := c.core.Retries.Queued("q")
		return items == n-1
	})
	close(release)
	for range n {
		require.NoError(t, recv(t, errs, 5*time.Second, "retry returned"))
	}
	assert.EqualValues(t, 2, calls.Load(), "one call, then one for the rest")
	assert.Len(t, waiting(t, c, "q"), n)
}

// A process says whether its task is plain as its store record does, so
// that a retry of it at once goes to retry_plain.lua.
func TestProcessCarriesPlain(t *testing.T) {
	for _, plain := range []bool{true, false} {
		p := newProcessAt(nil, "q", store.Proc{PID: "1", Owner: "w", Plain: plain, Task: store.Task{ID: "a"}}, time.Now())
		require.Equal(t, plain, p.rec.Plain)
	}
}
