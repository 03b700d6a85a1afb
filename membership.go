package worqr

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/worqr/worqr/internal/store"
)

// serving is one queue a worker serves. name, events, sub and runner are
// set when it is made and never change; the fields marked so are guarded
// by the worker's mu.
type serving struct {
	name   string
	events Events
	sub    *subscription
	// procs are the worker's in-flight processes in this queue, by process
	// id: the one map of them. Guarded by w.mu.
	procs map[string]*Process
	// gate lets a reconciliation, a rejoin or leaving the queue stop
	// dequeues on it while they decide which processes in Redis the worker
	// really holds (dequeues hold it shared).
	gate sync.RWMutex
	// unsure counts the renewals that will still look for processes Redis
	// says the worker holds but it does not know of. A dequeue whose reply
	// was lost sets it; it stays set for more than one pass because the
	// lost command may still run late on another pooled connection.
	// Guarded by w.mu.
	unsure int
	// releasedUpTo is the queue's last process id (as a number) when the
	// worker last gave back processes Redis said it held that it did not
	// know of (a reconciliation, a rejoin): a hand-off event for one of
	// them that comes later is ignored (see handoff.go). Guarded by w.mu.
	releasedUpTo uint64
	// leaving is set while StopWork releases the queue: a script that
	// finds the lease gone then is not evidence that the worker is dead.
	// Guarded by w.mu.
	leaving bool
	// deadlineAt is when the worker's lease on this queue may expire, by
	// its own clock, less the fence margin (see lease.go). Guarded by w.mu.
	deadlineAt time.Time
	// fenced is set when the lease on this queue was not renewed in time:
	// the worker takes no work here until rejoin has taken a new lease.
	// Guarded by w.mu.
	fenced bool
	// leaseGen counts the times the worker gave up its lease on this
	// queue (fenceQueue): an answer to a renewal sent before says nothing
	// about the lease it holds now. Guarded by w.mu.
	leaseGen uint64
	// sched moves the queue's delayed tasks when they are due.
	sched *scheduler
	// runner is the Handle runtime serving the queue, if any.
	runner *runner
	// inCallback is set while the dispatcher runs one of the application's
	// callbacks, which may itself call StopWork or Close: stopping the
	// subscription then does not wait for the dispatcher. It is not set
	// during the dispatcher's own Redis calls (the catch-up), so stopping
	// waits for those.
	inCallback atomic.Bool
}

// StartWork makes the worker serve a queue: it records the queue in the
// registry, takes a lease on it, subscribes to its events, and then raises
// a Work event if tasks are already waiting.
func (w *Worker) StartWork(ctx context.Context, queue string, events Events) error {
	return w.startWork(ctx, queue, events, nil)
}

// startWork serves a queue, driven by the application (r nil) or by a
// Handle runtime.
func (w *Worker) startWork(ctx context.Context, queue string, events Events, r *runner) error {
	if err := w.c.validate(ctx, "start work", queue); err != nil {
		return err
	}
	w.membership.Lock()
	defer w.membership.Unlock()
	id, err := w.current("start work")
	if err != nil {
		return err
	}
	w.mu.Lock()
	_, already := w.serving[queue]
	w.mu.Unlock()
	if already {
		return fmt.Errorf("worqr: start work %q: %w", queue, ErrAlreadyServing)
	}
	w.mu.Lock()
	// The queue lease expires with the registry lease that join reads,
	// which is no earlier than the one this deadline was set for.
	deadline := w.lease.at
	w.mu.Unlock()
	if err := w.join(ctx, id, queue); err != nil {
		return err
	}
	s := &serving{name: queue, events: events, procs: make(map[string]*Process), runner: r, deadlineAt: deadline, sched: newScheduler(w, queue)}
	s.sub = w.subscribe(s)
	w.mu.Lock()
	w.serving[queue] = s
	draining := w.state.phase != phaseServing
	if r != nil && !draining {
		r.startLoop() // a served queue's runner always has a loop to stop
	}
	w.mu.Unlock()
	if draining { // Shutdown or Close began meanwhile: serve nothing new
		undo, cancel := context.WithTimeout(context.WithoutCancel(ctx), w.opts.TTL)
		defer cancel()
		_ = w.leave(undo, id, s)
		return fmt.Errorf("worqr: start work %q: %w", queue, ErrWorkerClosed)
	}
	// Return once events published from now on will be heard.
	var why error
	select {
	case <-s.sub.ready:
		return nil
	case <-ctx.Done():
		why = ctx.Err()
	case <-w.life.Done():
		why = ErrWorkerClosed
	}
	undo, cancel := context.WithTimeout(context.WithoutCancel(ctx), w.opts.TTL)
	defer cancel()
	if err := w.leave(undo, id, s); err != nil {
		why = undoFailed{err: why, what: "leaving the queue again failed, so it stays served", undo: err}
	}
	return fmt.Errorf("worqr: start work %q: waiting for the subscription: %w", queue, why)
}

// join records the queue in the worker's registry entry, then takes a lease
// on it that expires with the registry lease (see join.lua for why).
func (w *Worker) join(ctx context.Context, id, queue string) error {
	c := w.c
	unregistered, err := c.store.JoinQueue(ctx, queue, id)
	switch {
	case errors.Is(err, store.ErrLeaseGone):
		w.fence(id, errors.New("registry lease gone when starting work"))
		return fmt.Errorf("worqr: start work %q: %w", queue, ErrWorkerFenced)
	case err != nil:
		return c.fail("start work", queue, err)
	case unregistered:
		if err := c.store.RegisterQueue(ctx, queue); err != nil {
			return c.fail("register queue", queue, err)
		}
	}
	return nil
}

// StopWork stops serving a queue: it unsubscribes, returns every task the
// worker holds in that queue to the front of the queue, and gives up the
// lease. Processes it held end with ErrProcessLost. On a queue served by
// Handle it first cancels the running handlers (cause ErrShutdown) and
// gives them ShutdownCancelWait to return, so none still holds a task a
// peer may take. If giving the tasks back fails, the queue stays served.
func (w *Worker) StopWork(ctx context.Context, queue string) error {
	if err := w.c.validate(ctx, "stop work", queue); err != nil {
		return err
	}
	w.membership.Lock()
	defer w.membership.Unlock()
	w.mu.Lock()
	s, ok := w.serving[queue]
	id, closed := w.id, w.isClosed()
	w.mu.Unlock()
	if closed {
		return fmt.Errorf("worqr: stop work %q: %w", queue, ErrWorkerClosed)
	}
	if !ok {
		return fmt.Errorf("worqr: stop work %q: %w", queue, ErrNotServing)
	}
	if r := s.runner; r != nil {
		// End the handlers, with no grace, before their tasks are given
		// away.
		w.stopRunners(expired(ctx), ctx, []*runner{r})
	}
	err := w.leave(ctx, id, s)
	if err != nil && s.runner != nil {
		s.runner.startLoop() // the queue is still served: keep handling it
	}
	return err
}

// leave ends the worker's service of a queue. It first gives the worker's
// tasks there back in Redis, with dequeues on the queue held off; only when
// that succeeded does the worker stop serving the queue. If it fails the
// queue stays served (and its lease renewed), so nothing is left in a
// process that no one would reclaim, and the caller may try again.
func (w *Worker) leave(ctx context.Context, id string, s *serving) error {
	s.gate.Lock()
	w.mu.Lock()
	s.leaving = true
	w.mu.Unlock()
	err := w.releaseOwn(ctx, id, []*serving{s})
	w.mu.Lock()
	s.leaving = false
	if err == nil && w.serving[s.name] == s {
		delete(w.serving, s.name)
	}
	w.mu.Unlock()
	s.gate.Unlock()
	if err != nil {
		return err
	}
	s.sub.stop(ctx)
	s.sched.stop()
	w.endAll(s, ErrProcessLost)
	c := w.c
	// The queue is left. A failure here leaves only a name in the worker's
	// queue set, with no lease or process behind it: reclaimers pass over
	// it. Reporting it would tell the caller the queue is still served,
	// and a retry would fail with ErrNotServing.
	if err := c.store.LeaveQueue(ctx, id, s.name); err != nil {
		w.logger().Warn("worqr: left the queue but could not drop it from the worker's queue set", "queue", s.name, "err", err)
	}
	return nil
}

// healthyAfter is the poison-pill guard of a worker giving its own work
// back: a task it held longer than the guard's window was healthy, and its
// count of deaths in a row is cleared (a persistent task given back at
// every deploy or fence is never taken for a poison pill).
func (w *Worker) healthyAfter() store.Poison {
	return store.Poison{Window: w.reclaimer.window}
}

// releaseOwn returns every task the worker holds in the given queues to
// the front of each queue and drops its leases there, one script per queue
// in one round trip.
func (w *Worker) releaseOwn(ctx context.Context, id string, ss []*serving) error {
	if len(ss) == 0 {
		return nil
	}
	c := w.c
	rs := make([]store.Release, len(ss))
	for i, s := range ss {
		rs[i] = store.Release{Queue: s.name, Worker: id, Mode: store.ReleaseForce, Poison: w.healthyAfter()}
	}
	var errs []error
	for i, r := range c.store.ReleaseAll(ctx, rs) {
		if r.Err != nil {
			errs = append(errs, c.fail("release", ss[i].name, r.Err))
		}
	}
	return errors.Join(errs...)
}
