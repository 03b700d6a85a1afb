package worqr

import (
	"context"
	"strings"
	"time"

	"github.com/worqr/worqr/internal/backoff"
	"github.com/worqr/worqr/internal/store"
	"github.com/worqr/worqr/internal/subscription"
)

// Events are a worker's callbacks for one queue, given to StartWork. Each
// may be nil. They run one at a time per queue, in the order the events
// arrived, on a goroutine of the worker's: never on the Redis connection's
// reader, so a slow callback delays only its own queue's events.
type Events struct {
	// Work is called when tasks may be waiting: after an enqueue (also
	// one handed straight to an idle runtime, count 1), a stop or a
	// reclaim (count is how many tasks that added), and after every
	// (re)subscription and re-registration when the queue is not empty
	// (count is the queue's length then). Work events that pile up while a
	// callback runs are merged into one, with their counts added.
	Work func(queue string, count int64)
	// Cancel is called with the id of each cancelled task that was in
	// flight (on any worker) when it was cancelled. Processes of this
	// worker holding it have already ended with ErrTaskCancelled. A task
	// cancelled while it waited is simply gone: no event is raised.
	Cancel func(queue string, taskID string)
	// Delete is called when the queue was deleted. Processes of this worker
	// in it have already ended with ErrQueueDeleted.
	Delete func(queue string)
}

// handle applies an event to the session's processes, then calls the
// application's callback. It runs on the queue's dispatcher goroutine.
func (s *session) handle(ctx context.Context, e subscription.Event) {
	w := s.w
	if e.Subscribed {
		if e.Again {
			// A missed hand-off left a process in Redis that the worker
			// does not know of: reconciling gives it back.
			s.Books.MarkUnsure(1, true)
		}
		// The subscription may come back before the command connection
		// does: keep checking until a check succeeds, or nothing missed
		// would ever be found.
		b := backoff.New(10*time.Millisecond, time.Second).On(w.c.clock)
		for {
			err := s.catchUp(ctx)
			if err == nil || ctx.Err() != nil {
				return // stopped meanwhile
			}
			w.logger().Debug("worqr: check after subscribing failed; retrying", "queue", s.Name, "err", err)
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
		if s.Runtime != nil && (e.To == "" || strings.Contains(e.To, w.ID())) {
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
		if s.Runtime != nil && e.To == w.ID() {
			s.Runtime.Starter().HandedOff(ctx, &s.Session, e.Event)
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
func (s *session) passOn(ctx context.Context, count int64) {
	c := s.w.c
	sent := c.outage.Begin()
	switch err := c.store.Publish(ctx, s.Name, store.WorkMessage(count)); {
	case err == nil:
		c.outage.OK(sent)
	case ctx.Err() == nil:
		if err = c.fail("publish", s.Name, err); !c.outage.Failed(sent, "publish", err) {
			s.w.logger().Warn("worqr: could not pass a work event on", "queue", s.Name, "err", err)
		}
	}
}

// catchUp runs after every (re)subscription and re-registration: it raises
// the events a missed notification would have raised. Cancel and delete
// marks on the worker's processes are found through the states script,
// and waiting tasks through the queue's length.
func (s *session) catchUp(ctx context.Context) error {
	w := s.w
	c := w.c
	w.mu.Lock()
	id := w.state.ID()
	procs := s.Books.Processes() // with the id they were held under
	w.mu.Unlock()
	if len(procs) > 0 {
		pids := make([]string, len(procs))
		for i, p := range procs {
			pids[i] = p.ID
		}
		states, err := c.store.States(ctx, s.Name, id, pids)
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
	n, err := c.store.QueueLen(ctx, s.Name)
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
