package worqr

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/worqr/worqr/internal/store"
)

// statsFlushTimeout bounds one timer flush of idle queues' stats.
const statsFlushTimeout = 5 * time.Second

// statsFlusher writes the stats counts a client holds for queues that went
// idle (store.FlushIdleStats): a busy queue's counts ride on its own
// dequeue, finish and retry calls, but an idle queue makes none. It is one
// goroutine per client, which runs only while counts are pending: a
// client that holds none (every client whose workers have shut down, which
// writes them) has none running, closed or not.
type statsFlusher struct {
	store *store.Store
	log   *slog.Logger
	kick  chan struct{} // buffered (1): look again, counts were written
	stop  chan struct{} // closed by close

	mu sync.Mutex // guards running and closed
	// running is closed when the goroutine returns; nil when none runs.
	running chan struct{}
	closed  bool
}

func newStatsFlusher(s *store.Store, log *slog.Logger) *statsFlusher {
	f := &statsFlusher{store: s, log: log, kick: make(chan struct{}, 1), stop: make(chan struct{})}
	s.OnStatsPending(f.pending)
	return f
}

// pending is told that a queue has counts pending while it had none: it
// starts the goroutine if none runs. It never blocks for long: the store
// calls it as it counts.
func (f *statsFlusher) pending() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.running != nil || f.closed {
		return
	}
	f.running = make(chan struct{})
	go f.loop(f.running)
}

// written tells the goroutine that counts were written by others (Close,
// Shutdown): it looks again, and returns if none are left.
func (f *statsFlusher) written() {
	select {
	case f.kick <- struct{}{}:
	default: // a kick is waiting already
	}
}

// loop waits until the first queue's counts may be written, writes the
// idle ones, and again, until none are pending.
func (f *statsFlusher) loop(done chan struct{}) {
	defer close(done)
	for {
		next := f.store.StatsNextIdle()
		if next.IsZero() {
			// Counts that became pending after the look above found
			// running set and started nothing: look again, under mu,
			// which pending takes.
			f.mu.Lock()
			if f.store.StatsNextIdle().IsZero() {
				f.running = nil
				f.mu.Unlock()
				return
			}
			f.mu.Unlock()
			continue
		}
		t := time.NewTimer(time.Until(next))
		select {
		case <-t.C:
		case <-f.kick:
			t.Stop()
			continue
		case <-f.stop:
			t.Stop()
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), statsFlushTimeout)
		_, err := f.store.FlushIdleStats(ctx)
		cancel()
		if err != nil {
			f.log.Debug("worqr: writing stats of idle queues", "err", err)
			// Counts given back (Redis loading, say) are due at once:
			// wait a while before the next try.
			select {
			case <-time.After(store.StatsFlushEvery):
			case <-f.stop:
				return
			}
		}
	}
}

// close stops the goroutine for good and waits for it until ctx ends (a
// write in progress finishes first).
func (f *statsFlusher) close(ctx context.Context) {
	f.mu.Lock()
	running := f.running
	if !f.closed {
		f.closed = true
		close(f.stop)
	}
	f.mu.Unlock()
	if running != nil {
		select {
		case <-running:
		case <-ctx.Done():
		}
	}
}

// flushStats writes the stats counts the client holds, for every queue or
// one (queue set). A failure is logged, not returned: it costs counts
// only, never work.
func (c *Client) flushStats(ctx context.Context, queue string) {
	sent := c.outage.begin()
	err := c.store.FlushStats(ctx, queue)
	c.statsFlusher.written()
	if err == nil {
		c.outage.ok(sent)
	} else if err = c.fail("write stats", queue, err); !c.outage.failed(sent, "stats", err) {
		c.log.Warn("worqr: could not write stats counts", "queue", queue, "err", err)
	}
}
