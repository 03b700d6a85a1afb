// Package queuestats reads the sizes of worqr's queues from Redis for the
// metrics packages (prometheus and otel): one read per scrape, bounded in
// time and in the number of queues, and shared by scrapes that overlap;
// and makes the label values of queue names and task kinds.
package queuestats

import (
	"context"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"golang.org/x/sync/errgroup"

	"github.com/worqr/worqr"
	"github.com/worqr/worqr/internal/clock"
)

// Defaults for the zero values of Reader's bounds.
const (
	DefaultTimeout   = 5 * time.Second
	DefaultMaxQueues = 100
	DefaultParallel  = 8
)

// Count is a number read from Redis; OK is false when its read failed.
type Count struct {
	N  int64
	OK bool
}

// Queue holds one queue's sizes.
type Queue struct {
	Name     string
	Waiting  Count // QueueInfo's counts, read together
	Delayed  Count
	InFlight Count
	Dead     Count
	// WaitingSince is when its task waiting longest became due (zero
	// when none waits), read with Waiting.
	WaitingSince time.Time
}

// OldestWaiting is how long q's task waiting longest has waited at now,
// 0 when none waits.
func (q Queue) OldestWaiting(now time.Time) time.Duration {
	if q.WaitingSince.IsZero() {
		return 0
	}
	return max(now.Sub(q.WaitingSince), 0)
}

// Snapshot is the result of one read.
type Snapshot struct {
	// Queues are the first MaxQueues queues of the registry, by name.
	Queues []Queue
	// QueueCount is the number of queues in the registry.
	QueueCount Count
	// Workers is the number of live workers.
	Workers Count
	// Failures counts the reads that failed (or timed out); Err is the
	// first of them.
	Failures int
	Err      error
	// Took is how long the read took.
	Took time.Duration
}

// Reader reads Snapshots of a Client. Its fields must not change once Read
// has been called.
type Reader struct {
	Client *worqr.Client
	// Timeout bounds one read. Default DefaultTimeout.
	Timeout time.Duration
	// MaxQueues bounds the queues read. Default DefaultMaxQueues.
	MaxQueues int
	// Parallel bounds the requests in flight at once. Default
	// DefaultParallel.
	Parallel int
	// Clock tells the time of the reads. Default the system clock.
	Clock clock.Clock

	mu    sync.Mutex // held during a read: overlapping reads wait and share
	last  Snapshot
	ended time.Time // when last was read; zero before the first read
}

// Read reads the sizes of the queues, or returns those of a read that
// ended after this call began (one that was under way when it was made).
func (r *Reader) Read(ctx context.Context) Snapshot {
	clk := clock.Or(r.Clock)
	asked := clk.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.ended.IsZero() && r.ended.After(asked) {
		return r.last
	}
	r.last = r.read(ctx)
	r.ended = clk.Now()
	return r.last
}

func orDefault[T int | time.Duration](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
}

func (r *Reader) read(ctx context.Context) Snapshot {
	clk := clock.Or(r.Clock)
	start := clk.Now()
	ctx, cancel := context.WithTimeout(ctx, orDefault(r.Timeout, DefaultTimeout))
	defer cancel()

	var (
		failures atomic.Int64
		errOnce  sync.Once
		firstErr error
	)
	failed := func(err error) {
		failures.Add(1)
		errOnce.Do(func() { firstErr = err })
	}
	count := func(n int64, err error) Count {
		if err != nil {
			failed(err)
			return Count{}
		}
		return Count{N: n, OK: true}
	}

	var s Snapshot
	var g errgroup.Group
	g.SetLimit(orDefault(r.Parallel, DefaultParallel))
	g.Go(func() error {
		ws, err := r.Client.Workers(ctx)
		s.Workers = count(int64(len(ws)), err)
		return nil
	})
	names, err := r.Client.Queues(ctx)
	s.QueueCount = count(int64(len(names)), err)
	slices.Sort(names)
	names = names[:min(len(names), orDefault(r.MaxQueues, DefaultMaxQueues))]
	s.Queues = make([]Queue, len(names))
	for i, name := range names {
		q := &s.Queues[i]
		q.Name = name
		g.Go(func() error {
			// One round trip for the four counts (QueueInfo).
			info, err := r.Client.QueueInfo(ctx, name)
			if err != nil {
				failed(err)
				return nil
			}
			q.Waiting, q.Delayed = Count{info.Waiting, true}, Count{info.Delayed, true}
			q.InFlight, q.Dead = Count{info.InFlight, true}, Count{info.Dead, true}
			q.WaitingSince = info.WaitingSince
			return nil
		})
	}
	_ = g.Wait()
	s.Failures, s.Err = int(failures.Load()), firstErr
	s.Took = clk.Since(start)
	return s
}

// Label is a queue name fit for a metric label or an attribute: queue
// names are any bytes, label values must be UTF-8 (Prometheus panics
// otherwise, OTLP drops the batch), so invalid bytes become U+FFFD.
func Label(queue string) string {
	if utf8.ValidString(queue) {
		return queue
	}
	return strings.ToValidUTF8(queue, "\uFFFD")
}
