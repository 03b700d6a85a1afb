package worqr

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/worqr/worqr/internal/store"
)

// fakeSend records the batches a coalescer sends and holds each until the
// test releases it.
type fakeSend struct {
	mu      sync.Mutex
	batches [][]int
	started chan struct{}
	release chan struct{}
}

func newFakeSend() *fakeSend {
	return &fakeSend{started: make(chan struct{}, 100), release: make(chan struct{})}
}

func (f *fakeSend) send(_ context.Context, _ string, items []int) ([]string, error) {
	f.mu.Lock()
	f.batches = append(f.batches, slices.Clone(items))
	f.mu.Unlock()
	f.started <- struct{}{}
	<-f.release
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = fmt.Sprint("done ", it)
	}
	return out, nil
}

// queued counts the calls (items) and the batches of queue that wait
// behind the one in flight in c.
func queued[I, O any](c *coalescer[I, O], queue string) (items, batches int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.queues[queue]
	if p == nil {
		return 0, 0
	}
	for _, b := range p.batches {
		items += len(b.items)
	}
	return items, len(p.batches)
}

func TestCoalescerBatchesCallsBehindTheOneInFlight(t *testing.T) {
	f := newFakeSend()
	c := newCoalescer(3, f.send)
	ctx := ctxT(t)
	var wg sync.WaitGroup
	results := make([]string, 6)
	call := func(i int) {
		defer wg.Done()
		out, err := c.do(ctx, "q", i)
		if err == nil {
			results[i] = out
		}
	}
	wg.Add(1)
	go call(0)
	recv(t, f.started, 5*time.Second, "first call sent alone")
	for i := 1; i <= 4; i++ {
		wg.Add(1)
		go call(i)
		// Wait until the call has joined a batch, so the order is known.
		eventually(t, 5*time.Second, "call joined", func() bool {
			n, _ := queued(c, "q")
			return n == i
		})
	}
	// Another queue is not held up by q.
	wg.Add(1)
	go func() {
		defer wg.Done()
		out, err := c.do(ctx, "other", 5)
		if err == nil {
			results[5] = out
		}
	}()
	recv(t, f.started, 5*time.Second, "other queue sent at once")
	close(f.release)
	wg.Wait()
	for i, r := range results {
		require.Equal(t, fmt.Sprint("done ", i), r)
	}
	slices.SortFunc(f.batches, func(a, b []int) int { return a[0] - b[0] })
	require.Equal(t, [][]int{{0}, {1, 2, 3}, {4}, {5}}, f.batches, "in arrival order, at most 3 a batch")
	// The goroutine that sent the last batch forgets the queue after its
	// callers have been answered.
	eventually(t, 5*time.Second, "idle queues are forgotten", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return len(c.queues) == 0
	})
}

func TestCoalescerLeavesOutCallersThatGaveUp(t *testing.T) {
	f := newFakeSend()
	c := newCoalescer(10, f.send)
	ctx := ctxT(t)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = c.do(ctx, "q", 0)
	}()
	recv(t, f.started, 5*time.Second, "first call sent")
	quit, cancel := context.WithCancel(ctx)
	gaveUp := make(chan error, 1)
	go func() {
		_, err := c.do(quit, "q", 1)
		gaveUp <- err
	}()
	eventually(t, 5*time.Second, "call joined", func() bool {
		n, _ := queued(c, "q")
		return n == 1
	})
	cancel()
	require.True(t, errors.Is(recv(t, gaveUp, 5*time.Second, "gave up"), context.Canceled))
	stays := make(chan string, 1)
	go func() {
		out, _ := c.do(ctx, "q", 2)
		stays <- out
	}()
	eventually(t, 5*time.Second, "call joined", func() bool {
		n, _ := queued(c, "q")
		return n == 2 // in one batch: it holds up to 10
	})
	close(f.release)
	require.Equal(t, "done 2", recv(t, stays, 5*time.Second, "kept call answered"))
	<-done
	eventually(t, 5*time.Second, "queue forgotten", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return len(c.queues) == 0
	})
	f.mu.Lock()
	defer f.mu.Unlock()
	require.Equal(t, [][]int{{0}, {2}}, f.batches, "the caller that gave up was left out")
}

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
	codes, err := c.finishJoined(ctx, "q", []*Process{p1, p2, p1, stolen})
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
	codes, err := c.store.Retry(ctx, "q", []store.RetryRef{
		ref(p1, 0, "first"), ref(p2, time.Hour, "second"), ref(p1, 0, "again"), stolen, ref(p4, 0, "x"),
	})
	require.NoError(t, err)
	require.Equal(t, []store.Outcome{store.WasActive, store.WasActive, store.NotOwned, store.NotOwned, store.WasCancelled}, codes)
	procs, err := c.Processes(ctx, "q")
	require.NoError(t, err)
	require.Len(t, procs, 1)
	require.Equal(t, p3.ID(), procs[0].ID)
	assert.Equal(t, []string{"a"}, waiting(t, c, "q"), "p1's task is back; p4's was cancelled")
	delayed, err := c.store.DelayedLen(ctx, "q")
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
	c.store.SetFault(func(_ context.Context, op store.Op, _ string) error {
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
		items, _ := queued(c.retries, "q")
		return items == n-1
	})
	close(release)
	for range n {
		require.NoError(t, recv(t, errs, 5*time.Second, "retry returned"))
	}
	assert.EqualValues(t, 2, calls.Load(), "one call, then one for the rest")
	assert.Len(t, waiting(t, c, "q"), n)
}

// then does not wait: with nothing in flight it sends at once and calls
// back before it returns; behind a call in flight its item joins the next
// batch, and the goroutine that sends that batch calls back, with the
// output, or with the context's error (the item left out) if the context
// ended before the batch went out.
func TestCoalescerThenCallsBackFromTheBatch(t *testing.T) {
	f := newFakeSend()
	c := newCoalescer(10, f.send)
	ctx := ctxT(t)
	got := make(chan string, 3)
	callback := func(out string, err error) { got <- outText(out, err) }
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		_, _ = c.do(ctx, "q", 0)
	}()
	recv(t, f.started, 5*time.Second, "first call sent")
	quit, cancel := context.WithCancel(ctx)
	c.then(ctx, "q", 1, callback)
	c.then(quit, "q", 2, callback)
	cancel()
	select {
	case g := <-got:
		t.Fatalf("called back (%s) before the batch went out", g)
	default:
	}
	close(f.release)
	results := []string{recv(t, got, 5*time.Second, "first callback"), recv(t, got, 5*time.Second, "second callback")}
	assert.Equal(t, []string{"done 1", "error: context canceled"}, results)
	wg.Wait()
	assert.Equal(t, [][]int{{0}, {1}}, f.batches, "the item whose context ended left out")

	// Nothing in flight: sent at once, called back before then returns.
	eventually(t, 5*time.Second, "nothing in flight", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return len(c.queues) == 0
	})
	c.then(ctx, "q", 3, callback)
	select {
	case g := <-got:
		assert.Equal(t, "done 3", g)
	default:
		t.Fatal("then returned before calling back with nothing in flight")
	}
}

// do and then callers mixed in one batch, a do that gave up first and a
// then whose context ended: each item gets its own output.
func TestCoalescerMixesDoAndThenInOneBatch(t *testing.T) {
	f := newFakeSend()
	c := newCoalescer(10, f.send)
	ctx := ctxT(t)
	go func() { _, _ = c.do(ctx, "q", 0) }()
	recv(t, f.started, 5*time.Second, "first call sent")
	doOut := make(chan string, 2)
	gaveUp, giveUp := context.WithCancel(ctx)
	go func() { doOut <- outText(c.do(gaveUp, "q", 10)) }()
	eventually(t, 5*time.Second, "10 queued", func() bool { n, _ := queued(c, "q"); return n == 1 })
	got := make(chan string, 3)
	cb := func(out string, err error) { got <- outText(out, err) }
	c.then(ctx, "q", 11, cb)
	go func() { doOut <- outText(c.do(ctx, "q", 12)) }()
	eventually(t, 5*time.Second, "12 queued", func() bool { n, _ := queued(c, "q"); return n == 3 })
	ended, end := context.WithCancel(ctx)
	c.then(ended, "q", 13, cb)
	end()
	c.then(ctx, "q", 14, cb)
	giveUp()
	require.Equal(t, "error: context canceled", recv(t, doOut, 5*time.Second, "10 gave up"))
	close(f.release)
	require.Equal(t, "done 12", recv(t, doOut, 5*time.Second, "12"))
	var outs []string
	for range 3 {
		outs = append(outs, recv(t, got, 5*time.Second, "callback"))
	}
	require.Equal(t, []string{"done 11", "error: context canceled", "done 14"}, outs)
	f.mu.Lock()
	defer f.mu.Unlock()
	require.Equal(t, [][]int{{0}, {11, 12, 14}}, f.batches)
}

// A then sent at once, with nothing in flight, calls back before the
// batches that queued up behind it go out, as one that waited in a batch
// does: what a batch behind finds (a Finish that finds the queue's lease
// gone fences the worker) must not overtake the outcome of the one before
// (which a fence would otherwise report as lost, though it succeeded).
func TestCoalescerThenSentAtOnceCallsBackBeforeTheBatchesBehind(t *testing.T) {
	f := newFakeSend()
	c := newCoalescer(10, f.send)
	ctx := ctxT(t)
	calledBack, hold := make(chan string, 1), make(chan struct{})
	go c.then(ctx, "q", 0, func(out string, err error) {
		calledBack <- out
		<-hold
	})
	recv(t, f.started, 5*time.Second, "0 sent at once")
	doOut := make(chan string, 1)
	go func() { doOut <- outText(c.do(ctx, "q", 1)) }()
	eventually(t, 5*time.Second, "1 queued", func() bool { n, _ := queued(c, "q"); return n == 1 })
	close(f.release)
	require.Equal(t, "done 0", recv(t, calledBack, 5*time.Second, "0 called back"))
	// Sending the batch behind is a goroutine's work away: were it not held
	// until the callback returns, it would go out well within this.
	select {
	case <-f.started:
		t.Fatal("the batch behind went out while the callback before it ran")
	case <-time.After(200 * time.Millisecond):
	}
	close(hold)
	recv(t, f.started, 5*time.Second, "the batch behind sent once the callback returned")
	require.Equal(t, "done 1", recv(t, doOut, 5*time.Second, "1"))
	f.mu.Lock()
	defer f.mu.Unlock()
	require.Equal(t, [][]int{{0}, {1}}, f.batches)
}

// outText is an output, or its error, as one string to compare.
func outText(out string, err error) string {
	if err != nil {
		return "error: " + err.Error()
	}
	return out
}

// The goroutine that sends the batches queued behind one is tracked:
// close waits for it; once closed, the caller whose batch returned sends
// the ones behind itself.
func TestCoalescerCloseWaitsForItsSender(t *testing.T) {
	sent := make(chan []int, 10)
	gate := make(chan struct{})
	c := newCoalescer(3, func(_ context.Context, _ string, items []int) ([]string, error) {
		sent <- slices.Clone(items)
		<-gate
		out := make([]string, len(items))
		for i, it := range items {
			out[i] = fmt.Sprint("done ", it)
		}
		return out, nil
	})
	ctx := ctxT(t)
	results := make(chan string, 10)
	call := func(i int) {
		out, err := c.do(ctx, "q", i)
		if err != nil {
			out = err.Error()
		}
		results <- out
	}
	joined := func(n int) {
		eventually(t, 5*time.Second, "call joined", func() bool {
			items, _ := queued(c, "q")
			return items == n
		})
	}

	go call(0)
	require.Equal(t, []int{0}, recv(t, sent, 5*time.Second, "first batch"))
	go call(1)
	joined(1)
	gate <- struct{}{}
	require.Equal(t, "done 0", recv(t, results, 5*time.Second, "first answered"))
	require.Equal(t, []int{1}, recv(t, sent, 5*time.Second, "the batch behind, sent by the sender"))
	closed := make(chan struct{})
	go func() { c.close(); close(closed) }()
	select {
	case <-closed:
		t.Fatal("close returned while the sender was sending")
	case <-time.After(50 * time.Millisecond):
	}
	gate <- struct{}{}
	recv(t, closed, 5*time.Second, "close returned once the sender did")
	require.Equal(t, "done 1", recv(t, results, 5*time.Second, "second answered"))

	go call(2)
	require.Equal(t, []int{2}, recv(t, sent, 5*time.Second, "sent at once"))
	go call(3)
	joined(1)
	gate <- struct{}{}
	require.Equal(t, []int{3}, recv(t, sent, 5*time.Second, "the batch behind, sent by the caller itself"))
	gate <- struct{}{}
	assert.ElementsMatch(t, []string{"done 2", "done 3"}, []string{
		recv(t, results, 5*time.Second, "answered"), recv(t, results, 5*time.Second, "answered"),
	})
}
