package worqr

import (
	"bytes"
	"context"
	"errors"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/worqr/worqr/internal/store"
)

// A task enqueued with Retain keeps its outcome, finished with its result
// or dead with its error, readable by id and waited for; one without keeps
// nothing.
func TestRetainedOutcomes(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	w := newWorker(t, c, WorkerOptions{})
	release := make(chan struct{})
	require.NoError(t, w.Handle(ctx, "q", func(_ context.Context, p *Process) error {
		<-release
		switch string(p.Task()) {
		case "flaky":
			if p.Attempt() == 1 {
				return RetryAfter(time.Millisecond, errors.New("not yet"))
			}
			p.SetResult([]byte("at last"))
			return nil
		case "bad":
			return WithReason("bad-input", Permanent(errors.New("no such user")))
		default:
			p.SetResult([]byte("result of " + string(p.Task())))
			return nil
		}
	}, HandleOptions{}))
	good, err := c.Enqueue(ctx, "q", []byte("good"), Retain(time.Minute))
	require.NoError(t, err)
	bad, err := c.Enqueue(ctx, "q", []byte("bad"), Retain(time.Minute))
	require.NoError(t, err)
	flaky, err := c.Enqueue(ctx, "q", []byte("flaky"), Retain(time.Minute))
	require.NoError(t, err)
	plain, err := c.Enqueue(ctx, "q", []byte("plain"))
	require.NoError(t, err)
	_, err = c.TaskResult(ctx, "q", good)
	assert.ErrorIs(t, err, ErrNoTask, "not ended yet")

	outcomes := make(chan TaskOutcome, 3)
	for _, id := range []string{good, bad, flaky} {
		go func() {
			o, err := c.Wait(ctx, "q", id)
			assert.NoError(t, err)
			outcomes <- o
		}()
	}
	close(release)
	got := map[string]TaskOutcome{}
	for range 3 {
		o := recv(t, outcomes, 5*time.Second, "an outcome")
		got[o.ID] = o
	}
	assert.Equal(t, OutcomeSucceeded, got[good].Status)
	assert.Equal(t, "result of good", string(got[good].Result))
	assert.Equal(t, 1, got[good].Attempts)
	assert.False(t, got[good].EndedAt.Before(got[good].StartedAt))
	assert.False(t, got[good].StartedAt.Before(got[good].EnqueuedAt.Truncate(time.Millisecond)))
	assert.True(t, got[good].ExpiresAt.After(got[good].EndedAt.Add(50*time.Second)))
	assert.Equal(t, OutcomeDead, got[bad].Status)
	assert.Equal(t, "bad-input", got[bad].Reason)
	assert.Contains(t, got[bad].Error, "no such user")
	assert.Equal(t, 1, got[bad].Attempts)
	assert.Equal(t, OutcomeSucceeded, got[flaky].Status)
	assert.Equal(t, "at last", string(got[flaky].Result))
	assert.Equal(t, 2, got[flaky].Attempts, "the failed start counts")
	again, err := c.TaskResult(ctx, "q", good)
	require.NoError(t, err)
	assert.Equal(t, got[good], again)

	settledQueue(t, c, "q")
	_, err = c.TaskResult(ctx, "q", plain)
	assert.ErrorIs(t, err, ErrNoTask, "nothing is kept unless asked")
	_, err = c.TaskResult(ctx, "q", "")
	assert.ErrorIs(t, err, ErrInvalidOptions)
	_, err = c.Wait(ctx, "q", "")
	assert.ErrorIs(t, err, ErrInvalidOptions)
}

// An outcome is forgotten when its retention runs out.
func TestRetentionExpires(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	w := newWorker(t, c, WorkerOptions{})
	require.NoError(t, w.Handle(ctx, "q", func(context.Context, *Process) error { return nil }, HandleOptions{}))
	id, err := c.Enqueue(ctx, "q", []byte("x"), Retain(200*time.Millisecond))
	require.NoError(t, err)
	o, err := c.Wait(ctx, "q", id)
	require.NoError(t, err)
	eventually(t, 5*time.Second, "forgotten", func() bool {
		_, err := c.TaskResult(ctx, "q", id)
		return errors.Is(err, ErrNoTask)
	})
	assert.True(t, time.Now().Add(time.Second).After(o.ExpiresAt))
}

// A thousand waiters cost one read each when they start and one when
// their outcome comes, and nothing while they wait: no polling.
func TestThousandWaitersDoNotPoll(t *testing.T) {
	t.Parallel()
	b, c, ctx := setup(t)
	const n = 1000
	tasks := make([][]byte, n)
	for i := range tasks {
		tasks[i] = []byte(strconv.Itoa(i))
	}
	ids, err := c.EnqueueBatch(ctx, "q", tasks, Retain(time.Minute))
	require.NoError(t, err)

	reads := countCalls(c, store.OpRead)
	var wg sync.WaitGroup
	var done atomic.Int64
	// A test that ends early (a wait below timed out) ends its waiters
	// before it returns: they must not report to it once it has.
	wctx, cancel := context.WithCancel(ctx)
	t.Cleanup(func() { cancel(); wg.Wait() })
	for _, id := range ids {
		wg.Go(func() {
			o, err := c.Wait(wctx, "q", id)
			if wctx.Err() != nil {
				return
			}
			if assert.NoError(t, err) && assert.Equal(t, OutcomeSucceeded, o.Status) {
				done.Add(1)
			}
		})
	}
	// Each waiter reads once when it starts, and once more if it started
	// before the subscription was confirmed (the confirmation wakes all,
	// in case an outcome came in between); then nothing. They are done
	// when each is blocked in Wait's select with no wake pending, after
	// the confirmation's wake: not when reads have stopped for a while,
	// which a loaded machine that pauses the process fakes.
	eventually(t, 20*time.Second, "the waiters have looked", func() bool {
		return reads.Load() >= n && waitersAsleep(t, c, "q", n)
	})
	idle := reads.Load()
	assert.LessOrEqual(t, idle, int64(2*n))
	assert.True(t, waitersAsleep(t, c, "q", n), "asleep still")
	deadline := time.Now().Add(300 * time.Millisecond)
	eventually(t, 5*time.Second, "an idle while", func() bool { return time.Now().After(deadline) })
	assert.Equal(t, idle, reads.Load(), "waiters polled while nothing happened")

	// The worker on a client of its own: its subscription to the queue
	// would otherwise share the waiters' connection, and its confirmation
	// wake them all once more.
	w := newWorker(t, b.client(), WorkerOptions{})
	require.NoError(t, w.Handle(ctx, "q", func(context.Context, *Process) error { return nil }, HandleOptions{Concurrency: 50}))
	wg.Wait()
	assert.EqualValues(t, n, done.Load())
	assert.LessOrEqual(t, reads.Load(), idle+n, "one read per outcome")
}

// waitersAsleep reports whether a queue's n waiters, the only ones of the
// test that calls it, each wait in Wait's select with no wake pending:
// none will read again until it is woken. The first n-1 waiters to come
// are woken once when they come; the first is woken only by the
// subscription's confirmation, so with n reads made that has come, and
// its wakes have all been sent once the waiters' lock is taken here.
func waitersAsleep(t *testing.T, c *Client, queue string, n int) bool {
	t.Helper()
	test := t.Name()
	if i := strings.IndexByte(test, '/'); i >= 0 {
		test = test[:i]
	}
	return c.core.Waiters.Quiet(queue, func(registered int) bool {
		return registered == n && waitersInSelect(t, test, n)
	})
}

// waitersInSelect reports whether n goroutines of the test are blocked in
// Wait's select.
func waitersInSelect(t *testing.T, test string, n int) bool {
	// Blocked, not runnable: a wake sent to a goroutine blocked in the
	// select goes to it, not into the channel's buffer.
	var buf bytes.Buffer
	require.NoError(t, pprof.Lookup("goroutine").WriteTo(&buf, 2))
	asleep := 0
	for _, g := range strings.Split(buf.String(), "\n\n") {
		header, frames, _ := strings.Cut(g, "\n")
		lines := strings.Split(frames, "\n")
		if strings.Contains(header, "[select") && // (runtime frames are not shown)
			strings.HasPrefix(lines[0], "github.com/worqr/worqr/internal/waiters.(*Waiters).Wait(") &&
			strings.Contains(g, "github.com/worqr/worqr."+test+".") {
			asleep++
		}
	}
	return asleep == n
}

// killRetained dequeues n tasks of queue with w and sends each to the dead
// letters, and returns their outcomes as Wait reports them (dead).
func killRetained(t *testing.T, c *Client, w *Worker, queue string, n int) []TaskOutcome {
	t.Helper()
	ctx := ctxT(t)
	var out []TaskOutcome
	for range n {
		p, err := w.Dequeue(ctx, queue)
		require.NoError(t, err)
		require.NoError(t, p.DeadLetter(ctx, errors.New("broken")))
		o, err := c.Wait(ctx, queue, p.TaskID())
		require.NoError(t, err)
		require.Equal(t, OutcomeDead, o.Status)
		out = append(out, o)
	}
	return out
}

// A dead letter requeued, one or all, is as if it had never run: the
// outcome its death left is gone with the requeue, so TaskResult has none
// and Wait waits for the next run's, which it then returns.
func TestRequeuedDeadLetterForgetsItsOutcome(t *testing.T) {
	t.Parallel()
	b, c, ctx := setup(t)
	// The worker on a client of its own, so that its subscription does
	// not wake the waiters (see TestThousandWaitersDoNotPoll).
	w := newWorker(t, b.client(), WorkerOptions{})
	require.NoError(t, w.StartWork(ctx, "q", Events{}))
	ids, err := c.EnqueueBatch(ctx, "q", [][]byte{[]byte("a"), []byte("b")}, Retain(time.Minute))
	require.NoError(t, err)
	killRetained(t, c, w, "q", 2)

	ok, err := c.RequeueDeadLetter(ctx, "q", ids[0])
	require.NoError(t, err)
	require.True(t, ok)
	n, err := c.RequeueDeadLetters(ctx, "q")
	require.NoError(t, err)
	require.EqualValues(t, 1, n)
	for _, id := range ids {
		_, err := c.TaskResult(ctx, "q", id)
		assert.ErrorIs(t, err, ErrNoTask, "requeued: no outcome until it runs again")
	}

	outcomes := make(chan TaskOutcome, len(ids))
	for _, id := range ids {
		go func() {
			o, err := c.Wait(ctx, "q", id)
			assert.NoError(t, err)
			outcomes <- o
		}()
	}
	eventually(t, 10*time.Second, "the waiters to wait, or an outcome", func() bool {
		return len(outcomes) > 0 || waitersAsleep(t, c, "q", len(ids))
	})
	require.Empty(t, outcomes, "Wait answered with the outcome from before the requeue")
	for range ids {
		p, err := w.Dequeue(ctx, "q")
		require.NoError(t, err)
		assert.Equal(t, 1, p.Attempt())
		p.SetResult([]byte("fixed"))
		require.NoError(t, p.Finish(ctx))
	}
	for range ids {
		o := recv(t, outcomes, 10*time.Second, "the outcome of the run after the requeue")
		assert.Equal(t, OutcomeSucceeded, o.Status)
		assert.Equal(t, "fixed", string(o.Result))
		assert.Equal(t, 1, o.Attempts)
	}
}

// A waiter woken by a task's death that reads only after the dead letter
// was requeued does not get the dead outcome: it waits on, for the
// outcome of the next run.
func TestWaiterReadingAfterTheRequeueWaitsForTheNextRun(t *testing.T) {
	t.Parallel()
	b, c, ctx := setup(t)
	w := newWorker(t, b.client(), WorkerOptions{})
	require.NoError(t, w.StartWork(ctx, "q", Events{}))
	id, err := c.Enqueue(ctx, "q", []byte("a"), Retain(time.Minute))
	require.NoError(t, err)

	// Once armed, the next read of the waiter's client is held until
	// released: the waiter's, after the death's event wakes it.
	var armed atomic.Bool
	held, release := make(chan struct{}), make(chan struct{})
	c.core.Store.SetFault(func(ctx context.Context, op store.Op, _ string) error {
		if op == store.OpRead && armed.CompareAndSwap(true, false) {
			close(held)
			select {
			case <-release:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	})
	outcomes := make(chan TaskOutcome, 1)
	go func() {
		o, err := c.Wait(ctx, "q", id)
		assert.NoError(t, err)
		outcomes <- o
	}()
	eventually(t, 10*time.Second, "the waiter to wait", func() bool { return waitersAsleep(t, c, "q", 1) })
	armed.Store(true)
	p, err := w.Dequeue(ctx, "q")
	require.NoError(t, err)
	require.NoError(t, p.DeadLetter(ctx, errors.New("broken")))
	recv(t, held, 10*time.Second, "the waiter's read after the death")
	ok, err := c.RequeueDeadLetter(ctx, "q", id)
	require.NoError(t, err)
	require.True(t, ok)
	close(release)

	eventually(t, 10*time.Second, "the waiter to wait again, or an outcome", func() bool {
		return len(outcomes) > 0 || waitersAsleep(t, c, "q", 1)
	})
	require.Empty(t, outcomes, "Wait answered with the outcome from before the requeue")
	p, err = w.Dequeue(ctx, "q")
	require.NoError(t, err)
	require.NoError(t, p.Finish(ctx))
	o := recv(t, outcomes, 10*time.Second, "the outcome of the run after the requeue")
	assert.Equal(t, OutcomeSucceeded, o.Status)
}
