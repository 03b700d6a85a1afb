// Package statsflush writes the stats counts a client holds for queues
// that went idle.
package statsflush

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/worqr/worqr/internal/clock"
	"github.com/worqr/worqr/internal/startstop"
	"github.com/worqr/worqr/internal/store"
)

// statsFlushTimeout bounds one timer flush of idle queues' stats.
const statsFlushTimeout = 5 * time.Second

// Flusher writes the stats counts a client holds for queues that went
// idle (store.FlushIdleStats): a busy queue's counts ride on its own
// dequeue, finish and retry calls, but an idle queue makes none. It is a
// service (startstop) of the client whose run lasts only while counts are
// pending: a client that holds none (every client whose workers have shut
// down, which writes them) has no goroutine running, closed or not. Each
// run ends by itself once nothing is pending, and the next pending count
// starts another.
type Flusher struct {
	startstop.Base
	store *store.Store
	log   *slog.Logger
	clock clock.Clock   // the store's: it dates the counts pending
	kick  chan struct{} // buffered (1): look again, counts were written

	mu sync.Mutex // guards closed, and the start and the end of a run
	// closed is set by close: no run starts again.
	closed bool
}

// New is the flusher of the counts s holds, logging on log.
func New(s *store.Store, log *slog.Logger, clk clock.Clock) *Flusher {
	f := &Flusher{store: s, log: log, clock: clk, kick: make(chan struct{}, 1)}
	s.OnStatsPending(f.pending)
	return f
}

// pending is told that a queue has counts pending while it had none: it
// starts a run if none goes on. It never blocks for long: the store calls
// it as it counts.
func (f *Flusher) pending() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return
	}
	// The client has no context of its own: the run lasts until nothing
	// is pending or close stops it.
	_ = f.Start(context.Background())
}

// Start begins a run on ctx, unless one goes on. It is called under mu
// (pending), as a run's end is decided: a count that became pending after
// the run's last look either is seen by it or starts the next run.
func (f *Flusher) Start(ctx context.Context) error {
	ctx, ok, started, stopped := f.Begin(ctx)
	if !ok {
		return nil
	}
	go func() {
		started()
		f.loop(ctx, stopped)
	}()
	return nil
}

// Written tells the run that counts were written by others (Close,
// Shutdown): it looks again, and ends if none are left.
func (f *Flusher) Written() {
	select {
	case f.kick <- struct{}{}:
	default: // a kick is waiting already
	}
}

// loop waits until the first queue's counts may be written, writes the
// idle ones, and again, until none are pending or ctx ends; stopped is the
// last thing it calls.
func (f *Flusher) loop(ctx context.Context, stopped func()) {
	for {
		next := f.store.StatsNextIdle()
		if next.IsZero() {
			// Counts that became pending after the look above found this
			// run going and started nothing: look again, under mu, which
			// pending takes, and end the run under it too.
			f.mu.Lock()
			if f.store.StatsNextIdle().IsZero() {
				stopped()
				f.mu.Unlock()
				return
			}
			f.mu.Unlock()
			continue
		}
		t := f.clock.NewTimer(f.clock.Until(next))
		select {
		case <-t.C():
		case <-f.kick:
			t.Stop()
			continue
		case <-ctx.Done():
			t.Stop()
			stopped()
			return
		}
		// A write under way when the flusher stops is finished (bounded),
		// not abandoned: counts it took are written once, by it.
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), statsFlushTimeout)
		_, err := f.store.FlushIdleStats(wctx)
		cancel()
		if err != nil {
			f.log.Debug("worqr: writing stats of idle queues", "err", err)
			// Counts given back (Redis loading, say) are due at once:
			// wait a while before the next try.
			t := f.clock.NewTimer(store.StatsFlushEvery)
			select {
			case <-t.C():
			case <-ctx.Done():
				t.Stop()
				stopped()
				return
			}
		}
	}
}

// Close stops the flusher for good and waits for its run to end (a write
// in progress finishes first, within statsFlushTimeout).
func (f *Flusher) Close() {
	f.mu.Lock()
	f.closed = true
	f.mu.Unlock()
	f.Stop()
}
