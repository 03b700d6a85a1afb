package engine

import (
	"context"
	"errors"

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
	s.Books.EndMatching(func(p *Proc) bool { return ids[p.TaskID] }, errs.ErrTaskCancelled)
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
	s.Books.EndMatching(func(p *Proc) bool { return p.Seq <= upTo }, errs.ErrQueueDeleted)
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
