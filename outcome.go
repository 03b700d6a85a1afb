package worqr

import (
	"context"
	"fmt"

	"github.com/worqr/worqr/internal/store"
	"github.com/worqr/worqr/worqrtype"
)

// TaskOutcome is a retained task's outcome (see worqrtype.TaskOutcome).
type TaskOutcome = worqrtype.TaskOutcome

// TaskResult returns the outcome of a task enqueued with Retain, by id. It
// returns ErrNoTask while the task has not ended (or did not ask to be
// retained, or its retention ran out, or it is a dead letter requeued and
// not yet ended again).
func (c *Client) TaskResult(ctx context.Context, queue, id string) (TaskOutcome, error) {
	if err := c.core.Validate(ctx, "task result", queue); err != nil {
		return TaskOutcome{}, err
	}
	if id == "" {
		return TaskOutcome{}, fmt.Errorf("worqr: task result %q: empty task id: %w", queue, ErrInvalidOptions)
	}
	r, state, err := c.core.Store.TaskOutcome(ctx, queue, id, false)
	if err != nil {
		return TaskOutcome{}, c.core.Fail("task result", queue, err)
	}
	if state != store.OutcomeKept {
		return TaskOutcome{}, fmt.Errorf("worqr: task result %q %s: %w", queue, id, ErrNoTask)
	}
	return r.Outcome(queue), nil
}

// Wait waits until a task enqueued with Retain has ended, and returns its
// outcome, or ctx's error. It does not poll: it hears the outcome's event
// on the queue's subscription, shared by all waiters (docs/results.md
// tells how none is missed, and what a read costs).
//
// Wait waits only while an outcome will come: while its queue holds the
// task, enqueued with Retain, waiting, delayed or in flight. When no
// outcome will come, Wait returns at once with an error saying why:
//   - ErrNotRetained: the queue holds the task (waiting, delayed, in
//     flight or dead) but it was enqueued without Retain;
//   - ErrTaskCancelled: the task was cancelled while Wait waited, or is
//     cancelled and its process still runs;
//   - ErrQueueDeleted: likewise, its queue was deleted;
//   - ErrNoTask: no outcome of the task is kept and its queue holds it
//     nowhere an outcome could come from: an id never enqueued (or given
//     with another queue), a task cancelled before Wait began, one
//     enqueued without Retain that has ended, or a retained one whose
//     outcome expired (even while its dead letter is kept). An expired
//     outcome looks like an unknown id.
//
// An outcome kept is returned at once, a dead one included; a dead letter
// requeued has none until it ends again (see RequeueDeadLetter). An empty
// id is ErrInvalidOptions.
func (c *Client) Wait(ctx context.Context, queue, id string) (TaskOutcome, error) {
	return c.wait(ctx, queue, id, nil)
}

// WaitWithProgress is Wait, calling onProgress (on the caller's
// goroutine) with the task's progress reports while it waits (see
// Process.ReportProgress): the last one kept in Redis once subscribed,
// then each one published. A callback slower than the reports skips to
// the latest. A nil onProgress makes it Wait. Following it, in
// docs/results.md, tells its cost and order.
func (c *Client) WaitWithProgress(ctx context.Context, queue, id string, onProgress func(TaskProgress)) (TaskOutcome, error) {
	return c.wait(ctx, queue, id, onProgress)
}

// wait is Wait, and WaitWithProgress with onProgress (internal/waiters'
// Wait).
func (c *Client) wait(ctx context.Context, queue, id string, onProgress func(TaskProgress)) (TaskOutcome, error) {
	if err := c.core.Validate(ctx, "wait", queue); err != nil {
		return TaskOutcome{}, err
	}
	if id == "" {
		return TaskOutcome{}, fmt.Errorf("worqr: wait %q: empty task id: %w", queue, ErrInvalidOptions)
	}
	return c.core.Waiters.Outcome(ctx, queue, id, onProgress, c.core.Fail)
}
