package engine

import (
	"context"
	"fmt"

	"github.com/worqr/worqr/internal/errs"
	"github.com/worqr/worqr/internal/startstop"
)

// CloserHost is the worker as its closer takes it: its mu, lifecycle and
// sessions (DeadlineHost), its registry entry, and the components the
// engine does not hold, each stopped through the host.
type CloserHost interface {
	DeadlineHost
	// Registry is the worker's registry entry, whose lock a close holds
	// while it gives the worker's tasks back and deregisters.
	Registry() Joiner
	// Served is the worker's sessions. The caller holds the worker's mu.
	Served() Sessions
	// TakePools takes the slot schedulers of the worker's HandleQueues
	// calls, which it holds no more. The caller holds the worker's mu.
	TakePools() []*Scheduler
	// Services are the stops of the worker's services the engine does
	// not hold (its lease keeper, its membership of the reclaimer, its
	// periodic schedules), run in parallel with the rest.
	Services() []func()
	// StopTicks stops the worker's periodic schedules: a draining worker
	// enqueues no more ticks.
	StopTicks()
	// Left tells the client that the worker no longer counts among its
	// workers; it is called once the worker's sessions are detached.
	Left()
	// Flush writes the stats counts the client holds.
	Flush(ctx context.Context)
}

// Closer ends the worker: it drains it (its runtimes stop taking work
// and their handlers end), then closes it (its components stop, its
// sessions are detached and their tasks given back, and it deregisters).
// It owns the end of the worker's life and the worker's one-shot
// goroutines, which it waits for.
type Closer struct {
	host CloserHost
	env  *Env
	end  context.CancelFunc // ends the worker's life
	// tasks tracks the worker's one-shot goroutines on its life: queue
	// lease renewals, reconciliations after them, and rejoins. Close
	// closes it after life ended and waits for them; once closed it
	// starts none.
	tasks startstop.Group
}

// Init sets up the closer of the worker host of environment env, whose
// life end ends.
func (k *Closer) Init(host CloserHost, env *Env, end context.CancelFunc) {
	k.host, k.env, k.end = host, env, end
}

// Go runs f on a goroutine of the worker's one-shot tasks, unless the
// closer stopped them.
func (k *Closer) Go(f func()) { k.tasks.Go(f) }

// Halt ends the worker's life and waits for its one-shot goroutines,
// stopping nothing else: what runs on life stops, and nothing is given
// back (a frozen worker, as tests make one).
func (k *Closer) Halt() {
	k.end()
	k.tasks.Wait()
}

// Close closes the worker: it stops its components, ends its processes,
// gives their tasks back to the front of their queues and deregisters.
// Running handlers were stopped before (Drain). op names the call in
// its errors; a second call fails with ErrWorkerClosed.
func (k *Closer) Close(ctx context.Context, op string) error {
	k.host.Lock()
	closing := k.host.Worker().ToClosed()
	k.host.Unlock()
	if !closing {
		return fmt.Errorf("worqr: %s: %w", op, errs.ErrWorkerClosed)
	}
	k.StopComponents()
	reg := k.host.Registry()
	reg.Lock()
	defer reg.Unlock()
	id, ss := k.DetachAll(ctx, errs.ErrProcessLost, true)
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("worqr: %s: %w", op, err)
	}
	if err := ReleaseOwn(ctx, k.env, id, ss); err != nil {
		return err
	}
	// The stats its processes counted, not yet written (the client's, of
	// every queue: it may hold others' too, which is harmless).
	k.host.Flush(ctx)
	// Out of the registry at once, rather than when its lease expires.
	if _, err := k.env.Store.Deregister(ctx, id, false); err != nil {
		return k.env.Fail("deregister", "", err)
	}
	return nil
}

// StopComponents ends the worker's life, stops its services in parallel
// (the host's, the pools' loops and the queues' dispatchers), and waits
// for the one-shot goroutines (renewals, reconciliations, rejoins) they
// started. It runs once the worker is closed, before the registry's lock
// is taken: a re-registration in progress holds it and ends when its
// context does.
func (k *Closer) StopComponents() {
	k.end()
	k.host.Lock()
	ss := k.host.Sessions(nil)
	dispatchers := make([]startstop.Service, 0, len(ss))
	for _, s := range ss {
		// A dispatcher in a callback (which may be this Close) ends when
		// the callback returns: its context ended with life, so it starts
		// no other (see Session.Call).
		if !s.InCallback() {
			dispatchers = append(dispatchers, s.Sub)
		}
	}
	// The loops of the worker's slot schedulers (HandleQueues' and those
	// of the queues Handle serves) end for good.
	pools := k.host.TakePools()
	for _, s := range ss {
		if s.Runtime != nil {
			pools = append(pools, s.Runtime.Sched())
		}
	}
	k.host.Unlock()
	var stops startstop.Group
	for _, stop := range k.host.Services() {
		stops.Go(stop)
	}
	stops.Go(func() { CloseAll(pools) })
	startstop.StopAll(dispatchers...)
	stops.Close()
	k.tasks.Close()
}

// DetachAll drops every queue the worker serves from its books: each
// subscription stops (and, with unsubscribe, is ended on the server too)
// and each process still held ends with reason. Nothing is written to
// Redis. It returns the worker's id and the sessions it served. The
// worker is closed, so nothing serves a queue again.
func (k *Closer) DetachAll(ctx context.Context, reason error, unsubscribe bool) (string, []*Session) {
	k.host.Lock()
	served := k.host.Served()
	id, ss := k.host.Worker().ID(), served.List()
	clear(served)
	for _, s := range ss {
		s.Lease.Left(true)
	}
	k.host.Unlock()
	for _, s := range ss {
		if unsubscribe {
			s.Sub.Unsubscribe(ctx)
		} else {
			s.Sub.Halt(ctx)
		}
		s.Sched.Stop()
		s.Books.EndAll(reason)
	}
	k.host.Left()
	return id, ss
}

// Drain stops every runtime taking tasks and waits for their handlers
// until ctx ends, then cancels them (see Runtimes.Stop). It returns ctx's
// error if the handlers outlasted it.
func (k *Closer) Drain(ctx context.Context) error {
	k.host.Lock()
	k.host.Worker().ToDraining()
	var runtimes Runtimes
	for _, s := range k.host.Sessions(nil) {
		if s.Runtime != nil {
			runtimes = append(runtimes, s.Runtime)
		}
	}
	k.host.Unlock()
	k.host.StopTicks()
	// The wait after the handlers were cancelled is the env's CancelWait,
	// whether or not ctx (the grace period) has ended.
	if !runtimes.Stop(ctx, context.WithoutCancel(ctx), k.env) {
		return ctx.Err()
	}
	return nil
}
