package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/worqr/worqr/internal/errs"
	"github.com/worqr/worqr/internal/lifecycle"
)

// ServeHost is the worker as starting and stopping work on a queue take
// it: a session's host, the checks of a call, the making of a session,
// and its sessions by queue.
type ServeHost interface {
	SessionHost
	// Validate tells why the call op on queue cannot be made (a closed
	// client, a done ctx, a bad queue name), if it cannot.
	Validate(ctx context.Context, op, queue string) error
	// NewSession makes the session of queue, with the application's
	// events and the Handle runtime r (nil if the application dequeues
	// itself), serving under a lease whose deadline is deadline, and
	// subscribes it to the queue's events.
	NewSession(queue string, events Events, r *Runtime, deadline time.Time) *Session
	// RecordSlots records the handler slots of the worker (id) in its
	// registry entry. The caller holds the registry's lock.
	RecordSlots(ctx context.Context, id string)
}

// Serve makes the worker serve queue, driven by the application (r nil)
// or by a Handle runtime: it records the queue in the registry, takes a
// lease on it, subscribes to its events, and returns once events
// published from then on will be heard. If it fails, a runtime r that
// does not serve the queue stops taking work.
func Serve(ctx context.Context, host ServeHost, env *Env, queue string, events Events, r *Runtime) error {
	err := serveQueue(ctx, host, env, queue, events, r)
	if err != nil && r != nil {
		host.Lock()
		s := host.Session(queue)
		host.Unlock()
		if s == nil || s.Runtime != r {
			r.StopTaking()
		}
	}
	return err
}

// serveQueue is Serve but for the runtime's stop on failure.
func serveQueue(ctx context.Context, host ServeHost, env *Env, queue string, events Events, r *Runtime) error {
	if err := host.Validate(ctx, "start work", queue); err != nil {
		return err
	}
	reg := host.Registry()
	reg.Lock()
	defer reg.Unlock()
	host.Lock()
	id, err := host.Worker().Current("start work")
	already := host.Served().Serves(queue)
	// The queue lease expires with the registry lease that join reads,
	// which is no earlier than the one this deadline was set for.
	deadline := host.Deadline().At()
	host.Unlock()
	if err != nil {
		return err
	}
	if already {
		return fmt.Errorf("worqr: start work %q: %w", queue, errs.ErrAlreadyServing)
	}
	if err := reg.Join(ctx, id, queue); err != nil {
		return err
	}
	s := host.NewSession(queue, events, r, deadline)
	host.Lock()
	draining := host.Worker().Phase() != lifecycle.Serving
	host.Served().Add(s, !draining)
	host.Unlock()
	if draining { // Shutdown or Close began meanwhile: serve nothing new
		undo, cancel := context.WithTimeout(context.WithoutCancel(ctx), env.TTL)
		defer cancel()
		_ = s.Leave(undo, id)
		return fmt.Errorf("worqr: start work %q: %w", queue, errs.ErrWorkerClosed)
	}
	// Return once events published from now on will be heard.
	var why error
	select {
	case <-s.Sub.Ready():
		if s.Runtime != nil {
			host.RecordSlots(ctx, id)
		}
		return nil
	case <-ctx.Done():
		why = ctx.Err()
	case <-env.Writer.Life().Done():
		why = errs.ErrWorkerClosed
	}
	undo, cancel := context.WithTimeout(context.WithoutCancel(ctx), env.TTL)
	defer cancel()
	if err := s.Leave(undo, id); err != nil {
		why = UndoFailed{Err: why, What: "leaving the queue again failed, so it stays served", Undo: err}
	}
	return fmt.Errorf("worqr: start work %q: waiting for the subscription: %w", queue, why)
}

// PoolHost is the worker as serving a HandleQueues pool takes it.
type PoolHost interface {
	ServeHost
	// AddPool records pool among the worker's slot schedulers, which its
	// closer stops. The caller holds the worker's mu.
	AddPool(pool *Scheduler)
}

// ServePool serves the queues of pool's members, each with its events,
// whole or not at all: if one fails, those served already are left
// again. The pool's loop starts once every member is served (each with
// its work flag set), so that the first slots already follow its order.
// A refused pool's members take no work, whether they were served or
// not: its loop never runs to dequeue for them, and a hand-off would
// start a handler for a member that took work, on a pool nothing stops
// (a worker closed meanwhile does not hold it, and a leaving that
// failed left its queue served).
func ServePool(ctx context.Context, host PoolHost, env *Env, pool *Scheduler, events []Events) error {
	err := servePool(ctx, host, env, pool, events)
	if err != nil {
		for _, r := range pool.Members() {
			r.StopTaking()
		}
	}
	return err
}

// servePool is ServePool but for its members' stop on refusal.
func servePool(ctx context.Context, host PoolHost, env *Env, pool *Scheduler, events []Events) error {
	members := pool.Members()
	for i, r := range members {
		err := Serve(ctx, host, env, r.Queue(), events[i], r)
		if err == nil {
			continue
		}
		undo, cancel := context.WithTimeout(context.WithoutCancel(ctx), env.TTL)
		defer cancel()
		for _, done := range members[:i] {
			if uerr := Unserve(undo, host, done.Queue()); uerr != nil && !errors.Is(uerr, errs.ErrWorkerClosed) {
				err = UndoFailed{Err: err, What: fmt.Sprintf("leaving %q again failed", done.Queue()), Undo: uerr}
			}
		}
		return err
	}
	// Under the worker's mu, so that a worker closing meanwhile
	// (Closer.StopComponents) finds it.
	host.Lock()
	closed := host.Worker().IsClosed()
	if !closed {
		host.AddPool(pool)
		pool.SetReady()
	}
	host.Unlock()
	if closed {
		return fmt.Errorf("worqr: handle queues: %w", errs.ErrWorkerClosed)
	}
	return nil
}

// Unserve stops the worker serving queue (StopWork): the session stops
// (Session.Stop) and the registry's record of the worker's slots follows.
func Unserve(ctx context.Context, host ServeHost, queue string) error {
	if err := host.Validate(ctx, "stop work", queue); err != nil {
		return err
	}
	reg := host.Registry()
	reg.Lock()
	defer reg.Unlock()
	host.Lock()
	s := host.Session(queue)
	id, closed := host.Worker().ID(), host.Worker().IsClosed()
	host.Unlock()
	if closed {
		return fmt.Errorf("worqr: stop work %q: %w", queue, errs.ErrWorkerClosed)
	}
	if s == nil {
		return fmt.Errorf("worqr: stop work %q: %w", queue, errs.ErrNotServing)
	}
	if err := s.Stop(ctx, id); err != nil {
		return err
	}
	if s.Runtime != nil {
		host.RecordSlots(ctx, id)
	}
	return nil
}

// UndoFailed is Err, a call's error, with the error of undoing what the
// call had done (Undo, after What failed), which failed too: errors.Is
// matches either. Undo is an error of worqr's: its "worqr: " prefix is
// not said again.
type UndoFailed struct {
	Err  error
	What string // "leaving the queue again failed"
	Undo error
}

func (e UndoFailed) Error() string {
	return fmt.Sprintf("%s (and %s: %s)", e.Err, e.What, strings.TrimPrefix(e.Undo.Error(), "worqr: "))
}

// Unwrap is both errors.
func (e UndoFailed) Unwrap() []error { return []error{e.Err, e.Undo} }
