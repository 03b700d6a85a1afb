package worqr

import (
	"context"
	"time"

	"github.com/worqr/worqr/internal/delayed"
	"github.com/worqr/worqr/internal/engine"
	"github.com/worqr/worqr/internal/subscription"
)

// session is one queue a worker serves, from StartWork (or Handle,
// HandleQueues) to StopWork or the worker's shutdown. Its engine part
// (engine.Session: its gate, lease deadline, in-flight processes,
// dispatcher, timer of delayed tasks, the application's events and, for
// Handle, its runtime) is held by value; the session adds the worker.
// Its fences, rejoins and reconciliations are the engine's
// (internal/engine: fence.go, rejoin.go, reconcile.go), over the worker as
// their host (workerHost, engine.go); its runtime (engine.Runtime) adopts
// the hand-offs, and its renewals are the lease keeper's (engine.Keeper).
//
// w is set when it is made and never changes.
type session struct {
	engine.Session
	w *Worker
}

// newSession makes the session of a queue, serving under a lease whose
// deadline is deadline, and subscribes to the queue's events.
func newSession(w *Worker, queue string, events Events, r *engine.Runtime, deadline time.Time) *session {
	s := &session{w: w}
	s.Init((*workerHost)(w), &w.env, queue, engine.Events(events), r, deadline, delayed.New(delayedEnv(w), w.life, queue))
	s.Sub = subscription.New(w.life, w.c.store, s.Name, s.Dispatch, s.InCallback)
	return s
}

// handled reports whether a Handle runtime serves the queue.
func (s *session) handled() bool { return s.Runtime != nil }

// stopHandling ends the handlers of a Handle runtime (cause ErrShutdown),
// giving them no grace once ctx ends, and stops its loop, before the
// session gives its tasks away; a session without one has nothing to stop.
func (s *session) stopHandling(ctx context.Context) {
	if s.Runtime != nil {
		runtimes{s.Runtime}.stop(expired(ctx), ctx, s.w)
	}
}

// resumeHandling starts a Handle runtime's loop again, when leaving the
// queue failed and the session still serves it.
func (s *session) resumeHandling() {
	if s.Runtime != nil {
		s.Runtime.StartLoop()
	}
}

// sessions are the queues a worker serves, by name. Guarded by w.mu.
type sessions map[string]*session

// list is the sessions, in no order.
func (ss sessions) list() []*session {
	out := make([]*session, 0, len(ss))
	for _, s := range ss {
		out = append(out, s)
	}
	return out
}

// serves reports whether the worker serves queue.
func (ss sessions) serves(queue string) bool {
	_, ok := ss[queue]
	return ok
}

// add records s as the session of its queue. While the worker serves
// (serving), a Handle runtime's loop starts with it: a served queue's
// runtime always has a loop to stop.
func (ss sessions) add(s *session, serving bool) {
	ss[s.Name] = s
	if serving && s.Runtime != nil {
		s.Runtime.StartLoop()
	}
}

// remove drops s, if it is still the session of its queue, and reports
// whether it was.
func (ss sessions) remove(s *session) bool {
	if ss[s.Name] != s {
		return false
	}
	delete(ss, s.Name)
	return true
}

// runtimes lists the Handle runtimes of the sessions.
func (ss sessions) runtimes() runtimes {
	var rs runtimes
	for _, s := range ss {
		if s.Runtime != nil {
			rs = append(rs, s.Runtime)
		}
	}
	return rs
}
