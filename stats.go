package worqr

import (
	"context"
	"fmt"
	"time"

	"github.com/worqr/worqr/internal/store"
	"github.com/worqr/worqr/worqrtype"
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

// A queue's stats are worqrtype's.
type (
	// Stats are a queue's stats over time (see worqrtype.Stats).
	Stats = worqrtype.Stats
	// StatsBucket is what a queue did in one minute or hour (see
	// worqrtype.StatsBucket).
	StatsBucket = worqrtype.StatsBucket
	// StatsCounts are a time bucket's counters of a queue (see
	// worqrtype.StatsCounts).
	StatsCounts = worqrtype.StatsCounts
	// KindCounts are a time bucket's counters of the tasks of one kind
	// (see worqrtype.KindCounts).
	KindCounts = worqrtype.KindCounts
	// Histogram counts durations in log-scale buckets (see
	// worqrtype.Histogram).
	Histogram = worqrtype.Histogram
)

// HistogramBuckets is the number of buckets of a Histogram.
const HistogramBuckets = worqrtype.HistogramBuckets

// HistogramBound is the upper bound of a Histogram's bucket k: 2^k µs.
func HistogramBound(k int) time.Duration { return worqrtype.HistogramBound(k) }

// StatsKinds is how many kinds of tasks a queue's stats keep apart
// (StatsBucket.Kinds), across every client: the first kinds counted, the
// others under StatsOtherKind. The bound keeps a queue's stats from
// growing with the kinds its producers choose.
const StatsKinds = store.StatsKinds

// StatsOtherKind is the kind in StatsBucket.Kinds of the tasks whose
// kinds are past StatsKinds. No task can have it (kinds have no
// parentheses).
const StatsOtherKind = store.StatsOtherKind

// Stats reads a queue's stats: per minute for the last 6 hours, or per
// hour for the last 7 days (see StatsOptions), kept in Redis as tasks are
// enqueued, started and ended (unless turned off, see Options.NoStats).
// This client's own counts are written first; other clients' last second
// may be missing (docs/operations.md tells when counts are written, and
// what a read costs). A Resolution other than a minute or an hour is
// ErrInvalidOptions.
func (c *Client) Stats(ctx context.Context, queue string, opts StatsOptions) (Stats, error) {
	if err := c.core.Validate(ctx, "stats", queue); err != nil {
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
	_ = c.core.Store.FlushStats(ctx, queue)
	c.core.StatsFlusher.Written()
	since := opts.Since
	if res != time.Minute {
		since = time.Time{} // hours come from the whole hash
	}
	now, slots, err := c.core.Store.Stats(ctx, queue, since)
	if err != nil {
		return Stats{}, c.core.Fail("stats", queue, err)
	}
	out := Stats{Queue: queue, Resolution: res, Now: now}
	for _, sl := range slots {
		if sl.Hour != (res == time.Hour) || !sl.Start.Add(res).After(opts.Since) {
			continue
		}
		out.Buckets = append(out.Buckets, sl.Bucket())
	}
	return out, nil
}
