package worqr

import (
	"context"
	"errors"
	"fmt"

	"github.com/worqr/worqr/internal/engine"
	"github.com/worqr/worqr/internal/lifecycle"
	"github.com/worqr/worqr/internal/store"
)

// StartWork makes the worker serve a queue: it records the queue in the
// registry, takes a lease on it, subscribes to its events, and then raises
// a Work event if tasks are already waiting.
func (w *Worker) StartWork(ctx context.Context, queue string, events Events) error {
	return w.startWork(ctx, queue, events, nil)
}

// startWork serves a queue, driven by the application (r nil) or by a
// Handle runtime.
func (w *Worker) startWork(ctx context.Context, queue string, events Events, r *engine.Runtime) error {
	if err := w.c.validate(ctx, "start work", queue); err != nil {
		return err
	}
	w.registry.Lock()
	defer w.registry.Unlock()
	w.mu.Lock()
	id, err := w.state.Current("start work")
	already := w.sessions.serves(queue)
	w.mu.Unlock()
	if err != nil {
		return err
	}
	if already {
		return fmt.Errorf("worqr: start work %q: %w", queue, ErrAlreadyServing)
	}
	w.mu.Lock()
	// The queue lease expires with the registry lease that join reads,
	// which is no earlier than the one this deadline was set for.
	deadline := w.lease.At()
	w.mu.Unlock()
	if err := w.registry.Join(ctx, id, queue); err != nil {
		return err
	}
	s := newSession(w, queue, events, r, deadline)
	w.mu.Lock()
	draining := w.state.Phase() != lifecycle.Serving
	w.sessions.add(s, !draining)
	w.mu.Unlock()
	if draining { // Shutdown or Close began meanwhile: serve nothing new
		undo, cancel := context.WithTimeout(context.WithoutCancel(ctx), w.opts.TTL)
		defer cancel()
		_ = s.leave(undo, id)
		return fmt.Errorf("worqr: start work %q: %w", queue, ErrWorkerClosed)
	}
	// Return once events published from now on will be heard.
	var why error
	select {
	case <-s.Sub.Ready():
		if s.handled() {
			w.registry.RecordSlots(ctx, id)
		}
		return nil
	case <-ctx.Done():
		why = ctx.Err()
	case <-w.life.Done():
		why = ErrWorkerClosed
	}
	undo, cancel := context.WithTimeout(context.WithoutCancel(ctx), w.opts.TTL)
	defer cancel()
	if err := s.leave(undo, id); err != nil {
		why = undoFailed{err: why, what: "leaving the queue again failed, so it stays served", undo: err}
	}
	return fmt.Errorf("worqr: start work %q: waiting for the subscription: %w", queue, why)
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
	w.registry.Lock()
	defer w.registry.Unlock()
	w.mu.Lock()
	s, ok := w.sessions[queue]
	id, closed := w.state.ID(), w.state.IsClosed()
	w.mu.Unlock()
	if closed {
		return fmt.Errorf("worqr: stop work %q: %w", queue, ErrWorkerClosed)
	}
	if !ok {
		return fmt.Errorf("worqr: stop work %q: %w", queue, ErrNotServing)
	}
	s.stopHandling(ctx) // before the handlers' tasks are given away
	if err := s.leave(ctx, id); err != nil {
		s.resumeHandling() // the queue is still served: keep handling it
		return err
	}
	if s.handled() {
		w.registry.RecordSlots(ctx, id)
	}
	return nil
}

// leave ends the worker's service of the queue. It first gives the
// worker's tasks there back in Redis, with dequeues on the queue held off;
// only when that succeeded does the worker stop serving the queue. If it
// fails the queue stays served (and its lease renewed), so nothing is left
// in a process that no one would reclaim, and the caller may try again.
// The caller holds the registry's lock.
func (s *session) leave(ctx context.Context, id string) error {
	w := s.w
	s.Gate.Lock()
	s.Lease.Leaving()
	err := releaseOwn(ctx, w.c, id, w.reclaimer.HealthyAfter(), []*session{s})
	w.mu.Lock()
	s.Lease.Left(err == nil && w.sessions.remove(s))
	w.mu.Unlock()
	s.Gate.Unlock()
	if err != nil {
		return err
	}
	s.Sub.Unsubscribe(ctx)
	s.Sched.Stop()
	s.Books.EndAll(ErrProcessLost)
	c := w.c
	// The queue is left. A failure here leaves only a name in the worker's
	// queue set, with no lease or process behind it: reclaimers pass over
	// it. Reporting it would tell the caller the queue is still served,
	// and a retry would fail with ErrNotServing.
	if err := c.store.LeaveQueue(ctx, id, s.Name); err != nil {
		w.logger().Warn("worqr: left the queue but could not drop it from the worker's queue set", "queue", s.Name, "err", err)
	}
	return nil
}

// releaseOwn returns every task worker id holds in the queues of ss to
// the front of each queue and drops its leases there, one script per
// queue in one round trip; poison is the guard of healthyAfter.
func releaseOwn(ctx context.Context, c *Client, id string, poison store.Poison, ss []*session) error {
	if len(ss) == 0 {
		return nil
	}
	rs := make([]store.Release, len(ss))
	for i, s := range ss {
		rs[i] = store.Release{Queue: s.Name, Worker: id, Mode: store.ReleaseForce, Poison: poison}
	}
	var errs []error
	for i, r := range c.store.ReleaseAll(ctx, rs) {
		if r.Err != nil {
			errs = append(errs, c.fail("release", ss[i].Name, r.Err))
		}
	}
	return errors.Join(errs...)
}
