package worqr

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/worqr/worqr/internal/store"
)

// scheduler is one served queue's timer for delayed tasks, a component of
// the worker: it knows the earliest due time it has heard of (from
// schedule events, and from the promotion run after every subscription)
// and, when that time comes, moves every due task of the queue to its back
// in one script (promote.lua), which also says when the next is due. It
// never polls: a queue with no delayed task arms nothing. Due times are by
// the Redis clock; the worker's estimate of it (clock) turns them into
// timers, and promote.lua never moves a task early whatever a timer says.
type scheduler struct {
	w     *Worker // set when made, as is queue
	queue string

	mu      sync.Mutex  // guards the fields below
	timer   *time.Timer // nil until first armed
	at      int64       // the due time armed (Unix µs, Redis clock); 0 when none
	stopped bool
}

func newScheduler(w *Worker, queue string) *scheduler { return &scheduler{w: w, queue: queue} }

// learn arms the timer for a due time, unless an earlier one is armed.
func (sc *scheduler) learn(due int64) {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	if sc.stopped || due <= 0 || (sc.at != 0 && sc.at <= due) {
		return
	}
	sc.at = due
	d := time.UnixMicro(due).Sub(sc.w.clock.now())
	if sc.timer == nil {
		sc.timer = time.AfterFunc(d, sc.fire)
	} else {
		sc.timer.Reset(d)
	}
}

// fire promotes the due tasks and arms the timer for the next one.
func (sc *scheduler) fire() {
	sc.mu.Lock()
	if sc.stopped {
		sc.mu.Unlock()
		return
	}
	sc.at = 0
	sc.mu.Unlock()
	c := sc.w.c
	sent := c.outage.begin()
	switch err := sc.promote(sc.w.life); {
	case err == nil:
		c.outage.ok(sent)
	case sc.w.life.Err() == nil:
		if err = c.fail("promote", sc.queue, err); !c.outage.failed(sent, "promote", err) {
			sc.w.logger().Warn("worqr: moving due tasks failed; retrying", "queue", sc.queue, "err", err)
		}
		sc.learn(sc.w.clock.now().Add(retryPromoteAfter).UnixMicro())
	}
}

// retryPromoteAfter is how long a failed promotion waits to try again.
const retryPromoteAfter = 250 * time.Millisecond

// promote runs promote.lua, again while it moves a full cap of tasks, and
// arms the timer for the next due time.
func (sc *scheduler) promote(ctx context.Context) error {
	for {
		pctx, cancel := context.WithTimeout(ctx, sc.w.opts.TTL)
		sent := time.Now()
		p, err := sc.w.c.store.Promote(pctx, sc.queue)
		cancel()
		if err != nil {
			return err
		}
		sc.w.clock.observe(p.Now, sent, time.Now())
		if p.Moved < store.PromoteCap {
			if p.Next > 0 {
				sc.learn(p.Next)
			}
			return nil
		}
	}
}

// stop disarms the timer for good.
func (sc *scheduler) stop() {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	sc.stopped = true
	if sc.timer != nil {
		sc.timer.Stop()
	}
}

// redisClock estimates the Redis clock from the worker's: the offset seen
// in the last reply that carried the Redis time, taken at the midpoint of
// the round trip. Before any, it assumes the clocks agree. It takes no
// lock (the offset is one atomic word), so that it can be read under any
// of the worker's.
type redisClock struct {
	offset atomic.Int64 // Redis time minus local time, a time.Duration
}

// now is the Redis clock's time now, as far as known.
func (c *redisClock) now() time.Time {
	return time.Now().Add(time.Duration(c.offset.Load()))
}

// observe records a Redis time (Unix µs) read by a call sent and answered
// at the given local times.
func (c *redisClock) observe(redisUs int64, sent, received time.Time) {
	mid := sent.Add(received.Sub(sent) / 2)
	c.offset.Store(int64(time.UnixMicro(redisUs).Sub(mid)))
}
