package worqrtype

import (
	"math"
	"time"
)

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

// HistogramBuckets is the number of buckets of a Histogram: bucket k
// for k = 0..36.
const HistogramBuckets = 37

// Histogram counts durations in log-scale buckets: bucket k counts those
// longer than HistogramBound(k-1) and at most HistogramBound(k), that is
// 2^k µs (bucket 0 those up to 1 µs; the last bucket, about 19 hours,
// everything longer too).
type Histogram struct {
	Buckets [HistogramBuckets]int64
	Sum     time.Duration // of every duration counted
}

// HistogramBound is the upper bound of bucket k: 2^k µs.
func HistogramBound(k int) time.Duration {
	return time.Duration(int64(1)<<k) * time.Microsecond
}

// Count is the number of durations counted.
func (h Histogram) Count() int64 {
	var n int64
	for _, b := range h.Buckets {
		n += b
	}
	return n
}

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
// A q outside 0..1 is taken as the nearer bound.
func (h Histogram) Quantile(q float64) time.Duration {
	n := h.Count()
	if n == 0 {
		return 0
	}
	q = math.Min(math.Max(q, 0), 1)
	rank := q * float64(n)
	var seen float64
	for k, b := range h.Buckets {
		if b == 0 {
			continue
		}
		if seen+float64(b) >= rank {
			lo := time.Duration(0)
			if k > 0 {
				lo = HistogramBound(k - 1)
			}
			hi := HistogramBound(k)
			frac := (rank - seen) / float64(b)
			return lo + time.Duration(frac*float64(hi-lo))
		}
		seen += float64(b)
	}
	return HistogramBound(HistogramBuckets - 1)
}

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
