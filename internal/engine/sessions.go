package engine

import (
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/worqr/worqr/internal/errs"
	"github.com/worqr/worqr/internal/store"
	"github.com/worqr/worqr/internal/subscription"
)

// Sessions are the queues a worker serves, by name. Guarded by the
// worker's mu.
type Sessions map[string]*Session

// List is the sessions, in no order.
func (ss Sessions) List() []*Session {
	out := make([]*Session, 0, len(ss))
	for _, s := range ss {
		out = append(out, s)
	}
	return out
}

// Serves reports whether the worker serves queue.
func (ss Sessions) Serves(queue string) bool {
	_, ok := ss[queue]
	return ok
}

// Add records s as the session of its queue. While the worker serves
// (serving), a Handle runtime's loop starts with it: a served queue's
// runtime always has a loop to stop.
func (ss Sessions) Add(s *Session, serving bool) {
	ss[s.Name] = s
	if serving && s.Runtime != nil {
		s.Runtime.StartLoop()
	}
}

// Remove drops s, if it is still the session of its queue, and reports
// whether it was.
func (ss Sessions) Remove(s *Session) bool {
	if ss[s.Name] != s {
		return false
	}
	delete(ss, s.Name)
	return true
}

// Runtimes lists the Handle runtimes of the sessions.
func (ss Sessions) Runtimes() Runtimes {
	var rs Runtimes
	for _, s := range ss {
		if s.Runtime != nil {
			rs = append(rs, s.Runtime)
		}
	}
	return rs
}

// Slots are the handler slots of each queue served by Handle,
// HandleBatch or HandleQueues, sorted by queue: what the worker's
// registry entry records of them.
func (ss Sessions) Slots() []store.QueueSlots {
	var qs []store.QueueSlots
	for name, s := range ss {
		if s.Runtime != nil {
			qs = append(qs, store.QueueSlots{Queue: name, Slots: s.Runtime.Sched().Size()})
		}
	}
	slices.SortFunc(qs, func(a, b store.QueueSlots) int { return strings.Compare(a.Queue, b.Queue) })
	return qs
}

// Pools lists the slot schedulers of pools (HandleQueues') and of the
// sessions' runtimes, each once: pools first, then those of the queues
// served, by name.
func (ss Sessions) Pools(pools []*Scheduler) []*Scheduler {
	out := slices.Clone(pools)
	queues := make([]string, 0, len(ss))
	for q, s := range ss {
		if s.Runtime != nil {
			queues = append(queues, q)
		}
	}
	slices.Sort(queues)
	for _, q := range queues {
		if s := ss[q].Runtime.Sched(); !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// Subscribe subscribes the session, on the worker's life, to its queue's
// events, which its dispatcher (Dispatch) applies. It is called once the
// rest of the session is set (Init).
func (s *Session) Subscribe(life context.Context) {
	s.Sub = subscription.New(life, s.env.Store, s.Name, s.Dispatch, s.InCallback)
}

// Stop is StopWork on the session of worker id: it ends the handlers of
// a Handle runtime (cause ErrShutdown), giving them no grace once ctx
// ends, before the session gives its tasks away (Leave). If leaving
// fails the queue is still served, and a Handle runtime that was taking
// work takes it again; one that was not (a refused pool's member) has no
// loop to start.
func (s *Session) Stop(ctx context.Context, id string) error {
	taking := false
	if s.Runtime != nil {
		taking = s.Runtime.Taking()
		Runtimes{s.Runtime}.Stop(Expired(ctx), ctx, s.env)
	}
	err := s.Leave(ctx, id)
	if err != nil && taking {
		s.Runtime.StartLoop()
	}
	return err
}

// Leave ends the service of the queue by worker id. It first gives the
// worker's tasks there back in Redis, with dequeues on the queue held
// off; only when that succeeded does the worker stop serving the queue.
// If it fails the queue stays served (and its lease renewed), so nothing
// is left in a process that no one would reclaim, and the caller may try
// again. The caller holds the registry's lock.
func (s *Session) Leave(ctx context.Context, id string) error {
	s.Gate.Lock()
	s.Lease.Leaving()
	err := ReleaseOwn(ctx, s.env, id, []*Session{s})
	s.host.Lock()
	s.Lease.Left(err == nil && s.host.Served().Remove(s))
	s.host.Unlock()
	s.Gate.Unlock()
	if err != nil {
		return err
	}
	s.Sub.Unsubscribe(ctx)
	s.Sched.Stop()
	s.Books.EndAll(errs.ErrProcessLost)
	// The queue is left. A failure here leaves only a name in the worker's
	// queue set, with no lease or process behind it: reclaimers pass over
	// it. Reporting it would tell the caller the queue is still served,
	// and a retry would fail with ErrNotServing.
	if err := s.env.Store.LeaveQueue(ctx, id, s.Name); err != nil {
		s.env.logger().Warn("worqr: left the queue but could not drop it from the worker's queue set", "queue", s.Name, "err", err)
	}
	return nil
}

// ReleaseOwn returns every task worker id holds in the queues of ss to
// the front of each queue and drops its leases there, one script per
// queue in one round trip, under the poison-pill guard of env's
// HealthyAfter.
func ReleaseOwn(ctx context.Context, env *Env, id string, ss []*Session) error {
	if len(ss) == 0 {
		return nil
	}
	poison := env.HealthyAfter()
	rs := make([]store.Release, len(ss))
	for i, s := range ss {
		rs[i] = store.Release{Queue: s.Name, Worker: id, Mode: store.ReleaseForce, Poison: poison}
	}
	var failed []error
	for i, r := range env.Store.ReleaseAll(ctx, rs) {
		if r.Err != nil {
			failed = append(failed, env.Fail("release", ss[i].Name, r.Err))
		}
	}
	return errors.Join(failed...)
}

// Runtimes are Handle runtimes stopped together: a StopWork's, or those
// of a draining worker.
type Runtimes []*Runtime

// Idle reports whether no handler of the runtimes is running or writing
// its outcome.
func (rs Runtimes) Idle() bool {
	for _, r := range rs {
		if !r.Idle() {
			return false
		}
	}
	return true
}

// Stop stops the runtimes taking tasks and waits for their handlers until
// grace ends; then it cancels the handlers' contexts (cause ErrShutdown)
// and waits up to env's CancelWait more, or until ctx ends. It reports
// whether the handlers ended within grace. env is their worker's, whose
// clock times the wait and whose logger says when it ran out.
func (rs Runtimes) Stop(grace, ctx context.Context, env *Env) bool {
	for _, r := range rs {
		r.StopTaking()
	}
	if rs.drained(grace.Done(), nil) {
		return true
	}
	// A grace period that was over before it began outlasted no handler
	// if none was running (http.Server.Shutdown returns nil then too).
	if rs.Idle() {
		return true
	}
	for _, r := range rs {
		r.CancelAll(errs.ErrShutdown)
	}
	t := env.Clock.NewTimer(env.CancelWait)
	defer t.Stop()
	if !rs.drained(ctx.Done(), t.C()) && ctx.Err() == nil {
		env.logger().Warn("worqr: handlers still running after their contexts ended; their tasks go back to the queue")
	}
	return false
}

// drained waits, on the caller's goroutine, until no handler of the
// runtimes is running or writing its outcome, or until stop or timeout
// fires; it reports whether they all drained.
func (rs Runtimes) drained(stop <-chan struct{}, timeout <-chan time.Time) bool {
	for _, r := range rs {
		select {
		case <-r.Drained():
		case <-stop:
			return false
		case <-timeout:
			return false
		}
	}
	return true
}

// Expired is a context of parent that has already ended: no grace period.
func Expired(parent context.Context) context.Context {
	ctx, cancel := context.WithCancel(parent)
	cancel()
	return ctx
}
