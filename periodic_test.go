package worqr

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/worqr/worqr/internal/store"
)

// tickPayload makes each tick's payload its time in Unix ms.
func tickPayload(tick time.Time) []byte { return []byte(strconv.FormatInt(tick.UnixMilli(), 10)) }

// periodicTicks reads the ticks a queue's tasks were enqueued for, in
// order, checking that none was enqueued before its tick.
func periodicTicks(t *testing.T, c *Client, queue string) []int64 {
	t.Helper()
	tasks, err := c.Tasks(ctxT(t), queue, 0, -1)
	require.NoError(t, err)
	var ticks []int64
	for _, task := range tasks {
		tick, err := strconv.ParseInt(string(task.Payload), 10, 64)
		require.NoError(t, err)
		require.False(t, task.EnqueuedAt.Before(time.UnixMilli(tick)), "tick %d enqueued early, at %v", tick, task.EnqueuedAt)
		ticks = append(ticks, tick)
	}
	slices.Sort(ticks)
	return ticks
}

// requireOncePerTick checks that ticks holds each tick once, every period,
// with no gap but where the test process stalled: a tick is skipped, by
// the catch-up policy, only when no worker ran its schedule from that tick
// until the next, and stalls records whether this process (and the Redis
// it talks to) could not have either.
func requireOncePerTick(t *testing.T, ticks []int64, period time.Duration, stalls *stallWatch) {
	t.Helper()
	requireNeverTwice(t, ticks, period)
	p := period.Milliseconds()
	for i := 1; i < len(ticks); i++ {
		for m := ticks[i-1] + p; m < ticks[i]; m += p {
			from := time.UnixMilli(m)
			require.True(t, stalls.stalledWithin(from, from.Add(period), period/2),
				"tick %d missed with no stall of the test process to explain it (stalls %v): %v", m, stalls.seen(), ticks)
		}
	}
}

// stallWatch records the stalls of the test process and of its Redis: a
// goroutine pings Redis, on the client the workers use, every 5 ms, and
// notes every stretch of more than a given length between two answers.
type stallWatch struct {
	stop context.CancelFunc
	done chan struct{}

	mu    sync.Mutex     // guards gaps
	gaps  [][2]time.Time // from the last answer to the next, when long
	least time.Duration  // the shortest gap noted
}

func watchStalls(t *testing.T, c *Client, least time.Duration) *stallWatch {
	ctx, stop := context.WithCancel(context.Background())
	s := &stallWatch{stop: stop, done: make(chan struct{}), least: least}
	t.Cleanup(s.end)
	go func() {
		defer close(s.done)
		last := time.Now()
		for ctx.Err() == nil {
			_ = c.core.Redis.Do(ctx, c.core.Redis.B().Ping().Build()).Error()
			now := time.Now()
			if now.Sub(last) >= s.least {
				s.mu.Lock()
				s.gaps = append(s.gaps, [2]time.Time{last, now})
				s.mu.Unlock()
			}
			last = now
			select {
			case <-time.After(5 * time.Millisecond):
			case <-ctx.Done():
			}
		}
	}()
	return s
}

func (s *stallWatch) end() {
	s.stop()
	<-s.done
}

// stalledWithin reports whether a stall of at least d overlapped
// [from, to].
func (s *stallWatch) stalledWithin(from, to time.Time, d time.Duration) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, g := range s.gaps {
		if g[1].Sub(g[0]) >= d && g[0].Before(to) && g[1].After(from) {
			return true
		}
	}
	return false
}

func (s *stallWatch) seen() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, g := range s.gaps {
		out = append(out, fmt.Sprintf("%d+%dms", g[0].UnixMilli(), g[1].Sub(g[0]).Milliseconds()))
	}
	return out
}

// periodicSignals turns on the signals tickTo waits on, for the
// schedules of k.c's workers.
func (k *clocked) periodicSignals() {
	k.c.core.Signals.Ticked.Init(k.t)
	k.c.core.Signals.Waiting.Init(k.t)
}

// tickTo moves the clocks to the next tick of a schedule of every period,
// once n workers running it wait for that tick, and waits for their runs
// of it (their signals turned on by periodicSignals): one enqueues it, the
// others find it taken.
func (k *clocked) tickTo(period time.Duration, n int) time.Time {
	k.t.Helper()
	next := Every(period).Next(k.clk.Now())
	for range n {
		require.Equal(k.t, next, k.c.core.Signals.Waiting.WaitOrTimeout(), "the wait for the tick")
	}
	k.advance(next.Sub(k.clk.Now()))
	for range n {
		require.Equal(k.t, next, k.c.core.Signals.Ticked.WaitOrTimeout(), "the tick run")
	}
	return next
}

// millis are ticks in Unix ms, as periodicTicks gives them.
func millis(ticks ...time.Time) []int64 {
	out := make([]int64, 0, len(ticks))
	for _, t := range ticks {
		out = append(out, t.UnixMilli())
	}
	return out
}

// tickRetry is how long a tick that failed waits to try again
// (periodic.retryTickAfter).
const tickRetry = 250 * time.Millisecond

// requireNeverTwice checks that ticks are on the period and each at most
// once. (A lone worker stalled for more than a period by a loaded machine
// skips the ticks it missed, by the catch-up policy: gaps are allowed.)
func requireNeverTwice(t *testing.T, ticks []int64, period time.Duration) {
	t.Helper()
	p := period.Milliseconds()
	for i, tick := range ticks {
		require.Zero(t, tick%p, "tick %d is not on the period", tick)
		if i > 0 {
			require.Greater(t, tick, ticks[i-1], "tick %d enqueued twice: %v", tick, ticks)
		}
	}
}

// Workers running the same schedule enqueue each tick once between them,
// and none once closed. On miniredis the clocks move tick by tick, so no
// tick may be missed; on a real Redis see periodicOncePerTickRealTime.
func TestPeriodicOncePerTickAcrossWorkers(t *testing.T) {
	b := newBackend(t)
	if b.real {
		periodicOncePerTickRealTime(t, b)
		return
	}
	t.Parallel()
	k := setupClockedOn(t, b, nil)
	c, ctx := k.c, k.ctx
	k.periodicSignals()
	const period = 100 * time.Millisecond
	workers := make([]*Worker, 3)
	for i := range workers {
		workers[i] = newWorker(t, c, long)
		require.NoError(t, workers[i].Periodic(ctx, "beat", "periodic", Every(period), nil, PeriodicOptions{Payload: tickPayload}))
	}
	var want []time.Time
	for range 10 {
		want = append(want, k.tickTo(period, len(workers)))
	}
	for _, w := range workers {
		require.NoError(t, w.Close(ctx))
	}
	ticks := periodicTicks(t, c, "periodic")
	require.Equal(t, millis(want...), ticks, "each tick once, none missed")
	// Schedules tells the last tick and its task, the last one enqueued.
	ss, err := c.Schedules(ctx, "periodic")
	require.NoError(t, err)
	require.Len(t, ss, 1)
	require.Equal(t, "beat", ss[0].Name)
	require.Equal(t, ticks[len(ticks)-1], ss[0].LastTick.UnixMilli())
	ts, err := c.Tasks(ctx, "periodic", -1, -1)
	require.NoError(t, err)
	require.Len(t, ts, 1)
	require.Equal(t, ts[0].ID, ss[0].TaskID)
	require.Equal(t, ss[0].LastTick.Add(period), ss[0].NextTick, "the tick after the last")
	// A new schedule has nothing to catch up: its first tick is the one
	// after the registration.
	require.Equal(t, Every(period).Next(k.start), want[0])
	// Closed workers enqueue no more.
	k.advance(3 * period)
	c.core.Signals.Ticked.RequireEmpty()
	require.Len(t, periodicTicks(t, c, "periodic"), len(ticks))
}

// periodicOncePerTickRealTime is TestPeriodicOncePerTickAcrossWorkers on
// a real Redis, whose clock the test cannot move: ticks pass in real time,
// and a tick is missed only where the test process stalled. Not parallel
// for that.
func periodicOncePerTickRealTime(t *testing.T, b *backend) {
	c, ctx := b.client(), ctxT(t)
	const period = 100 * time.Millisecond
	stalls := watchStalls(t, c, period/2)
	workers := make([]*Worker, 3)
	start := time.Now()
	for i := range workers {
		workers[i] = newWorker(t, c, fast)
		require.NoError(t, workers[i].Periodic(ctx, "beat", "periodic", Every(period), nil, PeriodicOptions{Payload: tickPayload}))
	}
	eventually(t, 10*time.Second, "ten ticks", func() bool { return len(periodicTicks(t, c, "periodic")) >= 10 })
	for _, w := range workers {
		require.NoError(t, w.Close(ctx))
	}
	closed := time.Now()
	ticks := periodicTicks(t, c, "periodic")
	t.Logf("%d ticks: %v", len(ticks), ticks)
	requireOncePerTick(t, ticks, period, stalls)
	// Schedules tells the last tick and its task, the last one enqueued.
	ss, err := c.Schedules(ctx, "periodic")
	require.NoError(t, err)
	require.Len(t, ss, 1)
	require.Equal(t, "beat", ss[0].Name)
	require.Equal(t, ticks[len(ticks)-1], ss[0].LastTick.UnixMilli())
	ts, err := c.Tasks(ctx, "periodic", -1, -1)
	require.NoError(t, err)
	require.Len(t, ts, 1)
	require.Equal(t, ts[0].ID, ss[0].TaskID)
	require.Equal(t, ss[0].LastTick.Add(period), ss[0].NextTick, "the tick after the last")
	// A new schedule has nothing to catch up: its first tick follows the
	// registration.
	require.Greater(t, ticks[0], start.UnixMilli()-50)
	// Closed workers enqueue no more: three more periods pass (by the
	// Redis clock, which decides ticks) with no task.
	redisPassed(t, c, closed.Add(3*period))
	require.Len(t, periodicTicks(t, c, "periodic"), len(ticks))
}

// A schedule's ticks go on, none missed nor doubled, when one of the
// workers running it crashes.
func TestPeriodicSurvivesWorkerCrash(t *testing.T) {
	b := newBackend(t)
	if b.real {
		periodicSurvivesWorkerCrashRealTime(t, b)
		return
	}
	t.Parallel()
	k := setupClockedOn(t, b, nil)
	c, ctx := k.c, k.ctx
	k.periodicSignals()
	const period = 100 * time.Millisecond
	w1, w2 := newWorker(t, c, long), newWorker(t, c, long)
	for _, w := range []*Worker{w1, w2} {
		require.NoError(t, w.Periodic(ctx, "beat", "periodic", Every(period), nil, PeriodicOptions{Payload: tickPayload}))
	}
	var want []time.Time
	for range 3 {
		want = append(want, k.tickTo(period, 2))
	}
	// Both wait for the next tick when one crashes.
	next := Every(period).Next(k.clk.Now())
	for range 2 {
		require.Equal(t, next, c.core.Signals.Waiting.WaitOrTimeout())
	}
	crash(w1)
	k.advance(next.Sub(k.clk.Now()))
	require.Equal(t, next, c.core.Signals.Ticked.WaitOrTimeout(), "the survivor's run of the tick")
	want = append(want, next)
	for range 4 {
		want = append(want, k.tickTo(period, 1))
	}
	require.NoError(t, w2.Close(ctx))
	require.Equal(t, millis(want...), periodicTicks(t, c, "periodic"), "none missed nor doubled around the crash")
}

// periodicSurvivesWorkerCrashRealTime is TestPeriodicSurvivesWorkerCrash
// on a real Redis, in real time (see periodicOncePerTickRealTime).
func periodicSurvivesWorkerCrashRealTime(t *testing.T, b *backend) {
	c, ctx := b.client(), ctxT(t)
	const period = 100 * time.Millisecond
	stalls := watchStalls(t, c, period/2)
	w1, w2 := newWorker(t, c, fast), newWorker(t, c, fast)
	for _, w := range []*Worker{w1, w2} {
		require.NoError(t, w.Periodic(ctx, "beat", "periodic", Every(period), nil, PeriodicOptions{Payload: tickPayload}))
	}
	eventually(t, 10*time.Second, "three ticks", func() bool { return len(periodicTicks(t, c, "periodic")) >= 3 })
	crash(w1)
	crashed := time.Now()
	eventually(t, 10*time.Second, "five ticks after the crash", func() bool {
		ticks := periodicTicks(t, c, "periodic")
		return ticks[len(ticks)-1] >= crashed.Add(5*period).UnixMilli()
	})
	require.NoError(t, w2.Close(ctx))
	ticks := periodicTicks(t, c, "periodic")
	t.Logf("%d ticks: %v", len(ticks), ticks)
	requireOncePerTick(t, ticks, period, stalls) // none missed nor doubled around the crash
}

// Ticks missed while no worker ran the schedule are caught up once, by a
// task for the latest of them; the schedule goes on every period from it.
func TestPeriodicMissedTicksCatchUpOnce(t *testing.T) {
	b := newBackend(t)
	if b.real {
		periodicMissedTicksCatchUpOnceRealTime(t, b)
		return
	}
	t.Parallel()
	k := setupClockedOn(t, b, nil)
	c, ctx := k.c, k.ctx
	k.periodicSignals()
	const period = 200 * time.Millisecond
	w1 := newWorker(t, c, long)
	require.NoError(t, w1.Periodic(ctx, "beat", "periodic", Every(period), nil, PeriodicOptions{Payload: tickPayload}))
	before := []time.Time{k.tickTo(period, 1), k.tickTo(period, 1)}
	require.NoError(t, w1.Close(ctx))
	select { // the closed schedule's wait, if it began one
	case <-c.core.Signals.Waiting.C():
	default:
	}
	require.Equal(t, millis(before...), periodicTicks(t, c, "periodic"))
	lastBefore := before[len(before)-1]

	k.advance(5*period + period/2) // five ticks with no worker
	c.core.Signals.Ticked.RequireEmpty()
	w2 := newWorker(t, c, long)
	require.NoError(t, w2.Periodic(ctx, "beat", "periodic", Every(period), nil, PeriodicOptions{Payload: tickPayload}))
	registered := w2.parts.Clock.Now(w2.c.core.Clock)
	// One task, for the latest tick missed; the earlier ones skipped.
	caughtUp := c.core.Signals.Ticked.WaitOrTimeout()
	require.Equal(t, lastBefore.Add(5*period), caughtUp, "not the latest missed tick")
	require.False(t, caughtUp.After(registered))
	after := []time.Time{caughtUp}
	for range 3 {
		after = append(after, k.tickTo(period, 1))
	}
	require.NoError(t, w2.Close(ctx))
	require.Equal(t, millis(append(before, after...)...), periodicTicks(t, c, "periodic"), "every period on from the catch-up")
}

// periodicMissedTicksCatchUpOnceRealTime is
// TestPeriodicMissedTicksCatchUpOnce on a real Redis, in real time.
func periodicMissedTicksCatchUpOnceRealTime(t *testing.T, b *backend) {
	c, ctx := b.client(), ctxT(t)
	const period = 200 * time.Millisecond
	w1 := newWorker(t, c, fast)
	require.NoError(t, w1.Periodic(ctx, "beat", "periodic", Every(period), nil, PeriodicOptions{Payload: tickPayload}))
	eventually(t, 2*time.Second, "two ticks", func() bool { return len(periodicTicks(t, c, "periodic")) >= 2 })
	require.NoError(t, w1.Close(ctx))
	before := periodicTicks(t, c, "periodic")
	lastBefore := before[len(before)-1]

	redisPassed(t, c, time.UnixMilli(lastBefore).Add(5*period)) // four ticks or more with no worker
	w2 := newWorker(t, c, fast)
	require.NoError(t, w2.Periodic(ctx, "beat", "periodic", Every(period), nil, PeriodicOptions{Payload: tickPayload}))
	registered := w2.parts.Clock.Now(w2.c.core.Clock).UnixMilli()
	eventually(t, period/2, "the catch-up task", func() bool { return len(periodicTicks(t, c, "periodic")) > len(before) })
	caughtUp := periodicTicks(t, c, "periodic")[len(before)]
	// One task, for the latest tick missed; the earlier ones skipped.
	require.Greater(t, caughtUp-lastBefore, 3*period.Milliseconds(), "not the latest missed tick")
	require.LessOrEqual(t, caughtUp, registered)
	require.Greater(t, caughtUp, registered-period.Milliseconds())

	eventually(t, 10*time.Second, "four ticks from the catch-up on", func() bool {
		return len(periodicTicks(t, c, "periodic"))-len(before) >= 4
	})
	require.NoError(t, w2.Close(ctx))
	after := periodicTicks(t, c, "periodic")
	t.Logf("before %v, after %v", before, after)
	// One worker at a time: under load it may miss a tick and skip it (the
	// policy tested here), so only duplicates are errors.
	requireNeverTwice(t, before, period)
	require.Equal(t, caughtUp, after[len(before)])
	requireNeverTwice(t, after[len(before):], period) // on from the catch-up
}

func TestPeriodicOptionsAndErrors(t *testing.T) {
	_, c, ctx := setup(t)
	w := newWorker(t, c, fast)
	every := Every(50 * time.Millisecond)
	for _, bad := range []struct {
		name  string
		sched Schedule
		opts  PeriodicOptions
	}{
		{"", every, PeriodicOptions{}},
		{strings.Repeat("x", MaxPeriodicNameLen+1), every, PeriodicOptions{}},
		{"nil", nil, PeriodicOptions{}},
		{"zero", Every(0), PeriodicOptions{}},
		{"negative", Every(-time.Second), PeriodicOptions{}},
		{"tiny", Every(time.Microsecond), PeriodicOptions{}},
		{"never", scheduleFunc(func(time.Time) time.Time { return time.Time{} }), PeriodicOptions{}},
		{"stuck", scheduleFunc(func(t time.Time) time.Time { return t }), PeriodicOptions{}},
		{"timeout", every, PeriodicOptions{Timeout: -time.Second}},
		{"retain", every, PeriodicOptions{Retain: -time.Second}},
		{"weight", every, PeriodicOptions{Weight: -1}},
		{"heavy", every, PeriodicOptions{Weight: MaxWeight + 1}},
	} {
		err := w.Periodic(ctx, bad.name, "periodic", bad.sched, nil, bad.opts)
		require.ErrorIs(t, err, ErrInvalidOptions, "%q", bad.name)
	}
	require.ErrorIs(t, w.Periodic(ctx, "ok", "", every, nil, PeriodicOptions{}), ErrInvalidQueueName)

	// Options reach the tasks.
	require.NoError(t, w.Periodic(ctx, "ok", "periodic", every, []byte("fixed"), PeriodicOptions{MaxAttempts: 3, Weight: 2}))
	require.ErrorIs(t, w.Periodic(ctx, "ok", "periodic", every, nil, PeriodicOptions{}), ErrInvalidOptions, "registered twice")
	eventually(t, 2*time.Second, "a tick", func() bool {
		n, err := c.QueueLen(ctx, "periodic")
		return err == nil && n > 0
	})
	require.True(t, w.StopPeriodic("ok", "periodic"))
	require.False(t, w.StopPeriodic("ok", "periodic"))
	tasks, err := c.Tasks(ctx, "periodic", 0, -1)
	require.NoError(t, err)
	for _, task := range tasks {
		require.Equal(t, "fixed", string(task.Payload))
		require.Equal(t, 3, task.MaxAttempts)
		require.Equal(t, 2, task.Weight)
	}
	redisPassed(t, c, time.Now().Add(3*50*time.Millisecond)) // three periods
	n, err := c.QueueLen(ctx, "periodic")
	require.NoError(t, err)
	require.EqualValues(t, len(tasks), n, "stopped schedule still ticks")

	// A negative MaxAttempts is no limit, as at enqueue.
	require.NoError(t, w.Periodic(ctx, "unlimited", "periodic-unlimited", every, nil, PeriodicOptions{MaxAttempts: -2}))
	eventually(t, 2*time.Second, "a tick of the unlimited schedule", func() bool {
		n, err := c.QueueLen(ctx, "periodic-unlimited")
		return err == nil && n > 0
	})
	require.True(t, w.StopPeriodic("unlimited", "periodic-unlimited"))
	tasks, err = c.Tasks(ctx, "periodic-unlimited", 0, -1)
	require.NoError(t, err)
	require.NotEmpty(t, tasks)
	require.Equal(t, -1, tasks[0].MaxAttempts)

	// Check knows the periodic hash.
	rep, err := c.Check(ctx, CheckOptions{})
	require.NoError(t, err)
	require.Empty(t, rep.UnknownKeys)

	require.NoError(t, w.Close(ctx))
	require.True(t, errors.Is(w.Periodic(ctx, "late", "periodic", every, nil, PeriodicOptions{}), ErrWorkerClosed))
}

type scheduleFunc func(time.Time) time.Time

func (f scheduleFunc) Next(t time.Time) time.Time { return f(t) }

func TestPeriodicEveryIsAligned(t *testing.T) {
	e := Every(time.Hour)
	at := time.Date(2026, 3, 4, 10, 2, 30, 0, time.FixedZone("X", 3600))
	require.Equal(t, time.Date(2026, 3, 4, 10, 0, 0, 0, time.UTC), e.Next(at))
	require.Equal(t, time.Date(2026, 3, 4, 11, 0, 0, 0, time.UTC), e.Next(time.Date(2026, 3, 4, 10, 0, 0, 0, time.UTC)))
	require.Equal(t, time.Unix(0, 0).UTC(), Every(time.Second).Next(time.Unix(0, -1)))
}

// A tick that fails (Redis unreachable) is tried again; the ticks missed
// meanwhile follow the policy: one task, for the latest, then every tick.
func TestPeriodicTickFailuresAreRetried(t *testing.T) {
	b := newBackend(t)
	if b.real {
		periodicTickFailuresAreRetriedRealTime(t, b)
		return
	}
	t.Parallel()
	k := setupClockedOn(t, b, nil)
	c, ctx := k.c, k.ctx
	k.periodicSignals()
	const period = 100 * time.Millisecond
	var failing atomic.Bool
	var failed atomic.Int64
	c.core.Store.SetFault(func(_ context.Context, op store.Op, _ string) error {
		if op == store.OpTick && failing.Load() {
			failed.Add(1)
			return errInjected
		}
		return nil
	})
	w := newWorker(t, c, long)
	require.NoError(t, w.Periodic(ctx, "beat", "periodic", Every(period), nil, PeriodicOptions{Payload: tickPayload}))
	var want []time.Time
	for range 3 {
		want = append(want, k.tickTo(period, 1))
	}
	failing.Store(true)
	k.tickTo(period, 1)
	// The outage lasts three retries, more than three periods: three ticks
	// or more are missed.
	for range 3 {
		c.core.Signals.Waiting.WaitOrTimeout() // the retry's timer
		k.advance(tickRetry)
		c.core.Signals.Ticked.WaitOrTimeout()
	}
	require.EqualValues(t, 4, failed.Load(), "ticks tried during the outage")
	failing.Store(false)
	c.core.Signals.Waiting.WaitOrTimeout()
	k.advance(tickRetry)
	caughtUp := c.core.Signals.Ticked.WaitOrTimeout()
	require.Equal(t, Every(period).Next(k.clk.Now().Add(-period)), caughtUp, "the catch-up is the latest missed tick")
	want = append(want, caughtUp)
	for range 3 {
		want = append(want, k.tickTo(period, 1))
	}
	require.NoError(t, w.Close(ctx))
	ticks := periodicTicks(t, c, "periodic")
	require.Equal(t, millis(want...), ticks, "one gap, for the outage")
	require.GreaterOrEqual(t, want[3].Sub(want[2]), 3*period, "ticks missed in the outage: %v", ticks)
}

// periodicTickFailuresAreRetriedRealTime is
// TestPeriodicTickFailuresAreRetried on a real Redis, in real time.
func periodicTickFailuresAreRetriedRealTime(t *testing.T, b *backend) {
	c, ctx := b.client(), ctxT(t)
	const period = 100 * time.Millisecond
	var failing atomic.Bool
	var failed atomic.Int64
	c.core.Store.SetFault(func(_ context.Context, op store.Op, _ string) error {
		if op == store.OpTick && failing.Load() {
			failed.Add(1)
			return errInjected
		}
		return nil
	})
	w := newWorker(t, c, fast)
	require.NoError(t, w.Periodic(ctx, "beat", "periodic", Every(period), nil, PeriodicOptions{Payload: tickPayload}))
	eventually(t, 10*time.Second, "three ticks", func() bool { return len(periodicTicks(t, c, "periodic")) >= 3 })
	failing.Store(true)
	failedFrom := time.Now()
	// The outage lasts until ticks have failed and more than three periods
	// have passed, so that three ticks or more are missed.
	eventually(t, 10*time.Second, "ticks fail for three periods", func() bool {
		return failed.Load() >= 3 && time.Since(failedFrom) > 3*period+period/2
	})
	failing.Store(false)
	n := len(periodicTicks(t, c, "periodic"))
	eventually(t, 10*time.Second, "three ticks after the outage", func() bool { return len(periodicTicks(t, c, "periodic")) >= n+3 })
	require.NoError(t, w.Close(ctx))
	ticks := periodicTicks(t, c, "periodic")
	t.Logf("%d ticks: %v", len(ticks), ticks)
	// The outage's gap is the one after the last tick written before it
	// began. Other gaps are allowed: a stall of the loaded test process
	// longer than a period misses ticks too, and the same policy skips
	// them (the fake clock's run above checks that policy exactly).
	before := -1
	for i, tick := range ticks {
		d := tick - ticks[max(i-1, 0)]
		require.Zero(t, d%period.Milliseconds(), "off the period: %v", ticks)
		require.True(t, i == 0 || d > 0, "a tick twice: %v", ticks)
		if tick <= failedFrom.UnixMilli() {
			before = i
		}
	}
	require.True(t, before >= 0 && before+1 < len(ticks), "ticks before and after the outage: %v", ticks)
	require.GreaterOrEqual(t, ticks[before+1]-ticks[before], 3*period.Milliseconds(),
		"the catch-up is not the latest missed tick: %v (outage from %d)", ticks, failedFrom.UnixMilli())
}

// redisPassed waits until the Redis clock, which decides ticks, has
// passed at (a negative check's wait: nothing should happen until then).
func redisPassed(t *testing.T, c *Client, at time.Time) {
	t.Helper()
	eventually(t, time.Until(at)+10*time.Second, "the Redis clock passes "+at.Format(time.StampMilli), func() bool {
		now, err := c.core.Redis.Do(ctxT(t), c.core.Redis.B().Time().Build()).AsIntSlice()
		require.NoError(t, err)
		return time.Unix(now[0], now[1]*1000).After(at)
	})
}

// A periodic schedule's tick fires when the client's clock (and Redis's)
// reaches it, and the next an interval later: no real time passes.
func TestPeriodicTickFiresOnAdvance(t *testing.T) {
	t.Parallel()
	k := setupClocked(t)
	k.c.core.Signals.Ticked.Init(t)
	w := newWorker(t, k.c, long)
	require.NoError(t, w.Periodic(k.ctx, "hourly", "q", Every(time.Hour), nil, PeriodicOptions{Payload: tickPayload}))
	first := Every(time.Hour).Next(k.start)

	if d := first.Sub(k.clk.Now()); d > time.Millisecond {
		k.advance(d - time.Millisecond)
	}
	k.c.core.Signals.Ticked.RequireEmpty()
	require.Empty(t, periodicTicks(t, k.c, "q"), "a tick enqueued before its time")

	k.advance(time.Millisecond)
	require.Equal(t, first, k.c.core.Signals.Ticked.WaitOrTimeout())
	require.Equal(t, []int64{first.UnixMilli()}, periodicTicks(t, k.c, "q"))

	k.advance(time.Hour)
	require.Equal(t, first.Add(time.Hour), k.c.core.Signals.Ticked.WaitOrTimeout())
	require.Equal(t, []int64{first.UnixMilli(), first.Add(time.Hour).UnixMilli()}, periodicTicks(t, k.c, "q"))
}
