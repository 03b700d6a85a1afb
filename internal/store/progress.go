package store

import (
	"context"
	"strconv"

	"github.com/redis/rueidis"
)

// ReportProgress records a process's progress report (see progress.lua),
// if the process still belongs to its worker, whose lease is live, and is
// active; the outcome says what it found (WasActive: written).
func (s *Store) ReportProgress(ctx context.Context, queue string, p ProcRef, percent int, note string) (Outcome, error) {
	k := s.queueKeys(queue)
	res, err := s.run(ctx, OpProgress, queue, s.scripts.Progress, []string{k.Procs, k.Leases, k.Progress},
		[]string{p.Worker, p.PID, strconv.Itoa(percent), note, k.Channel})
	return outcome(res, err)
}

// Progress reads the last progress report of a task in flight; false when
// it has none (not in flight, or it reported nothing yet).
func (s *Store) Progress(ctx context.Context, queue, id string) (ProgressRecord, bool, error) {
	if err := s.enter(ctx, OpRead, queue); err != nil {
		return ProgressRecord{}, false, err
	}
	v, err := s.rdb.Do(ctx, s.b().Hget().Key(s.queueKeys(queue).Progress).Field(id).Build().Pin()).ToString()
	if rueidis.IsRedisNil(err) {
		return ProgressRecord{}, false, nil
	}
	if err != nil {
		return ProgressRecord{}, false, err
	}
	r, ok := ParseProgress(v)
	return r, ok, nil
}
