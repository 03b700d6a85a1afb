package worqr

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/worqr/worqr/internal/delayed"
	"github.com/worqr/worqr/internal/engine"
	"github.com/worqr/worqr/internal/lifecycle"
	"github.com/worqr/worqr/internal/subscription"
)

// session is one queue a worker serves, from StartWork (or Handle,
// HandleQueues) to StopWork or the worker's shutdown. It owns the queue's
// part of the worker: its lease deadline, its in-flight processes, its
// dispatcher (sub), its timer of delayed tasks (sched) and, for Handle, its
// runtime. Its fences, rejoins, reconciliations, hand-off adoptions and
// renewals are its own methods, in the files of those components (fence.go,
// rejoin.go, reconcile.go, start.go, keepalive.go, events.go).
//
// w, name, events, sub, sched and runner are set when it is made and never
// change; the fields marked so are guarded by mu. A session reads the
// worker's state (its id, its lifecycle) only where a decision must be
// atomic with it, taking w.mu before mu (see the lock order in worker.go).
type session struct {
	w      *Worker
	name   string
	events Events
	sub    *subscription.Subscription
	// sched moves the queue's delayed tasks when they are due.
	sched *delayed.Scheduler
	// runner is the Handle runtime serving the queue, if any.
	runner *runner

	// gate lets a reconciliation, a rejoin or leaving the queue stop
	// dequeues on it while they decide which processes in Redis the worker
	// really holds (dequeues hold it shared). It is taken before w.mu and
	// mu.
	gate sync.RWMutex

	mu sync.Mutex // guards the fields below
	// state is where the session stands with its lease (see lifecycle.Session).
	// Guarded by mu.
	state lifecycle.Session
	// procs are the worker's in-flight processes in this queue, by process
	// id: the one map of them. Guarded by mu.
	procs map[string]*engine.Proc
	// unsure counts the renewals that will still look for processes Redis
	// says the worker holds but it does not know of. A dequeue whose reply
	// was lost sets it; it stays set for more than one pass because the
	// lost command may still run late on another pooled connection.
	// Guarded by mu.
	unsure int
	// releasedUpTo is the queue's last process id (as a number) when the
	// worker last gave back processes Redis said it held that it did not
	// know of (a reconciliation, a rejoin): a hand-off event for one of
	// them that comes later is ignored (see start.go). Guarded by mu.
	releasedUpTo uint64
	// deadlineAt is when the worker's lease on this queue may expire, by
	// its own clock, less the fence margin (see lease.go). Guarded by mu.
	deadlineAt time.Time
	// leaseGen counts the times the worker gave up its lease on this
	// queue (fence, or a re-registration that could not reach it): an
	// answer to a renewal sent before says nothing about the lease it
	// holds now. Guarded by mu.
	leaseGen uint64

	// inCallback is set while the dispatcher runs one of the application's
	// callbacks, which may itself call StopWork or Close: stopping the
	// subscription then does not wait for the dispatcher. It is not set
	// during the dispatcher's own Redis calls (the catch-up), so stopping
	// waits for those.
	inCallback atomic.Bool
}

// newSession makes the session of a queue, serving under a lease whose
// deadline is deadline, and subscribes to the queue's events.
func newSession(w *Worker, queue string, events Events, r *runner, deadline time.Time) *session {
	s := &session{w: w, name: queue, events: events, procs: make(map[string]*engine.Proc), runner: r, deadlineAt: deadline, sched: delayed.New(delayedEnv(w), w.life, queue)}
	s.sub = subscription.New(w.life, w.c.store, s.name, s.handle, s.inCallback.Load)
	return s
}

// call runs an application callback, unless the subscription was stopped.
// Setting inCallback before checking ctx means a stop that cancelled ctx
// first skips the callback, and one that cancelled it later does not wait.
func (s *session) call(ctx context.Context, f func()) {
	s.inCallback.Store(true)
	defer s.inCallback.Store(false)
	if ctx.Err() == nil {
		f()
	}
}

// handled reports whether a Handle runtime serves the queue.
func (s *session) handled() bool { return s.runner != nil }

// stopHandling ends the handlers of a Handle runtime (cause ErrShutdown),
// giving them no grace once ctx ends, and stops its loop, before the
// session gives its tasks away; a session without one has nothing to stop.
func (s *session) stopHandling(ctx context.Context) {
	if s.runner != nil {
		runners{s.runner}.stop(expired(ctx), ctx, s.w)
	}
}

// resumeHandling starts a Handle runtime's loop again, when leaving the
// queue failed and the session still serves it.
func (s *session) resumeHandling() {
	if s.runner != nil {
		s.runner.startLoop()
	}
}

// processes is a copy of the session's in-flight processes. Callers may
// hold w.mu.
func (s *session) processes() []*engine.Proc {
	s.mu.Lock()
	defer s.mu.Unlock()
	ps := make([]*engine.Proc, 0, len(s.procs))
	for _, p := range s.procs {
		ps = append(ps, p)
	}
	return ps
}

// takeAll empties the session's books and returns what they held, with
// no reconciliation left to run (whoever takes them gives back everything
// under the worker's id). Callers may hold w.mu.
func (s *session) takeAll() []*engine.Proc {
	s.mu.Lock()
	defer s.mu.Unlock()
	lost := make([]*engine.Proc, 0, len(s.procs))
	for _, p := range s.procs {
		lost = append(lost, p)
	}
	s.procs = make(map[string]*engine.Proc)
	s.unsure = 0
	return lost
}

// endAll ends every process the session holds, once it has ended (the
// worker no longer serves the queue).
func (s *session) endAll(reason error) {
	s.mu.Lock()
	procs := s.procs
	s.procs = make(map[string]*engine.Proc)
	s.mu.Unlock()
	for _, p := range procs {
		p.End(reason, true)
	}
}

// endMatching ends (without settling: Finish still works) the processes
// of the queue that match.
func (s *session) endMatching(match func(*engine.Proc) bool, reason error) {
	s.mu.Lock()
	var hit []*engine.Proc
	for _, p := range s.procs {
		if match(p) {
			hit = append(hit, p)
		}
	}
	s.mu.Unlock()
	for _, p := range hit {
		p.End(reason, false)
	}
}

// drop takes p out of the session's books, if it is there.
func (s *session) drop(p *engine.Proc) {
	s.mu.Lock()
	if s.procs[p.ID] == p {
		delete(s.procs, p.ID)
	}
	s.mu.Unlock()
}

// markUnsure makes the next passes renewals make look for processes
// Redis says the worker holds that it does not know of: at least, or
// (exactly) reset to passes.
func (s *session) markUnsure(passes int, atLeast bool) {
	s.mu.Lock()
	if atLeast {
		s.unsure = max(s.unsure, passes)
	} else {
		s.unsure = passes
	}
	s.mu.Unlock()
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
	ss[s.name] = s
	if serving && s.runner != nil {
		s.runner.startLoop()
	}
}

// remove drops s, if it is still the session of its queue, and reports
// whether it was.
func (ss sessions) remove(s *session) bool {
	if ss[s.name] != s {
		return false
	}
	delete(ss, s.name)
	return true
}

// runners lists the Handle runtimes of the sessions.
func (ss sessions) runners() runners {
	var rs runners
	for _, s := range ss {
		if s.runner != nil {
			rs = append(rs, s.runner)
		}
	}
	return rs
}
