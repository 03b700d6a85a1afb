package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/redis/rueidis"
)

// FindBounds bound FindTask's search, for each of in flight, delayed,
// dead and waiting: at most Limit entries and Budget bytes of them (a
// read of about a megabyte, or one entry, may pass it).
type FindBounds struct {
	Limit  int
	Budget int64
}

// Found is where FindTask found a task; nil where it did not.
type Found struct {
	// Waiting is the task if it waits, at Position in dequeue order.
	Waiting  *Task
	Position int64
	Delayed  *DelayedTask
	Proc     *Proc
	Dead     *DeadLetter
	// Attempts is the task's attempt history, oldest first, wherever it
	// is (see ParseAttempts).
	Attempts []Attempt
	// Partial is set when a search stopped at a bound before the end:
	// Attempts may then lack the latest attempt, kept in the task's entry
	// (see ATTEMPTS in common/failures.lua).
	Partial bool
}

// FindTask looks for the task of this id in a queue, in one script call
// (task_find.lua): in flight, delayed, dead and waiting, each payload cut
// to its first cut bytes (cut < 0: whole). Only what matches comes back;
// the scan is O(n) on the server, within bounds.
func (s *Store) FindTask(ctx context.Context, queue, id string, cut int, bounds FindBounds) (Found, error) {
	k := s.queueKeys(queue)
	res, err := s.run(ctx, OpRead, queue, s.scripts.TaskFind, []string{k.High, k.Waiting, k.Low, k.Delayed, k.Procs, k.Dead, k.Errors, k.Progress, k.GroupWait},
		[]string{id, strconv.Itoa(cut), strconv.Itoa(bounds.Limit), strconv.FormatInt(bounds.Budget, 10)})
	if err != nil {
		return Found{}, err
	}
	parts, err := res.ToArray()
	if err == nil && len(parts) != 6 {
		err = fmt.Errorf("task_find.lua answered %d parts", len(parts))
	}
	if err != nil {
		return Found{}, err
	}
	partial, err := parts[0].AsInt64()
	if err != nil {
		return Found{}, err
	}
	history, err := parts[5].ToString()
	if err != nil {
		return Found{}, err
	}
	f := Found{Partial: partial == 1, Attempts: ParseAttempts(history)}
	part := func(i, n int) ([]rueidis.RedisMessage, error) {
		vals, err := parts[i].ToArray()
		if err == nil && len(vals) != 0 && len(vals) != n {
			err = fmt.Errorf("task_find.lua answered %d values in part %d", len(vals), i)
		}
		if err != nil || len(vals) == 0 {
			return nil, err
		}
		return vals, nil
	}
	// Each found place is {..., size, entry, ...}: sizeAt is the index of
	// the size.
	task := func(vals []rueidis.RedisMessage, sizeAt int) (Task, error) {
		size, err1 := vals[sizeAt].AsInt64()
		e, err2 := vals[sizeAt+1].ToString()
		return CutTask(e, size), errors.Join(err1, err2)
	}
	var errs []error
	if w, err := part(1, 3); w != nil {
		pos, err1 := w[0].AsInt64()
		t, err2 := task(w, 1)
		f.Waiting, f.Position = &t, pos
		errs = append(errs, err1, err2)
	} else {
		errs = append(errs, err)
	}
	if d, err := part(2, 3); d != nil {
		t, err1 := task(d, 0)
		due, err2 := d[2].AsFloat64()
		f.Delayed = &DelayedTask{Task: t, Due: int64(due)}
		errs = append(errs, err1, err2)
	} else {
		errs = append(errs, err)
	}
	if p, err := part(3, 4); p != nil {
		pid, err1 := p[0].ToString()
		size, err2 := p[1].AsInt64()
		v, err3 := p[2].ToString()
		report, err4 := p[3].ToString()
		errs = append(errs, err1, err2, err3, err4)
		if proc, ok := ParseProc(pid, v); ok {
			proc.Task.Size = int(size)
			if r, ok := ParseProgress(report); ok && r.PID == pid {
				proc.Progress = &r
			}
			f.Proc = &proc
		}
	} else {
		errs = append(errs, err)
	}
	if d, err := part(4, 3); d != nil {
		t, err1 := task(d, 0)
		e, err2 := d[2].ToString()
		f.Dead = &DeadLetter{Task: t, Error: e}
		errs = append(errs, err1, err2)
	} else {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return Found{}, err
	}
	return f, nil
}
