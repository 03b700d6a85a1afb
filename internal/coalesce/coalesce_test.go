package coalesce

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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

func TestCoalescerBatchesCallsBehindTheOneInFlight(t *testing.T) {
	f := newFakeSend()
	c := New(3, f.send)
	ctx := ctxT(t)
	var wg sync.WaitGroup
	results := make([]string, 6)
	call := func(i int) {
		defer wg.Done()
		out, err := c.Do(ctx, "q", i)
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
			n, _ := c.Queued("q")
			return n == i
		})
	}
	// Another queue is not held up by q.
	wg.Add(1)
	go func() {
		defer wg.Done()
		out, err := c.Do(ctx, "other", 5)
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
	c := New(10, f.send)
	ctx := ctxT(t)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = c.Do(ctx, "q", 0)
	}()
	recv(t, f.started, 5*time.Second, "first call sent")
	quit, cancel := context.WithCancel(ctx)
	gaveUp := make(chan error, 1)
	go func() {
		_, err := c.Do(quit, "q", 1)
		gaveUp <- err
	}()
	eventually(t, 5*time.Second, "call joined", func() bool {
		n, _ := c.Queued("q")
		return n == 1
	})
	cancel()
	require.True(t, errors.Is(recv(t, gaveUp, 5*time.Second, "gave up"), context.Canceled))
	stays := make(chan string, 1)
	go func() {
		out, _ := c.Do(ctx, "q", 2)
		stays <- out
	}()
	eventually(t, 5*time.Second, "call joined", func() bool {
		n, _ := c.Queued("q")
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

// then does not wait: with nothing in flight it sends at once and calls
// back before it returns; behind a call in flight its item joins the next
// batch, and the goroutine that sends that batch calls back, with the
// output, or with the context's error (the item left out) if the context
// ended before the batch went out.
func TestCoalescerThenCallsBackFromTheBatch(t *testing.T) {
	f := newFakeSend()
	c := New(10, f.send)
	ctx := ctxT(t)
	got := make(chan string, 3)
	callback := Func[string](func(out string, err error) { got <- outText(out, err) })
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		_, _ = c.Do(ctx, "q", 0)
	}()
	recv(t, f.started, 5*time.Second, "first call sent")
	quit, cancel := context.WithCancel(ctx)
	c.Then(ctx, "q", 1, callback)
	c.Then(quit, "q", 2, callback)
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
	c.Then(ctx, "q", 3, callback)
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
	c := New(10, f.send)
	ctx := ctxT(t)
	go func() { _, _ = c.Do(ctx, "q", 0) }()
	recv(t, f.started, 5*time.Second, "first call sent")
	doOut := make(chan string, 2)
	gaveUp, giveUp := context.WithCancel(ctx)
	go func() { doOut <- outText(c.Do(gaveUp, "q", 10)) }()
	eventually(t, 5*time.Second, "10 queued", func() bool { n, _ := c.Queued("q"); return n == 1 })
	got := make(chan string, 3)
	cb := Func[string](func(out string, err error) { got <- outText(out, err) })
	c.Then(ctx, "q", 11, cb)
	go func() { doOut <- outText(c.Do(ctx, "q", 12)) }()
	eventually(t, 5*time.Second, "12 queued", func() bool { n, _ := c.Queued("q"); return n == 3 })
	ended, end := context.WithCancel(ctx)
	c.Then(ended, "q", 13, cb)
	end()
	c.Then(ctx, "q", 14, cb)
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
	c := New(10, f.send)
	ctx := ctxT(t)
	calledBack, hold := make(chan string, 1), make(chan struct{})
	go c.Then(ctx, "q", 0, Func[string](func(out string, _ error) {
		calledBack <- out
		<-hold
	}))
	recv(t, f.started, 5*time.Second, "0 sent at once")
	doOut := make(chan string, 1)
	go func() { doOut <- outText(c.Do(ctx, "q", 1)) }()
	eventually(t, 5*time.Second, "1 queued", func() bool { n, _ := c.Queued("q"); return n == 1 })
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
	c := New(3, func(_ context.Context, _ string, items []int) ([]string, error) {
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
		out, err := c.Do(ctx, "q", i)
		if err != nil {
			out = err.Error()
		}
		results <- out
	}
	joined := func(n int) {
		eventually(t, 5*time.Second, "call joined", func() bool {
			items, _ := c.Queued("q")
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
	go func() { c.Close(); close(closed) }()
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

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// recv waits for a value on ch up to a deadline.
func recv[T any](t *testing.T, ch <-chan T, within time.Duration, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(within):
		t.Fatalf("not within %v: %s", within, what)
		var zero T
		return zero
	}
}

// eventually polls cond until it holds, up to a deadline.
func eventually(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", within, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
