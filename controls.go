package worqr

import (
	"context"
	"fmt"
	"time"

	"github.com/worqr/worqr/internal/store"
)

// Pause stops the whole fleet handing out a queue's tasks: dequeues return
// nothing (ErrNoTask), enqueues are still accepted, and tasks in flight
// finish as usual. It lasts until Resume, and is kept in Redis, so workers
// that start later honour it too.
func (c *Client) Pause(ctx context.Context, queue string) error {
	return c.control(ctx, "pause", queue, store.Pause, 0, 0)
}

// Resume undoes Pause and wakes every worker serving the queue.
func (c *Client) Resume(ctx context.Context, queue string) error {
	return c.control(ctx, "resume", queue, store.Resume, 0, 0)
}

// SetConcurrency limits how many of a queue's tasks are in flight at once
// across all workers, to n; 0 removes the limit. It is kept in Redis and
// enforced inside the dequeue script, so it holds for every worker, those
// that start later included, and is never exceeded: a process counts until
// it ends, and a dead worker's until it is reclaimed. A task enqueued with
// a Weight counts its weight (see Weight for the order of starts and for a
// task heavier than the limit). When a slot frees (a finish, a retry, a
// dead letter, a reclaim), a worker the limit held back is woken at once;
// none polls.
func (c *Client) SetConcurrency(ctx context.Context, queue string, n int) error {
	if n < 0 {
		return fmt.Errorf("worqr: set concurrency %q: negative limit %d: %w", queue, n, ErrInvalidOptions)
	}
	return c.control(ctx, "set concurrency", queue, store.Limit, n, 0)
}

// SetRateLimit limits how many of a queue's tasks start in any window of
// per, across all workers, to n; 0 removes the limit. It is enforced by the
// Redis clock inside the dequeue script, which keeps the starts of the last
// window: a worker that finds the limit used up learns when the next start
// is allowed and sleeps exactly until then (no polling). A manual Dequeue
// gets ErrRateLimited.
//
// A start is counted when a worker takes the task (the dequeue script
// hands it out), not when its handler runs: every dequeue counts, a
// retry's, a reclaim's and a manual Dequeue's included; a task taken and
// given back before its handler ran (Requeue, StopWork, shutdown) has
// used its start all the same; and a handler begins a little after its
// dequeue (the reply's round trip, a goroutine), so handlers' own starts
// may bunch slightly more than n across the edge of a window.
func (c *Client) SetRateLimit(ctx context.Context, queue string, n int, per time.Duration) error {
	if n < 0 || (n > 0 && per < time.Millisecond) {
		return fmt.Errorf("worqr: set rate limit %q: %d per %v: %w", queue, n, per, ErrInvalidOptions)
	}
	return c.control(ctx, "set rate limit", queue, store.Rate, n, per)
}

func (c *Client) control(ctx context.Context, op, queue string, cop store.ControlOp, n int, per time.Duration) error {
	if err := c.validate(ctx, op, queue); err != nil {
		return err
	}
	if err := c.store.Control(ctx, queue, cop, n, per); err != nil {
		return c.fail(op, queue, err)
	}
	return nil
}

// QueueInfo is a queue's counts and controls.
type QueueInfo struct {
	Name string
	// Waiting, Delayed, InFlight and Dead count its tasks in each state.
	Waiting, Delayed, InFlight, Dead int64
	// InFlightWeight is the sum of the weights of its tasks in flight
	// (see Weight): the slots in use, which the concurrency limit counts.
	// It equals InFlight unless weighted tasks are in flight.
	InFlightWeight int64
	// Paused is set between Pause and Resume.
	Paused bool
	// Concurrency is its limit across the fleet (SetConcurrency); 0 for
	// none.
	Concurrency int
	// Rate starts (dequeues) per Per at most (SetRateLimit); 0 for no
	// limit.
	Rate int
	Per  time.Duration
}

// QueueInfo reads a queue's counts and controls in one round trip.
func (c *Client) QueueInfo(ctx context.Context, queue string) (QueueInfo, error) {
	if err := c.validate(ctx, "queue info", queue); err != nil {
		return QueueInfo{}, err
	}
	st, err := c.store.QueueState(ctx, queue)
	if err != nil {
		return QueueInfo{}, c.fail("queue info", queue, err)
	}
	return QueueInfo{Name: queue, Waiting: st.Waiting, Delayed: st.Delayed, InFlight: st.InFlight, InFlightWeight: st.InFlightWeight, Dead: st.Dead, Paused: st.Paused, Concurrency: st.Limit, Rate: st.Rate, Per: st.Per}, nil
}
