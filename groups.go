package worqr

import (
	"context"
	"fmt"
	"time"

	"github.com/worqr/worqr/internal/controls"
	"github.com/worqr/worqr/internal/enqueue"
	"github.com/worqr/worqr/internal/store"
	"github.com/worqr/worqr/worqrtype"
)

// MaxGroupLen is the longest group key, in bytes (see Group).
const MaxGroupLen = 128

// Group puts the tasks in a group of their queue, named by key (a tenant,
// a customer, an account: any bytes, 1 to MaxGroupLen of them;
// ErrInvalidOptions otherwise); "" means none, as without the option.
// Groups are not declared: a key used once makes the group, and a group
// whose tasks are gone costs nothing.
//
// A queue's dequeues serve its groups in turn, one task a turn (see
// SetGroupTurns and SetGroupTurnSize), and the tasks without a group as
// one more group, so a large group does not hold back a small one: fair
// round-robin. Within a group, tasks start by priority, then in enqueue
// order. A group runs at most its concurrency limit of tasks at once
// (SetGroupConcurrency; with a limit of 1 it is a sequence, its tasks run
// one at a time in order, see SetSequenceHold) and starts at most its
// rate (SetGroupRate), across the fleet, holding back no other group.
// Every other control applies to grouped tasks as to any.
// docs/flow-control.md tells how turns, limits, sequences, retries and
// the order within a group work.
func Group(key string) EnqueueOption {
	return func(o *enqueueOptions) { o.Group, o.GroupSet = key, true }
}

// SetGroupConcurrency limits how many tasks of one group of a queue (see
// Group) are in flight at once across all workers, to n; with group "",
// it sets the default of every group that has no limit of its own. n = 0
// removes the limit: a group's own falls back to the default, and the
// default to none. Like SetConcurrency's, the limit is kept in Redis and
// enforced inside the dequeue script for the whole fleet (see
// docs/flow-control.md). Limits are kept for named groups whether or not
// they have tasks. n must be in 0..MaxLimit and group at most MaxGroupLen
// bytes (ErrInvalidOptions). A queue that does not exist gives
// ErrNoQueue, unless CreateQueue is given.
//
// With a limit of 1 a group is a sequence (see Group).
func (c *Client) SetGroupConcurrency(ctx context.Context, queue, group string, n int, opts ...ControlOption) error {
	const op = "set group concurrency"
	if n < 0 || int64(n) > MaxLimit {
		return fmt.Errorf("worqr: %s %q: limit %d not in 0..%d: %w", op, queue, n, int64(MaxLimit), ErrInvalidOptions)
	}
	if err := enqueue.CheckGroup(group, false); err != nil {
		return fmt.Errorf("worqr: %s %q: %w", op, queue, err)
	}
	return controls.Run(ctx, c.core.Validate, op, queue, opts, func(create bool) error {
		return c.core.Store.ControlGroup(ctx, queue, group, n, create)
	})
}

// SetSequenceHold makes a queue hold each of its sequences (a group with
// a concurrency limit of 1, its own or the default: see Group) whose task
// dies until its dead letter is requeued (it goes back to the front of
// its group) or deleted, so that a sequence never runs a task after one
// that failed for good. on false stops it, and every sequence so held
// goes on at once, but those whose own setting is on
// (SetGroupSequenceHold, which goes over the queue's); the default is
// off (the later tasks go on). The setting is the queue's, kept in Redis.
// QueueInfo counts the groups held (GroupsHeldOnDead), and Groups lists
// them (GroupInfo.DeadTask). A queue that does not exist gives
// ErrNoQueue, unless CreateQueue is given. docs/flow-control.md tells
// when a group is held and let go.
func (c *Client) SetSequenceHold(ctx context.Context, queue string, on bool, opts ...ControlOption) error {
	return controls.Run(ctx, c.core.Validate, "set sequence hold", queue, opts, func(create bool) error {
		return c.core.Store.ControlSequenceHold(ctx, queue, on, create)
	})
}

// SetGroupTurns gives one group of a queue (see Group) n turns in a row
// among the queue's groups, where every other group takes its own (1
// unless set): while groups have tasks waiting, a group of 3 turns starts
// 3 tasks for every one of a group of 1 (a premium tenant's share). With
// group "", it sets the default of every group without turns of its own.
// n = 0 removes them: a group's own fall back to the default, and the
// default to 1. Turns share out the starts among the groups with work;
// they raise no limit, and are not Weight. They are kept in Redis and
// applied inside the dequeue script, for the whole fleet (see
// docs/flow-control.md). n must be in 0..MaxLimit and group at most
// MaxGroupLen bytes (ErrInvalidOptions). A queue that does not exist
// gives ErrNoQueue, unless CreateQueue is given.
func (c *Client) SetGroupTurns(ctx context.Context, queue, group string, n int, opts ...ControlOption) error {
	const op = "set group turns"
	if n < 0 || int64(n) > MaxLimit {
		return fmt.Errorf("worqr: %s %q: turns %d not in 0..%d: %w", op, queue, n, int64(MaxLimit), ErrInvalidOptions)
	}
	if err := enqueue.CheckGroup(group, false); err != nil {
		return fmt.Errorf("worqr: %s %q: %w", op, queue, err)
	}
	return controls.Run(ctx, c.core.Validate, op, queue, opts, func(create bool) error {
		return c.core.Store.ControlGroupTurns(ctx, queue, group, n, create)
	})
}

// MaxGroupTurnSize is the largest turn size (SetGroupTurnSize).
const MaxGroupTurnSize = 64

// SetGroupTurnSize sets how many tasks one turn of a group of a queue
// (see Group) starts at most: up to n of its waiting tasks, bounded by
// its limits and by the tasks the dequeue asks for. The setting is the
// queue's, for all its groups and the tasks without a group, kept in
// Redis and read by every dequeue. n = 1, the default, is strict
// alternation; a group's turns (SetGroupTurns) multiply it. A larger n
// buys throughput (fewer Redis calls per task) with coarser fairness:
// groups alternate in runs of up to n tasks (see docs/flow-control.md
// for when to use it). n must be in 1..MaxGroupTurnSize
// (ErrInvalidOptions). A queue that does not exist gives ErrNoQueue,
// unless CreateQueue is given.
func (c *Client) SetGroupTurnSize(ctx context.Context, queue string, n int, opts ...ControlOption) error {
	const op = "set group turn size"
	if n < 1 || n > MaxGroupTurnSize {
		return fmt.Errorf("worqr: %s %q: turn size %d not in 1..%d: %w", op, queue, n, MaxGroupTurnSize, ErrInvalidOptions)
	}
	return controls.Run(ctx, c.core.Validate, op, queue, opts, func(create bool) error {
		return c.core.Store.ControlGroupTurnSize(ctx, queue, n, create)
	})
}

// GroupHold is a group's own sequence-hold setting (see
// worqrtype.GroupHold).
type GroupHold = worqrtype.GroupHold

// A group's own sequence-hold settings (see worqrtype.GroupHoldAsQueue).
const (
	GroupHoldAsQueue = worqrtype.GroupHoldAsQueue // the queue's setting applies, the default
	GroupHoldOn      = worqrtype.GroupHoldOn      // hold the group's sequence on a dead task
	GroupHoldOff     = worqrtype.GroupHoldOff     // never hold it
)

// SetGroupSequenceHold sets one group's own sequence-hold setting, over
// the queue's (SetSequenceHold): GroupHoldOn holds the group, if it is a
// sequence, when its task dies, though the queue does not hold its
// sequences; GroupHoldOff never holds it; GroupHoldAsQueue (the default)
// follows the queue. A group that the new setting no longer holds goes on
// at once, as when the queue's setting goes off; turning the queue's off
// does not let go of the groups whose own setting is on. The setting is
// kept in Redis whether or not the group has tasks. group must be 1 to
// MaxGroupLen bytes and h one of the three (ErrInvalidOptions). A queue
// that does not exist gives ErrNoQueue, unless CreateQueue is given.
func (c *Client) SetGroupSequenceHold(ctx context.Context, queue, group string, h GroupHold, opts ...ControlOption) error {
	const op = "set group sequence hold"
	if h < GroupHoldAsQueue || h > GroupHoldOff {
		return fmt.Errorf("worqr: %s %q: %v: %w", op, queue, h, ErrInvalidOptions)
	}
	if err := enqueue.CheckGroup(group, true); err != nil {
		return fmt.Errorf("worqr: %s %q: %w", op, queue, err)
	}
	return controls.Run(ctx, c.core.Validate, op, queue, opts, func(create bool) error {
		return c.core.Store.ControlGroupHold(ctx, queue, group, store.GroupHold(h), create)
	})
}

// SetGroupRate limits how many tasks of one group of a queue (see Group)
// start in any window of per, across all workers, to n; with group "", it
// sets the default of every group that has no rate of its own. n = 0
// removes the rate: a group's own falls back to the default, and the
// default to none. Like SetRateLimit, it is enforced by the Redis clock
// inside the dequeue script: a group that used up its rate waits out of
// turn, holding back no other group, and nobody polls (see
// docs/flow-control.md). Rates are kept for named groups whether or not
// they have tasks. n must be in 0..MaxLimit, per a whole number of
// milliseconds (at least one) when n is not 0, and group at most
// MaxGroupLen bytes (ErrInvalidOptions). A queue that does not exist
// gives ErrNoQueue, unless CreateQueue is given.
//
// The queue's own SetRateLimit and SetConcurrency apply as well: a task
// starts only when every limit allows it.
func (c *Client) SetGroupRate(ctx context.Context, queue, group string, n int, per time.Duration, opts ...ControlOption) error {
	const op = "set group rate"
	if err := controls.CheckRate(n, per); err != nil {
		return fmt.Errorf("worqr: %s %q: %w", op, queue, err)
	}
	if err := enqueue.CheckGroup(group, false); err != nil {
		return fmt.Errorf("worqr: %s %q: %w", op, queue, err)
	}
	return controls.Run(ctx, c.core.Validate, op, queue, opts, func(create bool) error {
		return c.core.Store.ControlGroupRate(ctx, queue, group, n, per, create)
	})
}
