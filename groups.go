package worqr

import (
	"context"
	"fmt"
	"time"

	"github.com/worqr/worqr/internal/enqueue"
	"github.com/worqr/worqr/internal/store"
)

// MaxGroupLen is the longest group key, in bytes (see Group).
const MaxGroupLen = 128

// Group puts the tasks in a group of their queue, named by key (a tenant,
// a customer, an account: any bytes, 1 to MaxGroupLen of them;
// ErrInvalidOptions otherwise). Groups are not declared: a key used once
// makes the group, and a group whose tasks are gone costs nothing.
//
// A queue's dequeues serve its groups in turn, one task a turn (an equal
// share of a dequeue's tasks when fewer groups are ready; up to n under
// SetGroupTurnSize), and the tasks
// without a group as one more group, so a group with 100,000 tasks
// waiting does not hold back one with ten: fair round-robin. A group
// given more turns (SetGroupTurns) takes that many in a row. Within a
// group, tasks start by priority (HighPriority, LowPriority), then in the
// order they were enqueued: a retried, reclaimed or delayed task takes its
// place by its id when it waits again, ahead of the group's tasks enqueued
// after it (AtFront puts tasks ahead of the group's others, the last put
// there first). High-priority tasks without a group start before every
// group's turn, and low-priority ones after.
//
// A group with a concurrency limit of 1 is a sequence: its tasks run one
// at a time in that order across the fleet, and a failing task holds the
// group until it succeeds or dies. Retried with a delay, it waits at the
// front of its group, not in the delayed set, and the group waits until it
// is due; when it dies, the group's later tasks go on (its dead letter,
// requeued, goes back to the front), unless the queue holds its sequences
// on a dead task (SetSequenceHold): then the group waits until the dead
// letter is requeued or deleted.
//
// A group runs at most its concurrency limit of tasks at once, across the
// fleet (SetGroupConcurrency), and starts at most its rate limit of tasks
// in any window (SetGroupRate); a group at its limit or rate waits out of
// turn without holding back other groups. Every other control applies to
// grouped tasks as to any: Pause, the queue's SetConcurrency and
// SetRateLimit, Weight (a task holds its weight in its group's limit as in
// the queue's), In and At, Unique, retries and dead letters. A grouped
// task is never handed straight to an idle worker: it waits for a dequeue,
// which applies its group's limit.
//
// "" means none, as without the option. See docs/flow-control.md.
func Group(key string) EnqueueOption {
	return func(o *enqueueOptions) { o.Group, o.GroupSet = key, true }
}

// SetGroupConcurrency limits how many tasks of one group of a queue (see
// Group) are in flight at once across all workers, to n; with group "",
// it sets the default of every group that has no limit of its own. n = 0
// removes the limit: a group's own falls back to the default, and the
// default to none. Like SetConcurrency, the limit is kept in Redis and
// enforced inside the dequeue script for the whole fleet: a process counts
// until it ends, a dead worker's until it is reclaimed, and a weighted
// task counts its weight (one heavier than the limit starts alone). A
// group at its limit is passed over until one of its processes ends, which
// wakes a worker at once; none polls. Limits are kept for named groups
// whether or not they have tasks. n must be in 0..MaxLimit and group at
// most MaxGroupLen bytes (ErrInvalidOptions). A queue that does not exist
// gives ErrNoQueue, unless CreateQueue is given.
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
	return c.controlWith(ctx, op, queue, opts, func(create bool) error {
		return c.store.ControlGroup(ctx, queue, group, n, create)
	})
}

// SetSequenceHold makes a queue hold each of its sequences (a group with
// a concurrency limit of 1, its own or the default: see Group) whose task
// dies (its attempts used up, buried, or a poison pill) until its dead
// letter is requeued (RequeueDeadLetter, RequeueDeadLetters: it goes
// back to the front of its group) or deleted (DeleteDeadLetter,
// PurgeDeadLetters, or trimmed by the dead letters' bounds), so that a sequence never runs a task after
// one that failed for good. on false stops it, and every sequence so held
// goes on at once; the default is off (the later tasks go on). The
// setting is the queue's, for all its sequences, kept in Redis like
// SetGroupConcurrency's limits; a group is held only when its task dies
// while the setting is on and the group is a sequence, and stays held
// (whatever its limit becomes) until its dead letter is dealt with. The
// first dead task holds the group: one that dies after it (its limit was
// raised meanwhile) does not. QueueInfo counts the groups held
// (GroupsHeldOnDead), and Groups lists them (GroupInfo.DeadTask). A
// queue that does not exist gives ErrNoQueue, unless CreateQueue is given.
//
// A group's own setting (SetGroupSequenceHold) goes over the queue's: off
// here lets go of every held group but those whose own setting is on.
func (c *Client) SetSequenceHold(ctx context.Context, queue string, on bool, opts ...ControlOption) error {
	return c.controlWith(ctx, "set sequence hold", queue, opts, func(create bool) error {
		return c.store.ControlSequenceHold(ctx, queue, on, create)
	})
}

// SetGroupTurns gives one group of a queue (see Group) n turns in a row
// among the queue's groups, where every other group takes its own (1
// unless set): while groups have tasks waiting, a group of 3 turns starts
// 3 tasks for every one of a group of 1 (a premium tenant's share). With
// group "", it sets the default of every group without turns of its own.
// n = 0 removes them: a group's own fall back to the default, and the
// default to 1. A turn is one task, or an equal share of a dequeue's
// tasks when fewer turns are to be given than tasks asked for (see
// Group): a group of n turns keeps its place in the rotation for n of
// them, then moves behind the others. Turns share out the starts among
// the groups with work; they do not raise a group's limits
// (SetGroupConcurrency, SetGroupRate), which stop its turns as ever. The
// turns are kept in Redis and applied inside the dequeue script, for the
// whole fleet, at the same O(log G) per pick. The tasks without a group
// take one turn. n must be in 0..MaxLimit and group at most MaxGroupLen
// bytes (ErrInvalidOptions). A queue that does not exist gives
// ErrNoQueue, unless CreateQueue is given.
//
// Turns are not Weight: a task's weight is the slots of the concurrency
// limits it holds while it runs, a group's turns its part of the starts.
func (c *Client) SetGroupTurns(ctx context.Context, queue, group string, n int, opts ...ControlOption) error {
	const op = "set group turns"
	if n < 0 || int64(n) > MaxLimit {
		return fmt.Errorf("worqr: %s %q: turns %d not in 0..%d: %w", op, queue, n, int64(MaxLimit), ErrInvalidOptions)
	}
	if err := enqueue.CheckGroup(group, false); err != nil {
		return fmt.Errorf("worqr: %s %q: %w", op, queue, err)
	}
	return c.controlWith(ctx, op, queue, opts, func(create bool) error {
		return c.store.ControlGroupTurns(ctx, queue, group, n, create)
	})
}

// MaxGroupTurnSize is the largest turn size (SetGroupTurnSize).
const MaxGroupTurnSize = 64

// SetGroupTurnSize sets how many tasks one turn of a group of a queue
// (see Group) starts at most: up to n of its waiting tasks (or an equal
// share of a dequeue's tasks when that is more, as with n = 1), bounded
// by its free room under its concurrency limit (SetGroupConcurrency) and
// its rate (SetGroupRate), and by the tasks the dequeue asks for (a
// worker with one free slot takes one, and the group's turn moves on). The
// setting is the queue's, for all its groups and the tasks without a
// group (which take turns as one more group). n = 1, the default, is
// strict alternation, one task a turn (see Group); a group's turns
// (SetGroupTurns) multiply it: a group of 3 turns takes up to 3n in a row.
//
// A turn costs the dequeue a read of its group's next tasks and a move
// of its turn, most of a grouped task's Redis cost when there are many
// groups, so a larger turn size buys throughput (fewer calls per task)
// with coarser fairness: groups alternate in runs of up to n tasks. Use
// it for a queue of many groups whose workers take several tasks a
// dequeue, where runs of a few tasks do not matter. The setting is kept
// in Redis and read by every dequeue, for the whole fleet. n must be in
// 1..MaxGroupTurnSize (ErrInvalidOptions). A queue that does not exist
// gives ErrNoQueue, unless CreateQueue is given.
func (c *Client) SetGroupTurnSize(ctx context.Context, queue string, n int, opts ...ControlOption) error {
	const op = "set group turn size"
	if n < 1 || n > MaxGroupTurnSize {
		return fmt.Errorf("worqr: %s %q: turn size %d not in 1..%d: %w", op, queue, n, MaxGroupTurnSize, ErrInvalidOptions)
	}
	return c.controlWith(ctx, op, queue, opts, func(create bool) error {
		return c.store.ControlGroupTurnSize(ctx, queue, n, create)
	})
}

// GroupHold is a group's own sequence-hold setting (SetGroupSequenceHold).
type GroupHold int

// A group's own sequence-hold settings.
const (
	// GroupHoldAsQueue: the queue's setting (SetSequenceHold) applies to
	// the group, the default.
	GroupHoldAsQueue GroupHold = iota
	// GroupHoldOn holds the group's sequence on a dead task, whatever the
	// queue's setting.
	GroupHoldOn
	// GroupHoldOff never holds it.
	GroupHoldOff
)

// String is "queue", "on" or "off".
func (h GroupHold) String() string {
	switch h {
	case GroupHoldOn:
		return "on"
	case GroupHoldOff:
		return "off"
	case GroupHoldAsQueue:
		return "queue"
	}
	return fmt.Sprintf("GroupHold(%d)", int(h))
}

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
	return c.controlWith(ctx, op, queue, opts, func(create bool) error {
		return c.store.ControlGroupHold(ctx, queue, group, store.GroupHold(h), create)
	})
}

// SetGroupRate limits how many tasks of one group of a queue (see Group)
// start in any window of per, across all workers, to n; with group "", it
// sets the default of every group that has no rate of its own. n = 0
// removes the rate: a group's own falls back to the default, and the
// default to none. Like SetRateLimit, it is enforced by the Redis clock
// inside the dequeue script, which keeps each group's starts of its last
// window: a group that used up its rate waits out of turn, holding back no
// other group, until its oldest start leaves the window, and a worker that
// finds nothing else to start learns that time and sleeps until then (no
// polling). A start counts when a worker takes the task, as SetRateLimit
// says. Rates are kept for named groups whether or not they have tasks. n
// must be in 0..MaxLimit, per a whole number of milliseconds (at least
// one) when n is not 0, and group at most MaxGroupLen bytes
// (ErrInvalidOptions). A queue that does not exist gives ErrNoQueue,
// unless CreateQueue is given.
//
// The queue's own SetRateLimit and SetConcurrency apply as well: a task
// starts only when every limit allows it.
func (c *Client) SetGroupRate(ctx context.Context, queue, group string, n int, per time.Duration, opts ...ControlOption) error {
	const op = "set group rate"
	if err := checkRate(n, per); err != nil {
		return fmt.Errorf("worqr: %s %q: %w", op, queue, err)
	}
	if err := enqueue.CheckGroup(group, false); err != nil {
		return fmt.Errorf("worqr: %s %q: %w", op, queue, err)
	}
	return c.controlWith(ctx, op, queue, opts, func(create bool) error {
		return c.store.ControlGroupRate(ctx, queue, group, n, per, create)
	})
}
