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
)

// ErrNoQueue is returned by Control for a queue that does not exist (its
// meta hash holds no name) when it was not asked to create it.
var ErrNoQueue = errors.New("no such queue")

// Control pauses or resumes a queue, or sets its concurrency limit (0
// removes it), for the whole fleet. A queue that does not exist is made
// (and registered) when create is set; otherwise nothing changes and the
// error is ErrNoQueue.
func (s *Store) Control(ctx context.Context, queue string, op ControlOp, limit int, per time.Duration, create bool) error {
	k := s.queueKeys(queue)
	mk := "0"
	if create {
		mk = "1"
	}
	res, err := s.run(ctx, OpControl, queue, s.scripts.Control, []string{k.Meta, k.Waiting, k.High, k.Low},
		[]string{k.Channel, queue, string(op), strconv.Itoa(limit), strconv.FormatInt(max(per.Milliseconds(), 1), 10), mk})
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
}

// QueueState reads a queue's counts and controls, at one instant
// (queue_info.lua).
func (s *Store) QueueState(ctx context.Context, queue string) (QueueState, error) {
	k := s.queueKeys(queue)
	res, err := s.run(ctx, OpRead, queue, s.scripts.QueueInfo, []string{k.Waiting, k.Delayed, k.Procs, k.Dead, k.Meta, k.High, k.Low}, nil)
	if err != nil {
		return QueueState{}, err
	}
	n, err := res.AsIntSlice()
	if err == nil && len(n) != 10 {
		err = fmt.Errorf("queue_info.lua answered %d values", len(n))
	}
	if err != nil {
		return QueueState{}, err
	}
	return QueueState{Waiting: n[0], Delayed: n[1], InFlight: n[2], Dead: n[3], Paused: n[4] == 1, Limit: int(n[5]), Rate: int(n[6]),
		Per: time.Duration(n[7]) * time.Millisecond, InFlightWeight: n[2] + n[8], Oldest: n[9]}, nil
}
