package worqr

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Bad input and hostile conditions: Redis that is not there, goes away or
// flaps; calls on closed clients and workers, with cancelled contexts or
// nonsense arguments. Every one must give a typed error, never a panic,
// a hang or a leaked goroutine.

// closedPort is a local address nothing listens on.
func closedPort(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}

func TestNewWithRedisUnreachable(t *testing.T) {
	t.Parallel()
	addr := closedPort(t)
	for _, a := range []string{addr, "redis://" + addr + "/0", "redis://user:pass@" + addr} {
		c, err := New(Options{Addr: a})
		assert.Nil(t, c)
		assert.ErrorIs(t, err, ErrUnavailable, a)
		assert.False(t, errors.Is(err, ErrInvalidOptions), a)
		saysWorqrOnce(t, err, a)
		if err != nil {
			assert.NotContains(t, err.Error(), "pass", "the password is not said")
		}
	}
}

// With Redis gone, every call that needs it fails with ErrUnavailable:
// not a hang, not a bare network error. State changes fail at once (a
// retried one could run twice); reads are retried by rueidis until their
// context's deadline is near, then fail the same way. Once Redis is back
// everything works again.
func TestCallsWhileRedisIsDown(t *testing.T) {
	t.Parallel()
	px, c, direct, ctx := setupBehindProxy(t)
	w := newWorker(t, c, fast)
	require.NoError(t, w.StartWork(ctx, "q", Events{}))
	require.NoError(t, second(direct.Enqueue(ctx, "q", []byte("x"))))
	held := dequeueAll(t, w, "q", 1)[0]

	px.cut()
	const within = 3 * time.Second
	calls := map[string]func(context.Context) error{
		"Enqueue":     func(ctx context.Context) error { return second(c.Enqueue(ctx, "q", []byte("y"))) },
		"Cancel":      func(ctx context.Context) error { _, err := c.Cancel(ctx, "q", []byte("y")); return err },
		"CancelTask":  func(ctx context.Context) error { return second(c.CancelTask(ctx, "q", "1")) },
		"DeleteQueue": func(ctx context.Context) error { _, err := c.DeleteQueue(ctx, "other"); return err },
		"Queues":      func(ctx context.Context) error { _, err := c.Queues(ctx); return err },
		"QueueLen":    func(ctx context.Context) error { _, err := c.QueueLen(ctx, "q"); return err },
		"Range":       func(ctx context.Context) error { _, err := c.Range(ctx, "q", 0, -1); return err },
		"Processes":   func(ctx context.Context) error { _, err := c.Processes(ctx, "q"); return err },
		"Stats":       func(ctx context.Context) error { _, err := c.Stats(ctx, "q", StatsOptions{}); return err },
		"Workers":     func(ctx context.Context) error { _, err := c.Workers(ctx); return err },
		"Check":       func(ctx context.Context) error { _, err := c.Check(ctx, CheckOptions{Repair: true}); return err },
		"NewWorker":   func(ctx context.Context) error { _, err := c.NewWorker(ctx, WorkerOptions{}); return err },
		"StartWork":   func(ctx context.Context) error { return w.StartWork(ctx, "new", Events{}) },
		"Dequeue":     func(ctx context.Context) error { _, err := w.Dequeue(ctx, "q"); return err },
		"Process.Status": func(ctx context.Context) error {
			err := held.Status(ctx)
			if errors.Is(err, ErrProcessLost) {
				// The worker fenced itself first: also right.
				return fmt.Errorf("%w (%w)", err, ErrUnavailable)
			}
			return err
		},
	}
	var wg sync.WaitGroup
	for name, call := range calls {
		wg.Go(func() {
			cctx, cancel := context.WithTimeout(ctx, within)
			defer cancel()
			start := time.Now()
			err := call(cctx)
			if errors.Is(err, ErrWorkerFenced) && (name == "StartWork" || name == "Dequeue") {
				return // the worker fenced itself first: also right
			}
			assert.ErrorIs(t, err, ErrUnavailable, name)
			saysWorqrOnce(t, err, name)
			// ErrUnavailable, not the deadline's error, is what says it
			// gave up in time; this only says it did not hang (a stall of
			// the test process may carry it past the deadline itself).
			assert.Less(t, time.Since(start), within+time.Second, "%s returned by about its deadline", name)
		})
	}
	wg.Wait()

	px.restore()
	require.NoError(t, afterOutage(t, func() error { return second(c.Enqueue(ctx, "q", []byte("after"))) }))
	requireCleanEventually(t, c)
}

// A consistency check against a Redis that does not answer at all (a
// dial that hangs) fails as unavailable, not with the deadline, which
// rueidis gives a try under way as it passes: the check stops a little
// before the caller's deadline.
func TestCheckOfAHungRedisFailsAsUnavailable(t *testing.T) {
	t.Parallel()
	px, c, _, ctx := setupBehindProxy(t)
	_, err := c.Queues(ctx) // connected
	require.NoError(t, err)
	px.hang()
	const within = time.Second
	cctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	start := time.Now()
	_, err = c.Check(cctx, CheckOptions{})
	// Without the margin the check fails with the deadline's error, not
	// ErrUnavailable. The time only says it did not hang: the margin is
	// 100 ms, which a stall of a loaded machine may eat, and such a stall
	// (seen: 3.3 s under -race) may hold the return too.
	assert.ErrorIs(t, err, ErrUnavailable)
	assert.Less(t, time.Since(start), within+3*time.Second, "returned by about its deadline")
	px.restore()
}

// A worker running handlers through a Redis that flaps, short cuts and
// one longer than its TTL (it fences itself and registers again), keeps
// taking work by itself, loses no task, and is left with no more
// goroutines than it started with. Not parallel: it counts goroutines.
// The outages last on the worker's clock, a Fake one on miniredis, which
// the test moves beat by beat.
func TestWorkerRidesOutFlappingRedis(t *testing.T) {
	k := setupTimed(t, nil)
	direct, ctx := k.c, k.ctx
	px := newProxy(t)
	c := k.clientVia(px)
	k.beatsOf(c)
	var mu sync.Mutex
	done := make(map[string]int)
	ran := make(chan struct{}, 1)
	handler := func(ctx context.Context, p *Process) error {
		mu.Lock()
		done[string(p.Task())]++
		mu.Unlock()
		select {
		case ran <- struct{}{}:
		default:
		}
		return nil
	}
	w := newWorker(t, c, fast)
	for _, q := range []string{"a", "b"} {
		require.NoError(t, w.Handle(ctx, q, handler, HandleOptions{Concurrency: 4}))
	}
	total := 0
	enqueue := func(n int) {
		for range n {
			q := []string{"a", "b"}[total%2]
			require.NoError(t, second(direct.Enqueue(ctx, q, fmt.Appendf(nil, "task-%04d", total))))
			total++
		}
	}
	handled := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(done)
	}
	// allHandled waits for every task enqueued to be handled within 15 s
	// of the worker's clock: while no handler runs, time passes, beat by
	// beat (the renewals find the processes whose dequeue replies were
	// lost; the retries of dequeues that failed come due).
	allHandled := func(what string) {
		t.Helper()
		for passed := time.Duration(0); handled() != total; {
			select {
			case <-ran:
			case <-time.After(20 * time.Millisecond):
				if passed >= 15*time.Second {
					t.Fatalf("%s: %d of %d tasks handled", what, handled(), total)
				}
				k.run(fast.RenewInterval)
				passed += fast.RenewInterval
			}
		}
	}
	enqueue(20)
	allHandled("first tasks handled")
	k.run(2 * fast.RenewInterval) // a renewal and a reclaim pass, so every goroutine has started
	baseline := worqrGoroutines()

	cycle := func(down time.Duration) {
		px.cut()
		enqueue(10)
		k.run(down)
		px.restore()
		enqueue(10)
		allHandled(fmt.Sprintf("tasks handled after a %v outage", down))
	}
	for range 4 {
		cycle(200 * time.Millisecond)
	}
	id := w.ID()
	cycle(2 * fast.TTL) // the worker fences itself and registers again
	assert.NotEqual(t, id, w.ID(), "registered again under a new id")
	cycle(100 * time.Millisecond)

	eventually(t, 10*time.Second, "goroutines back to where they were", func() bool {
		return worqrGoroutines() <= baseline
	})
	requireCleanEventually(t, direct)
}

// requireCleanEventually waits for a check to find nothing: a worker that
// fenced itself leaves its old id for its own reclaim's next pass.
func requireCleanEventually(t *testing.T, c *Client) {
	t.Helper()
	eventually(t, 10*time.Second, "a clean check", func() bool {
		rep, err := c.Check(context.Background(), CheckOptions{})
		require.NoError(t, err)
		return rep.Problems() == 0
	})
}

// Every call on a closed client, and on its closed workers and their
// processes, gives a typed error; Close twice is fine.
func TestCallsOnClosedClientAndWorker(t *testing.T) {
	t.Parallel()
	b, c, ctx := setup(t)
	w := newWorker(t, c, WorkerOptions{})
	require.NoError(t, w.StartWork(ctx, "q", Events{}))
	enqueueNumbered(t, c, "q", 2)
	p := dequeueAll(t, w, "q", 1)[0]

	// A closed worker of an open client.
	closedW := newWorker(t, b.client(), WorkerOptions{})
	require.NoError(t, closedW.StartWork(ctx, "q", Events{}))
	cp := dequeueAll(t, closedW, "q", 1)[0]
	require.NoError(t, closedW.Close(ctx))
	h := func(context.Context, *Process) error { return nil }
	for name, err := range map[string]error{
		"StartWork": closedW.StartWork(ctx, "r", Events{}),
		"StopWork":  closedW.StopWork(ctx, "q"),
		"Dequeue":   second(closedW.Dequeue(ctx, "q")),
		"DequeueN":  second(closedW.DequeueN(ctx, "q", 3)),
		"Handle":    closedW.Handle(ctx, "r", h, HandleOptions{}),
	} {
		assert.ErrorIs(t, err, ErrWorkerClosed, name)
		saysWorqrOnce(t, err, name)
	}
	assert.NoError(t, closedW.Close(ctx))
	assert.NoError(t, closedW.Shutdown(ctx))
	assert.Empty(t, closedW.Queues())
	<-cp.Done()
	assert.ErrorIs(t, cp.Err(), ErrProcessLost)
	for name, err := range map[string]error{"Finish": cp.Finish(ctx), "Requeue": cp.Requeue(ctx), "Status": cp.Status(ctx)} {
		assert.ErrorIs(t, err, ErrProcessLost, name)
		saysWorqrOnce(t, err, name)
	}

	require.NoError(t, c.Close(ctx))
	require.NoError(t, c.Close(ctx), "second Close")
	for name, err := range everyCall(ctx, c, w, p, h, "x", CheckOptions{}) {
		assert.ErrorIs(t, err, ErrClientClosed, name)
		saysWorqrOnce(t, err, name)
	}
	assert.NoError(t, w.Close(ctx), "the client closed it already")
}

// everyCall makes every call of the client, the worker w (on queue "q",
// and "r" for new work) and the process p, in this order, and returns
// their errors by name. cancel is the task Cancel asks for.
func everyCall(ctx context.Context, c *Client, w *Worker, p *Process, h Handler, cancel string, check CheckOptions) map[string]error {
	return map[string]error{
		"Enqueue":         second(c.Enqueue(ctx, "q", []byte("x"))),
		"EnqueueBatch":    second(c.EnqueueBatch(ctx, "q", [][]byte{[]byte("x")})),
		"Cancel":          second(c.Cancel(ctx, "q", []byte(cancel))),
		"CancelTask":      second(c.CancelTask(ctx, "q", "1")),
		"DeleteQueue":     second(c.DeleteQueue(ctx, "q")),
		"Queues":          second(c.Queues(ctx)),
		"QueueLen":        second(c.QueueLen(ctx, "q")),
		"Peek":            second(c.Peek(ctx, "q")),
		"Range":           second(c.Range(ctx, "q", 0, -1)),
		"Tasks":           second(c.Tasks(ctx, "q", 0, -1)),
		"Delayed":         second(c.Delayed(ctx, "q", 0, -1)),
		"DeadLetters":     second(c.DeadLetters(ctx, "q", 0, 10)),
		"TaskResult":      second(c.TaskResult(ctx, "q", "1")),
		"Wait":            second(c.Wait(ctx, "q", "1")),
		"Processes":       second(c.Processes(ctx, "q")),
		"Workers":         second(c.Workers(ctx)),
		"WorkerQueues":    second(c.WorkerQueues(ctx, w.ID())),
		"NewWorker":       second(c.NewWorker(ctx, WorkerOptions{})),
		"Check":           second(c.Check(ctx, check)),
		"StartWork":       w.StartWork(ctx, "r", Events{}),
		"StopWork":        w.StopWork(ctx, "q"),
		"Dequeue":         second(w.Dequeue(ctx, "q")),
		"Handle":          w.Handle(ctx, "r", h, HandleOptions{}),
		"Process.Requeue": p.Requeue(ctx),
		"Process.Status":  p.Status(ctx),
	}
}

// A cancelled context fails every call with context.Canceled and changes
// nothing: the same calls then succeed with a live context.
func TestCancelledContexts(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	w := newWorker(t, c, WorkerOptions{})
	require.NoError(t, w.StartWork(ctx, "q", Events{}))
	enqueueNumbered(t, c, "q", 2)
	p := dequeueAll(t, w, "q", 1)[0]
	dead, cancel := context.WithCancel(ctx)
	cancel()
	h := func(context.Context, *Process) error { return nil }
	calls := everyCall(dead, c, w, p, h, "t0001", CheckOptions{Repair: true})
	calls["Finish"] = p.Finish(dead)
	for name, err := range calls {
		assert.ErrorIs(t, err, context.Canceled, name)
		saysWorqrOnce(t, err, name)
	}
	assert.Equal(t, []string{"t0001"}, waiting(t, c, "q"), "nothing changed")
	assert.Equal(t, []string{"q"}, w.Queues())
	require.NoError(t, p.Status(ctx))
	require.NoError(t, p.Finish(ctx))
	qs, err := c.Queues(ctx)
	require.NoError(t, err)
	assert.Equal(t, []string{"q"}, qs)

	// Shutdown with a context already over has no grace period, and still
	// gives the worker's tasks back and deregisters it. (No handler ran
	// over the grace period: there is none.)
	held := dequeueAll(t, w, "q", 1)[0]
	require.NoError(t, w.Shutdown(dead))
	<-held.Done()
	assert.Equal(t, []string{"t0001"}, waiting(t, c, "q"))
	ws, err := c.Workers(ctx)
	require.NoError(t, err)
	assert.Empty(t, ws)
}

// Arguments that make no sense give ErrInvalidOptions, or harmless
// answers, never a panic.
func TestNonsenseArguments(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	w := newWorker(t, c, WorkerOptions{})
	require.NoError(t, w.StartWork(ctx, "q", Events{}))
	enqueueNumbered(t, c, "q", 3)

	assert.ErrorIs(t, w.Handle(ctx, "h", nil, HandleOptions{}), ErrInvalidOptions)
	assert.ErrorIs(t, w.Handle(ctx, "h", func(context.Context, *Process) error { return nil }, HandleOptions{Concurrency: -1}), ErrInvalidOptions)
	assert.NotContains(t, w.Queues(), "h", "a refused Handle serves nothing")
	for _, n := range []int{0, -1, math.MinInt} {
		_, err := w.DequeueN(ctx, "q", n)
		assert.ErrorIs(t, err, ErrInvalidOptions, n)
	}
	_, err := c.NewWorker(ctx, WorkerOptions{TTL: -time.Second})
	assert.ErrorIs(t, err, ErrInvalidOptions)
	_, err = c.NewWorker(ctx, WorkerOptions{RenewInterval: -time.Second})
	assert.ErrorIs(t, err, ErrInvalidOptions)
	_, err = New(Options{Redis: c.core.Redis, MaxTaskSize: -1})
	assert.ErrorIs(t, err, ErrInvalidOptions)

	for _, r := range [][2]int64{{0, math.MaxInt64}, {math.MinInt64, math.MaxInt64}, {5, 2}, {-1, -3}, {math.MaxInt64, math.MinInt64}} {
		_, err := c.Range(ctx, "q", r[0], r[1])
		assert.NoError(t, err, r)
	}
	all, err := c.Range(ctx, "q", 0, math.MaxInt64)
	require.NoError(t, err)
	assert.Len(t, all, 3)
	require.NoError(t, second(c.EnqueueBatch(ctx, "q", nil)))
	require.NoError(t, second(c.EnqueueBatch(ctx, "q", [][]byte{nil, {}})))
	qs, err := c.WorkerQueues(ctx, "")
	require.NoError(t, err)
	assert.Empty(t, qs)
	ps, err := w.DequeueN(ctx, "q", math.MaxInt32)
	require.NoError(t, err)
	assert.Len(t, ps, 5, "a huge count takes what there is")
}

// second drops the value of a (value, error) pair.
func second[T any](_ T, err error) error { return err }

// A cancel or delete event that Redis's state does not back (forged by a
// client allowed to publish on the queue's channel, or stale) ends the
// handler, but must not lose its task: it goes back to the queue.
func TestForgedEventsLoseNoTask(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	w := newWorker(t, c, WorkerOptions{})
	causes := make(chan error, 10)
	var mu sync.Mutex
	runs := make(map[string]int)
	require.NoError(t, w.Handle(ctx, "q", func(hctx context.Context, p *Process) error {
		mu.Lock()
		runs[string(p.Task())]++
		first := runs[string(p.Task())] == 1
		mu.Unlock()
		if !first {
			return nil
		}
		<-hctx.Done()
		causes <- context.Cause(hctx)
		return nil // done, as far as it knows
	}, HandleOptions{}))
	for kind, want := range map[string]error{
		"delete": ErrQueueDeleted,
		"cancel": ErrTaskCancelled,
	} {
		mu.Lock()
		clear(runs)
		mu.Unlock()
		id, err := c.Enqueue(ctx, "q", []byte("victim"))
		require.NoError(t, err)
		forged := "d7fffffffffffffff"
		if kind == "cancel" {
			forged = "c" + id
		}
		eventually(t, 5*time.Second, "handler running", func() bool {
			mu.Lock()
			defer mu.Unlock()
			return runs["victim"] == 1
		})
		require.NoError(t, c.core.Store.Publish(ctx, "q", forged))
		assert.ErrorIs(t, recv(t, causes, 5*time.Second, "the forged event ends the handler"), want, forged)
		eventually(t, 5*time.Second, "the task is run again, not lost: "+forged, func() bool {
			mu.Lock()
			defer mu.Unlock()
			return runs["victim"] == 2
		})
	}
}

// worqrGoroutines counts the goroutines running worqr's own code (not the
// test's, nor the handler goroutines kept for reuse), so that other tests' and rueidis's goroutines, which come and go
// on their own schedule, do not blur a leak check.
func worqrGoroutines() int {
	buf := make([]byte, 1<<22)
	buf = buf[:runtime.Stack(buf, true)]
	n := 0
	for _, g := range strings.Split(string(buf), "\n\n") {
		// Handler goroutines are kept for reuse, up to the concurrency
		// limit (a pool's, for HandleQueues): bounded, so not a leak.
		if strings.Contains(g, "github.com/worqr/worqr.(") && !strings.Contains(g, "_test.go") &&
			!strings.Contains(g, "github.com/worqr/worqr.serve(") {
			n++
		}
	}
	return n
}
