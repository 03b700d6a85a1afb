package engine

import (
	"context"
	"strings"
	"time"

	"github.com/worqr/worqr/internal/backoff"
	"github.com/worqr/worqr/internal/store"
	"github.com/worqr/worqr/internal/subscription"
)

// Dispatch applies an event of the queue's subscription to the session's
// processes, then calls the application's callback. It runs on the
// queue's dispatcher goroutine.
func (s *Session) Dispatch(ctx context.Context, e subscription.Event) {
	if e.Subscribed {
		if e.Again {
			// A missed hand-off left a process in Redis that the worker
			// does not know of: reconciling gives it back.
			s.Books.MarkUnsure(1, true)
		}
		// The subscription may come back before the command connection
		// does: keep checking until a check succeeds, or nothing missed
		// would ever be found.
		b := backoff.New(10*time.Millisecond, time.Second).On(s.env.Clock)
		for {
			err := s.catchUp(ctx)
			if err == nil || ctx.Err() != nil {
				return // stopped meanwhile
			}
			s.env.logger().Debug("worqr: check after subscribing failed; retrying", "queue", s.Name, "err", err)
			if !b.Wait(ctx) {
				return
			}
		}
	}
	switch e.Kind {
	case store.EventWork:
		if e.Count <= 0 {
			return
		}
		if s.Runtime != nil && (e.To == "" || strings.Contains(e.To, s.env.WorkerID())) {
			if s.Runtime.Taking() {
				s.Runtime.WorkArrived()
				if e.To != "" && s.Runtime.Full() {
					// A pool member is parked in every queue it found
					// empty, also while its slots are taken by other
					// queues: named then, it lets the idle runtimes know.
					s.passOn(ctx, e.Count)
				}
			} else if e.To != "" {
				// Named while stopping (Shutdown's grace period, StopWork):
				// the tasks are someone else's to take.
				s.passOn(ctx, e.Count)
			}
		}
		s.Worked(ctx, e.Count)
	case store.EventHandOff:
		if s.Runtime != nil && e.To == s.env.WorkerID() {
			s.Runtime.Starter().HandedOff(ctx, s, e.Event)
		}
		s.Worked(ctx, 1)
	case store.EventCancel:
		s.Cancelled(ctx, e.TaskIDs)
	case store.EventSchedule:
		s.Sched.Learn(e.Due)
	case store.EventDelete:
		s.Deleted(ctx, e.UpTo)
	}
}

// passOn wakes every runtime serving the queue, for a work event that named
// this one when it could not take work. Best effort: a failure leaves the
// tasks to the next event, a catch-up, or the wake that releasing the
// queue publishes.
func (s *Session) passOn(ctx context.Context, count int64) {
	o := s.env.Writer.Outage()
	sent := o.Begin()
	switch err := s.env.Store.Publish(ctx, s.Name, store.WorkMessage(count)); {
	case err == nil:
		o.OK(sent)
	case ctx.Err() == nil:
		if err = s.env.Fail("publish", s.Name, err); !o.Failed(sent, "publish", err) {
			s.env.logger().Warn("worqr: could not pass a work event on", "queue", s.Name, "err", err)
		}
	}
}

// catchUp runs after every (re)subscription and re-registration: it raises
// the events a missed notification would have raised. Cancel and delete
// marks on the worker's processes are found through the states script,
// and waiting tasks through the queue's length.
func (s *Session) catchUp(ctx context.Context) error {
	st := s.env.Store
	s.host.Lock()
	id := s.host.Worker().ID()
	procs := s.Books.Processes() // with the id they were held under
	s.host.Unlock()
	if len(procs) > 0 {
		pids := make([]string, len(procs))
		for i, p := range procs {
			pids[i] = p.ID
		}
		states, err := st.States(ctx, s.Name, id, pids)
		if err != nil {
			return err
		}
		s.ApplyStates(ctx, procs, states)
	}
	// Delayed tasks that came due while nobody listened are moved now, and
	// the timer armed for the next.
	if err := s.Sched.Promote(ctx); err != nil {
		return err
	}
	n, err := st.QueueLen(ctx, s.Name)
	if err != nil {
		return err
	}
	// A runtime looks even at an empty queue: finding it empty parks it in
	// the idle set (under the worker's current id), where enqueues find it.
	if s.Runtime != nil {
		s.Runtime.WorkArrived()
	}
	if n > 0 {
		s.Worked(ctx, n)
	}
	return nil
}
