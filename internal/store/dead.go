package store

import (
	"context"
	"fmt"
	"strconv"

	"github.com/redis/rueidis"
)

// DeadLetter is a dead letter as stored: its task entry (with Died, Worker
// and Kind set) and the error its last attempt recorded ("" if none).
type DeadLetter struct {
	Task  Task
	Error string
}

// DeadLetters lists up to limit (> 0) of a queue's dead letters, newest
// first, skipping the offset (>= 0) newest, with their errors, in one
// script call. With cut >= 0 each payload is cut to its first cut bytes
// in Redis (see Task.Size); with cut < 0 they come whole.
func (s *Store) DeadLetters(ctx context.Context, queue string, offset, limit, cut int) ([]DeadLetter, error) {
	k := s.queueKeys(queue)
	res, err := s.run(ctx, OpDeadLetters, queue, s.scripts.DeadList, []string{k.Dead, k.Errors}, []string{strconv.Itoa(offset), strconv.Itoa(limit), strconv.Itoa(cut)})
	if err != nil {
		return nil, err
	}
	var errs []string
	ts, err := cutTasks("dead_list.lua", res, 3, func(_ *Task, rest []rueidis.RedisMessage) error {
		e, err := rest[0].ToString()
		errs = append(errs, e)
		return err
	})
	if err != nil {
		return nil, err
	}
	out := make([]DeadLetter, len(ts))
	for i, t := range ts {
		out[i] = DeadLetter{Task: t, Error: errs[i]}
	}
	return out, nil
}

// DeadCount is the number of a queue's dead letters.
func (s *Store) DeadCount(ctx context.Context, queue string) (int64, error) {
	if err := s.enter(ctx, OpRead, queue); err != nil {
		return 0, err
	}
	return s.rdb.Do(ctx, s.b().Zcard().Key(s.queueKeys(queue).Dead).Build().Pin()).AsInt64()
}

// RequeueDead puts the dead letter of task id back at the back of its
// queue, as a task not yet started (its retained outcome, if any,
// dropped), wakes the queue, and registers the
// queue if it had to be made again. It reports false, changing nothing,
// when the queue has no dead letter of that id.
func (s *Store) RequeueDead(ctx context.Context, queue, id string) (bool, error) {
	k := s.queueKeys(queue)
	res, err := s.run(ctx, OpRequeueDead, queue, s.scripts.DeadRequeue, []string{k.Dead, k.Errors, k.Waiting, k.Meta, k.Idle, k.High, k.Low, k.Stats, k.Results, k.Retained, k.GroupWait, k.GroupReady, k.Flows, k.GroupLimits},
		[]string{k.Channel, queue, id, deadPattern(id)})
	n, err := s.requeued(ctx, queue, "dead_requeue.lua", res, err)
	return n == 1, err
}

// RequeueAllDead does what RequeueDead does for every dead letter of a
// queue, in one script call, and returns how many it requeued.
func (s *Store) RequeueAllDead(ctx context.Context, queue string) (int64, error) {
	k := s.queueKeys(queue)
	res, err := s.run(ctx, OpRequeueDead, queue, s.scripts.DeadRequeueAll, []string{k.Dead, k.Errors, k.Waiting, k.Meta, k.Idle, k.High, k.Low, k.Stats, k.Results, k.Retained, k.GroupWait, k.GroupReady, k.Flows, k.GroupLimits},
		[]string{k.Channel, queue})
	return s.requeued(ctx, queue, "dead_requeue_all.lua", res, err)
}

// requeued reads a requeue script's {requeued, unregistered} answer and
// registers the queue when asked to, as Enqueue does. A failed
// registration is returned with the count: the tasks were requeued.
func (s *Store) requeued(ctx context.Context, queue, script string, res rueidis.RedisResult, err error) (int64, error) {
	if err != nil {
		return 0, err
	}
	n, err := res.AsIntSlice()
	if err == nil && len(n) != 2 {
		err = fmt.Errorf("%s answered %d values", script, len(n))
	}
	if err != nil {
		return 0, err
	}
	if n[1] == 1 {
		if err := s.RegisterQueue(ctx, queue); err != nil {
			return n[0], err
		}
	}
	return n[0], nil
}

// DeleteDead deletes the dead letter of task id, and its error, and lets
// a sequence it held go on (see ControlSequenceHold). It reports
// false when the queue has no dead letter of that id.
func (s *Store) DeleteDead(ctx context.Context, queue, id string) (bool, error) {
	k := s.queueKeys(queue)
	res, err := s.run(ctx, OpDeleteDead, queue, s.scripts.DeadDelete, []string{k.Dead, k.Errors, k.Meta, k.Idle, k.GroupWait, k.GroupReady, k.GroupLimits},
		[]string{id, deadPattern(id), k.Channel})
	if err != nil {
		return false, err
	}
	n, err := res.AsInt64()
	return n == 1, err
}

// PurgeDead deletes every dead letter of a queue, and their errors, lets
// every sequence they held go on, and returns how many there were.
func (s *Store) PurgeDead(ctx context.Context, queue string) (int64, error) {
	k := s.queueKeys(queue)
	res, err := s.run(ctx, OpDeleteDead, queue, s.scripts.DeadPurge, []string{k.Dead, k.Errors, k.Meta, k.Idle, k.GroupWait, k.GroupReady, k.GroupLimits},
		[]string{k.Channel})
	if err != nil {
		return 0, err
	}
	return res.AsInt64()
}

// deadPattern is the ZSCAN MATCH pattern of the dead letters of task id:
// entries whose header starts with the id, then a field or the payload.
func deadPattern(id string) string { return globEscape(id) + "[,:]*" }
