package store

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// TickStatus is what Tick did.
type TickStatus int

// What a tick can do.
const (
	// TickSkipped: the tick was not later than the last one enqueued
	// (another worker enqueued it), or it was a read (tick 0).
	TickSkipped TickStatus = 0
	// TickEnqueued: the task was added.
	TickEnqueued TickStatus = 1
	// TickEarly: the tick is later than the Redis clock; nothing changed.
	TickEarly TickStatus = 2
)

// Ticked is what a tick did and found.
type Ticked struct {
	Status TickStatus
	// Last is the last tick enqueued for the schedule (Unix ms, Redis
	// clock): the tick itself when it was enqueued.
	Last int64
	// Now is the Redis clock when the script ran (Unix µs).
	Now int64
	// ID is the task's id when it was enqueued.
	ID string
}

// Tick enqueues payload on queue for one tick (Unix ms, Redis clock) of
// the periodic schedule name, unless a tick as late has been enqueued for
// it already or the tick is still to come (tick.lua). Tick 0 only reads
// the schedule's last tick, recording now as its last for a schedule never
// seen. next is the schedule's tick after this one (after now, for a
// read; Unix ms, 0 if none), kept for inspection with the tick's task.
// args gives the task's MaxAttempts, Timeout, Retain and Weight; the
// others are ignored.
func (s *Store) Tick(ctx context.Context, queue, name string, tick, next int64, payload []byte, args EnqueueArgs) (Ticked, error) {
	k := s.queueKeys(queue)
	res, err := s.run(ctx, OpTick, queue, s.scripts.Tick, []string{k.Waiting, k.Meta, k.Idle, k.Periodic, k.Stats, k.Retained, k.Ticks},
		[]string{k.Channel, queue, name, strconv.FormatInt(tick, 10), args.fields(), string(payload), strconv.FormatInt(next, 10)})
	if err != nil {
		return Ticked{}, err
	}
	vals, err := res.AsStrSlice()
	if err == nil && len(vals) != 5 {
		err = fmt.Errorf("tick.lua answered %d values", len(vals))
	}
	if err != nil {
		return Ticked{}, err
	}
	var t Ticked
	status, err1 := strconv.Atoi(vals[0])
	last, err2 := strconv.ParseInt(vals[1], 10, 64)
	now, err3 := strconv.ParseInt(vals[2], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil {
		return Ticked{}, fmt.Errorf("tick.lua answered %q", vals)
	}
	t.Status, t.Last, t.Now, t.ID = TickStatus(status), last, now, vals[3]
	if vals[4] == "1" {
		if err := s.RegisterQueue(ctx, queue); err != nil {
			return t, err
		}
	}
	return t, nil
}

// ScheduleState is what Redis keeps of one periodic schedule of a queue.
type ScheduleState struct {
	Name string
	// Last is the last tick enqueued (Unix ms, Redis clock), or when the
	// schedule was first seen if none was yet.
	Last int64
	// TaskID is the id of the last tick's task, "" if none is known.
	TaskID string
	// Next is the schedule's tick after the last one, as the worker that
	// enqueued the last one (or registered the schedule) computed it (Unix
	// ms, Redis clock); 0 if unknown.
	Next int64
}

// Schedules reads a queue's periodic schedules: their last ticks and
// those ticks' tasks (periodic_list.lua), sorted by name.
func (s *Store) Schedules(ctx context.Context, queue string) ([]ScheduleState, error) {
	k := s.queueKeys(queue)
	res, err := s.run(ctx, OpRead, queue, s.scripts.PeriodicList, []string{k.Periodic, k.Ticks}, nil)
	if err != nil {
		return nil, err
	}
	vals, err := res.AsStrSlice()
	if err != nil {
		return nil, err
	}
	out := make([]ScheduleState, 0, len(vals)/3)
	for i := 0; i+2 < len(vals); i += 3 {
		last, err := strconv.ParseInt(vals[i+1], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("periodic_list.lua: last tick %q unreadable", vals[i+1])
		}
		id, next, _ := strings.Cut(vals[i+2], ",")
		st := ScheduleState{Name: vals[i], Last: last, TaskID: id}
		if next != "" {
			if st.Next, err = strconv.ParseInt(next, 10, 64); err != nil {
				return nil, fmt.Errorf("periodic_list.lua: next tick %q unreadable", next)
			}
		}
		out = append(out, st)
	}
	slices.SortFunc(out, func(a, b ScheduleState) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}
