package worqr

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/worqr/worqr/internal/clock"
	"github.com/worqr/worqr/internal/startstop"
	"github.com/worqr/worqr/internal/store"
)

// scheduler is one served queue's timer for delayed tasks, a component of
// the worker: it knows the earliest due time it has heard of (from
// schedule events, and from the promotion run after every subscription)
// and, when that time comes, moves every due task of the queue to its back
// in one script (promote.lua), which also says when the next is due. It
// never polls: its loop starts with the first due time heard of, so a
// queue with no delayed task has neither loop nor timer. Due times are by
// the Redis clock; the worker's estimate of it (redisClock) turns them
// into timers, and promote.lua never moves a task early whatever a timer
// says.
type scheduler struct {
	w     *Worker // set when made, as are queue, loop and kick
	queue string
	loop  *startstop.Loop
	// kick tells the loop that the due time moved earlier.
	kick chan struct{}

	mu      sync.Mutex // guards the fields below
	at      int64      // the earliest due time heard of (Unix µs, Redis clock); 0 when none
	started bool       // the loop was started
	stopped bool
}

func newScheduler(w *Worker, queue string) *scheduler {
	sc := &scheduler{w: w, queue: queue, kick: make(chan struct{}, 1)}
	sc.loop = startstop.NewLoop(sc.run)
	return sc
}

// learn arms the timer for a due time, unless an earlier one is armed.
func (sc *scheduler) learn(due int64) {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	if sc.stopped || due <= 0 || (sc.at != 0 && sc.at <= due) {
		return
	}
	sc.at = due
	if !sc.started {
		sc.started = true
		_ = sc.loop.Start(sc.w.life) // a Loop's Start does not fail
	}
	select {
	case sc.kick <- struct{}{}:
	default:
	}
}

// run is the loop: it waits for the earliest due time, then promotes.
func (sc *scheduler) run(ctx context.Context) {
	t := sc.w.c.clock.NewTimer(time.Hour)
	defer t.Stop()
	for {
		sc.mu.Lock()
		at := sc.at
		sc.mu.Unlock()
		if at == 0 {
			t.Stop()
		} else {
			t.Reset(time.UnixMicro(at).Sub(sc.w.clock.now(sc.w.c.clock)))
			sc.w.c.signals.armed.Signal(at)
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
func (sc *scheduler) runOnce(ctx context.Context) {
	sc.mu.Lock()
	sc.at = 0
	sc.mu.Unlock()
	c := sc.w.c
	sent := c.outage.Begin()
	switch err := sc.promote(ctx); {
	case err == nil:
		c.outage.OK(sent)
	case ctx.Err() == nil:
		if err = c.fail("promote", sc.queue, err); !c.outage.Failed(sent, "promote", err) {
			sc.w.logger().Warn("worqr: moving due tasks failed; retrying", "queue", sc.queue, "err", err)
		}
		sc.learn(sc.w.clock.now(sc.w.c.clock).Add(retryPromoteAfter).UnixMicro())
	}
	c.signals.promoted.Signal(sc.queue)
}

// retryPromoteAfter is how long a failed promotion waits to try again.
const retryPromoteAfter = 250 * time.Millisecond

// promote runs promote.lua, again while it moves a full cap of tasks, and
// arms the timer for the next due time.
func (sc *scheduler) promote(ctx context.Context) error {
	for {
		pctx, cancel := context.WithTimeout(ctx, sc.w.opts.TTL)
		sent := sc.w.c.clock.Now()
		p, err := sc.w.c.store.Promote(pctx, sc.queue)
		cancel()
		if err != nil {
			return err
		}
		sc.w.clock.observe(p.Now, sent, sc.w.c.clock.Now())
		if p.Moved < store.PromoteCap {
			if p.Next > 0 {
				sc.learn(p.Next)
			}
			return nil
		}
	}
}

// stop stops the loop for good, waiting for a promotion under way.
func (sc *scheduler) stop() {
	sc.mu.Lock()
	sc.stopped = true
	sc.mu.Unlock()
	sc.loop.Stop()
}

// redisClock estimates the Redis clock from the worker's (the client's
// clock): the offset seen in the last reply that carried the Redis time,
// taken at the midpoint of the round trip. Before any, it assumes the
// clocks agree. The Redis time itself stays Redis's: only the worker's
// readings of its own time go through the client's clock. It takes no
// lock (the offset is one atomic word), so that it can be read under any
// of the worker's.
type redisClock struct {
	offset atomic.Int64 // Redis time minus local time, a time.Duration
}

// at is the Redis clock's time when the worker's reads local, as far as
// known.
func (c *redisClock) at(local time.Time) time.Time {
	return local.Add(time.Duration(c.offset.Load()))
}

// now is the Redis clock's time when local reads now, as far as the
// worker knows.
func (c *redisClock) now(local clock.Clock) time.Time { return c.at(local.Now()) }

// observe records a Redis time (Unix µs) read by a call sent and answered
// at the given local times.
func (c *redisClock) observe(redisUs int64, sent, received time.Time) {
	mid := sent.Add(received.Sub(sent) / 2)
	c.offset.Store(int64(time.UnixMicro(redisUs).Sub(mid)))
}
