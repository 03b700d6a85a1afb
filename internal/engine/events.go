package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/worqr/worqr/internal/errs"
	"github.com/worqr/worqr/internal/store"
)

// Events are the application's callbacks for one queue; the root
// package's Events is the same struct, converted at StartWork. Each may
// be nil, and each runs through the session's Call.
type Events struct {
	Work   func(queue string, count int64)
	Cancel func(queue string, taskID string)
	Delete func(queue string)
}

// Worked raises a Work event of count tasks, if the application listens.
func (s *Session) Worked(ctx context.Context, count int64) {
	if s.Events.Work != nil {
		s.Call(ctx, func() { s.Events.Work(s.Name, count) })
	}
}

// Cancelled applies a cancel event: it ends (without settling: Finish
// still works) the processes of the tasks named, then raises one Cancel
// event per task.
func (s *Session) Cancelled(ctx context.Context, taskIDs []string) {
	ids := make(map[string]bool, len(taskIDs))
	for _, id := range taskIDs {
		// Tasks queued by a worqr before task ids have none, or "0",
		// all alike: an event cannot tell them apart. Their holders
		// learn of a cancel from Redis when they next write.
		if id != "" && id != "0" {
			ids[id] = true
		}
	}
	s.EndMatching(func(p *Proc) bool { return ids[p.TaskID] }, errs.ErrTaskCancelled)
	if s.Events.Cancel != nil {
		for _, id := range taskIDs {
			s.Call(ctx, func() { s.Events.Cancel(s.Name, id) })
		}
	}
}

// Deleted applies a delete event: it ends (without settling) the
// processes up to the queue's last process id when it was deleted
// (upTo), then raises a Delete event.
func (s *Session) Deleted(ctx context.Context, upTo uint64) {
	s.EndMatching(func(p *Proc) bool { return p.Seq <= upTo }, errs.ErrQueueDeleted)
	if s.Events.Delete != nil {
		s.Call(ctx, func() { s.Events.Delete(s.Name) })
	}
}

// ApplyStates ends processes whose state in Redis says they should end
// and raises one Cancel event per cancelled task and one Delete event:
// the events a missed notification would have raised.
func (s *Session) ApplyStates(ctx context.Context, procs []*Proc, states []store.State) {
	cancelled := make(map[string]bool)
	deleted := false
	for i, p := range procs {
		switch err := StateErr(states[i]); {
		case err == nil:
		case errors.Is(err, errs.ErrProcessLost):
			p.Forget(errs.ErrProcessLost)
		case errors.Is(err, errs.ErrTaskCancelled):
			// Raise the event only if the message did not already.
			if p.End(err, false) {
				cancelled[p.TaskID] = true
			}
		default:
			if p.End(err, false) {
				deleted = true
			}
		}
	}
	for task := range cancelled {
		if s.Events.Cancel != nil {
			s.Call(ctx, func() { s.Events.Cancel(s.Name, task) })
		}
	}
	if deleted && s.Events.Delete != nil {
		s.Call(ctx, func() { s.Events.Delete(s.Name) })
	}
}

// fenceBooks gives up the session's lease on its queue, when it could not be
// renewed in time: it takes the processes out of the books, with no
// reconciliation left to run (a rejoin gives back everything under the
// worker's id in the queue), and returns them and the deadline the lease
// was held to. ok is false when the session was not serving. The caller
// holds the worker's mu, and ends the processes.
func (s *Session) fenceBooks() (lost []*Proc, deadline time.Time, ok bool) {
	s.Mu.Lock()
	defer s.Mu.Unlock()
	if !s.State.Fence() {
		return nil, time.Time{}, false
	}
	s.LeaseGen++
	lost = make([]*Proc, 0, len(s.Procs))
	for _, p := range s.Procs {
		lost = append(lost, p)
	}
	s.Procs = make(map[string]*Proc)
	s.Unsure = 0
	return lost, s.DeadlineAt, true
}

// EndLost ends the processes a fence took: their tasks belong to the
// peers now, or go back to the queue with the rejoin.
func EndLost(lost []*Proc) {
	reason := fmt.Errorf("%w: %w", errs.ErrProcessLost, errs.ErrWorkerFenced)
	for _, p := range lost {
		p.End(reason, true)
	}
}

// LogDropped says, in one line, how many of the processes a fence ended
// had an outcome still to write: their handlers had returned, but the
// writes failed on the connection and were being tried again (see
// proc.Persist). The fence drops them; their tasks go back with the rest,
// so they may run again.
func LogDropped(log *slog.Logger, lost []*Proc) {
	n := 0
	for _, p := range lost {
		if p.St.IsUnwritten() {
			n++
		}
	}
	if n > 0 {
		log.Warn("worqr: outcomes not yet written when the worker fenced itself are dropped; their tasks may run again", "outcomes", n)
	}
}
