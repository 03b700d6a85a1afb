package dashboard

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/worqr/worqr"
)

// The rate is the tasks finished over the reads of the last minute: what
// each minute that had not ended at a read gained by the next, over the
// time they span.
func TestHistoryRate(t *testing.T) {
	t.Parallel()
	minute := func(m int64) time.Time { return time.Unix(m*60, 0) }
	read := func(now time.Time, finished ...int64) worqr.Stats {
		s := worqr.Stats{Now: now}
		for i := 0; i+1 < len(finished); i += 2 {
			s.Buckets = append(s.Buckets, worqr.StatsBucket{Start: minute(finished[i]), Counts: worqr.StatsCounts{Finished: finished[i+1]}})
		}
		return s
	}
	var h history
	t0 := minute(6000).Add(30 * time.Second)
	_, ok := h.next(read(t0, 5999, 100, 6000, 10))
	assert.False(t, ok, "the first read has nothing to compare with")
	rate, ok := h.next(read(t0.Add(10*time.Second), 5999, 100, 6000, 30))
	assert.True(t, ok)
	assert.InDelta(t, 2.0, rate, 1e-9, "20 finished in 10 s; the minute that had ended does not count")
	rate, _ = h.next(read(t0.Add(40*time.Second), 6000, 50, 6001, 5))
	assert.InDelta(t, 45.0/40, rate, 1e-9, "20 more in the old minute, 5 in the new one: 45 in 40 s")
	rate, _ = h.next(read(t0.Add(50 * time.Second)))
	assert.InDelta(t, 45.0/50, rate, 1e-9, "nothing read: nothing more finished")
	rate, _ = h.next(read(t0.Add(100 * time.Second)))
	assert.Zero(t, rate, "the reads that counted are over a minute old")
}

// A steady flow whose counts are written in batches (10 tasks every 5 s,
// read every second) reads as a steady 2/s, not 0 and 10 in turn.
func TestHistoryRateSteady(t *testing.T) {
	t.Parallel()
	var h history
	start := time.Unix(6000*60, 0)
	for i := range 120 {
		now := start.Add(time.Duration(i) * time.Second)
		// Each read finds a minute new to it (so all it holds is
		// gained): 10 tasks every fifth second, none otherwise.
		s := worqr.Stats{Now: now, Buckets: []worqr.StatsBucket{{Start: now.Add(-time.Second)}}}
		if i%5 == 4 {
			s.Buckets[0].Counts.Finished = 10
		}
		rate, _ := h.next(s)
		if i >= 20 {
			assert.InDelta(t, 2.0, rate, 0.5, "at %d s", i)
		}
	}
}

// The live rate is the queue's tasks finished per second: tasks that leave
// the queue otherwise (cancelled) do not count, and it falls back to 0
// when nothing ran for its window.
func TestLiveRateIsFinishedTasks(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Options{PollInterval: 50 * time.Millisecond})
	ctx := e.ctx()
	tasks := make([][]byte, 50)
	for i := range tasks {
		tasks[i] = []byte("x")
	}
	_, err := e.c.EnqueueBatch(ctx, "jobs", tasks)
	require.NoError(t, err)
	e.h.poll.mu.Lock()
	e.h.poll.window = time.Second // else 0 again only a minute after the last finished
	e.h.poll.mu.Unlock()
	v := e.watch()
	rateOf := func() (float64, bool) {
		v.mu.Lock()
		defer v.mu.Unlock()
		for _, q := range v.last.Queues {
			if q.Name == "jobs" {
				return q.Rate, len(q.Spark) > 0
			}
		}
		return 0, false
	}
	eventually(t, "a first rate", func() bool { _, ok := rateOf(); return ok })
	_, err = e.c.Cancel(ctx, "jobs", []byte("x"))
	require.NoError(t, err)
	eventually(t, "the cancel seen", func() bool {
		v.mu.Lock()
		defer v.mu.Unlock()
		return len(v.last.Queues) == 1 && v.last.Queues[0].Waiting == 0
	})
	rate, _ := rateOf()
	assert.Zero(t, rate, "cancelled tasks are not throughput")

	_, err = e.c.EnqueueBatch(ctx, "jobs", tasks)
	require.NoError(t, err)
	w, err := e.c.NewWorker(ctx, worqr.WorkerOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = w.Close(context.Background()) })
	gate := make(chan struct{})
	require.NoError(t, w.Handle(ctx, "jobs", func(ctx context.Context, _ *worqr.Process) error {
		select {
		case <-gate:
		case <-ctx.Done():
		}
		return nil
	}, worqr.HandleOptions{Concurrency: 5}))
	close(gate)
	eventually(t, "a rate above 0 while tasks finish", func() bool { r, _ := rateOf(); return r > 0 })
	eventually(t, "all finished", func() bool {
		s, err := e.c.Stats(ctx, "jobs", worqr.StatsOptions{})
		return err == nil && s.Total().Counts.Finished == 50
	})
	eventually(t, "0 again when nothing runs", func() bool { r, _ := rateOf(); return r == 0 })
}

// The queue page shows the queue's stats: totals, percentiles and a chart,
// per minute or per hour.
func TestQueuePageStats(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Options{})
	ctx := e.ctx()
	code, body := e.get("/queue?q=" + qx("jobs"))
	require.Equal(t, 200, code)
	assert.Contains(t, body, `id="nostats"`)

	_, err := e.c.EnqueueBatch(ctx, "jobs", [][]byte{[]byte("a"), []byte("b"), []byte("c")})
	require.NoError(t, err)
	w, err := e.c.NewWorker(ctx, worqr.WorkerOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = w.Close(context.Background()) })
	require.NoError(t, w.Handle(ctx, "jobs", func(context.Context, *worqr.Process) error { return nil }, worqr.HandleOptions{}))
	eventually(t, "three finished", func() bool {
		s, err := e.c.Stats(ctx, "jobs", worqr.StatsOptions{})
		return err == nil && s.Total().Counts.Finished == 3
	})
	for _, path := range []string{"/queue?q=" + qx("jobs"), "/queue?q=" + qx("jobs") + "&res=h"} {
		code, body = e.get(path)
		require.Equal(t, 200, code)
		assert.Contains(t, body, `<b id="stat-finished">3</b>`, path)
		assert.Contains(t, body, `<b id="stat-enqueued">3</b>`, path)
		assert.NotContains(t, body, `id="nostats"`, path)
		assert.Contains(t, body, `<g class="bar">`, path)
		assert.Contains(t, body, "finished 3, started 3, enqueued 3", path)
		assert.NotContains(t, body, `<b id="stat-wait">— · —</b>`, path)
		if strings.Contains(path, "res=h") {
			assert.Contains(t, body, "per hour, last 7 days")
		} else {
			assert.Contains(t, body, "per minute, last hour")
		}
	}
}

// The chart stacks retried and dead on finished, scaled together with
// started, and the percentile chart draws each percentile of each bucket
// that counted some, scaled to the largest p99.
func TestStatsViewLayout(t *testing.T) {
	t.Parallel()
	now := time.Unix(6000*60, 0).Add(30 * time.Second)
	hist := func(k int, n int64) worqr.Histogram { // n durations of 2^k µs
		var h worqr.Histogram
		h.Buckets[k] = n
		return h
	}
	s := worqr.Stats{Now: now, Buckets: []worqr.StatsBucket{
		{Start: time.Unix(5999*60, 0), Counts: worqr.StatsCounts{Finished: 6, Retried: 2, Dead: 2, Started: 8}, Wait: hist(10, 8), Run: hist(12, 8)},
		{Start: time.Unix(6000*60, 0), Counts: worqr.StatsCounts{Finished: 5, Started: 5}, Run: hist(14, 5)},
	}}
	v := newStatsView(s, time.Minute, 60)
	require.Len(t, v.Bars, 2)
	assert.EqualValues(t, 10, v.Max, "finished, retried and dead together")
	b := v.Bars[0]
	assert.InDelta(t, 6*11.8, b.H, 1e-9)
	assert.InDelta(t, 2*11.8, b.RetriedH, 1e-9)
	assert.InDelta(t, 2*11.8, b.DeadH, 1e-9)
	assert.InDelta(t, chartH-10*11.8, b.DeadY, 1e-9, "on top of the others")
	assert.Zero(t, v.Bars[1].RetriedH)
	assert.Equal(t, hist(14, 5).Quantile(0.99).Round(time.Microsecond).String(), v.LatMax, "the largest p99")
	assert.Equal(t, 1, len(strings.Fields(v.WaitP50Line)), "one bucket counted waits")
	assert.Equal(t, 2, len(strings.Fields(v.RunP99Line)))
	assert.True(t, strings.HasSuffix(v.RunP99Line, ",1.0"), "the largest at the top: %s", v.RunP99Line)

	e := newEnv(t, Options{})
	_, err := e.c.Enqueue(e.ctx(), "jobs", []byte("x"))
	require.NoError(t, err)
	_, body := e.get("/queue/jobs")
	assert.NotContains(t, body, `id="latchart"`, "no percentiles yet: no chart")
}
