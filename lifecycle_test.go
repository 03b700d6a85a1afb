package worqr

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

// startTimes records when each task's handler started.
type startTimes struct {
	mu sync.Mutex
	at map[string][]time.Time
}

func (s *startTimes) add(task string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.at == nil {
		s.at = make(map[string][]time.Time)
	}
	s.at[task] = append(s.at[task], time.Now())
}

func (s *startTimes) get(task string) []time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Time(nil), s.at[task]...)
}

// A delayed task waits in the delayed set, never starts before its due
// time, and starts soon after it, woken by the worker's timer.
func TestDelayedTaskStartsWhenDue(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	w := newWorker(t, c, WorkerOptions{})
	var starts startTimes
	require.NoError(t, w.Handle(ctx, "q", func(_ context.Context, p *Process) error {
		starts.add(string(p.Task()))
		return nil
	}, HandleOptions{}))

	const delay = 300 * time.Millisecond
	enqueued := time.Now()
	ids, err := c.EnqueueBatch(ctx, "q", [][]byte{[]byte("a"), []byte("b")}, In(delay))
	require.NoError(t, err)
	at := time.Now().Add(2 * delay)
	_, err = c.Enqueue(ctx, "q", []byte("later"), At(at))
	require.NoError(t, err)
	n, err := c.DelayedLen(ctx, "q")
	require.NoError(t, err)
	assert.EqualValues(t, 3, n)
	assert.Empty(t, waiting(t, c, "q"), "nothing waits before it is due")
	delayed, err := c.Delayed(ctx, "q", 0, -1)
	require.NoError(t, err)
	require.Len(t, delayed, 3)
	assert.Equal(t, ids[0], delayed[0].ID)
	assert.WithinDuration(t, enqueued.Add(delay), delayed[0].DueAt, 200*time.Millisecond)

	eventually(t, 5*time.Second, "all three ran", func() bool { return len(starts.get("later")) == 1 })
	for _, task := range []string{"a", "b"} {
		got := starts.get(task)
		require.Len(t, got, 1, task)
		// Redis runs on this host (or is miniredis): one clock, and a task
		// never starts before its due time by it.
		assert.False(t, got[0].Before(enqueued.Add(delay)), "%s started %v early", task, enqueued.Add(delay).Sub(got[0]))
	}
	assert.False(t, starts.get("later")[0].Before(at), "started %v early", at.Sub(starts.get("later")[0]))
	n, err = c.DelayedLen(ctx, "q")
	require.NoError(t, err)
	assert.Zero(t, n)
}

// A delayed task lives in Redis, not in a worker's timer: with no worker
// at its due time, the next worker to serve the queue moves it at once.
func TestDelayedTaskSurvivesWithoutWorkers(t *testing.T) {
	t.Parallel()
	b, c, ctx := setup(t)
	dead := newWorker(t, c, fast)
	require.NoError(t, dead.StartWork(ctx, "q", Events{}))
	require.NoError(t, second(c.Enqueue(ctx, "q", []byte("x"), In(200*time.Millisecond))))
	delayed, err := c.Delayed(ctx, "q", 0, 0)
	require.NoError(t, err)
	require.Len(t, delayed, 1)
	crash(dead) // its armed timer dies with it
	eventually(t, 5*time.Second, "the due time passes with nobody serving", func() bool {
		return time.Now().After(delayed[0].DueAt.Add(50 * time.Millisecond))
	})
	assert.Empty(t, waiting(t, c, "q"), "no worker moved it")

	w := newWorker(t, b.client(), WorkerOptions{})
	got := make(chan string, 1)
	require.NoError(t, w.Handle(ctx, "q", func(_ context.Context, p *Process) error {
		got <- string(p.Task())
		return nil
	}, HandleOptions{}))
	assert.Equal(t, "x", recv(t, got, 5*time.Second, "the overdue task ran"))
}

// A failing task is retried after the policy's backoff, with its attempt
// number and its previous error, until its budget is spent; then it is a
// dead letter.
func TestRetryBackoffAndBudget(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	w := newWorker(t, c, WorkerOptions{})
	type try struct {
		attempt int
		last    string
		at      time.Time
	}
	tries := make(chan try, 10)
	const backoff = 150 * time.Millisecond
	var asked []int
	var mu sync.Mutex
	require.NoError(t, w.Handle(ctx, "q", func(_ context.Context, p *Process) error {
		tries <- try{p.Attempt(), p.LastError(), time.Now()}
		return errors.New("boom " + string(rune('0'+p.Attempt())))
	}, HandleOptions{Retry: RetryPolicy{MaxAttempts: 3, Backoff: func(attempt int, err error) time.Duration {
		mu.Lock()
		asked = append(asked, attempt)
		mu.Unlock()
		return backoff
	}}}))
	id, err := c.Enqueue(ctx, "q", []byte("x"))
	require.NoError(t, err)

	var got []try
	for range 3 {
		got = append(got, recv(t, tries, 5*time.Second, "an attempt"))
	}
	for i, g := range got {
		assert.Equal(t, i+1, g.attempt)
		if i == 0 {
			assert.Empty(t, g.last)
			continue
		}
		assert.Equal(t, "boom "+string(rune('0'+i)), g.last, "the previous attempt's error")
		assert.GreaterOrEqual(t, g.at.Sub(got[i-1].at), backoff-20*time.Millisecond, "retried before the backoff")
	}
	eventually(t, 5*time.Second, "dead-lettered", func() bool { return len(deadPayloads(t, c, "q")) == 1 })
	tasks, err := c.Tasks(ctx, "q", 0, -1)
	require.NoError(t, err)
	assert.Empty(t, tasks)
	assert.NotEmpty(t, id)
	select {
	case extra := <-tries:
		t.Fatalf("a fourth attempt ran: %+v", extra)
	case <-time.After(2 * backoff):
	}
	mu.Lock()
	assert.Equal(t, []int{1, 2}, asked, "the backoff is asked after each failure but the last")
	mu.Unlock()
}

// RetryAfter overrides the backoff, the MaxAttempts option the budget, and
// WithReason names the failure in the dead letter.
func TestRetryAfterMaxAttemptsAndKind(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	w := newWorker(t, c, WorkerOptions{})
	starts := make(chan time.Time, 10)
	require.NoError(t, w.Handle(ctx, "q", func(_ context.Context, p *Process) error {
		starts <- time.Now()
		if p.Attempt() == 1 {
			return RetryAfter(200*time.Millisecond, errors.New("slow down"))
		}
		return WithReason("rate limit!", errors.New("still limited"))
	}, HandleOptions{Retry: RetryPolicy{MaxAttempts: 10, Backoff: func(int, error) time.Duration { return time.Hour }}}))
	require.NoError(t, second(c.Enqueue(ctx, "q", []byte("x"), MaxAttempts(2))))
	first := recv(t, starts, 5*time.Second, "first attempt")
	second := recv(t, starts, 5*time.Second, "second attempt, after RetryAfter rather than the hour-long backoff")
	assert.GreaterOrEqual(t, second.Sub(first), 180*time.Millisecond)
	eventually(t, 5*time.Second, "dead-lettered on its own budget of 2", func() bool { return len(deadPayloads(t, c, "q")) == 1 })
	k := c.core.Store.Keys().Queue("q")
	vals, err := c.core.Redis.Do(ctx, c.core.Redis.B().Zrange().Key(k.Dead).Min("0").Max("-1").Build()).AsStrSlice()
	require.NoError(t, err)
	require.Len(t, vals, 1)
	assert.Contains(t, vals[0], ",Krate_limit_", "the kind, cleaned")
	msg, err := c.core.Redis.Do(ctx, c.core.Redis.B().Hvals().Key(k.Errors).Build()).AsStrSlice()
	require.NoError(t, err)
	require.Len(t, msg, 2, "the error and the attempt history")
	assert.Contains(t, msg, "still limited")
}

// By hand: Retry with a delay records the error; DeadLetter buries now.
func TestManualRetryAndDeadLetter(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	w := newWorker(t, c, WorkerOptions{})
	require.NoError(t, w.StartWork(ctx, "q", Events{}))
	require.NoError(t, second(c.EnqueueBatch(ctx, "q", [][]byte{[]byte("later"), []byte("dead")})))
	ps := dequeueAll(t, w, "q", 2)
	require.NoError(t, ps[0].Retry(ctx, 100*time.Millisecond, errors.New("not yet")))
	require.NoError(t, ps[1].DeadLetter(ctx, WithReason("bad-input", errors.New("no such user"))))
	assert.ErrorIs(t, ps[1].Requeue(ctx), ErrProcessLost, "ended")
	eventually(t, 5*time.Second, "due again", func() bool { return len(waiting(t, c, "q")) == 1 })
	p := dequeueAll(t, w, "q", 1)[0]
	assert.Equal(t, 2, p.Attempt())
	assert.Equal(t, "not yet", p.LastError())
	require.NoError(t, p.Finish(ctx))
	assert.Equal(t, []string{"dead"}, deadPayloads(t, c, "q"))
	errs, err := c.core.Redis.Do(ctx, c.core.Redis.B().Hkeys().Key(c.core.Store.Keys().Queue("q").Errors).Build()).AsStrSlice()
	require.NoError(t, err)
	assert.Len(t, errs, 2, "the finished task's error and attempt history are gone; the dead one's stay")
	assert.ErrorIs(t, p.Retry(ctx, -time.Second, nil), ErrInvalidOptions)
}

// Cancel and DeleteQueue reach delayed tasks too.
func TestCancelAndDeleteReachDelayedTasks(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	ids, err := c.EnqueueBatch(ctx, "q", [][]byte{[]byte("a"), []byte("b"), []byte("c")}, In(time.Hour))
	require.NoError(t, err)
	res, err := c.CancelTask(ctx, "q", ids[0])
	require.NoError(t, err)
	assert.Equal(t, CancelResult{Removed: 1}, res)
	res, err = c.Cancel(ctx, "q", []byte("b"))
	require.NoError(t, err)
	assert.Equal(t, CancelResult{Removed: 1}, res)
	n, err := c.DeleteQueue(ctx, "q")
	require.NoError(t, err)
	assert.EqualValues(t, 1, n, "the delayed task left was dropped with the queue")
	left, err := c.DelayedLen(ctx, "q")
	require.NoError(t, err)
	assert.Zero(t, left)
	rep, err := c.Check(ctx, CheckOptions{})
	require.NoError(t, err)
	assert.Zero(t, rep.Problems(), "%v", rep)
}

func TestBadLifecycleOptions(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	assert.ErrorIs(t, second(c.Enqueue(ctx, "q", []byte("x"), In(-time.Second))), ErrInvalidOptions)
	// A due time in the past means now.
	require.NoError(t, second(c.Enqueue(ctx, "q", []byte("x"), At(time.Now().Add(-time.Hour)))))
	assert.Equal(t, []string{"x"}, waiting(t, c, "q"))
}

// A negative MaxAttempts at enqueue means no limit, as it does in a
// RetryPolicy: the task outlives its queue's budget of 2, and shows its
// own budget as negative.
func TestNegativeMaxAttemptsMeansNoLimit(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	id, err := c.Enqueue(ctx, "q", []byte("x"), MaxAttempts(-3), Retain(time.Hour))
	require.NoError(t, err)
	tasks, err := c.Tasks(ctx, "q", 0, -1)
	require.NoError(t, err)
	require.Len(t, tasks, 1)
	assert.Equal(t, -1, tasks[0].MaxAttempts, "no limit, whichever negative number said so")

	w := newWorker(t, c, WorkerOptions{})
	require.NoError(t, w.Handle(ctx, "q", func(_ context.Context, p *Process) error {
		if p.Attempt() < 5 {
			return errors.New("not yet")
		}
		return nil
	}, HandleOptions{Retry: RetryPolicy{MaxAttempts: 2, Backoff: func(int, error) time.Duration { return 0 }}}))
	waitCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, err := c.Wait(waitCtx, "q", id)
	require.NoError(t, err)
	assert.Equal(t, OutcomeSucceeded, out.Status, "dead-lettered on the queue's budget: %+v", out)
	assert.Equal(t, 5, out.Attempts)
}

// ExponentialBackoff doubles from base up to its cap, takes at most its
// jitter off, never overflows, and refuses arguments that make no sense.
func TestExponentialBackoff(t *testing.T) {
	exact := ExponentialBackoff(100*time.Millisecond, time.Second, 0)
	for attempt, want := range map[int]time.Duration{
		-1: 100 * time.Millisecond, 0: 100 * time.Millisecond, 1: 100 * time.Millisecond,
		2: 200 * time.Millisecond, 4: 800 * time.Millisecond, 5: time.Second,
		63: time.Second, 64: time.Second, 65: time.Second, 1000: time.Second, math.MaxInt: time.Second,
	} {
		assert.Equal(t, want, exact(attempt, nil), "attempt %d", attempt)
	}

	for _, jitter := range []float64{0.1, 0.5, 1} {
		b := ExponentialBackoff(time.Second, time.Minute, jitter)
		for _, attempt := range []int{1, 3, 7, 1000} {
			full := min(time.Second<<(min(attempt, 20)-1), time.Minute)
			low := full - time.Duration(float64(full)*jitter)
			seen := map[time.Duration]bool{}
			for range 200 {
				d := b(attempt, nil)
				require.GreaterOrEqual(t, d, low, "jitter %v attempt %d", jitter, attempt)
				require.LessOrEqual(t, d, full, "jitter %v attempt %d", jitter, attempt)
				require.Positive(t, d)
				seen[d] = true
			}
			assert.Greater(t, len(seen), 100, "jitter %v attempt %d: the delays are drawn", jitter, attempt)
		}
	}

	// At the extremes: the largest cap, a nanosecond base, full jitter.
	huge := ExponentialBackoff(time.Nanosecond, math.MaxInt64, 1)
	for _, attempt := range []int{62, 63, 64, 1000} {
		d := huge(attempt, nil)
		assert.Positive(t, d, "attempt %d", attempt)
	}
	assert.Equal(t, time.Duration(math.MaxInt64), ExponentialBackoff(time.Nanosecond, math.MaxInt64, 0)(1000, nil))
	assert.Equal(t, time.Duration(1)<<62, ExponentialBackoff(time.Nanosecond, math.MaxInt64, 0)(63, nil))

	for _, bad := range []struct {
		base, limit time.Duration
		jitter      float64
	}{
		{0, time.Second, 0}, {-time.Second, time.Second, 0}, {time.Second, time.Millisecond, 0},
		{time.Second, time.Minute, -0.1}, {time.Second, time.Minute, 1.5}, {time.Second, time.Minute, math.NaN()},
	} {
		func() {
			defer func() {
				err, _ := recover().(error)
				assert.ErrorIs(t, err, ErrInvalidOptions, "%+v", bad)
			}()
			ExponentialBackoff(bad.base, bad.limit, bad.jitter)
		}()
	}
}

// ReasonOf and RetryAfterDelay read what WithReason, a panic and RetryAfter
// put in an error, through wrapping.
func TestKindOfAndRetryAfterDelay(t *testing.T) {
	base := errors.New("boom")
	assert.Equal(t, "", ReasonOf(base))
	assert.Equal(t, "", ReasonOf(nil))
	assert.Equal(t, "smtp-5xx", ReasonOf(fmt.Errorf("send: %w", WithReason("smtp-5xx", base))))
	assert.Equal(t, ReasonPanic, ReasonOf(Permanent(fmt.Errorf("%w: oops", ErrHandlerPanicked))))
	assert.Equal(t, "bad_input", ReasonOf(WithReason("bad input", Permanent(base))))

	_, ok := RetryAfterDelay(base)
	assert.False(t, ok)
	d, ok := RetryAfterDelay(fmt.Errorf("wrapped: %w", RetryAfter(time.Minute, RetryAfter(time.Hour, base))))
	assert.True(t, ok)
	assert.Equal(t, time.Minute, d, "the outermost")
	d, ok = RetryAfterDelay(RetryAfter(-time.Second, base))
	assert.True(t, ok)
	assert.Zero(t, d)
}

func TestDefaultBackoff(t *testing.T) {
	for attempt, want := range map[int]time.Duration{1: time.Second, 2: 2 * time.Second, 5: 16 * time.Second, 20: DefaultBackoffCap, 100: DefaultBackoffCap} {
		for range 20 {
			d := DefaultBackoff(attempt, nil)
			assert.GreaterOrEqual(t, d, want/2, "attempt %d", attempt)
			assert.LessOrEqual(t, d, want, "attempt %d", attempt)
		}
	}
}

// The budget counts failed attempts only: a start whose worker died does
// not use it up, so a task reclaimed from a crash still gets its retries.
func TestBudgetCountsFailuresNotReclaims(t *testing.T) {
	t.Parallel()
	k := setupTimed(t, nil)
	c, ctx := k.c, k.ctx
	require.NoError(t, second(c.Enqueue(ctx, "q", []byte("x"), MaxAttempts(2))))
	dead := newWorker(t, c, fast)
	require.NoError(t, dead.StartWork(ctx, "q", Events{}))
	dequeueAll(t, dead, "q", 1)
	crash(dead)

	pc, w := k.reclaimingPeer()
	attempts := make(chan int, 5)
	require.NoError(t, w.Handle(ctx, "q", func(_ context.Context, p *Process) error {
		attempts <- p.Attempt()
		if p.Attempt() == 2 {
			return errors.New("first failure")
		}
		return nil
	}, HandleOptions{Retry: RetryPolicy{Backoff: func(int, error) time.Duration { return 0 }}}))
	k.run(fast.TTL + fast.RenewInterval)
	reclaimed(t, 1, pc)
	assert.Equal(t, 2, recv(t, attempts, 5*time.Second, "reclaimed, then tried"))
	assert.Equal(t, 3, recv(t, attempts, 5*time.Second, "retried: one failure of a budget of two"))
	settledQueue(t, c, "q")
	assert.Empty(t, deadPayloads(t, c, "q"))
}

// A handler that outlives its timeout has its context ended with
// ErrTaskTimeout and is retried; the task's own Timeout overrides the
// queue's, and on its last attempt it dies with reason timeout.
func TestHandlerTimeout(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	w := newWorker(t, c, WorkerOptions{})
	causes := make(chan error, 10)
	require.NoError(t, w.Handle(ctx, "q", func(hctx context.Context, p *Process) error {
		if string(p.Task()) == "quick" {
			return nil
		}
		<-hctx.Done()
		causes <- context.Cause(hctx)
		return hctx.Err()
	}, HandleOptions{Timeout: time.Hour, Retry: RetryPolicy{MaxAttempts: 2, Backoff: func(int, error) time.Duration { return 0 }}}))
	start := time.Now()
	require.NoError(t, second(c.Enqueue(ctx, "q", []byte("slow"), Timeout(100*time.Millisecond))))
	require.NoError(t, second(c.Enqueue(ctx, "q", []byte("quick"), Timeout(time.Millisecond))))
	assert.ErrorIs(t, recv(t, causes, 5*time.Second, "first attempt timed out"), ErrTaskTimeout)
	assert.ErrorIs(t, recv(t, causes, 5*time.Second, "second attempt timed out"), ErrTaskTimeout)
	assert.GreaterOrEqual(t, time.Since(start), 200*time.Millisecond-20*time.Millisecond, "the task's own 100 ms, twice")
	eventually(t, 5*time.Second, "dead after two attempts", func() bool { return len(deadPayloads(t, c, "q")) == 1 })
	vals, err := c.core.Redis.Do(ctx, c.core.Redis.B().Zrange().Key(c.core.Store.Keys().Queue("q").Dead).Min("0").Max("-1").Build()).AsStrSlice()
	require.NoError(t, err)
	assert.Contains(t, vals[0], ",K"+ReasonTimeout)
	settledQueue(t, c, "q")
	assert.ErrorIs(t, second(c.Enqueue(ctx, "q", []byte("x"), Timeout(-time.Second))), ErrInvalidOptions)
}

// holdScript makes the first call on queue q of the script sha hang,
// whatever its context says, until release is called; held is closed once
// it hangs. While hang is set, the other calls on q hang until their
// context ends (the queue's node is unreachable).
func holdScript(h *hooked, q, sha string, hang *atomic.Bool) (held <-chan struct{}, release func()) {
	heldCh, releaseCh := make(chan struct{}), make(chan struct{})
	var once atomic.Bool
	h.set(func(h *hooked) {
		h.do = func(ctx context.Context, cmd rueidis.Completed, next func() rueidis.RedisResult) rueidis.RedisResult {
			if !onQueue(cmd, q) {
				return next()
			}
			if scriptOf(cmd) == sha && once.CompareAndSwap(false, true) {
				close(heldCh)
				<-releaseCh
				return rueidis.NewErrorResult(fmt.Errorf("node of queue %s: connection reset (test): %w", q, io.ErrUnexpectedEOF))
			}
			if hang.Load() {
				<-ctx.Done()
				return rueidis.NewErrorResult(ctx.Err())
			}
			return next()
		}
		h.doMulti = func(ctx context.Context, cmds []rueidis.Completed, next func() []rueidis.RedisResult) []rueidis.RedisResult {
			if !hang.Load() {
				return next()
			}
			return h.divertMulti(ctx, cmds, func(cmd rueidis.Completed) bool { return onQueue(cmd, q) },
				func() rueidis.RedisResult { <-ctx.Done(); return rueidis.NewErrorResult(ctx.Err()) })
		}
	})
	return heldCh, sync.OnceFunc(func() { close(releaseCh) })
}

// workerGoroutines lists the stacks of goroutines running a method of a
// worker or of the client's loops (the caller's excepted), or of the
// engine's parts of a worker: its sessions, its closer, its runtimes'
// stop.
func workerGoroutines() []string {
	return goroutinesRunning(func(frame string) bool {
		return strings.Contains(frame, "worqr/worqr.(*") && !strings.Contains(frame, "worqr/worqr.(*hooked)") ||
			strings.Contains(frame, "internal/engine.(*Session)") || strings.Contains(frame, "internal/engine.(*Closer)") ||
			strings.Contains(frame, "internal/engine.Runtimes.")
	})
}

// goroutinesRunning lists the stacks of goroutines (the caller's
// excepted) with a frame that matches.
func goroutinesRunning(match func(frame string) bool) []string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	var out []string
	for i, g := range strings.Split(string(buf), "\n\n") {
		if i == 0 {
			continue // this goroutine
		}
		for _, line := range strings.Split(g, "\n") {
			if strings.HasPrefix(line, "created by") || strings.HasPrefix(line, "\t") {
				continue // who started it, or a file:line
			}
			if match(line) {
				out = append(out, g)
				break
			}
		}
	}
	return out
}

// closeWhileHeld closes w while a call of one of its goroutines is held,
// and checks that Close waits for that goroutine, which ends once the
// call returns (its context ended with the worker), and that no
// goroutine of the worker outlives Close.
func closeWhileHeld(t *testing.T, w *Worker, release func()) {
	t.Helper()
	closed := make(chan error, 1)
	go func() { closed <- w.Close(context.Background()) }()
	recv(t, w.core.Life().Done(), 5*time.Second, "Close ended the worker's life")
	select {
	case err := <-closed:
		t.Fatalf("Close returned (%v) while a goroutine of the worker was still running", err)
	case <-time.After(100 * time.Millisecond):
	}
	release()
	require.NoError(t, recv(t, closed, 10*time.Second, "Close returned"))
	assert.Empty(t, workerGoroutines(), "goroutines of the worker outlived Close")
}

// leakCheck fails the test if a goroutine started during it outlives it
// (its cleanups included: register it first, so that it runs last).
func leakCheck(t *testing.T) {
	t.Helper()
	current := goleak.IgnoreCurrent()
	t.Cleanup(func() {
		goleak.VerifyNone(t, current,
			goleak.IgnoreAnyFunction("github.com/redis/rueidis.(*clusterClient)._refresh.func2"),
			goleak.IgnoreAnyFunction("github.com/redis/rueidis.(*call).DelayDo.func1"))
	})
}

// holdLog is a log handler that holds the first record whose message
// starts with msg until release is called; held is closed once it holds.
type holdLog struct {
	slog.Handler
	*holdState
}

type holdState struct {
	msg     string
	once    atomic.Bool
	held    chan struct{}
	release func()
	waiting chan struct{}
}

func newHoldLog(h slog.Handler, msg string) *holdLog {
	waiting := make(chan struct{})
	return &holdLog{Handler: h, holdState: &holdState{
		msg: msg, held: make(chan struct{}), waiting: waiting,
		release: sync.OnceFunc(func() { close(waiting) }),
	}}
}

func (h *holdLog) Handle(ctx context.Context, r slog.Record) error {
	if strings.HasPrefix(r.Message, h.msg) && h.once.CompareAndSwap(false, true) {
		close(h.held)
		<-h.waiting
	}
	return h.Handler.Handle(ctx, r)
}

func (h *holdLog) WithAttrs(as []slog.Attr) slog.Handler {
	return &holdLog{Handler: h.Handler.WithAttrs(as), holdState: h.holdState}
}

func (h *holdLog) WithGroup(name string) slog.Handler {
	return &holdLog{Handler: h.Handler.WithGroup(name), holdState: h.holdState}
}

// Close waits for the rejoin of a fenced queue, caught between two
// attempts (in its log line, which the test holds) while it holds no lock
// that Close takes, and leaves no goroutine behind. Not parallel: the
// leak check sees every goroutine.
func TestCloseEndsARejoinInFlight(t *testing.T) {
	leakCheck(t)
	b, _, ctx := setup(t)
	logs := newHoldLog(testLogger(t).Handler(), "worqr: taking a lease on the queue again failed")
	h := &hooked{Client: b.redis()}
	c, err := New(Options{Redis: h, Prefix: b.prefix, Logger: slog.New(logs)})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	t.Cleanup(logs.release)
	c.core.Store.RenewApart() // each queue's lease renewed on its own
	releaseSHA := c.core.Store.Scripts().Release.SHA1()
	var down atomic.Bool
	h.set(func(h *hooked) {
		h.do = func(ctx context.Context, cmd rueidis.Completed, next func() rueidis.RedisResult) rueidis.RedisResult {
			switch {
			case !down.Load() || !onQueue(cmd, "a"):
				return next()
			case scriptOf(cmd) == releaseSHA:
				// Refused, not an outage: the rejoin logs its failure.
				return rueidis.NewErrorResult(fmt.Errorf("release refused (test): %w", context.Canceled))
			}
			<-ctx.Done() // the renewals of a's lease get no answer
			return rueidis.NewErrorResult(ctx.Err())
		}
	})
	w, fences := fencingWorkerWith(t, c, lasting) // fenced on a alone
	require.NoError(t, w.StartWork(ctx, "a", Events{}))
	require.NoError(t, w.StartWork(ctx, "b", Events{}))

	down.Store(true)
	ev := recv(t, fences, 10*time.Second, "queue a fenced")
	require.Equal(t, "a", ev.Queue)
	recv(t, logs.held, 5*time.Second, "the rejoin of a between attempts")
	down.Store(false) // Close's own calls go through
	closeWhileHeld(t, w, logs.release)
}

// Close waits for a renewal of a queue lease that is in a call to Redis,
// and leaves no goroutine behind.
func TestCloseEndsAQueueRenewalInFlight(t *testing.T) {
	leakCheck(t)
	b, _, ctx := setup(t)
	c, h := hookedClient(t, b)
	c.core.Store.RenewApart()
	var hang atomic.Bool
	held, release := holdScript(h, "a", c.core.Store.Scripts().Renew.SHA1(), &hang)
	t.Cleanup(release)
	w := newWorker(t, c, fast)
	require.NoError(t, w.StartWork(ctx, "a", Events{}))
	recv(t, held, 5*time.Second, "a renewal of a's lease in its call")
	closeWhileHeld(t, w, release)
}
