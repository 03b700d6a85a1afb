package worqr

import (
	"context"
	"fmt"

	"github.com/worqr/worqr/internal/engine"
	"github.com/worqr/worqr/internal/proc"
	"github.com/worqr/worqr/internal/slotpolicy"
)

// The Handle runtime is the engine's (engine.Runtime, engine.Scheduler:
// internal/engine's runtime.go, scheduler.go, slots.go, start.go and
// dequeue.go); the root gives it the application's handler and options.

// Handle serves a queue with a handler: the worker starts work on it and,
// woken by work events, dequeues while fewer than Concurrency handlers run
// and tasks wait, several at a time when several slots are free. It never
// polls: after a missed notification the check on resubscribing wakes it.
// It is HandleQueues with one queue.
func (w *Worker) Handle(ctx context.Context, queue string, h Handler, opts HandleOptions) error {
	return w.handle(ctx, queue, h, opts, nil)
}

// handle is Handle; attach, if set, is given the runtime before it takes
// work (HandleBatch's batcher watches it from its handler calls).
func (w *Worker) handle(ctx context.Context, queue string, h Handler, opts HandleOptions, attach func(*engine.Runtime)) error {
	if h == nil {
		return fmt.Errorf("worqr: handle %q: nil handler: %w", queue, ErrInvalidOptions)
	}
	size, err := slotpolicy.Slots(opts.Concurrency, DefaultConcurrency)
	if err != nil {
		return fmt.Errorf("worqr: handle %q: %w", queue, err)
	}
	// One member: ready once it is served.
	s := engine.NewScheduler(w.core.Host(), size, true, true)
	r := s.Add(queue, callOf(chain(h, w.opts.Middleware, opts.Middleware)), memberOptions(opts), 0, 1)
	if attach != nil {
		attach(r)
	}
	// The worker tells the member of work events itself
	// (engine.Runtime.WorkArrived), before it calls these.
	return engine.Serve(ctx, w.core.Host(), &w.core.Env, queue, engine.Events(opts.Events), r)
}

// callOf is h as the engine calls it: with the public process whose
// record the engine holds.
func callOf(h Handler) engine.Call {
	return func(ctx context.Context, p *engine.Proc) error { return h(ctx, processOf(p)) }
}

// memberOptions are what the runtime serving a queue takes of its
// options.
func memberOptions(opts HandleOptions) engine.MemberOptions {
	return engine.MemberOptions{Timeout: opts.Timeout, PanicIsPermanent: opts.PanicIsPermanent, Policy: proc.Policy(opts.Retry), Delay: opts.Retry.delay}
}
