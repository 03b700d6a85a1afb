// Package startstop is the one lifecycle of the engine's background loops:
// each starts, says when it has started, stops when told (or when the
// context it was started with ends), and says when it has stopped. An
// owner stops all of its services in parallel and knows that none of
// their goroutines outlives the stop.
package startstop

import (
	"context"
	"errors"
	"sync"
)

// ErrStopped is the cause of a service's context when Stop ended it.
var ErrStopped = errors.New("service stopped")

// Service is a background loop with a start and a stop.
type Service interface {
	// Start starts the service on ctx: it stops when ctx ends or Stop is
	// called. Starting a running service does nothing.
	Start(ctx context.Context) error
	// Stop ends the service and waits for it to stop. It is safe on a
	// service never started and to call twice.
	Stop()
	// Started is closed once the service has started.
	Started() <-chan struct{}
	// Stopped is closed once the service has stopped.
	Stopped() <-chan struct{}
}

// Base gives a service its lifecycle; a service embeds it and starts each
// run through Begin. A stopped service may be started again.
type Base struct {
	mu      sync.Mutex
	running bool
	cancel  context.CancelCauseFunc
	started chan struct{}
	stopped chan struct{}
}

// Begin starts a run. It returns the run's context (ended, with cause
// ErrStopped, by Stop), false if a run is already going (then the caller
// does nothing), and the two calls the run makes: started once it is
// ready, stopped as the last thing it does (stopped implies started).
func (b *Base) Begin(ctx context.Context) (run context.Context, ok bool, started, stopped func()) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.running {
		select {
		case <-b.stopped:
			// The last run ended by itself (its context ended); begin anew.
			b.started, b.stopped = nil, nil
		default:
			return ctx, false, nil, nil
		}
	}
	b.running = true
	if b.started == nil {
		b.started = make(chan struct{})
	}
	if b.stopped == nil {
		b.stopped = make(chan struct{})
	}
	run, b.cancel = context.WithCancelCause(ctx)
	startedCh, stoppedCh := b.started, b.stopped
	started = sync.OnceFunc(func() { close(startedCh) })
	return run, true, started, func() {
		started()
		close(stoppedCh)
	}
}

// Stop ends the run and waits until it has stopped.
func (b *Base) Stop() {
	b.mu.Lock()
	if !b.running {
		b.mu.Unlock()
		return
	}
	b.cancel(ErrStopped)
	stopped := b.stopped
	// Held while waiting, so that a Start racing this Stop waits for it.
	<-stopped
	b.running, b.started, b.stopped = false, nil, nil
	b.mu.Unlock()
}

// Started is closed once the current (or next) run has started.
func (b *Base) Started() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.started == nil {
		b.started = make(chan struct{})
	}
	return b.started
}

// Stopped is closed once the current (or next) run has stopped.
func (b *Base) Stopped() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.stopped == nil {
		b.stopped = make(chan struct{})
	}
	return b.stopped
}

// Loop is a service that runs one function on a goroutine of its own
// until the function returns; the function returns when its context ends.
type Loop struct {
	Base
	run func(ctx context.Context)
}

// NewLoop makes a Loop of run.
func NewLoop(run func(ctx context.Context)) *Loop { return &Loop{run: run} }

// Start runs the loop on ctx.
func (l *Loop) Start(ctx context.Context) error {
	ctx, ok, started, stopped := l.Begin(ctx)
	if !ok {
		return nil
	}
	go func() {
		defer stopped()
		started()
		l.run(ctx)
	}()
	return nil
}

// StartAll starts services in order; if one fails it stops those already
// started and returns its error.
func StartAll(ctx context.Context, services ...Service) error {
	for i, s := range services {
		if err := s.Start(ctx); err != nil {
			StopAll(services[:i]...)
			return err
		}
	}
	return nil
}

// StopAll stops services in parallel and waits for them all. Nil services
// are skipped.
func StopAll(services ...Service) {
	var wg sync.WaitGroup
	for _, s := range services {
		if s == nil {
			continue
		}
		wg.Go(s.Stop)
	}
	wg.Wait()
}

// Group tracks the one-shot goroutines an owner starts (a renewal, a
// rejoin, a write after a handler), so that the owner's stop can wait for
// them: none outlives Close.
type Group struct {
	mu     sync.Mutex
	closed bool
	wg     sync.WaitGroup
}

// Go runs f on a goroutine of its own, unless the group is closed; it
// reports whether it did.
func (g *Group) Go(f func()) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return false
	}
	g.wg.Go(f)
	return true
}

// Close stops the group taking goroutines and waits for those running.
func (g *Group) Close() {
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
	g.wg.Wait()
}

// Wait waits for the goroutines running now, leaving the group open.
func (g *Group) Wait() { g.wg.Wait() }
