package worqr

import (
	"context"
	"fmt"

	"github.com/worqr/worqr/internal/inspect"
	"github.com/worqr/worqr/internal/store"
	"github.com/worqr/worqr/worqrtype"
)

// DeadLetter is a task that went to its queue's dead letters (see
// worqrtype.DeadLetter).
type DeadLetter = worqrtype.DeadLetter

// DeadLetters lists a queue's dead letters, newest first: up to limit of
// them, after skipping the offset newest, so offset 0 starts with the
// newest. limit must be positive and offset not negative
// (ErrInvalidOptions). Each comes with the error its last attempt
// recorded, all read in one round trip. Offsets count from the newest at
// the time of each call, so pages can overlap or skip as tasks die or
// are removed (docs/retries.md). With PayloadPrefix their payloads are
// cut in Redis.
func (c *Client) DeadLetters(ctx context.Context, queue string, offset, limit int, opts ...InspectOption) ([]DeadLetter, error) {
	if err := c.core.Validate(ctx, "dead letters", queue); err != nil {
		return nil, err
	}
	if offset < 0 || limit <= 0 {
		return nil, fmt.Errorf("worqr: dead letters %q: offset %d, limit %d: %w", queue, offset, limit, ErrInvalidOptions)
	}
	cut, err := inspect.Cut("dead letters", queue, opts)
	if err != nil {
		return nil, err
	}
	ds, err := c.core.Store.DeadLetters(ctx, queue, offset, limit, cut)
	if err != nil {
		return nil, c.core.Fail("dead letters", queue, err)
	}
	return inspect.Each(ds, func(d store.DeadLetter) DeadLetter { return d.Info(queue) }), nil
}

// DeadLetterCount returns the number of a queue's dead letters.
func (c *Client) DeadLetterCount(ctx context.Context, queue string) (int64, error) {
	if err := c.core.Validate(ctx, "dead letter count", queue); err != nil {
		return 0, err
	}
	n, err := c.core.Store.DeadCount(ctx, queue)
	if err != nil {
		return 0, c.core.Fail("dead letter count", queue, err)
	}
	return n, nil
}

// RequeueDeadLetter puts the dead letter of task id back at the back of its
// queue and wakes the queue's workers: the task runs again as if it had
// never run, with its id, payload and own attempt budget, and without its
// attempts, error and outcome (Managing dead letters in docs/retries.md).
// A queue that had lost its name is made to exist again, as by Enqueue.
// It reports false, with no error, when the queue has no dead letter of
// that id (requeued or deleted already, trimmed, or never there).
//
// If it returns an error wrapping ErrUnavailable the task may or may not
// have been requeued. If the task was requeued but the queue could not be
// entered in the registry afterwards, it reports true with that error;
// the next Enqueue to the queue, a worker starting work on it, or
// Client.Check enters it.
func (c *Client) RequeueDeadLetter(ctx context.Context, queue, id string) (bool, error) {
	if err := c.core.Validate(ctx, "requeue dead letter", queue); err != nil {
		return false, err
	}
	if id == "" {
		return false, fmt.Errorf("worqr: requeue dead letter %q: empty task id: %w", queue, ErrInvalidOptions)
	}
	ok, err := c.core.Store.RequeueDead(ctx, queue, id)
	if err != nil {
		return ok, c.core.Fail("requeue dead letter", queue, err)
	}
	if ok {
		c.core.Carrier.Revived(ctx, queue) // a workflow's step: its workflow carries on
	}
	return ok, nil
}

// RequeueDeadLetters requeues every dead letter of a queue, as
// RequeueDeadLetter does one, in one script call: they join the back of
// the queue in the order they died, the oldest nearest the front, and one
// work event announces them. It returns how many it requeued; with an
// error, as RequeueDeadLetter says, the count is that of tasks requeued
// before the registration failed, or 0.
func (c *Client) RequeueDeadLetters(ctx context.Context, queue string) (int64, error) {
	if err := c.core.Validate(ctx, "requeue dead letters", queue); err != nil {
		return 0, err
	}
	n, err := c.core.Store.RequeueAllDead(ctx, queue)
	if err != nil {
		return n, c.core.Fail("requeue dead letters", queue, err)
	}
	if n > 0 {
		c.core.Carrier.Revived(ctx, queue) // workflows' steps: their workflows carry on
	}
	return n, nil
}

// DeleteDeadLetter deletes the dead letter of task id and its recorded
// error. It reports false, with no error, when the queue has no dead
// letter of that id.
func (c *Client) DeleteDeadLetter(ctx context.Context, queue, id string) (bool, error) {
	if err := c.core.Validate(ctx, "delete dead letter", queue); err != nil {
		return false, err
	}
	if id == "" {
		return false, fmt.Errorf("worqr: delete dead letter %q: empty task id: %w", queue, ErrInvalidOptions)
	}
	ok, err := c.core.Store.DeleteDead(ctx, queue, id)
	if err != nil {
		return false, c.core.Fail("delete dead letter", queue, err)
	}
	return ok, nil
}

// PurgeDeadLetters deletes every dead letter of a queue and their recorded
// errors, and returns how many it deleted.
func (c *Client) PurgeDeadLetters(ctx context.Context, queue string) (int64, error) {
	if err := c.core.Validate(ctx, "purge dead letters", queue); err != nil {
		return 0, err
	}
	n, err := c.core.Store.PurgeDead(ctx, queue)
	if err != nil {
		return 0, c.core.Fail("purge dead letters", queue, err)
	}
	return n, nil
}
