package worqr

import (
	"context"
	"fmt"
	"time"

	"github.com/worqr/worqr/internal/controls"
	"github.com/worqr/worqr/internal/store"
	"github.com/worqr/worqr/worqrtype"
)

// MaxLimit is the largest concurrency or rate limit a queue takes: the
// scripts keep limits as Lua numbers (doubles), which hold every whole
// number up to 2^53 − 1 exactly and no larger one. SetConcurrency and
// SetRateLimit refuse more with ErrInvalidOptions.
const MaxLimit = 1<<53 - 1

// The limit is internal/controls', which checks rates: see the limits of
// enqueue.go for how this fails the build when the two part.
const _ = uint(MaxLimit-controls.MaxLimit) + uint(controls.MaxLimit-MaxLimit)

// ControlOption changes how Pause, Resume, SetConcurrency and SetRateLimit
// act.
type ControlOption func(*controlOptions)

type controlOptions = controls.Options

// CreateQueue lets a control make the queue it changes when the queue
// does not exist (see Queues): to pause it, or set its limits, before
// its first task. Without it a control on a queue that does not exist
// changes nothing and returns ErrNoQueue, so a misspelt name makes no
// queue.
func CreateQueue() ControlOption { return func(o *controlOptions) { o.Create = true } }

// Pause stops the whole fleet handing out a queue's tasks: dequeues return
// nothing (ErrNoTask), enqueues are still accepted, and tasks in flight
// finish as usual. It lasts until Resume, and is kept in Redis, so workers
// that start later honour it too. A queue that does not exist gives
// ErrNoQueue, unless CreateQueue is given.
func (c *Client) Pause(ctx context.Context, queue string, opts ...ControlOption) error {
	return c.control(ctx, "pause", queue, store.Pause, 0, 0, opts)
}

// Resume undoes Pause and wakes every worker serving the queue. A queue
// that does not exist gives ErrNoQueue, unless CreateQueue is given.
func (c *Client) Resume(ctx context.Context, queue string, opts ...ControlOption) error {
	return c.control(ctx, "resume", queue, store.Resume, 0, 0, opts)
}

// SetConcurrency limits how many of a queue's tasks are in flight at once
// across all workers, to n; 0 removes the limit. It is enforced inside the
// dequeue script, so it holds for every worker and is never exceeded; a
// task enqueued with a Weight counts its weight (docs/queue-controls.md
// tells how, and how held-back workers are woken). n must be in
// 0..MaxLimit (ErrInvalidOptions). A queue that does not exist gives
// ErrNoQueue, unless CreateQueue is given.
func (c *Client) SetConcurrency(ctx context.Context, queue string, n int, opts ...ControlOption) error {
	if n < 0 || int64(n) > MaxLimit {
		return fmt.Errorf("worqr: set concurrency %q: limit %d not in 0..%d: %w", queue, n, int64(MaxLimit), ErrInvalidOptions)
	}
	return c.control(ctx, "set concurrency", queue, store.Limit, n, 0, opts)
}

// SetRateLimit limits how many of a queue's tasks start in any window of
// per, across all workers, to n; 0 removes the limit. It is enforced by the
// Redis clock inside the dequeue script: a worker that finds the limit
// used up sleeps until the next start is allowed, and a manual Dequeue
// gets ErrRateLimited. A start is counted when a worker takes the task,
// not when its handler runs (docs/queue-controls.md tells what counts).
// n must be in 0..MaxLimit, and per a whole number of milliseconds, at
// least one, when n is not 0 (ErrInvalidOptions). A queue that does not
// exist gives ErrNoQueue, unless CreateQueue is given.
func (c *Client) SetRateLimit(ctx context.Context, queue string, n int, per time.Duration, opts ...ControlOption) error {
	if err := controls.CheckRate(n, per); err != nil {
		return fmt.Errorf("worqr: set rate limit %q: %w", queue, err)
	}
	return c.control(ctx, "set rate limit", queue, store.Rate, n, per, opts)
}

func (c *Client) control(ctx context.Context, op, queue string, cop store.ControlOp, n int, per time.Duration, opts []ControlOption) error {
	return controls.Run(ctx, c.core.Validate, op, queue, opts, func(create bool) error {
		return c.core.Store.Control(ctx, queue, cop, n, per, create)
	})
}

// QueueInfo is a queue's counts and controls (see worqrtype.QueueInfo).
type QueueInfo = worqrtype.QueueInfo

// QueueInfo reads a queue's counts and controls in one round trip.
func (c *Client) QueueInfo(ctx context.Context, queue string) (QueueInfo, error) {
	if err := c.core.Validate(ctx, "queue info", queue); err != nil {
		return QueueInfo{}, err
	}
	st, err := c.core.Store.QueueState(ctx, queue)
	if err != nil {
		return QueueInfo{}, c.core.Fail("queue info", queue, err)
	}
	return st.Info(queue, AggregateSettings{MaxSize: DefaultAggregateMaxSize, MaxDelay: DefaultAggregateMaxDelay}), nil
}
