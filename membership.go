package worqr

import (
	"context"
	"fmt"

	"github.com/worqr/worqr/internal/engine"
	"github.com/worqr/worqr/internal/lifecycle"
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
	already := w.sessions.Serves(queue)
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
	w.sessions.Add(s, !draining)
	w.mu.Unlock()
	if draining { // Shutdown or Close began meanwhile: serve nothing new
		undo, cancel := context.WithTimeout(context.WithoutCancel(ctx), w.opts.TTL)
		defer cancel()
		_ = s.Leave(undo, id)
		return fmt.Errorf("worqr: start work %q: %w", queue, ErrWorkerClosed)
	}
	// Return once events published from now on will be heard.
	var why error
	select {
	case <-s.Sub.Ready():
		if s.Runtime != nil {
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
	if err := s.Leave(undo, id); err != nil {
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
	if err := s.Stop(ctx, id); err != nil {
		return err
	}
	if s.Runtime != nil {
		w.registry.RecordSlots(ctx, id)
	}
	return nil
}
