package worqr

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/worqr/worqr/internal/engine"
	"github.com/worqr/worqr/internal/store"
	"github.com/worqr/worqr/internal/testsignal"
)

// A paused queue takes enqueues and hands out nothing, to every worker;
// in-flight tasks finish; resuming wakes the workers.
func TestPauseAndResume(t *testing.T) {
	t.Parallel()
	b, c, ctx := setup(t)
	started := make(chan string, 10)
	release := make(chan struct{})
	w := newWorker(t, b.client(), WorkerOptions{})
	require.NoError(t, w.Handle(ctx, "q", func(_ context.Context, p *Process) error {
		started <- string(p.Task())
		<-release
		return nil
	}, HandleOptions{}))
	require.NoError(t, second(c.Enqueue(ctx, "q", []byte("before"))))
	assert.Equal(t, "before", recv(t, started, 5*time.Second, "a task in flight"))

	require.NoError(t, c.Pause(ctx, "q"))
	require.NoError(t, second(c.EnqueueBatch(ctx, "q", [][]byte{[]byte("a"), []byte("b")})))
	manual := newWorker(t, c, WorkerOptions{})
	require.NoError(t, manual.StartWork(ctx, "q", Events{}))
	_, err := manual.Dequeue(ctx, "q")
	assert.ErrorIs(t, err, ErrNoTask, "a paused queue hands out nothing")
	info, err := c.QueueInfo(ctx, "q")
	require.NoError(t, err)
	assert.True(t, info.Paused)
	assert.EqualValues(t, 2, info.Waiting)
	assert.EqualValues(t, 1, info.InFlight)
	close(release) // the task in flight finishes while paused
	eventually(t, 5*time.Second, "finished", func() bool {
		info, err := c.QueueInfo(ctx, "q")
		return err == nil && info.InFlight == 0
	})
	select {
	case task := <-started:
		t.Fatalf("%s started while paused", task)
	default:
	}

	require.NoError(t, c.Resume(ctx, "q"))
	got := []string{recv(t, started, 5*time.Second, "woken by resume"), recv(t, started, 5*time.Second, "and the next")}
	assert.ElementsMatch(t, []string{"a", "b"}, got)
	info, err = c.QueueInfo(ctx, "q")
	require.NoError(t, err)
	assert.False(t, info.Paused)
}

// A concurrency limit holds across workers: never more in flight than
// the limit, and a freed slot wakes a worker at once.
func TestConcurrencyLimitAcrossWorkers(t *testing.T) {
	t.Parallel()
	b, c, ctx := setup(t)
	const limit, n = 3, 30
	require.NoError(t, c.SetConcurrency(ctx, "q", limit, CreateQueue()))
	var now, peak atomic.Int32
	done := make(chan struct{}, n)
	h := func(context.Context, *Process) error {
		cur := now.Add(1)
		for {
			p := peak.Load()
			if cur <= p || peak.CompareAndSwap(p, cur) {
				break
			}
		}
		time.Sleep(10 * time.Millisecond) // the work
		now.Add(-1)
		done <- struct{}{}
		return nil
	}
	for range 3 {
		w := newWorker(t, b.client(), WorkerOptions{})
		require.NoError(t, w.Handle(ctx, "q", h, HandleOptions{Concurrency: 5}))
	}
	tasks := make([][]byte, n)
	for i := range tasks {
		tasks[i] = []byte{byte(i)}
	}
	require.NoError(t, second(c.EnqueueBatch(ctx, "q", tasks)))
	var mu sync.Mutex
	var sampled int64
	stop := make(chan struct{})
	go func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			info, err := c.QueueInfo(ctx, "q")
			if err == nil {
				mu.Lock()
				sampled = max(sampled, info.InFlight)
				mu.Unlock()
			}
		}
	}()
	for i := range n {
		recv(t, done, 10*time.Second, fmt.Sprintf("handler %d of %d done", i+1, n))
	}
	close(stop)
	assert.LessOrEqual(t, peak.Load(), int32(limit), "handlers at once")
	assert.Equal(t, int32(limit), peak.Load(), "the limit was reached: slots were handed on")
	mu.Lock()
	assert.LessOrEqual(t, sampled, int64(limit), "processes in Redis at once")
	mu.Unlock()

	// Raising the limit, or removing it, lets more run.
	info, err := c.QueueInfo(ctx, "q")
	require.NoError(t, err)
	assert.Equal(t, limit, info.Concurrency)
	require.NoError(t, c.SetConcurrency(ctx, "q", 0))
	info, err = c.QueueInfo(ctx, "q")
	require.NoError(t, err)
	assert.Zero(t, info.Concurrency)
	assert.ErrorIs(t, c.SetConcurrency(ctx, "q", -1), ErrInvalidOptions)
}

// A unique key admits one task while it lives (or for a TTL): a second
// enqueue adds nothing and says so, with the holder's id.
func TestUniqueTasks(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	id, err := c.Enqueue(ctx, "q", []byte("report"), Unique("report:7"))
	require.NoError(t, err)
	again, err := c.Enqueue(ctx, "q", []byte("report again"), Unique("report:7"))
	assert.ErrorIs(t, err, ErrDuplicate)
	assert.Equal(t, id, again, "the holder's id")
	assert.Equal(t, []string{"report"}, waiting(t, c, "q"))
	other, err := c.Enqueue(ctx, "q", []byte("another"), Unique("report:8"))
	require.NoError(t, err)

	// In flight it still holds the key; finished, it gives it up.
	w := newWorker(t, c, WorkerOptions{})
	require.NoError(t, w.StartWork(ctx, "q", Events{}))
	ps := dequeueAll(t, w, "q", 2)
	_, err = c.Enqueue(ctx, "q", []byte("x"), Unique("report:7"))
	assert.ErrorIs(t, err, ErrDuplicate)
	require.NoError(t, ps[0].Finish(ctx))
	_, err = c.Enqueue(ctx, "q", []byte("x"), Unique("report:7"))
	require.NoError(t, err, "the key is free once its task ended")
	// Cancelled or dead, too.
	require.NoError(t, second(c.CancelTask(ctx, "q", other)))
	require.ErrorIs(t, ps[1].Requeue(ctx), ErrTaskCancelled)
	require.NoError(t, second(c.Enqueue(ctx, "q", []byte("y"), Unique("report:8"))))

	// For a time, whatever becomes of the task: even once it is gone.
	t0 := time.Now()
	tick, err := c.Enqueue(ctx, "t", []byte("tick"), UniqueFor("tick", 300*time.Millisecond))
	require.NoError(t, err)
	require.NoError(t, second(c.CancelTask(ctx, "t", tick)))
	_, err = c.Enqueue(ctx, "t", []byte("tick"), UniqueFor("tick", 300*time.Millisecond))
	assert.ErrorIs(t, err, ErrDuplicate, "held for the period, though cancelled")
	eventually(t, 5*time.Second, "the period ends", func() bool {
		_, err := c.Enqueue(ctx, "t", []byte("tick"), UniqueFor("tick", 300*time.Millisecond))
		return err == nil
	})
	// Redis keeps time in whole milliseconds: the period starts at most 1 ms
	// before t0 on this process's clock (a run on the cluster saw 299.99 ms).
	assert.GreaterOrEqual(t, time.Since(t0), 299*time.Millisecond, "not before the period ended (one clock: Redis is local)")
	// Keys are per queue.
	require.NoError(t, second(c.Enqueue(ctx, "other", []byte("tick"), UniqueFor("tick", time.Minute))))

	_, err = c.EnqueueBatch(ctx, "q", [][]byte{[]byte("a")}, Unique("k"))
	assert.ErrorIs(t, err, ErrInvalidOptions, "a key fits one task")
	_, err = c.Enqueue(ctx, "q", []byte("a"), Unique(""))
	assert.ErrorIs(t, err, ErrInvalidOptions)
}

// A rate limit allows so many starts in any window across the fleet, by
// the Redis clock; a limited runtime sleeps until the next start is
// allowed instead of polling. On miniredis both clocks move a window at a
// time; on a real Redis, whose clock is the point, the windows pass in
// real time.
func TestRateLimit(t *testing.T) {
	t.Parallel()
	k := setupTimed(t, nil)
	c, ctx := k.c, k.ctx
	const rate, per, n = 3, 300 * time.Millisecond, 9
	require.NoError(t, c.SetRateLimit(ctx, "q", rate, per, CreateQueue()))
	info, err := c.QueueInfo(ctx, "q")
	require.NoError(t, err)
	assert.Equal(t, rate, info.Rate)
	assert.Equal(t, per, info.Per)

	var mu sync.Mutex
	var starts []uint64 // the processes' ids: the Redis clock (µs) at each dequeue
	began := make(chan struct{}, n)
	wc := k.client()
	dequeues := countCalls(wc, store.OpDequeue)
	var runtimes []*engine.Runtime
	for range 2 {
		w := newWorker(t, wc, WorkerOptions{})
		require.NoError(t, w.Handle(ctx, "q", func(_ context.Context, p *Process) error {
			at, err := strconv.ParseUint(p.ID(), 16, 64)
			mu.Lock()
			starts = append(starts, at)
			mu.Unlock()
			began <- struct{}{}
			return err
		}, HandleOptions{Concurrency: 5}))
		runtimes = append(runtimes, runnerOf(w, "q"))
	}
	tasks := make([][]byte, n)
	for i := range tasks {
		tasks[i] = []byte{byte(i)}
	}
	require.NoError(t, second(c.EnqueueBatch(ctx, "q", tasks)))
	k.windows(runtimes, began, per, rate, rate, rate)
	mu.Lock()
	defer mu.Unlock()
	slices.Sort(starts)
	for i := rate; i < len(starts); i++ {
		// By the clock the limit counts by (a process id is the Redis
		// clock at its dequeue, and the window holds those ids): the
		// (i-rate)-th start left the window before the i-th began. The
		// handlers' own clocks would add their scheduling delays.
		assert.GreaterOrEqual(t, starts[i]-starts[i-rate], uint64(per.Microseconds()), "start %d", i)
	}
	assert.Less(t, dequeues.Load(), int64(40), "dequeues: woken by the window, not polling")

	require.NoError(t, c.SetRateLimit(ctx, "q", 0, 0))
	info, err = c.QueueInfo(ctx, "q")
	require.NoError(t, err)
	assert.Zero(t, info.Rate)
	assert.ErrorIs(t, c.SetRateLimit(ctx, "q", 1, 0), ErrInvalidOptions)
	assert.ErrorIs(t, c.SetRateLimit(ctx, "q", 1, 1500*time.Microsecond), ErrInvalidOptions, "Redis would keep 1ms")

	// By hand: ErrRateLimited, saying when.
	require.NoError(t, c.SetRateLimit(ctx, "m", 1, time.Minute, CreateQueue()))
	require.NoError(t, second(c.EnqueueBatch(ctx, "m", [][]byte{[]byte("a"), []byte("b")})))
	mw := newWorker(t, c, WorkerOptions{})
	require.NoError(t, mw.StartWork(ctx, "m", Events{}))
	p := dequeueAll(t, mw, "m", 1)[0]
	require.NoError(t, p.Finish(ctx))
	_, err = mw.Dequeue(ctx, "m")
	assert.ErrorIs(t, err, ErrRateLimited)
}

// windows waits for each window's starts, counted in rounds, on began. On
// the Fake clocks it then waits for every runtime of rs to have armed the
// rate limit's timer, and moves both clocks just past the window (a start
// exactly one window after the last is still limited): no start may come
// before they move. On a real Redis the windows pass by themselves.
func (k *clocked) windows(rs []*engine.Runtime, began <-chan struct{}, per time.Duration, rounds ...int) {
	k.t.Helper()
	for i, n := range rounds {
		for j := range n {
			recv(k.t, began, testsignal.Wait, fmt.Sprintf("start %d of %d in window %d", j+1, n, i+1))
		}
		if k.clk == nil || i == len(rounds)-1 {
			continue
		}
		eventually(k.t, testsignal.Wait, "the rate limit's timers armed", func() bool {
			for _, r := range rs {
				if !r.Limited() {
					return false
				}
			}
			return true
		})
		select {
		case <-began:
			k.t.Fatalf("a start beyond the %d of window %d before the clocks moved", n, i+1)
		default:
		}
		k.advance(per + time.Millisecond)
	}
}

// Dequeues take high-priority tasks first, then normal, then low, FIFO
// within a level; a task keeps its level when it is requeued, retried,
// reclaimed or delayed; inspection and cancel see every level.
func TestPriorities(t *testing.T) {
	t.Parallel()
	k := setupTimed(t, nil)
	c, ctx := k.c, k.ctx
	require.NoError(t, second(c.EnqueueBatch(ctx, "q", [][]byte{[]byte("n1"), []byte("n2")})))
	require.NoError(t, second(c.EnqueueBatch(ctx, "q", [][]byte{[]byte("l1"), []byte("l2")}, LowPriority())))
	require.NoError(t, second(c.EnqueueBatch(ctx, "q", [][]byte{[]byte("h1"), []byte("h2")}, HighPriority())))
	require.NoError(t, second(c.Enqueue(ctx, "q", []byte("h0"), HighPriority(), AtFront())))
	assert.Equal(t, []string{"h0", "h1", "h2", "n1", "n2", "l1", "l2"}, waiting(t, c, "q"))
	n, err := c.QueueLen(ctx, "q")
	require.NoError(t, err)
	assert.EqualValues(t, 7, n)
	mid, err := c.Range(ctx, "q", 2, 5)
	require.NoError(t, err)
	assert.Equal(t, [][]byte{[]byte("h2"), []byte("n1"), []byte("n2"), []byte("l1")}, mid, "positions across levels")
	last, err := c.Range(ctx, "q", -1, -1)
	require.NoError(t, err)
	assert.Equal(t, [][]byte{[]byte("l2")}, last)

	w := newWorker(t, c, fast)
	require.NoError(t, w.StartWork(ctx, "q", Events{}))
	ps, err := w.DequeueN(ctx, "q", 4)
	require.NoError(t, err)
	var got []string
	for _, p := range ps {
		got = append(got, string(p.Task()))
	}
	assert.Equal(t, []string{"h0", "h1", "h2", "n1"}, got, "one dequeue across levels, in order")
	// h0 requeued, h1 retried later, h2 given back by a crash: each to its level.
	require.NoError(t, ps[0].Requeue(ctx))
	require.NoError(t, ps[1].Retry(ctx, 50*time.Millisecond, nil))
	require.NoError(t, ps[3].Finish(ctx))
	crash(w)
	pc, peer := k.reclaimingPeer()
	pc.core.Signals.Promoted.Init(t)
	require.NoError(t, peer.StartWork(ctx, "q", Events{}))
	k.run(fast.TTL + fast.RenewInterval)
	reclaimed(t, 1, pc)
	until(t, &pc.core.Signals.Promoted, "h1 due again", func() bool { return len(waiting(t, c, "q")) == 6 })
	got = waiting(t, c, "q")
	assert.Equal(t, []string{"h2", "h0", "h1", "n2", "l1", "l2"}, got[:6], "h2 to the front (reclaimed), h0 and h1 at the back of high")

	res, err := c.Cancel(ctx, "q", []byte("l1"))
	require.NoError(t, err)
	assert.EqualValues(t, 1, res.Removed)
	info, err := c.QueueInfo(ctx, "q")
	require.NoError(t, err)
	assert.EqualValues(t, 5, info.Waiting)
	dropped, err := c.DeleteQueue(ctx, "q")
	require.NoError(t, err)
	assert.EqualValues(t, 5, dropped)
	rep, err := c.Check(ctx, CheckOptions{})
	require.NoError(t, err)
	assert.Zero(t, rep.Problems(), "%v", rep)
}

// A runtime whose estimate of the Redis clock runs ahead of Redis wakes
// before the rate limit allows the next start; the dequeue then says the
// start is not allowed yet, at a time the estimate puts in the past. It
// must not arm its timer for that past time and dequeue again at once, for
// as long as the estimate is off.
func TestRateLimitedRuntimeWithAClockAheadDoesNotSpin(t *testing.T) {
	t.Parallel()
	b, c, ctx := setup(t)
	const per, ahead = 500 * time.Millisecond, 250 * time.Millisecond
	require.NoError(t, c.SetRateLimit(ctx, "q", 1, per, CreateQueue()))
	require.NoError(t, second(c.EnqueueBatch(ctx, "q", [][]byte{[]byte("a"), []byte("b"), []byte("c")})))
	wc := b.client()
	dequeues := countCalls(wc, store.OpDequeue)
	w := newWorker(t, wc, WorkerOptions{})
	started := make(chan struct{}, 3)
	caughtUp := make(chan struct{}, 1)
	require.NoError(t, w.Handle(ctx, "q", func(context.Context, *Process) error {
		started <- struct{}{}
		return nil
	}, HandleOptions{Concurrency: 1, Events: Events{Work: func(string, int64) {
		select {
		case caughtUp <- struct{}{}:
		default:
		}
	}}}))
	// The check after subscribing has read the Redis clock (its promotion)
	// by the time it raises the work event; nothing reads it after.
	recv(t, caughtUp, 5*time.Second, "the check after subscribing")
	w.parts.Clock.Shift(ahead)
	from := dequeues.Load()
	for i := range 3 {
		recv(t, started, 5*time.Second, fmt.Sprintf("start %d of 3", i+1))
	}
	// Without the spin: a dequeue or two per start, and one more for each
	// early wake-up.
	n := dequeues.Load() - from
	t.Logf("%d dequeues for two rate-limited starts, the clock estimate %v ahead", n, ahead)
	assert.LessOrEqual(t, n, int64(15), "dequeues while the clock estimate ran %v ahead", ahead)
}

// A StopWork that fails (the queue stays served) stops the loop, and with
// it the rate limit's timer, but leaves limitedAt set: the restarted loop's
// rate-limited dequeue then finds WakeAt "armed for an earlier time" and
// arms nothing, so the waiting tasks wait for the next work event.
func TestARestartedLoopWakesForTheRateLimit(t *testing.T) {
	t.Parallel()
	k := setupClocked(t)
	c, ctx := k.c, k.ctx
	require.NoError(t, c.SetRateLimit(ctx, "q", 1, time.Second, CreateQueue()))
	w := newWorker(t, c, WorkerOptions{})
	started := make(chan struct{}, 10)
	require.NoError(t, w.Handle(ctx, "q", func(context.Context, *Process) error {
		started <- struct{}{}
		return nil
	}, HandleOptions{Concurrency: 1}))
	require.NoError(t, second(c.EnqueueBatch(ctx, "q", [][]byte{[]byte("a"), []byte("b"), []byte("c")})))
	recv(t, started, 5*time.Second, "first start")
	r := runnerOf(w, "q")
	eventually(t, 5*time.Second, "rate-limit timer armed", r.Limited)
	timers := k.clk.Timers()
	failStopWork(t, c, w, "q")
	// The restarted loop's dequeue finds the window used and arms a timer
	// in place of the one its stop stopped: the clocks move only then, so
	// that the dequeue does not find the window over.
	k.waitTimers(timers)
	// The window is one second from the first start, which leaves it only
	// once it is past: both clocks move just past it, and the timer fires
	// for a dequeue the limit allows. A loop that armed no timer starts
	// nothing however far they move.
	k.advance(time.Second + time.Millisecond)
	recv(t, started, 5*time.Second, "second start after the window")
}

// The rate limit counts a start when a worker takes the task, not when a
// handler runs it: a task taken and given back without running has used
// its start.
func TestRateLimitCountsTakes(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	require.NoError(t, c.SetRateLimit(ctx, "q", 1, time.Hour, CreateQueue()))
	require.NoError(t, second(c.Enqueue(ctx, "q", []byte("a"))))
	w := newWorker(t, c, WorkerOptions{})
	require.NoError(t, w.StartWork(ctx, "q", Events{}))
	p := dequeueAll(t, w, "q", 1)[0]
	require.NoError(t, p.Requeue(ctx)) // no handler ran it
	_, err := w.Dequeue(ctx, "q")
	assert.ErrorIs(t, err, ErrRateLimited, "the take used the window's one start")
	n, err := c.QueueLen(ctx, "q")
	require.NoError(t, err)
	assert.EqualValues(t, 1, n)
}

// A control on a queue that does not exist changes nothing and says so,
// unless asked to make it: a misspelt name makes no queue.
func TestControlsOnAQueueThatDoesNotExist(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	controls := map[string]func(q string, opts ...ControlOption) error{
		"pause":  func(q string, opts ...ControlOption) error { return c.Pause(ctx, q, opts...) },
		"resume": func(q string, opts ...ControlOption) error { return c.Resume(ctx, q, opts...) },
		"limit":  func(q string, opts ...ControlOption) error { return c.SetConcurrency(ctx, q, 3, opts...) },
		"rate":   func(q string, opts ...ControlOption) error { return c.SetRateLimit(ctx, q, 5, time.Second, opts...) },
	}
	meta := func(q string) int64 {
		n, err := c.core.Redis.Do(ctx, c.core.Redis.B().Exists().Key(c.core.Store.Keys().Queue(q).Meta).Build()).AsInt64()
		require.NoError(t, err)
		return n
	}
	for name, control := range controls {
		typo := "nonexistent-" + name
		assert.ErrorIs(t, control(typo), ErrNoQueue, name)
		assert.Zero(t, meta(typo), "%s wrote the meta hash of a queue that does not exist", name)

		made := "made-" + name
		require.NoError(t, control(made, CreateQueue()), name)
		require.NoError(t, control(made), "%s on the queue it made", name)
	}
	queues, err := c.Queues(ctx)
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{"made-pause", "made-resume", "made-limit", "made-rate"}, queues)

	// A queue exists once enqueued to, or served, and no more once deleted.
	require.NoError(t, second(c.Enqueue(ctx, "jobs", []byte("x"))))
	require.NoError(t, c.Pause(ctx, "jobs"))
	w := newWorker(t, c, WorkerOptions{})
	require.NoError(t, w.StartWork(ctx, "served", Events{}))
	require.NoError(t, c.SetConcurrency(ctx, "served", 2))
	require.NoError(t, second(c.DeleteQueue(ctx, "jobs")))
	assert.ErrorIs(t, c.Resume(ctx, "jobs"), ErrNoQueue)
	queues, err = c.Queues(ctx)
	require.NoError(t, err)
	assert.NotContains(t, queues, "jobs")
}

// Limits are whole numbers the scripts hold exactly: up to MaxLimit,
// read back as set; anything larger is refused, changing nothing.
func TestLimitsAboveMaxLimitAreRefused(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	require.NoError(t, second(c.Enqueue(ctx, "q", []byte("x"))))
	require.NoError(t, c.SetConcurrency(ctx, "q", 7))
	for _, n := range []int64{MaxLimit + 1, MaxLimit + 2, 1 << 62, 1<<63 - 1} {
		assert.ErrorIs(t, c.SetConcurrency(ctx, "q", int(n)), ErrInvalidOptions, "limit %d", n)
		assert.ErrorIs(t, c.SetRateLimit(ctx, "q", int(n), time.Second), ErrInvalidOptions, "rate %d", n)
	}
	info, err := c.QueueInfo(ctx, "q")
	require.NoError(t, err)
	assert.Equal(t, 7, info.Concurrency, "a refused limit changed nothing")
	assert.Zero(t, info.Rate)

	require.NoError(t, c.SetConcurrency(ctx, "q", MaxLimit))
	require.NoError(t, c.SetRateLimit(ctx, "q", MaxLimit-1, time.Second))
	info, err = c.QueueInfo(ctx, "q")
	require.NoError(t, err)
	assert.Equal(t, MaxLimit, info.Concurrency)
	assert.Equal(t, MaxLimit-1, info.Rate)
	// A limit that large lets every task start.
	w := newWorker(t, c, WorkerOptions{})
	require.NoError(t, w.StartWork(ctx, "q", Events{}))
	p, err := w.Dequeue(ctx, "q")
	require.NoError(t, err)
	assert.Equal(t, "x", string(p.Task()))
}

// QueueInfo.WaitingSince is when the task next to wait longest became
// due, over every level: its enqueue, or the end of its delay.
func TestQueueInfoTellsWhenTheOldestWaitingTaskBecameDue(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	info, err := c.QueueInfo(ctx, "q")
	require.NoError(t, err)
	assert.True(t, info.WaitingSince.IsZero(), "nothing waits")

	since := func(id string) time.Time {
		us, err := strconv.ParseInt(id, 16, 64)
		require.NoError(t, err)
		return time.UnixMicro(us)
	}
	low, err := c.Enqueue(ctx, "q", []byte("low"), LowPriority())
	require.NoError(t, err)
	_, err = c.Enqueue(ctx, "q", []byte("normal"))
	require.NoError(t, err)
	_, err = c.Enqueue(ctx, "q", []byte("high"), HighPriority())
	require.NoError(t, err)
	info, err = c.QueueInfo(ctx, "q")
	require.NoError(t, err)
	assert.Equal(t, since(low), info.WaitingSince, "the low task waits longest, though it goes last")

	// Taken, and sent back after a delay: it waits from the delay's end.
	w := newWorker(t, c, WorkerOptions{})
	require.NoError(t, w.StartWork(ctx, "q", Events{}))
	for range 3 {
		p, err := w.Dequeue(ctx, "q")
		require.NoError(t, err)
		if string(p.Task()) == "low" {
			require.NoError(t, p.Retry(ctx, 20*time.Millisecond, errors.New("later")))
		} else {
			require.NoError(t, p.Finish(ctx))
		}
	}
	eventually(t, 10*time.Second, "the retried task to wait again", func() bool {
		info, err = c.QueueInfo(ctx, "q")
		require.NoError(t, err)
		return info.Waiting == 1
	})
	assert.True(t, info.WaitingSince.After(since(low).Add(20*time.Millisecond)) || info.WaitingSince.Equal(since(low).Add(20*time.Millisecond)),
		"waits from its backoff's end (%v), not its enqueue (%v)", info.WaitingSince, since(low))
}

// A rate-limited runtime wakes when the limit allows its next start by
// the worker's estimate of the Redis clock, which its dequeues keep: with
// Redis an hour ahead of the worker, its timer fires a second later, not
// an hour and a second.
func TestRateLimitedRuntimeWakesByTheRedisClock(t *testing.T) {
	t.Parallel()
	k := setupClocked(t)
	c, ctx := k.c, k.ctx
	redisNow := k.start.Add(time.Hour)
	k.b.mini.SetTime(redisNow)
	require.NoError(t, c.SetRateLimit(ctx, "q", 1, time.Second, CreateQueue()))
	require.NoError(t, second(c.Enqueue(ctx, "q", []byte("a"))))
	w := newWorker(t, c, WorkerOptions{})
	started := make(chan struct{}, 1)
	require.NoError(t, w.Handle(ctx, "q", func(context.Context, *Process) error {
		started <- struct{}{}
		return nil
	}, HandleOptions{Concurrency: 1}))
	recv(t, started, 5*time.Second, "the start")
	// The next dequeue finds the limit used up (before it finds the
	// queue empty) and arms the timer; once it fires, the dequeue it
	// makes finds the queue empty and arms none.
	r := runnerOf(w, "q")
	eventually(t, 5*time.Second, "the rate limit's timer armed", r.Limited)
	// Both clocks move a window at a time, up to five, each step just
	// past a window's end (a start exactly one window after the last is
	// still limited): the worker's estimate of the Redis clock is off by
	// up to half a round trip, which a loaded machine makes long, so a
	// timer may fire a step early, find the limit still used and be armed
	// again for the next. A timer that does not follow the clocks stays
	// armed through all five.
	const step = time.Second + time.Millisecond
	for i := 1; i <= 5 && r.Limited(); i++ {
		k.b.mini.SetTime(redisNow.Add(time.Duration(i) * step))
		k.clk.Advance(step)
		deadline := time.Now().Add(2 * time.Second)
		for r.Limited() && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
	}
	assert.False(t, r.Limited(), "the rate limit's timer fired within five seconds of both clocks")
}
