package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"
)

// ControlOp is a change to a queue's controls.
type ControlOp string

// Control operations.
const (
	Pause  ControlOp = "pause"
	Resume ControlOp = "resume"
	Limit  ControlOp = "limit"
	Rate   ControlOp = "rate"
	// GroupLimit sets a group's concurrency limit (see ControlGroup).
	GroupLimit ControlOp = "glimit"
	// GroupRate sets a group's rate limit (see ControlGroupRate).
	GroupRate ControlOp = "grate"
	// SequenceHold makes a queue hold its sequences on a dead task, or
	// stop (see ControlSequenceHold).
	SequenceHold ControlOp = "ghold"
	// Aggregation sets a queue's aggregation settings (see
	// ControlAggregation).
	Aggregation ControlOp = "agg"
	// GroupTurns sets a group's turns (see ControlGroupTurns).
	GroupTurns ControlOp = "gturns"
	// GroupTurnSize sets the tasks a group's turn starts (see
	// ControlGroupTurnSize).
	GroupTurnSize ControlOp = "gsize"
)

// ErrNoQueue is returned by Control for a queue that does not exist (its
// meta hash holds no name) when it was not asked to create it.
var ErrNoQueue = errors.New("no such queue")

// Control pauses or resumes a queue, or sets its concurrency limit (0
// removes it), for the whole fleet. A queue that does not exist is made
// (and registered) when create is set; otherwise nothing changes and the
// error is ErrNoQueue.
func (s *Store) Control(ctx context.Context, queue string, op ControlOp, limit int, per time.Duration, create bool) error {
	return s.control(ctx, queue, op, limit, per, create, "")
}

// ControlGroup sets the concurrency limit of a queue's group (0 removes
// it: the default applies), or with group "" the default of every group
// without one of its own (0 removes it: no limit), as Control does the
// queue's.
func (s *Store) ControlGroup(ctx context.Context, queue, group string, limit int, create bool) error {
	return s.control(ctx, queue, GroupLimit, limit, 0, create, EscapeGroup(group))
}

// ControlGroupRate sets the rate limit of a queue's group, n starts in
// any window of per (n = 0 removes it: the default applies), or with group
// "" the default of every group without one of its own (0 removes it: no
// rate), as Control does the queue's.
func (s *Store) ControlGroupRate(ctx context.Context, queue, group string, n int, per time.Duration, create bool) error {
	return s.control(ctx, queue, GroupRate, n, per, create, EscapeGroup(group))
}

// ControlSequenceHold makes a queue hold a sequence (a group with a limit
// of 1) whose task dies until its dead letter is requeued or deleted
// (on), or stop, letting every sequence so held go on (off).
func (s *Store) ControlSequenceHold(ctx context.Context, queue string, on bool, create bool) error {
	n := 0
	if on {
		n = 1
	}
	return s.control(ctx, queue, SequenceHold, n, 0, create, "")
}

// ControlAggregation sets a queue's aggregation settings: the most tasks
// an aggregated task gathers, and the longest a gathering waits from its
// first task (whole ms); 0 for either puts back its default.
func (s *Store) ControlAggregation(ctx context.Context, queue string, maxSize int, maxDelay time.Duration, create bool) error {
	return s.controlArgs(ctx, queue, Aggregation, maxSize, strconv.FormatInt(maxDelay.Milliseconds(), 10), create, "")
}

// ControlGroupTurns sets the turns of a queue's group in a row among
// the queue's groups (0 removes them: the default applies), or with group
// "" the default of every group without its own (0 removes it: one turn).
func (s *Store) ControlGroupTurns(ctx context.Context, queue, group string, n int, create bool) error {
	return s.control(ctx, queue, GroupTurns, n, 0, create, EscapeGroup(group))
}

// ControlGroupTurnSize sets how many of a group's waiting tasks one turn
// of it starts at most, for every group of a queue (1, or 0, puts back
// the default: one).
func (s *Store) ControlGroupTurnSize(ctx context.Context, queue string, n int, create bool) error {
	return s.control(ctx, queue, GroupTurnSize, n, 0, create, "")
}

// GroupHold is a group's own sequence-hold setting (ControlGroupHold).
type GroupHold int

// A group's own sequence-hold settings.
const (
	GroupHoldAsQueue GroupHold = 0 // the queue's setting applies
	GroupHoldOn      GroupHold = 1
	GroupHoldOff     GroupHold = 2
)

// ControlGroupHold sets a group's own sequence-hold setting, over the
// queue's (ControlSequenceHold): a group no longer held by it lets its
// hold go.
func (s *Store) ControlGroupHold(ctx context.Context, queue, group string, h GroupHold, create bool) error {
	return s.control(ctx, queue, SequenceHold, int(h), 0, create, EscapeGroup(group))
}

func (s *Store) control(ctx context.Context, queue string, op ControlOp, limit int, per time.Duration, create bool, group string) error {
	return s.controlArgs(ctx, queue, op, limit, strconv.FormatInt(max(per.Milliseconds(), 1), 10), create, group)
}

func (s *Store) controlArgs(ctx context.Context, queue string, op ControlOp, limit int, per string, create bool, group string) error {
	k := s.queueKeys(queue)
	mk := "0"
	if create {
		mk = "1"
	}
	res, err := s.run(ctx, OpControl, queue, s.scripts.Control, append([]string{k.Meta, k.Waiting, k.High, k.Low}, append(k.groups(), k.GroupStarts)...),
		[]string{k.Channel, queue, string(op), strconv.Itoa(limit), per, mk, group})
	if err != nil {
		return err
	}
	code, err := res.AsInt64()
	switch {
	case err != nil:
		return err
	case code == -1:
		return ErrNoQueue
	case code == 1:
		return s.RegisterQueue(ctx, queue)
	case code != 0:
		return fmt.Errorf("control.lua answered %d", code)
	}
	return nil
}

// QueueState is a queue's counts and controls, read in one round trip.
type QueueState struct {
	Waiting, Delayed, InFlight, Dead int64
	// InFlightWeight is the sum of the weights of the processes: InFlight
	// plus the meta field 'wx'.
	InFlightWeight int64
	Paused         bool
	Limit          int // 0: none
	Rate           int // 0: none
	Per            time.Duration
	// Oldest is when the task waiting longest became due (Unix µs, Redis
	// clock), 0 when none waits.
	Oldest int64
	// Groups counts the groups with tasks waiting or in flight, and
	// GroupsReady those whose turn may come (not held at their limit).
	Groups, GroupsReady int64
	// GroupLimit is every group's default concurrency limit, 0 if none.
	GroupLimit int
	// SequenceHold says the queue holds its sequences on a dead task, and
	// GroupsDeadHeld counts the groups so held.
	SequenceHold   bool
	GroupsDeadHeld int64
	// Gatherings counts the open gatherings of aggregated tasks, and
	// Gathering the tasks they hold; AggregateMax and AggregateDelay are
	// the aggregation settings set, 0 for those not set (the defaults).
	Gatherings, Gathering int64
	AggregateMax          int
	AggregateDelay        time.Duration
	// GroupTurns is every group's default turns, 0 if none.
	GroupTurns int
	// GroupTurnSize is the most tasks a group's turn starts, 0 if not set.
	GroupTurnSize int
}

// QueueState reads a queue's counts and controls, at one instant
// (queue_info.lua).
func (s *Store) QueueState(ctx context.Context, queue string) (QueueState, error) {
	k := s.queueKeys(queue)
	res, err := s.run(ctx, OpRead, queue, s.scripts.QueueInfo, []string{k.Waiting, k.Delayed, k.Procs, k.Dead, k.Meta, k.High, k.Low, k.GroupWait, k.GroupReady, k.GroupRunning, k.Gather, k.GatherDue}, nil)
	if err != nil {
		return QueueState{}, err
	}
	n, err := res.AsIntSlice()
	if err == nil && len(n) != 21 {
		err = fmt.Errorf("queue_info.lua answered %d values", len(n))
	}
	if err != nil {
		return QueueState{}, err
	}
	return QueueState{Waiting: n[0], Delayed: n[1], InFlight: n[2], Dead: n[3], Paused: n[4] == 1, Limit: int(n[5]), Rate: int(n[6]),
		Per: time.Duration(n[7]) * time.Millisecond, InFlightWeight: n[2] + n[8], Oldest: n[9],
		Groups: n[10], GroupsReady: n[11], GroupLimit: int(n[12]), SequenceHold: n[13] == 1, GroupsDeadHeld: n[14],
		Gatherings: n[15], Gathering: n[16], AggregateMax: int(n[17]), AggregateDelay: time.Duration(n[18]) * time.Millisecond,
		GroupTurns: int(n[19]), GroupTurnSize: int(n[20])}, nil
}
