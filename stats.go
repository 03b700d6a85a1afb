package worqr

import (
	"context"
	"fmt"
	"time"

	"github.com/worqr/worqr/internal/inspect"
	"github.com/worqr/worqr/internal/store"
)

// StatsOptions choose what Client.Stats reads. The zero value reads the
// minute buckets of the last 6 hours.
type StatsOptions struct {
	// Resolution is time.Minute (the default, for 0), whose buckets cover
	// the last 6 hours, or time.Hour, whose buckets cover the last 7 days.
	Resolution time.Duration
	// Since drops the buckets that end at or before it (a bucket that
	// holds Since is kept). Zero keeps all.
	Since time.Time
}

// StatsCounts are a time bucket's counters of a queue.
type StatsCounts struct {
	Enqueued int64 // tasks enqueued (by Enqueue and by periodic schedules)
	Started  int64 // tasks dequeued (started)
	Finished int64 // tasks finished
	Retried  int64 // tasks retried (a handler error, Process.Retry)
	// Requeued counts tasks put back to wait without a failure:
	// Process.Requeue, a worker giving its work back as it stops, and
	// dead letters requeued.
	Requeued  int64
	Dead      int64 // tasks moved to the dead letters (poison pills too)
	Reclaimed int64 // tasks returned to the queue from a dead worker
	Cancelled int64 // tasks cancelled (waiting, delayed or in flight)
}

func (c *StatsCounts) add(o StatsCounts) {
	c.Enqueued += o.Enqueued
	c.Started += o.Started
	c.Finished += o.Finished
	c.Retried += o.Retried
	c.Requeued += o.Requeued
	c.Dead += o.Dead
	c.Reclaimed += o.Reclaimed
	c.Cancelled += o.Cancelled
}

// HistogramBuckets is the number of buckets of a Histogram.
const HistogramBuckets = store.HistogramBuckets

// Histogram counts durations in log-scale buckets: bucket k counts those
// longer than HistogramBound(k-1) and at most HistogramBound(k), that is
// 2^k µs (bucket 0 those up to 1 µs; the last bucket, about 19 hours,
// everything longer too).
type Histogram struct {
	Buckets [HistogramBuckets]int64
	Sum     time.Duration // of every duration counted
}

// HistogramBound is the upper bound of bucket k: 2^k µs.
func HistogramBound(k int) time.Duration { return inspect.Bound(k) }

// Count is the number of durations counted.
func (h Histogram) Count() int64 { return inspect.Count(h.Buckets[:]) }

// Mean is the mean duration, 0 if none was counted.
func (h Histogram) Mean() time.Duration {
	n := h.Count()
	if n == 0 {
		return 0
	}
	return h.Sum / time.Duration(n)
}

// Quantile estimates the q-quantile (0 <= q <= 1: 0.5 the median, 0.99 the
// 99th percentile), interpolating linearly inside its bucket; so it is
// off by at most the bucket's width, a factor of 2. 0 if none was counted.
func (h Histogram) Quantile(q float64) time.Duration { return inspect.Quantile(h.Buckets[:], q) }

// Add counts o's durations in h too.
func (h *Histogram) Add(o Histogram) {
	for k := range h.Buckets {
		h.Buckets[k] += o.Buckets[k]
	}
	h.Sum += o.Sum
}

// StatsBucket is what a queue did in one minute or hour.
type StatsBucket struct {
	Start  time.Time // by the Redis clock
	Counts StatsCounts
	// Wait is how long tasks waited before they started: from when they
	// became due (enqueued, or for a delayed task its due time; for a task
	// back from a retry, a requeue, a reclaim or the dead letters, from
	// then, or from its retry delay's end) to their dequeue.
	Wait Histogram
	// Run is how long processes ran: from their dequeue to their finish,
	// retry, requeue or move to the dead letters, by the Redis clock (the
	// handler's time plus the round trips). Processes reclaimed from a
	// dead worker or cancelled are not counted.
	Run Histogram
	// Kinds are the counts of the tasks with a kind (see Kind) that
	// finished, were retried or died, by kind; nil when none did. A
	// queue's stats keep StatsKinds kinds apart: a kind past them counts
	// under StatsOtherKind, until a kind kept apart counts nothing for 7
	// days and gives its place up. Tasks without a kind are in Counts
	// only.
	Kinds map[string]KindCounts
}

// KindCounts are a time bucket's counters of the tasks of one kind.
type KindCounts struct {
	Finished int64 // tasks finished
	Retried  int64 // tasks retried (a handler error, Process.Retry)
	Dead     int64 // tasks moved to the dead letters (poison pills too)
}

// StatsKinds is how many kinds of tasks a queue's stats keep apart
// (StatsBucket.Kinds), across every client: the first kinds counted, the
// others under StatsOtherKind. The bound keeps a queue's stats from
// growing with the kinds its producers choose.
const StatsKinds = store.StatsKinds

// StatsOtherKind is the kind in StatsBucket.Kinds of the tasks whose
// kinds are past StatsKinds. No task can have it (kinds have no
// parentheses).
const StatsOtherKind = store.StatsOtherKind

// Stats are a queue's stats over time.
type Stats struct {
	Queue      string
	Resolution time.Duration // time.Minute or time.Hour
	Now        time.Time     // by the Redis clock, when read
	// Buckets that hold data, oldest first; a bucket in which nothing
	// happened is left out.
	Buckets []StatsBucket
}

// Total adds up the buckets.
func (s Stats) Total() StatsBucket {
	var t StatsBucket
	for i, b := range s.Buckets {
		if i == 0 {
			t.Start = b.Start
		}
		t.Counts.add(b.Counts)
		t.Wait.Add(b.Wait)
		t.Run.Add(b.Run)
		for kind, c := range b.Kinds {
			if t.Kinds == nil {
				t.Kinds = make(map[string]KindCounts)
			}
			tc := t.Kinds[kind]
			tc.Finished += c.Finished
			tc.Retried += c.Retried
			tc.Dead += c.Dead
			t.Kinds[kind] = tc
		}
	}
	return t
}

// Stats reads a queue's stats: per minute for the last 6 hours, or per
// hour for the last 7 days (see StatsOptions), kept in Redis as tasks are
// enqueued, started and ended (unless turned off, see Options.NoStats).
// This client's own counts are written first; other clients' last second
// may be missing (docs/operations.md tells when counts are written, and
// what a read costs). A Resolution other than a minute or an hour is
// ErrInvalidOptions.
func (c *Client) Stats(ctx context.Context, queue string, opts StatsOptions) (Stats, error) {
	if err := c.validate(ctx, "stats", queue); err != nil {
		return Stats{}, err
	}
	res := opts.Resolution
	if res == 0 {
		res = time.Minute
	}
	if res != time.Minute && res != time.Hour {
		return Stats{}, fmt.Errorf("worqr: stats %q: resolution %v (want a minute or an hour): %w", queue, opts.Resolution, ErrInvalidOptions)
	}
	// This client's own counts of the queue not yet written are written
	// first, so that it reads what it did. A failure shows in the read.
	_ = c.store.FlushStats(ctx, queue)
	c.statsFlusher.Written()
	since := opts.Since
	if res != time.Minute {
		since = time.Time{} // hours come from the whole hash
	}
	now, slots, err := c.store.Stats(ctx, queue, since)
	if err != nil {
		return Stats{}, c.fail("stats", queue, err)
	}
	out := Stats{Queue: queue, Resolution: res, Now: now}
	for _, sl := range slots {
		if sl.Hour != (res == time.Hour) || !sl.Start.Add(res).After(opts.Since) {
			continue
		}
		b := StatsBucket{Start: sl.Start}
		b.Counts = StatsCounts{
			Enqueued:  sl.Counts[store.StatEnqueued],
			Started:   sl.Counts[store.StatStarted],
			Finished:  sl.Counts[store.StatFinished],
			Retried:   sl.Counts[store.StatRetried],
			Requeued:  sl.Counts[store.StatRequeued],
			Dead:      sl.Counts[store.StatDead],
			Reclaimed: sl.Counts[store.StatReclaimed],
			Cancelled: sl.Counts[store.StatCancelled],
		}
		b.Wait = Histogram{Buckets: sl.Wait, Sum: time.Duration(sl.WaitSum) * time.Microsecond}
		b.Run = Histogram{Buckets: sl.Run, Sum: time.Duration(sl.RunSum) * time.Microsecond}
		for kind, c := range sl.Kinds {
			if b.Kinds == nil {
				b.Kinds = make(map[string]KindCounts, len(sl.Kinds))
			}
			b.Kinds[kind] = KindCounts{Finished: c[store.KindFinished], Retried: c[store.KindRetried], Dead: c[store.KindDead]}
		}
		out.Buckets = append(out.Buckets, b)
	}
	return out, nil
}

// flushStats writes the stats counts the client holds, for every queue or
// one (queue set). A failure is logged, not returned: it costs counts
// only, never work.
func (c *Client) flushStats(ctx context.Context, queue string) {
	sent := c.outage.Begin()
	err := c.store.FlushStats(ctx, queue)
	c.statsFlusher.Written()
	if err == nil {
		c.outage.OK(sent)
	} else if err = c.fail("write stats", queue, err); !c.outage.Failed(sent, "stats", err) {
		c.log.Warn("worqr: could not write stats counts", "queue", queue, "err", err)
	}
}
