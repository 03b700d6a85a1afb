package worqr

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/worqr/worqr/internal/store"
)

// MaxLimit is the largest concurrency or rate limit a queue takes: the
// scripts keep limits as Lua numbers (doubles), which hold every whole
// number up to 2^53 − 1 exactly and no larger one. SetConcurrency and
// SetRateLimit refuse more with ErrInvalidOptions.
const MaxLimit = 1<<53 - 1

// ControlOption changes how Pause, Resume, SetConcurrency and SetRateLimit
// act.
type ControlOption func(*controlOptions)

type controlOptions struct {
	create bool
}

// CreateQueue lets a control make the queue it changes when the queue
// does not exist (see Queues): to pause it, or set its limits, before
// its first task. Without it a control on a queue that does not exist
// changes nothing and returns ErrNoQueue, so a misspelt name makes no
// queue.
func CreateQueue() ControlOption { return func(o *controlOptions) { o.create = true } }

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
	if err := checkRate(n, per); err != nil {
		return fmt.Errorf("worqr: set rate limit %q: %w", queue, err)
	}
	return c.control(ctx, "set rate limit", queue, store.Rate, n, per, opts)
}

// checkRate refuses a rate limit Redis could not keep as given: a count
// outside 0..MaxLimit, or a window under a millisecond or not a whole
// number of them (Redis keeps whole milliseconds: 1.5ms would be 1ms).
func checkRate(n int, per time.Duration) error {
	if n < 0 || int64(n) > MaxLimit || (n > 0 && (per < time.Millisecond || per%time.Millisecond != 0)) {
		return fmt.Errorf("%d per %v (the count in 0..%d, the window whole milliseconds, at least 1ms): %w", n, per, int64(MaxLimit), ErrInvalidOptions)
	}
	return nil
}

func (c *Client) control(ctx context.Context, op, queue string, cop store.ControlOp, n int, per time.Duration, opts []ControlOption) error {
	return c.controlWith(ctx, op, queue, opts, func(create bool) error {
		return c.store.Control(ctx, queue, cop, n, per, create)
	})
}

// controlWith runs one change of a queue's controls (set: the store's
// call, told whether to make the queue) and says its error once.
func (c *Client) controlWith(ctx context.Context, op, queue string, opts []ControlOption, set func(create bool) error) error {
	if err := c.validate(ctx, op, queue); err != nil {
		return err
	}
	var o controlOptions
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	err := set(o.create)
	switch {
	case errors.Is(err, store.ErrNoQueue):
		return fmt.Errorf("worqr: %s %q: %w (CreateQueue makes it)", op, queue, ErrNoQueue)
	case err != nil:
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
	// none. A stored limit the scripts cannot read (not a whole number in
	// 0..MaxLimit: written by hand, or by an older worqr) is not enforced
	// and reads as 0; Client.Check reports it (UnreadableControls).
	Concurrency int
	// Rate starts (dequeues) per Per at most (SetRateLimit); 0 for no
	// limit. An unreadable stored value reads as 0, as for Concurrency.
	Rate int
	Per  time.Duration
	// WaitingSince is when the task that has waited longest became due
	// (its enqueue, or the end of its delay or backoff), by the Redis
	// clock; zero when none waits. Its age is what a backlog alert
	// watches: a queue that keeps up has a young oldest task however long
	// it is. Of a queue's groups, the next task of each of the first
	// MaxGroupsRead to be served counts.
	WaitingSince time.Time
	// Groups counts its groups (see Group) with tasks waiting or in
	// flight, and GroupsReady those of them not held back at their
	// limit. Waiting counts grouped tasks too.
	Groups, GroupsReady int64
	// GroupConcurrency is every group's default limit
	// (SetGroupConcurrency with group ""); 0 for none.
	GroupConcurrency int
	// SequenceHold says the queue holds its sequences on a dead task
	// (SetSequenceHold), and GroupsHeldOnDead counts the groups so held
	// until their dead letter is requeued or deleted.
	SequenceHold     bool
	GroupsHeldOnDead int64
	// Gatherings counts its open gatherings of tasks enqueued with an
	// aggregation key (see Aggregate), and Gathering the tasks they hold,
	// which Waiting does not count. Aggregation is the settings in force
	// (SetAggregation), defaults filled in.
	Gatherings, Gathering int64
	Aggregation           AggregateSettings
	// GroupTurns is every group's default turns in a row (SetGroupTurns
	// with group ""); 1 when none was set.
	GroupTurns int
	// GroupTurnSize is the most tasks one turn of a group starts
	// (SetGroupTurnSize); 1 when none was set.
	GroupTurnSize int
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
	info := QueueInfo{Name: queue, Waiting: st.Waiting, Delayed: st.Delayed, InFlight: st.InFlight, InFlightWeight: st.InFlightWeight, Dead: st.Dead, Paused: st.Paused, Concurrency: st.Limit, Rate: st.Rate, Per: st.Per,
		Groups: st.Groups, GroupsReady: st.GroupsReady, GroupConcurrency: st.GroupLimit,
		SequenceHold: st.SequenceHold, GroupsHeldOnDead: st.GroupsDeadHeld,
		Gatherings: st.Gatherings, Gathering: st.Gathering, Aggregation: AggregateSettings{MaxSize: cmp.Or(st.AggregateMax, DefaultAggregateMaxSize), MaxDelay: cmp.Or(st.AggregateDelay, DefaultAggregateMaxDelay)},
		GroupTurns: cmp.Or(st.GroupTurns, 1), GroupTurnSize: cmp.Or(st.GroupTurnSize, 1)}
	if st.Oldest > 0 {
		info.WaitingSince = time.UnixMicro(st.Oldest)
	}
	return info, nil
}
