package store

import (
	"context"
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

// Control pauses or resumes a queue, or sets its concurrency limit (0
// removes it), for the whole fleet, and registers the queue if it is new.
func (s *Store) Control(ctx context.Context, queue string, op ControlOp, limit int, per time.Duration) error {
	k := s.queueKeys(queue)
	res, err := s.run(ctx, OpControl, queue, s.scripts.Control, []string{k.Meta, k.Waiting, k.High, k.Low},
		[]string{k.Channel, queue, string(op), strconv.Itoa(limit), strconv.FormatInt(max(per.Milliseconds(), 1), 10)})
	if err != nil {
		return err
	}
	unregistered, err := res.AsInt64()
	if err != nil {
		return err
	}
	if unregistered == 1 {
		return s.RegisterQueue(ctx, queue)
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
	if err == nil && len(n) != 9 {
		err = fmt.Errorf("queue_info.lua answered %d values", len(n))
	}
	if err != nil {
		return QueueState{}, err
	}
	return QueueState{Waiting: n[0], Delayed: n[1], InFlight: n[2], Dead: n[3], Paused: n[4] == 1, Limit: int(n[5]), Rate: int(n[6]),
		Per: time.Duration(n[7]) * time.Millisecond, InFlightWeight: n[2] + n[8]}, nil
}
