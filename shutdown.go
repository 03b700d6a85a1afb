package worqr

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/worqr/worqr/internal/engine"
	"github.com/worqr/worqr/internal/startstop"
)

// Close stops the worker at once: it stops taking tasks, cancels running
// handlers (cause ErrShutdown) and gives them ShutdownCancelWait to
// return, gives every task it holds back to the front of its queue and
// deregisters; processes still held end with ErrProcessLost. Use it when
// the process is going away and should not leave its work waiting a TTL
// for its peers (if Redis cannot be reached, the peers still reclaim the
// work once the lease expires). Use Shutdown to let running handlers
// finish first. A second call returns nil.
func (w *Worker) Close(ctx context.Context) error {
	_ = w.closer.drain(engine.Expired(ctx)) // stop taking tasks, and cancel handlers at once
	err := w.closer.close(ctx, "close")
	if errors.Is(err, ErrWorkerClosed) {
		return nil
	}
	return err
}

// closer ends the worker: it drains it (its runtimes stop taking work
// and their handlers end), then closes it (its components stop, its
// sessions are detached and their tasks given back, and it deregisters).
// It owns the end of the worker's life and the worker's one-shot
// goroutines, which it waits for.
type closer struct {
	w    *Worker
	stop context.CancelFunc // ends w.life
	// tasks tracks the worker's one-shot goroutines on life: queue lease
	// renewals, reconciliations after them, and rejoins. close closes it
	// after life ended and waits for them; once closed it starts none.
	tasks startstop.Group
}

// close closes the worker: it stops its components, ends its processes,
// gives their tasks back to the front of their queues and deregisters.
// Running handlers were stopped before (drain).
func (k *closer) close(ctx context.Context, op string) error {
	w := k.w
	w.mu.Lock()
	closing := w.state.ToClosed()
	w.mu.Unlock()
	if !closing {
		return fmt.Errorf("worqr: %s: %w", op, ErrWorkerClosed)
	}
	k.stopComponents()
	w.registry.Lock()
	defer w.registry.Unlock()
	id, ss := k.detachAll(ctx, ErrProcessLost, true)
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("worqr: %s: %w", op, err)
	}
	if err := engine.ReleaseOwn(ctx, &w.env, id, ss); err != nil {
		return err
	}
	// The stats its processes counted, not yet written (the client's, of
	// every queue: it may hold others' too, which is harmless).
	w.c.flushStats(ctx, "")
	// Out of the registry at once, rather than when its lease expires.
	if _, err := w.c.store.Deregister(ctx, id, false); err != nil {
		return w.c.fail("deregister", "", err)
	}
	return nil
}

// stopComponents ends the worker's life, stops its services in parallel
// (the lease keeper, the reclaimer, the periodic schedules, the pools'
// loops and the queues' dispatchers), and waits for the one-shot
// goroutines (renewals, reconciliations, rejoins) they started. It runs
// once the worker is closed, before the registry's lock is taken: a
// re-registration in progress holds it and ends when its context does.
func (k *closer) stopComponents() {
	w := k.w
	k.stop()
	w.mu.Lock()
	dispatchers := make([]startstop.Service, 0, len(w.sessions))
	for _, s := range w.sessions {
		// A dispatcher in a callback (which may be this Close) ends when
		// the callback returns: its context ended with life, so it starts
		// no other (see engine.Session.Call).
		if !s.InCallback() {
			dispatchers = append(dispatchers, s.Sub)
		}
	}
	// The loops of the worker's slot schedulers (HandleQueues' and those
	// of the queues Handle serves) end for good.
	pools := w.pools
	w.pools = nil
	for _, r := range w.sessions.Runtimes() {
		pools = append(pools, r.Sched())
	}
	w.mu.Unlock()
	// The components of other files stop through their own calls, each
	// on a goroutine of this group, beside the dispatchers.
	var stops startstop.Group
	stops.Go(w.lease.Stop)
	stops.Go(func() { w.reclaimer.Leave(reclaimMember{w}) })
	stops.Go(w.periodics.Close)
	stops.Go(func() { engine.CloseAll(pools) })
	startstop.StopAll(dispatchers...)
	stops.Close()
	k.tasks.Close()
}

// detachAll drops every queue the worker serves from its books: each
// subscription stops (and, with unsubscribe, is ended on the server too)
// and each process still held ends with reason. Nothing is written to
// Redis. It returns the worker's id and the queues it served. The worker
// is closed, so nothing serves a queue again.
func (k *closer) detachAll(ctx context.Context, reason error, unsubscribe bool) (string, []*engine.Session) {
	w := k.w
	w.mu.Lock()
	id, ss := w.state.ID(), w.sessions.List()
	w.sessions = make(engine.Sessions)
	for _, s := range ss {
		s.Left(true)
	}
	w.mu.Unlock()
	for _, s := range ss {
		if unsubscribe {
			s.Sub.Unsubscribe(ctx)
		} else {
			s.Sub.Halt(ctx)
		}
		s.Sched.Stop()
		s.EndAll(reason)
	}
	w.c.mu.Lock()
	_, member := w.c.workers[w]
	delete(w.c.workers, w)
	w.c.mu.Unlock()
	if member {
		w.c.flows.Left() // the last worker's leaving stops the sweeps
	}
	return id, ss
}

// Shutdown stops the worker gracefully, like http.Server.Shutdown: it
// stops taking tasks at once, waits for running handlers until ctx ends,
// then cancels their contexts (cause ErrShutdown) and waits a short while
// (ShutdownCancelWait) for them to return. What is still unfinished goes
// back to the front of its queue, the worker deregisters and its
// subscriptions close. It returns ctx's error if the grace period ran out.
// A second call, or Close after it, is safe. Like http.Server.Shutdown, a
// Shutdown called from a handler waits for that handler too: give it a
// context with a deadline.
func (w *Worker) Shutdown(ctx context.Context) error {
	w.mu.Lock()
	closed := w.state.IsClosed()
	w.mu.Unlock()
	if closed {
		return nil
	}
	grace := w.closer.drain(ctx)
	closeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), w.opts.TTL)
	defer cancel()
	err := w.closer.close(closeCtx, "shutdown")
	if errors.Is(err, ErrWorkerClosed) {
		err = nil
	}
	return errors.Join(grace, err)
}

// ShutdownCancelWait is how long Shutdown and Close wait for handlers
// to return once their contexts were cancelled.
const ShutdownCancelWait = time.Second

// drain stops every runtime taking tasks and waits for their handlers
// until ctx ends, then cancels them (see engine.Runtimes.Stop). It returns ctx's
// error if the handlers outlasted it.
func (k *closer) drain(ctx context.Context) error {
	w := k.w
	w.mu.Lock()
	w.state.ToDraining()
	runtimes := w.sessions.Runtimes()
	w.mu.Unlock()
	w.periodics.Close() // a draining worker enqueues no more ticks
	// The wait after the handlers were cancelled is ShutdownCancelWait,
	// whether or not ctx (the grace period) has ended.
	if !runtimes.Stop(ctx, context.WithoutCancel(ctx), &w.env) {
		return ctx.Err()
	}
	return nil
}
