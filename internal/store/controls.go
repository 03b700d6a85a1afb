package store

import (
	"context"
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
	k := s.keys.Queue(queue)
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
	Paused                           bool
	Limit                            int // 0: none
	Rate                             int // 0: none
	Per                              time.Duration
}

// QueueState reads a queue's counts and controls.
func (s *Store) QueueState(ctx context.Context, queue string) (QueueState, error) {
	if err := s.enter(ctx, OpRead, queue); err != nil {
		return QueueState{}, err
	}
	k := s.keys.Queue(queue)
	res := s.rdb.DoMulti(ctx,
		s.b().Llen().Key(k.Waiting).Build().Pin(),
		s.b().Zcard().Key(k.Delayed).Build().Pin(),
		s.b().Hlen().Key(k.Procs).Build().Pin(),
		s.b().Zcard().Key(k.Dead).Build().Pin(),
		s.b().Hmget().Key(k.Meta).Field("paused", "limit", "rate", "per").Build().Pin(),
		s.b().Llen().Key(k.High).Build().Pin(),
		s.b().Llen().Key(k.Low).Build().Pin())
	var st QueueState
	for i, n := range []*int64{&st.Waiting, &st.Delayed, &st.InFlight, &st.Dead} {
		v, err := res[i].AsInt64()
		if err != nil {
			return QueueState{}, err
		}
		*n = v
	}
	for _, r := range res[5:] {
		n, err := r.AsInt64()
		if err != nil {
			return QueueState{}, err
		}
		st.Waiting += n
	}
	cfg, err := res[4].ToArray()
	if err != nil || len(cfg) != 4 {
		return QueueState{}, err
	}
	if v, err := cfg[2].ToString(); err == nil {
		st.Rate, _ = strconv.Atoi(v)
	}
	if v, err := cfg[3].ToString(); err == nil {
		ms, _ := strconv.ParseInt(v, 10, 64)
		st.Per = time.Duration(ms) * time.Millisecond
	}
	_, perr := cfg[0].ToString()
	st.Paused = perr == nil
	if v, err := cfg[1].ToString(); err == nil {
		st.Limit, _ = strconv.Atoi(v)
	}
	return st, nil
}
