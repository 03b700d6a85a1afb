package worqr

import (
	"context"
	"time"

	"github.com/worqr/worqr/internal/engine"
	"github.com/worqr/worqr/internal/errs"
)

// DefaultConcurrency is the slots (handlers that may run at once) of a
// Handle whose HandleOptions.Concurrency is zero, and of a HandleQueues
// pool whose PoolOptions.Concurrency is.
const DefaultConcurrency = 10

// Causes of a handler's context ending, as context.Cause reports them.
// (ErrTaskCancelled, ErrQueueDeleted and ErrWorkerFenced are causes too.)
var (
	// ErrShutdown is the cause when Shutdown's grace period ended, or the
	// worker was closed or failed, while the handler ran.
	ErrShutdown = errs.ErrShutdown
	// ErrTaskTimeout is the cause of a handler's context ending because
	// its time (HandleOptions.Timeout, or the task's Timeout option) ran
	// out.
	ErrTaskTimeout = errs.ErrTaskTimeout
	// ErrHandledQueue is returned by Dequeue on a queue served by Handle:
	// its runtime does the dequeuing, so that its concurrency accounting
	// stays right.
	ErrHandledQueue = errs.ErrHandledQueue
)

// ErrHandlerPanicked is what a handler that panicked failed with, as far
// as its worker is concerned: the worker recovers the panic, logs it with
// its stack, and treats it as this error (wrapped, with the panic's value
// in its text; wrapped with Permanent too under
// HandleOptions.PanicIsPermanent), with reason ReasonPanic.
var ErrHandlerPanicked = errs.ErrHandlerPanicked

// Middleware wraps a Handler with behaviour of its own (tracing, metrics,
// logging, a timeout, recovering from panics its own way). It returns the
// handler to call instead; that handler calls next to run the task, or
// returns without calling it to skip the task.
type Middleware func(next Handler) Handler

// chain wraps h in middleware, the first outermost.
func chain(h Handler, mws ...[]Middleware) Handler {
	for i := len(mws) - 1; i >= 0; i-- {
		for j := len(mws[i]) - 1; j >= 0; j-- {
			if mws[i][j] != nil {
				h = mws[i][j](h)
			}
		}
	}
	return h
}

// Handler runs one task. Returning nil finishes the process; returning an
// error retries the task after a backoff (HandleOptions.Retry), until its
// attempt budget is spent, when it goes to the dead letters, as it does at
// once with an error wrapped with Permanent. The context ends, with a cause that
// context.Cause reports, when:
//
//   - the task was cancelled (cause ErrTaskCancelled) or its queue deleted
//     (ErrQueueDeleted): the process is then dropped, whatever the handler
//     returns (unless Redis has no such mark on it, when the event was
//     stale or forged: then the task goes back to the end of its queue);
//   - the worker fenced itself (ErrWorkerFenced, also ErrProcessLost): the
//     task belongs to the peers now and nothing is written for it;
//   - Shutdown's grace period ended, or the worker was closed
//     (ErrShutdown): a handler that then returns nil has its process
//     finished; otherwise the task goes back to the front of its queue.
//
// A handler that holds its task until its context ends is a persistent
// task (an open connection, a subscription): see docs/persistent-tasks.md.
type Handler func(ctx context.Context, p *Process) error

// HandleOptions configure Handle.
type HandleOptions struct {
	// Concurrency is how many handlers may run at once for the queue: its
	// slots. Zero means DefaultConcurrency. In a QueueSpec it must be
	// zero: a pool's slots are PoolOptions.Concurrency, and a queue's
	// share of them is QueueSpec.MaxSlots.
	Concurrency int
	// PanicIsPermanent sends the task of a handler that panicked to the
	// dead letters at once, instead of retrying it.
	PanicIsPermanent bool
	// Events are low-level callbacks called as well, after the runtime has
	// handled each event.
	Events Events
	// Middleware wraps the handler, the first outermost, inside the
	// worker's WorkerOptions.Middleware.
	Middleware []Middleware
	// Retry says how many times a failing task is tried and how long it
	// waits in between. The zero value is the default policy.
	Retry RetryPolicy
	// Timeout bounds each handler's run: its context ends with the cause
	// ErrTaskTimeout, and if it then returns an error the task is retried
	// under Retry (reason ReasonTimeout when it dies). A task's own Timeout
	// enqueue option overrides it. Zero means no limit.
	Timeout time.Duration
}

// Permanent wraps a handler's error so the task goes to the dead letters at
// once (reason ReasonPermanent, unless it carries one: see WithReason) instead
// of being retried. Its text is err's, and so is the dead letter's error.
func Permanent(err error) error { return engine.Permanent(err) }

// IsPermanent reports whether err was wrapped with Permanent.
func IsPermanent(err error) bool { return engine.IsPermanent(err) }
