package worqr

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/worqr/worqr/internal/store"
)

// statsTotal is the total of a queue's stats at one resolution.
func statsTotal(t *testing.T, c *Client, queue string, res time.Duration) StatsBucket {
	t.Helper()
	s, err := c.Stats(context.Background(), queue, StatsOptions{Resolution: res})
	require.NoError(t, err)
	return s.Total()
}

// Every way a task starts and ends is counted, in the minute and the hour
// buckets alike, with one wait per start and one run per process ended by
// its holder.
func TestStatsCountWhatHappens(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	w := newWorker(t, c, WorkerOptions{})
	require.NoError(t, w.StartWork(ctx, "q", Events{}))
	enqueueNumbered(t, c, "q", 6)
	ps := dequeueAll(t, w, "q", 5)
	require.NoError(t, ps[0].Finish(ctx))
	require.NoError(t, ps[1].Retry(ctx, 0, errors.New("again")))
	require.NoError(t, ps[2].DeadLetter(ctx, errors.New("broken")))
	require.NoError(t, ps[3].Requeue(ctx))
	marked, err := c.CancelTask(ctx, "q", ps[4].TaskID())
	require.NoError(t, err)
	require.Equal(t, int64(1), marked.Marked)
	require.ElementsMatch(t, []string{"t0005", "t0001", "t0003"}, waiting(t, c, "q"), "the retried and the requeued one are back")
	removed, err := c.Cancel(ctx, "q", []byte("t0005"))
	require.NoError(t, err)
	require.Equal(t, int64(1), removed.Removed)
	requeued, err := c.RequeueDeadLetters(ctx, "q")
	require.NoError(t, err)
	require.Equal(t, int64(1), requeued)

	want := StatsCounts{Enqueued: 6, Started: 5, Finished: 1, Retried: 1, Requeued: 2, Dead: 1, Cancelled: 2}
	for _, res := range []time.Duration{time.Minute, time.Hour} {
		tot := statsTotal(t, c, "q", res)
		assert.Equal(t, want, tot.Counts, "resolution %v", res)
		assert.EqualValues(t, 5, tot.Wait.Count(), "a wait per start")
		assert.EqualValues(t, 4, tot.Run.Count(), "a run per process its holder ended")
		assert.Positive(t, tot.Run.Sum)
		assert.Positive(t, tot.Wait.Sum)
	}
	recent, err := c.Stats(ctx, "q", StatsOptions{Since: time.Now().Add(-5 * time.Minute)})
	require.NoError(t, err)
	assert.Equal(t, statsTotal(t, c, "q", time.Minute), recent.Total(), "the recent minutes, read by name, are the same")

	// The tasks back in the queue start again: their waits are counted too.
	ps = dequeueAll(t, w, "q", 3)
	for _, p := range ps {
		require.NoError(t, p.Finish(ctx))
	}
	tot := statsTotal(t, c, "q", time.Minute)
	assert.EqualValues(t, 8, tot.Counts.Started)
	assert.EqualValues(t, 4, tot.Counts.Finished)
	assert.EqualValues(t, 8, tot.Wait.Count())
	assert.EqualValues(t, 7, tot.Run.Count())
}

// A dead worker's processes, returned by a peer, count as reclaimed; a
// worker that stops gives its work back, counted as requeued. (The dead
// worker's client lives on: its counts are written.)
func TestStatsCountReclaimsAndGiveBacks(t *testing.T) {
	t.Parallel()
	k := setupTimed(t, nil)
	c, ctx := k.c, k.ctx
	dead := newWorker(t, c, fast)
	require.NoError(t, dead.StartWork(ctx, "q", Events{}))
	enqueueNumbered(t, c, "q", 3)
	dequeueAll(t, dead, "q", 2)
	crash(dead)
	pc, peer := k.reclaimingPeer()
	require.NoError(t, peer.StartWork(ctx, "q", Events{}))
	k.run(fast.TTL + fast.RenewInterval)
	reclaimed(t, 2, pc)
	// The reclaim's script writes its count itself.
	require.EqualValues(t, 2, statsTotal(t, c, "q", time.Minute).Counts.Reclaimed, "the dead worker's tasks reclaimed")
	dequeueAll(t, peer, "q", 3)
	require.NoError(t, peer.StopWork(ctx, "q"))
	// The peer's client writes its starts within a flush interval.
	k.run(store.StatsFlushEvery)
	var tot StatsBucket
	eventually(t, 10*time.Second, "the peer's starts written", func() bool {
		tot = statsTotal(t, c, "q", time.Minute)
		return tot.Counts.Started == 5
	})
	assert.EqualValues(t, 2, tot.Counts.Reclaimed)
	assert.EqualValues(t, 3, tot.Counts.Requeued, "given back as the peer stopped")
	assert.EqualValues(t, 5, tot.Counts.Started)
	assert.EqualValues(t, 5, tot.Wait.Count())
	assert.Zero(t, tot.Run.Count(), "nobody's handler ended a process")
}

// A delayed task waits from its due time, not from its enqueue.
func TestStatsWaitStartsWhenDue(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	w := newWorker(t, c, WorkerOptions{})
	require.NoError(t, w.StartWork(ctx, "q", Events{}))
	const delay = 300 * time.Millisecond
	before := time.Now()
	require.NoError(t, second(c.Enqueue(ctx, "q", []byte("x"), In(delay))))
	var p *Process
	eventually(t, 10*time.Second, "the delayed task started", func() bool {
		var err error
		p, err = w.Dequeue(ctx, "q")
		return err == nil
	})
	elapsed := time.Since(before)
	tot := statsTotal(t, c, "q", time.Minute)
	require.EqualValues(t, 1, tot.Wait.Count())
	// The clocks of this process and Redis agree to a few ms (one host).
	assert.Less(t, tot.Wait.Sum, elapsed-delay+20*time.Millisecond, "waited from its due time")
	first := tot.Wait.Sum
	// Taken before the retry: its delay starts at the script's clock,
	// which may be well before the call returns on a loaded machine.
	before = time.Now()
	require.NoError(t, p.Retry(ctx, delay, errors.New("later")))
	eventually(t, 10*time.Second, "the retried task started", func() bool {
		var err error
		p, err = w.Dequeue(ctx, "q")
		return err == nil
	})
	elapsed = time.Since(before)
	tot = statsTotal(t, c, "q", time.Minute)
	require.EqualValues(t, 2, tot.Wait.Count())
	assert.Less(t, tot.Wait.Sum-first, elapsed-delay+20*time.Millisecond, "the retry waited from its delay's end")
}

// A slot written in a later turn of its ring is cleared first: stale
// counts and buckets never add to new ones, and stale slots are not read.
func TestStatsRingsClearStaleSlots(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	key := c.core.Store.Keys().Queue("q").Stats
	// Every slot of both rings holds data of long ago (minute i, hour i
	// since the epoch: the right slot, the wrong turn).
	var args []string
	for i := 0; i < 360; i++ {
		s := "m" + strconv.Itoa(i)
		args = append(args, s, strconv.Itoa(i), s+":e", "1000", s+":s", "1000", s+":w5", "1000", s+":ws", "1000")
	}
	for i := 0; i < 168; i++ {
		s := "h" + strconv.Itoa(i)
		args = append(args, s, strconv.Itoa(i), s+":e", "1000", s+":w5", "1000")
	}
	hset := c.core.Redis.B().Hset().Key(key).FieldValue()
	for i := 0; i < len(args); i += 2 {
		hset = hset.FieldValue(args[i], args[i+1])
	}
	require.NoError(t, c.core.Redis.Do(ctx, hset.Build()).Error())
	for _, res := range []time.Duration{time.Minute, time.Hour} {
		s, err := c.Stats(ctx, "q", StatsOptions{Resolution: res})
		require.NoError(t, err)
		assert.Empty(t, s.Buckets, "stale slots are not read")
	}
	w := newWorker(t, c, WorkerOptions{})
	require.NoError(t, w.StartWork(ctx, "q", Events{}))
	enqueueNumbered(t, c, "q", 1)
	dequeueAll(t, w, "q", 1)
	for _, res := range []time.Duration{time.Minute, time.Hour} {
		s, err := c.Stats(ctx, "q", StatsOptions{Resolution: res})
		require.NoError(t, err)
		tot := s.Total()
		assert.Equal(t, StatsCounts{Enqueued: 1, Started: 1}, tot.Counts, "resolution %v", res)
		assert.EqualValues(t, 1, tot.Wait.Count())
		assert.Less(t, tot.Wait.Sum, time.Second)
		require.NotEmpty(t, s.Buckets)
		last := s.Buckets[len(s.Buckets)-1]
		assert.False(t, last.Start.After(s.Now), "buckets are in the past")
		assert.Less(t, s.Now.Sub(last.Start), 2*res)
	}
}

// A client with stats off writes none; DeleteQueue deletes them.
func TestStatsOffAndDeleted(t *testing.T) {
	t.Parallel()
	b, c, ctx := setup(t)
	key := c.core.Store.Keys().Queue("q").Stats
	exists := func() bool {
		n, err := c.core.Redis.Do(ctx, c.core.Redis.B().Exists().Key(key).Build()).AsInt64()
		require.NoError(t, err)
		return n == 1
	}
	off, err := New(Options{Redis: b.redis(), Prefix: b.prefix, Logger: testLogger(t), NoStats: true})
	require.NoError(t, err)
	t.Cleanup(func() { _ = off.Close(context.Background()) })
	w := newWorker(t, off, WorkerOptions{})
	require.NoError(t, w.StartWork(ctx, "q", Events{}))
	enqueueNumbered(t, off, "q", 2)
	for _, p := range dequeueAll(t, w, "q", 2) {
		require.NoError(t, p.Finish(ctx))
	}
	assert.False(t, exists(), "no stats written")
	s, err := off.Stats(ctx, "q", StatsOptions{})
	require.NoError(t, err)
	assert.Empty(t, s.Buckets)

	require.NoError(t, second(c.Enqueue(ctx, "q", []byte("x"))))
	assert.EqualValues(t, 1, statsTotal(t, c, "q", time.Minute).Counts.Enqueued) // written first
	assert.True(t, exists())
	require.NoError(t, second(c.DeleteQueue(ctx, "q")))
	assert.False(t, exists(), "deleted with its queue")

	_, err = c.Stats(ctx, "q", StatsOptions{Resolution: time.Second})
	assert.ErrorIs(t, err, ErrInvalidOptions)
}

// Since keeps the buckets that end after it.
func TestStatsSince(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	require.NoError(t, second(c.Enqueue(ctx, "q", []byte("x"))))
	s, err := c.Stats(ctx, "q", StatsOptions{})
	require.NoError(t, err)
	require.Len(t, s.Buckets, 1)
	start := s.Buckets[0].Start
	s, err = c.Stats(ctx, "q", StatsOptions{Since: start.Add(59 * time.Second)})
	require.NoError(t, err)
	assert.Len(t, s.Buckets, 1, "the bucket holding Since")
	s, err = c.Stats(ctx, "q", StatsOptions{Since: start.Add(time.Minute)})
	require.NoError(t, err)
	assert.Empty(t, s.Buckets, "a bucket that ended")
}

func TestHistogramQuantile(t *testing.T) {
	var h Histogram
	assert.Zero(t, h.Quantile(0.5))
	assert.Zero(t, h.Mean())
	h.Buckets[10] = 50 // (512 µs, 1024 µs]
	h.Buckets[20] = 50 // (0.52 s, 1.05 s]
	h.Sum = 50*time.Millisecond + 50*time.Second
	assert.EqualValues(t, 100, h.Count())
	assert.Equal(t, HistogramBound(10), h.Quantile(0.5), "the top of the lower bucket")
	assert.Equal(t, HistogramBound(9)+(HistogramBound(10)-HistogramBound(9))/2, h.Quantile(0.25))
	assert.Equal(t, HistogramBound(20), h.Quantile(1))
	assert.Equal(t, HistogramBound(19), h.Quantile(0.5000001).Truncate(time.Microsecond))
	assert.Equal(t, h.Sum/100, h.Mean())
	var sum Histogram
	sum.Add(h)
	sum.Add(h)
	assert.EqualValues(t, 200, sum.Count())
	assert.Equal(t, 2*h.Sum, sum.Sum)
	assert.Equal(t, 1024*time.Microsecond, HistogramBound(10))
}

// The first write of a new minute moves the minute last written into the
// rings (clearing slots that held an older minute or hour), once: hour
// totals are the minutes' totals. A minute last written too long ago is
// dropped.
func TestStatsMinutesFoldIntoHours(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	key := c.core.Store.Keys().Queue("q").Stats
	s, err := c.Stats(ctx, "q", StatsOptions{})
	require.NoError(t, err)
	now := s.Now.Unix() / 60
	plant := func(fields ...string) {
		t.Helper()
		hset := c.core.Redis.B().Hset().Key(key).FieldValue()
		for i := 0; i < len(fields); i += 2 {
			hset = hset.FieldValue(fields[i], fields[i+1])
		}
		require.NoError(t, c.core.Redis.Do(ctx, hset.Build()).Error())
	}
	// Minute now-2 was the last written: 5 enqueued, 2 started; its slots
	// in the rings hold a minute 6 hours and an hour a week older, to be
	// cleared.
	cur := now - 2
	ms := "m" + strconv.FormatInt(cur%360, 10)
	hour := cur / 60
	hs := "h" + strconv.FormatInt(hour%168, 10)
	plant("cur", strconv.FormatInt(cur, 10), "c:e", "5", "c:s", "2", "c:w3", "2", "c:ws", "10",
		ms, strconv.FormatInt(cur-360, 10), ms+":e", "1000", ms+":w3", "1000",
		hs, strconv.FormatInt(hour-168, 10), hs+":e", "1000", hs+":w3", "1000")
	hourly := func() StatsBucket { return statsTotal(t, c, "q", time.Hour) }
	assert.Equal(t, StatsCounts{Enqueued: 5, Started: 2}, hourly().Counts, "the current minute is read into its hour")
	assert.Equal(t, StatsCounts{Enqueued: 5, Started: 2}, statsTotal(t, c, "q", time.Minute).Counts, "and as its minute")
	assert.EqualValues(t, 2, hourly().Wait.Count())

	require.NoError(t, second(c.Enqueue(ctx, "q", []byte("x"))))
	require.NoError(t, second(c.Enqueue(ctx, "q", []byte("y"))))
	tot := hourly()
	assert.Equal(t, StatsCounts{Enqueued: 7, Started: 2}, tot.Counts, "folded once, the older hour cleared")
	assert.EqualValues(t, 2, tot.Wait.Count())
	assert.Equal(t, 10*time.Microsecond, tot.Wait.Sum)
	mins, err := c.Stats(ctx, "q", StatsOptions{})
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(mins.Buckets), 2, "minute cur, and the one (or two) of the enqueues")
	assert.Equal(t, time.Unix(cur*60, 0), mins.Buckets[0].Start)
	assert.EqualValues(t, 5, mins.Buckets[0].Counts.Enqueued)
	assert.Equal(t, StatsCounts{Enqueued: 7, Started: 2}, mins.Total().Counts, "minutes and hours agree")
	for _, f := range []string{hs + ":e", ms + ":e"} {
		n, err := c.core.Redis.Do(ctx, c.core.Redis.B().Hget().Key(key).Field(f).Build()).AsInt64()
		require.NoError(t, err)
		assert.EqualValues(t, 5, n, "minute cur is in the rings now: %s", f)
	}

	// A queue idle for eight days: its last minute is past the hour ring.
	_, err = c.DeleteQueue(ctx, "q")
	require.NoError(t, err)
	old := now - 8*24*60
	plant("cur", strconv.FormatInt(old, 10), "c:e", "9")
	assert.Empty(t, statsTotal(t, c, "q", time.Hour).Counts.Enqueued, "too old to read")
	assert.Empty(t, statsTotal(t, c, "q", time.Minute).Counts.Enqueued)
	require.NoError(t, second(c.Enqueue(ctx, "q", []byte("z"))))
	assert.Equal(t, StatsCounts{Enqueued: 1}, statsTotal(t, c, "q", time.Hour).Counts, "nor moved")
	assert.Equal(t, StatsCounts{Enqueued: 1}, statsTotal(t, c, "q", time.Minute).Counts)
}

// Every task of a large batch has its wait counted, and every process of
// finishes joined into one call its run (the client reads them from the
// replies).
func TestStatsWaitsOfALargeBatch(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	w := newWorker(t, c, WorkerOptions{})
	require.NoError(t, w.StartWork(ctx, "q", Events{}))
	before := time.Now()
	enqueueNumbered(t, c, "q", 21)
	ps := dequeueAll(t, w, "q", 21)
	elapsed := time.Since(before)
	tot := statsTotal(t, c, "q", time.Minute)
	assert.EqualValues(t, 21, tot.Counts.Started)
	assert.EqualValues(t, 21, tot.Wait.Count())
	assert.Positive(t, tot.Wait.Sum)
	assert.LessOrEqual(t, tot.Wait.Sum, 21*(elapsed+5*time.Millisecond))

	// Finishes that overlap are joined into one call.
	var wg sync.WaitGroup
	for _, p := range ps {
		wg.Go(func() { assert.NoError(t, p.Finish(ctx)) })
	}
	wg.Wait()
	elapsed = time.Since(before)
	tot = statsTotal(t, c, "q", time.Minute)
	assert.EqualValues(t, 21, tot.Counts.Finished)
	assert.EqualValues(t, 21, tot.Run.Count())
	assert.LessOrEqual(t, tot.Run.Sum, 21*(elapsed+5*time.Millisecond))
}
