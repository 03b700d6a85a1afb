package worqr

// Faults injected command by command: a rueidis client wrapped so a test
// can fail, delay or block chosen commands, to reach the runtime's races
// deterministically.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// hooked wraps a rueidis client so a test can act on chosen commands.
type hooked struct {
	rueidis.Client
	mu      sync.Mutex
	do      func(ctx context.Context, cmd rueidis.Completed, next func() rueidis.RedisResult) rueidis.RedisResult
	doMulti func(ctx context.Context, cmds []rueidis.Completed, next func() []rueidis.RedisResult) []rueidis.RedisResult
	recv    func(ctx context.Context)
}

func (h *hooked) Do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	h.mu.Lock()
	f := h.do
	h.mu.Unlock()
	next := func() rueidis.RedisResult { return h.Client.Do(ctx, cmd) }
	if f == nil {
		return next()
	}
	return f(ctx, cmd, next)
}

func (h *hooked) DoMulti(ctx context.Context, cmds ...rueidis.Completed) []rueidis.RedisResult {
	h.mu.Lock()
	f := h.doMulti
	h.mu.Unlock()
	next := func() []rueidis.RedisResult { return h.Client.DoMulti(ctx, cmds...) }
	if f == nil {
		return next()
	}
	return f(ctx, cmds, next)
}

func (h *hooked) Receive(ctx context.Context, subscribe rueidis.Completed, fn func(rueidis.PubSubMessage)) error {
	h.mu.Lock()
	f := h.recv
	h.mu.Unlock()
	if f != nil {
		f(ctx)
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	return h.Client.Receive(ctx, subscribe, fn)
}

// divertMulti is a doMulti hook for a node that fails or hangs while the
// others answer: the commands matched are not sent and get answer's
// result (called once, after the others were sent); the rest go out in
// one DoMulti.
func (h *hooked) divertMulti(ctx context.Context, cmds []rueidis.Completed, match func(rueidis.Completed) bool, answer func() rueidis.RedisResult) []rueidis.RedisResult {
	out := make([]rueidis.RedisResult, len(cmds))
	var sent []rueidis.Completed
	var at, diverted []int
	for i, cmd := range cmds {
		if match(cmd) {
			diverted = append(diverted, i)
			continue
		}
		sent, at = append(sent, cmd), append(at, i)
	}
	if len(sent) > 0 {
		for j, res := range h.Client.DoMulti(ctx, sent...) {
			out[at[j]] = res
		}
	}
	if len(diverted) > 0 {
		res := answer()
		for _, i := range diverted {
			out[i] = res
		}
	}
	return out
}

func (h *hooked) set(f func(h *hooked)) {
	h.mu.Lock()
	defer h.mu.Unlock()
	f(h)
}

// scriptOf is the SHA1 or source a script command carries.
func scriptOf(cmd rueidis.Completed) string {
	c := cmd.Commands()
	if len(c) > 1 && (c[0] == "EVALSHA" || c[0] == "EVAL") {
		return c[1]
	}
	return ""
}

// hookedClient is a worqr Client on a hooked rueidis client.
func hookedClient(t *testing.T, b *backend) (*Client, *hooked) {
	h := &hooked{Client: b.redis()}
	c, err := New(Options{Redis: h, Prefix: b.prefix, Logger: testLogger(t)})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	return c, h
}

// A work event handled between an empty dequeue and the runtime noting the
// queue empty must not be forgotten: no task waits while a slot is free.
func TestWorkEventDuringADequeueIsNotLost(t *testing.T) {
	t.Parallel()
	b, admin, ctx := setup(t)
	c, h := hookedClient(t, b)
	workSeen := make(chan struct{}, 10)
	var once atomic.Bool
	var handled atomic.Int32
	w := newWorker(t, c, WorkerOptions{})
	dequeueSHA := c.core.Store.Scripts().Dequeue.SHA1()
	h.set(func(h *hooked) {
		h.do = func(ctx context.Context, cmd rueidis.Completed, next func() rueidis.RedisResult) rueidis.RedisResult {
			res := next()
			if scriptOf(cmd) == dequeueSHA {
				if vals, err := res.AsStrSlice(); err == nil && len(vals) == 2 && handled.Load() == 1 && once.CompareAndSwap(false, true) {
					// Tasks land just after the empty dequeue ran, and
					// their event is handled before its reply is.
					require.NoError(t, second(admin.EnqueueBatch(context.Background(), "q", [][]byte{[]byte("a"), []byte("b")})))
					<-workSeen
				}
			}
			return res
		}
	})
	require.NoError(t, w.Handle(ctx, "q", func(context.Context, *Process) error {
		handled.Add(1)
		return nil
	}, HandleOptions{Concurrency: 1, Events: Events{Work: func(string, int64) { workSeen <- struct{}{} }}}))
	require.NoError(t, second(admin.Enqueue(ctx, "q", []byte("seed"))))
	eventually(t, 5*time.Second, "all three handled", func() bool { return handled.Load() == 3 })
}

// StopWork on a handled queue ends its handlers before their tasks can go
// to a peer, even when the UNSUBSCRIBE is slow: a persistent task is never
// held by two live workers.
func TestStopWorkEndsHandlersBeforeGivingTasksAway(t *testing.T) {
	t.Parallel()
	b, admin, ctx := setup(t)
	c1, h := hookedClient(t, b)
	h.set(func(h *hooked) {
		h.do = func(ctx context.Context, cmd rueidis.Completed, next func() rueidis.RedisResult) rueidis.RedisResult {
			if cs := cmd.Commands(); len(cs) > 0 && cs[0] == "UNSUBSCRIBE" {
				time.Sleep(300 * time.Millisecond) // a slow link
			}
			return next()
		}
	})
	l := &ledger{holds: make(map[string][]hold), open: make(map[string]int)}
	w1 := newWorker(t, c1, WorkerOptions{})
	w2 := newWorker(t, admin, WorkerOptions{})
	require.NoError(t, w1.Handle(ctx, "q", l.handler("w1"), HandleOptions{}))
	require.NoError(t, second(admin.Enqueue(ctx, "q", []byte("conn"))))
	eventually(t, 5*time.Second, "w1 holds", func() bool { return l.heldNow([]string{"conn"}) })
	require.NoError(t, w2.Handle(ctx, "q", l.handler("w2"), HandleOptions{}))
	require.NoError(t, w1.StopWork(ctx, "q"))
	eventually(t, 5*time.Second, "w2 holds", func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		return len(l.holds["conn"]) == 2 && !l.holds["conn"][0].end.IsZero()
	})
	l.mu.Lock()
	defer l.mu.Unlock()
	hs := l.holds["conn"]
	assert.False(t, hs[1].start.Before(hs[0].end), "held by two live workers at once for %v", hs[0].end.Sub(hs[1].start))
}

// A Finish that fails on the connection is retried while the worker
// lives; it would otherwise leave the process held for ever.
func TestFailedOutcomeWriteIsRetried(t *testing.T) {
	t.Parallel()
	b, admin, ctx := setup(t)
	c, h := hookedClient(t, b)
	var failed atomic.Bool
	finishSHA := c.core.Store.Scripts().Finish.SHA1()
	h.set(func(h *hooked) {
		h.do = func(ctx context.Context, cmd rueidis.Completed, next func() rueidis.RedisResult) rueidis.RedisResult {
			if scriptOf(cmd) == finishSHA && failed.CompareAndSwap(false, true) {
				return rueidis.NewErrorResult(io.ErrUnexpectedEOF) // reset before it was sent
			}
			return next()
		}
	})
	var runs atomic.Int32
	w := newWorker(t, c, WorkerOptions{})
	require.NoError(t, w.Handle(ctx, "q", func(context.Context, *Process) error { runs.Add(1); return nil }, HandleOptions{}))
	require.NoError(t, second(admin.Enqueue(ctx, "q", []byte("t"))))
	settledQueue(t, admin, "q")
	assert.True(t, failed.Load())
	assert.EqualValues(t, 1, runs.Load())
}

// Close while Handle waits for its subscription honours Close's context.
func TestCloseWhileHandleWaitsForItsSubscription(t *testing.T) {
	t.Parallel()
	b, _, _ := setup(t)
	c, h := hookedClient(t, b)
	gate := make(chan struct{})
	w := newWorker(t, c, WorkerOptions{})
	h.set(func(h *hooked) {
		h.recv = func(ctx context.Context) {
			select {
			case <-gate:
			case <-ctx.Done():
			}
		}
	})
	handled := make(chan error, 1)
	go func() {
		handled <- w.Handle(context.Background(), "q", func(context.Context, *Process) error { return nil }, HandleOptions{})
	}()
	eventually(t, 5*time.Second, "runtime registered", func() bool {
		w.core.Lock()
		defer w.core.Unlock()
		return w.core.Served()["q"] != nil
	})
	cctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	closed := make(chan error, 1)
	go func() { closed <- w.Close(cctx) }()
	recv(t, closed, 5*time.Second, "Close returns")
	close(gate)
	assert.ErrorIs(t, recv(t, handled, 5*time.Second, "Handle returns"), ErrWorkerClosed)
}

// A Handle whose subscription never comes and whose undo fails leaves the
// queue served with a running loop, so a later Close still returns.
func TestCloseAfterAFailedHandle(t *testing.T) {
	t.Parallel()
	b, _, _ := setup(t)
	c, h := hookedClient(t, b)
	w := newWorker(t, c, WorkerOptions{})
	releaseSHA := c.core.Store.Scripts().Release.SHA1()
	h.set(func(h *hooked) {
		h.recv = func(ctx context.Context) { <-ctx.Done() } // pub/sub not answering
		h.doMulti = func(ctx context.Context, cmds []rueidis.Completed, next func() []rueidis.RedisResult) []rueidis.RedisResult {
			if len(cmds) == 1 && scriptOf(cmds[0]) == releaseSHA {
				return []rueidis.RedisResult{rueidis.NewErrorResult(io.ErrUnexpectedEOF)}
			}
			return next()
		}
	})
	hctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	require.Error(t, w.Handle(hctx, "q", func(context.Context, *Process) error { return nil }, HandleOptions{}))
	h.set(func(h *hooked) { h.recv, h.doMulti = nil, nil }) // Redis is fine again
	cctx, cancel2 := context.WithTimeout(context.Background(), time.Second)
	defer cancel2()
	closed := make(chan error, 1)
	go func() { closed <- w.Close(cctx) }()
	recv(t, closed, 5*time.Second, "Close returns")
}

// Shutdown and Close at once, with several handled queues: no double close.
func TestShutdownAndCloseTogether(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	for range 50 {
		w, err := c.NewWorker(ctx, WorkerOptions{})
		require.NoError(t, err)
		for q := range 8 {
			require.NoError(t, w.Handle(ctx, fmt.Sprint("q", q), func(context.Context, *Process) error { return nil }, HandleOptions{}))
		}
		var g errgroup.Group
		g.Go(func() error { return w.Shutdown(ctx) })
		g.Go(func() error { return w.Close(ctx) })
		require.NoError(t, g.Wait())
	}
}

// Shutdown honours its context while the runtime's dequeue hangs on an
// unresponsive Redis.
func TestShutdownIsNotHeldUpByAHungDequeue(t *testing.T) {
	t.Parallel()
	b, admin, ctx := setup(t)
	c, h := hookedClient(t, b)
	w := newWorker(t, c, WorkerOptions{})
	require.NoError(t, w.Handle(ctx, "q", func(context.Context, *Process) error { return nil }, HandleOptions{}))
	inDequeue := make(chan struct{}, 1)
	dequeueSHA := c.core.Store.Scripts().Dequeue.SHA1()
	h.set(func(h *hooked) {
		h.do = func(ctx context.Context, cmd rueidis.Completed, next func() rueidis.RedisResult) rueidis.RedisResult {
			if scriptOf(cmd) == dequeueSHA {
				inDequeue <- struct{}{}
				select { // a hung server: rueidis would give up after 10s
				case <-ctx.Done():
					return rueidis.NewErrorResult(ctx.Err())
				case <-time.After(3 * time.Second):
				}
			}
			return next()
		}
	})
	require.NoError(t, second(admin.Enqueue(ctx, "q", []byte("t"))))
	recv(t, inDequeue, 5*time.Second, "dequeue sent")
	sctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	_ = w.Shutdown(sctx)
	assert.Less(t, time.Since(start), 2*time.Second, "Shutdown(100ms) took %v", time.Since(start))
}

// The runtime never polls: while its queue is empty and no event comes,
// it sends no dequeue, however many renewals go by.
func TestRuntimeDoesNotPoll(t *testing.T) {
	t.Parallel()
	b, admin, ctx := setup(t)
	c, h := hookedClient(t, b)
	dequeueSHA, renewSHA := c.core.Store.Scripts().Dequeue.SHA1(), c.core.Store.Scripts().Keepalive.SHA1()
	var dequeues, renewals atomic.Int32
	h.set(func(h *hooked) {
		h.do = func(ctx context.Context, cmd rueidis.Completed, next func() rueidis.RedisResult) rueidis.RedisResult {
			switch scriptOf(cmd) {
			case dequeueSHA:
				dequeues.Add(1)
			case renewSHA:
				renewals.Add(1)
			}
			return next()
		}
	})
	var handled atomic.Int32
	w := newWorker(t, c, lasting)
	require.NoError(t, w.Handle(ctx, "q", func(context.Context, *Process) error { handled.Add(1); return nil }, HandleOptions{}))
	enqueueNumbered(t, admin, "q", 5)
	eventually(t, 5*time.Second, "handled", func() bool { return handled.Load() == 5 })
	settledQueue(t, admin, "q")

	before, since := dequeues.Load(), renewals.Load()
	eventually(t, 5*time.Second, "three renewals go by", func() bool { return renewals.Load() >= since+3 })
	assert.Equal(t, before, dequeues.Load(), "dequeues while idle")
	assert.LessOrEqual(t, before, int32(5+2), "at most one dequeue per task, plus the empty ones that end a batch")
}

// A queue whose Redis node cannot be reached (on a cluster, a shard failing
// over) costs the worker only that queue: its lease there cannot be
// renewed, so at 0.9 TTL the worker ends its processes there and takes no
// work there, while its registry lease and other queues go on untouched.
// Once the node answers again the worker gives the queue's tasks back and
// takes a new lease, under the same id.
func TestUnreachableQueueFencesOnlyThatQueue(t *testing.T) {
	t.Parallel()
	b, admin, ctx := setup(t)
	c, h := hookedClient(t, b)
	c.core.Store.RenewApart() // as on a Cluster, where each queue's node fails on its own
	setDown, refused := refuseQueue(h, "a")
	w, fences := fencingWorkerWith(t, c, lasting)
	id := w.ID()
	require.NoError(t, w.StartWork(ctx, "a", Events{}))
	require.NoError(t, w.StartWork(ctx, "b", Events{}))
	require.NoError(t, second(admin.Enqueue(ctx, "a", []byte("ta"))))
	require.NoError(t, second(admin.Enqueue(ctx, "b", []byte("tb"))))
	pa, err := w.Dequeue(ctx, "a")
	require.NoError(t, err)
	pb, err := w.Dequeue(ctx, "b")
	require.NoError(t, err)

	setDown(true)
	ev := recv(t, fences, 10*time.Second, "queue a fenced")
	assert.Equal(t, "a", ev.Queue)
	assert.Equal(t, id, ev.WorkerID)
	assert.ErrorIs(t, ev.Cause, ErrWorkerFenced)
	require.Len(t, ev.Lost, 1)
	assert.Same(t, pa, ev.Lost[0])
	recv(t, pa.Done(), time.Second, "process in a ended")
	assert.ErrorIs(t, pa.Err(), ErrWorkerFenced)
	_, err = w.Dequeue(ctx, "a")
	assert.ErrorIs(t, err, ErrWorkerFenced)

	// Let the old lease on a run out and the rejoin fail against the
	// unreachable node more than once: the rest of the worker is unharmed.
	since := refused.Load()
	eventually(t, 10*time.Second, "rejoin retried against the down node", func() bool { return refused.Load() >= since+2 })
	require.NoError(t, pb.Status(ctx), "the process in b is still this worker's")
	assert.Equal(t, id, w.ID(), "no re-registration")
	assert.True(t, leaseLive(t, admin, id))

	setDown(false)
	var again *Process
	eventually(t, 10*time.Second, "a served again", func() bool {
		again, err = w.Dequeue(ctx, "a")
		if errors.Is(err, ErrWorkerFenced) || errors.Is(err, ErrNoTask) {
			return false
		}
		require.NoError(t, err)
		return true
	})
	assert.Equal(t, "ta", string(again.Task()), "the task held in a came back")
	require.NoError(t, again.Finish(ctx))
	require.NoError(t, pb.Finish(ctx))
	assert.Equal(t, id, w.ID())
	assert.Empty(t, fences, "no other fence")
}

// An outcome write that gets no answer within its deadline (a hung node)
// is sent again, as one that failed on the connection is: otherwise the
// live worker would hold the task for ever.
func TestTimedOutOutcomeWriteIsRetried(t *testing.T) {
	t.Parallel()
	b, admin, ctx := setup(t)
	c, h := hookedClient(t, b)
	var hung atomic.Bool
	finishSHA := c.core.Store.Scripts().Finish.SHA1()
	h.set(func(h *hooked) {
		h.do = func(ctx context.Context, cmd rueidis.Completed, next func() rueidis.RedisResult) rueidis.RedisResult {
			if scriptOf(cmd) == finishSHA && hung.CompareAndSwap(false, true) {
				<-ctx.Done() // no answer until the write gives up
				return rueidis.NewErrorResult(ctx.Err())
			}
			return next()
		}
	})
	var runs atomic.Int32
	w := newWorker(t, c, fast)
	require.NoError(t, w.Handle(ctx, "q", func(context.Context, *Process) error { runs.Add(1); return nil }, HandleOptions{}))
	require.NoError(t, second(admin.Enqueue(ctx, "q", []byte("t"))))
	settledQueue(t, admin, "q")
	assert.True(t, hung.Load())
	assert.EqualValues(t, 1, runs.Load())
}
