package worqr

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/worqr/worqr/internal/engine"
	"github.com/worqr/worqr/internal/store"
)

// heldFinishes runs the Handle runtime on queue q of c (2 slots, a
// handler that succeeds at once) with its first Finish held in the store
// until release is closed, and two tasks enqueued: the other task's
// Finish waits behind it in the coalescer, to go out in the next batch,
// from the coalescer's goroutine, when the first returns. later runs
// before each store call for a finish after the first (n counts them from
// 2). It returns once the second Finish is queued.
func heldFinishes(t *testing.T, c *Client, w *Worker, later func(ctx context.Context, n int64) error) (release chan struct{}, runs *atomic.Int64) {
	t.Helper()
	ctx := ctxT(t)
	entered, release := make(chan struct{}), make(chan struct{})
	var calls atomic.Int64
	c.core.Store.SetFault(func(ctx context.Context, op store.Op, _ string) error {
		if op != store.OpFinish {
			return nil
		}
		n := calls.Add(1)
		if n == 1 {
			close(entered)
			<-release
			return nil
		}
		return later(ctx, n)
	})
	runs = new(atomic.Int64)
	require.NoError(t, w.Handle(ctx, "q", func(context.Context, *Process) error { runs.Add(1); return nil }, HandleOptions{Concurrency: 2}))
	require.NoError(t, second(c.Enqueue(ctx, "q", []byte("a"))))
	require.NoError(t, second(c.Enqueue(ctx, "q", []byte("b"))))
	recv(t, entered, 5*time.Second, "first finish sent")
	eventually(t, 5*time.Second, "second finish queued behind it", func() bool {
		n, _ := c.core.Finishes.Queued("q")
		return n == 1
	})
	return release, runs
}

// runnerOf is the Handle runtime serving queue on w.
func runnerOf(w *Worker, queue string) *engine.Runtime {
	w.core.Lock()
	defer w.core.Unlock()
	return w.core.Served()[queue].Runtime
}

// outcomesAre checks that the observer saw each task end once, with want.
func outcomesAre(t *testing.T, obs *observer, want map[Outcome]int) {
	t.Helper()
	got := make(map[Outcome]int)
	for id, os := range obs.outcomes() {
		assert.Len(t, os, 1, "task %s ended more than once", id)
		for _, o := range os {
			got[o]++
		}
	}
	assert.Equal(t, want, got)
}

// A handler's Finish is written after its goroutine went back for work,
// but StopWork (and shutdown) still wait for it: the handler is not done
// until its outcome is recorded, so no task is given back while its
// Finish is in flight.
func TestStopWorkWaitsForAFinishInFlight(t *testing.T) {
	t.Parallel()
	_, c, obs, ctx := observed(t)
	w := newWorker(t, c, WorkerOptions{})
	release, _ := heldFinishes(t, c, w, func(context.Context, int64) error { return nil })
	stopped := make(chan error, 1)
	go func() { stopped <- w.StopWork(ctx, "q") }()
	select {
	case err := <-stopped:
		t.Fatalf("StopWork returned (%v) while finishes were in flight", err)
	case <-time.After(200 * time.Millisecond):
	}
	close(release)
	require.NoError(t, recv(t, stopped, 5*time.Second, "StopWork returned"))
	// Recorded before StopWork returned, not after.
	outcomesAre(t, obs, map[Outcome]int{OutcomeSucceeded: 2})
	settledQueue(t, c, "q")
}

// A Finish that waited behind another and then failed on the connection is
// tried again, off the coalescer's goroutine, until it is written; the
// handler is not run again.
func TestFailedBatchedFinishIsRetried(t *testing.T) {
	t.Parallel()
	_, c, obs, _ := observed(t)
	w := newWorker(t, c, WorkerOptions{})
	release, runs := heldFinishes(t, c, w, func(_ context.Context, n int64) error {
		if n == 2 {
			return errors.New("connection reset (test)") // ErrUnavailable to the caller
		}
		return nil
	})
	close(release)
	settledQueue(t, c, "q")
	r := runnerOf(w, "q")
	eventually(t, 5*time.Second, "both outcomes recorded", func() bool { return engine.Runtimes{r}.Idle() })
	outcomesAre(t, obs, map[Outcome]int{OutcomeSucceeded: 2})
	assert.EqualValues(t, 2, runs.Load())
}

// A Finish that waited behind another and finds the queue's lease gone
// fences the worker (on one Redis the queue's lease is the worker's) and
// loses the process, as one sent alone does.
func TestBatchedFinishFindingTheLeaseGoneFences(t *testing.T) {
	t.Parallel()
	b, obs := newBackend(t), &observer{}
	h := &hooked{Client: b.redis()}
	c, err := New(Options{Redis: h, Prefix: b.prefix, Logger: testLogger(t), Observer: obs})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	w := newWorker(t, c, WorkerOptions{})
	id := w.ID()
	// The other calls that would find the lease gone, and fence the worker
	// themselves, are held from the lease's removal until the fence is
	// seen, and those in flight are waited for before it: the first
	// Finish's slot, freed when its outcome is recorded, dequeues at about
	// that time, and a renewal may come.
	g := newCallGate()
	t.Cleanup(g.open)
	sc := c.core.Store.Scripts()
	leaseChecks := map[string]bool{sc.Dequeue.SHA1(): true, sc.Keepalive.SHA1(): true, sc.Renew.SHA1(): true}
	checksLease := func(cmd rueidis.Completed) bool {
		s := scriptOf(cmd)
		sum := sha1.Sum([]byte(s))
		return leaseChecks[s] || leaseChecks[hex.EncodeToString(sum[:])] // EVALSHA, or EVAL after NOSCRIPT
	}
	h.set(func(h *hooked) {
		h.do = func(_ context.Context, cmd rueidis.Completed, next func() rueidis.RedisResult) rueidis.RedisResult {
			if checksLease(cmd) {
				defer g.pass()()
			}
			return next()
		}
		h.doMulti = func(_ context.Context, cmds []rueidis.Completed, next func() []rueidis.RedisResult) []rueidis.RedisResult {
			if slices.ContainsFunc(cmds, checksLease) {
				defer g.pass()()
			}
			return next()
		}
	})
	release, _ := heldFinishes(t, c, w, func(ctx context.Context, n int64) error {
		if n == 2 {
			g.close()
			return c.core.Redis.Do(ctx, c.core.Redis.B().Zrem().Key(c.core.Store.Keys().Queue("q").Leases).Member(id).Build()).Error()
		}
		return nil
	})
	close(release)
	eventually(t, 5*time.Second, "fenced", func() bool {
		obs.mu.Lock()
		defer obs.mu.Unlock()
		return len(obs.fences) > 0
	})
	g.open()
	r := runnerOf(w, "q")
	eventually(t, 5*time.Second, "both outcomes recorded", func() bool { return engine.Runtimes{r}.Idle() })
	outcomesAre(t, obs, map[Outcome]int{OutcomeSucceeded: 1, OutcomeLost: 1})
	obs.mu.Lock()
	defer obs.mu.Unlock()
	assert.ErrorContains(t, obs.fences[0].Cause, `finish found the lease on "q" gone`)
}

// callGate holds calls back while it is closed; close waits for those
// that passed before to return.
type callGate struct {
	mu       sync.Mutex
	cond     *sync.Cond
	closed   bool
	inFlight int
}

func newCallGate() *callGate {
	g := &callGate{}
	g.cond = sync.NewCond(&g.mu)
	return g
}

// pass waits until the gate is open and returns what to call when the
// call returned.
func (g *callGate) pass() (returned func()) {
	g.mu.Lock()
	for g.closed {
		g.cond.Wait()
	}
	g.inFlight++
	g.mu.Unlock()
	return func() {
		g.mu.Lock()
		g.inFlight--
		g.cond.Broadcast()
		g.mu.Unlock()
	}
}

// close holds back the calls to come and waits for those in flight.
func (g *callGate) close() {
	g.mu.Lock()
	g.closed = true
	for g.inFlight > 0 {
		g.cond.Wait()
	}
	g.mu.Unlock()
}

func (g *callGate) open() {
	g.mu.Lock()
	g.closed = false
	g.cond.Broadcast()
	g.mu.Unlock()
}

// A StopWork whose give-back fails leaves the queue served, its tasks
// this worker's: a handler's outcome whose write failed on the
// connection must still be tried again, or its task is held for as long
// as the worker lives, neither finished nor given back.
func TestPersistGoesOnAfterAStopWorkThatFailed(t *testing.T) {
	t.Parallel()
	b, admin, ctx := setup(t)
	c, h := hookedClient(t, b)
	setDown, _ := refuseQueue(h, "q")
	// A long lease: the worker must not fence itself while "q" is down.
	w := newWorker(t, c, WorkerOptions{TTL: 30 * time.Second})
	entered := make(chan *Process, 1)
	release := make(chan struct{})
	require.NoError(t, w.Handle(ctx, "q", func(_ context.Context, p *Process) error {
		entered <- p
		<-release
		return nil
	}, HandleOptions{}))
	require.NoError(t, second(admin.Enqueue(ctx, "q", []byte("t"))))
	p := recv(t, entered, 5*time.Second, "the handler started")

	setDown(true)
	close(release)
	eventually(t, 5*time.Second, "the finish failed and is tried again", p.rec.St.IsUnwritten)
	sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	require.Error(t, w.StopWork(sctx, "q"), "the give-back cannot reach the queue")
	w.core.Lock()
	_, served := w.core.Served()["q"]
	w.core.Unlock()
	require.True(t, served, "a StopWork that failed leaves the queue served")

	setDown(false)
	recv(t, p.Done(), 5*time.Second, "the finish written once the queue's node is back")
	assert.ErrorIs(t, p.Err(), ErrProcessEnded)
}
