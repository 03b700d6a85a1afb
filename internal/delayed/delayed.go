// Package delayed is a served queue's timer for its delayed tasks, and the
// worker's estimate of the Redis clock their due times are read on.
package delayed

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/worqr/worqr/internal/clock"
	"github.com/worqr/worqr/internal/startstop"
	"github.com/worqr/worqr/internal/store"
)

// Scheduler is one served queue's timer for delayed tasks, a component of
// the worker: it knows the earliest due time it has heard of (from
// schedule events, and from the promotion run after every subscription)
// and, when that time comes, moves every due task of the queue to its back
// in one script (promote.lua), which also says when the next is due. It
// never polls: its loop starts with the first due time heard of, so a
// queue with no delayed task has neither loop nor timer. Due times are by
// the Redis clock; the worker's estimate of it (RedisClock) turns them
// into timers, and promote.lua never moves a task early whatever a timer
// says.
type Scheduler struct {
	w     *Env // set when made, as are life, queue, loop and kick
	life  context.Context
	queue string
	loop  *startstop.Loop
	// kick tells the loop that the due time moved earlier.
	kick chan struct{}

	mu      sync.Mutex // guards the fields below
	at      int64      // the earliest due time heard of (Unix µs, Redis clock); 0 when none
	started bool       // the loop was started
	stopped bool
}

// New is the timer of queue's delayed tasks, whose loop runs on life.
func New(w *Env, life context.Context, queue string) *Scheduler {
	sc := &Scheduler{w: w, life: life, queue: queue, kick: make(chan struct{}, 1)}
	sc.loop = startstop.NewLoop(sc.run)
	return sc
}

// Learn arms the timer for a due time, unless an earlier one is armed.
func (sc *Scheduler) Learn(due int64) {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	if sc.stopped || due <= 0 || (sc.at != 0 && sc.at <= due) {
		return
	}
	sc.at = due
	if !sc.started {
		sc.started = true
		_ = sc.loop.Start(sc.life) // a Loop's Start does not fail
	}
	select {
	case sc.kick <- struct{}{}:
	default:
	}
}

// run is the loop: it waits for the earliest due time, then promotes.
func (sc *Scheduler) run(ctx context.Context) {
	t := sc.w.Clock.NewTimer(time.Hour)
	defer t.Stop()
	for {
		sc.mu.Lock()
		at := sc.at
		sc.mu.Unlock()
		if at == 0 {
			t.Stop()
		} else {
			t.Reset(time.UnixMicro(at).Sub(sc.w.Redis.Now(sc.w.Clock)))
			sc.w.Armed.Signal(at)
		}
		select {
		case <-ctx.Done():
			return
		case <-sc.kick:
			continue
		case <-t.C():
		}
		sc.runOnce(ctx)
	}
}

// runOnce promotes the due tasks, which arms the timer for the next one,
// or arms it to try again soon if the promotion failed.
func (sc *Scheduler) runOnce(ctx context.Context) {
	sc.mu.Lock()
	sc.at = 0
	sc.mu.Unlock()
	c := sc.w
	sent := c.Outage.Begin()
	switch err := sc.Promote(ctx); {
	case err == nil:
		c.Outage.OK(sent)
	case ctx.Err() == nil:
		if err = c.Fail("promote", sc.queue, err); !c.Outage.Failed(sent, "promote", err) {
			sc.w.Log().Warn("worqr: moving due tasks failed; retrying", "queue", sc.queue, "err", err)
		}
		sc.Learn(sc.w.Redis.Now(sc.w.Clock).Add(retryPromoteAfter).UnixMicro())
	}
	c.Promoted.Signal(sc.queue)
}

// retryPromoteAfter is how long a failed promotion waits to try again.
const retryPromoteAfter = 250 * time.Millisecond

// Promote runs promote.lua, again while it moves a full cap of tasks, and
// arms the timer for the next due time.
func (sc *Scheduler) Promote(ctx context.Context) error {
	for {
		pctx, cancel := context.WithTimeout(ctx, sc.w.TTL)
		sent := sc.w.Clock.Now()
		p, err := sc.w.Store.Promote(pctx, sc.queue)
		cancel()
		if err != nil {
			return err
		}
		sc.w.Redis.Observe(p.Now, sent, sc.w.Clock.Now())
		if p.Moved < store.PromoteCap {
			if p.Next > 0 {
				sc.Learn(p.Next)
			}
			return nil
		}
	}
}

// Stop stops the loop for good, waiting for a promotion under way.
func (sc *Scheduler) Stop() {
	sc.mu.Lock()
	sc.stopped = true
	sc.mu.Unlock()
	sc.loop.Stop()
}

// RedisClock estimates the Redis clock from the worker's (the client's
// clock): the offset seen in the last reply that carried the Redis time,
// taken at the midpoint of the round trip. Before any, it assumes the
// clocks agree. The Redis time itself stays Redis's: only the worker's
// readings of its own time go through the client's clock. It takes no
// lock (the offset is one atomic word), so that it can be read under any
// of the worker's.
type RedisClock struct {
	offset atomic.Int64 // Redis time minus local time, a time.Duration
}

// At is the Redis clock's time when the worker's reads local, as far as
// known.
func (c *RedisClock) At(local time.Time) time.Time {
	return local.Add(time.Duration(c.offset.Load()))
}

// Now is the Redis clock's time when local reads now, as far as the
// worker knows.
func (c *RedisClock) Now(local clock.Clock) time.Time { return c.At(local.Now()) }

// Shift moves the estimate on by d, for tests.
func (c *RedisClock) Shift(d time.Duration) { c.offset.Add(int64(d)) }

// Observe records a Redis time (Unix µs) read by a call sent and answered
// at the given local times.
func (c *RedisClock) Observe(redisUs int64, sent, received time.Time) {
	mid := sent.Add(received.Sub(sent) / 2)
	c.offset.Store(int64(time.UnixMicro(redisUs).Sub(mid)))
}
