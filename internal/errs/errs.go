// Package errs holds the sentinel errors that the engine returns and the
// public API documents: the root package re-exports these very values
// (worqr.ErrWorkerFenced is errs.ErrWorkerFenced), so that errors.Is
// matches an error whichever side wrapped it. Their documentation is the
// root package's.
package errs

import "errors"

// The client's and the worker's errors (see the root package's).
var (
	ErrClientClosed     = errors.New("client closed")
	ErrWorkerClosed     = errors.New("worker closed")
	ErrInvalidOptions   = errors.New("invalid options")
	ErrInvalidQueueName = errors.New("invalid queue name")
	ErrTaskTooLarge     = errors.New("task too large")
	ErrNoTask           = errors.New("no task waiting")
	ErrNotRetained      = errors.New("task not retained")
	ErrNotServing       = errors.New("worker does not serve this queue")
	ErrAlreadyServing   = errors.New("worker already serves this queue")
	ErrWorkerFenced     = errors.New("worker fenced (lease lost)")
	ErrProcessLost      = errors.New("process lost")
	ErrProcessEnded     = errors.New("process ended")
	ErrTaskCancelled    = errors.New("task cancelled")
	ErrQueueDeleted     = errors.New("queue deleted")
	ErrNoQueue          = errors.New("no such queue")
	ErrRateLimited      = errors.New("rate limit used up")
	ErrDuplicate        = errors.New("duplicate task")
	ErrUnavailable      = errors.New("redis unavailable")
	ErrShutdown         = errors.New("worker shutting down")
	ErrTaskTimeout      = errors.New("task timed out")
	ErrHandledQueue     = errors.New("queue is served by Handle")
	ErrHandlerPanicked  = errors.New("handler panicked")
)

// The errors of a workflow's plan (see the root package's).
var (
	ErrWorkflowCycle = errors.New("workflow has a cycle")
	ErrUnknownStep   = errors.New("unknown workflow step")
	ErrDuplicateStep = errors.New("duplicate workflow step")
)
