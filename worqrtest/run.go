package worqrtest

import (
	"context"
	"fmt"
	"reflect"
	"time"

	"github.com/worqr/worqr"
)

// RunOptions describe the task Run gives a handler. The zero value is
// the first attempt at a task of queue "detached", enqueued now.
type RunOptions struct {
	// Queue is what Process.Queue returns. Default "detached".
	Queue string
	// TaskID is what Process.TaskID returns. Default an id made from the
	// clock, as Enqueue makes them.
	TaskID string
	// Attempt is what Process.Attempt returns: set it above 1 to test a
	// retry. Default 1.
	Attempt int
	// LastError is what Process.LastError returns: the error the
	// previous attempt failed with.
	LastError string
	// EnqueuedAt is what Process.EnqueuedAt returns. Default now.
	EnqueuedAt time.Time
	// Middleware wraps h, the first outermost, as a worker's would.
	Middleware []worqr.Middleware
}

// Run calls h on a task with this payload as a worker would, but with no
// worker and no Redis: on a detached process (worqr.NewDetachedProcess)
// and with ctx as the handler's context (end it to test what h does
// when its task is cancelled or times out). It returns what h set with
// Process.SetResult (nil if nothing) and what h returned: nil means a
// worker would finish the task, an error that worqr.IsPermanent reports
// would dead-letter it, any other would retry it. A panic in h is not
// recovered: it fails the test with its stack. A process's Finish,
// Requeue, Retry, DeadLetter and Status return worqr.ErrDetached.
func Run(ctx context.Context, h worqr.Handler, payload []byte, opts RunOptions) (result []byte, err error) {
	if h == nil {
		return nil, fmt.Errorf("worqrtest: run: nil handler: %w", worqr.ErrInvalidOptions)
	}
	for i := len(opts.Middleware) - 1; i >= 0; i-- {
		if opts.Middleware[i] != nil {
			h = opts.Middleware[i](h)
		}
	}
	p := worqr.NewDetachedProcess(payload, worqr.DetachedOptions{
		Queue: opts.Queue, TaskID: opts.TaskID, Attempt: opts.Attempt,
		LastError: opts.LastError, EnqueuedAt: opts.EnqueuedAt,
	})
	err = h(ctx, p)
	return p.Result(), err
}

// RunJSON is Run for a typed handler (worqr.HandleJSON's): v is encoded
// as JSON and decoded again for h, as EnqueueJSON and HandleJSON would
// do. For another codec, use Run with worqr.Typed(codec, h) and the
// encoded payload.
func RunJSON[T any](ctx context.Context, h worqr.TypedHandler[T], v T, opts RunOptions) (result []byte, err error) {
	if h == nil {
		return nil, fmt.Errorf("worqrtest: run: nil handler: %w", worqr.ErrInvalidOptions)
	}
	payload, err := worqr.JSON[T]{}.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("worqrtest: run: encode %s: %w", reflect.TypeFor[T](), err)
	}
	return Run(ctx, worqr.Typed(worqr.JSON[T]{}, h), payload, opts)
}
