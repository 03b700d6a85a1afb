package worqrtest

import (
	"context"
	"fmt"
	"log/slog"
	"reflect"
	"runtime/debug"
	"strings"
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
	// DueAt is what Process.DueAt returns: set it to test a handler of a
	// task that was delayed or retried. Default EnqueuedAt.
	DueAt time.Time
	// Middleware wraps h, the first outermost, as a worker's would.
	Middleware []worqr.Middleware
	// PanicIsPermanent makes a panic in h a Permanent error, as
	// worqr.HandleOptions.PanicIsPermanent does in a worker.
	PanicIsPermanent bool
	// Logger receives what a worker would log of a panic in h: the panic
	// and its stack, at level Error. Default slog.Default(), as a
	// worqr.Client's.
	Logger *slog.Logger
}

// Run calls h on a task with this payload as a worker would, but with no
// worker and no Redis: on a detached process (worqr.NewDetachedProcess)
// and with ctx as the handler's context (end it to test what h does
// when its task is cancelled or times out). It returns what h set with
// Process.SetResult (nil if nothing) and what h returned: nil means a
// worker would finish the task, an error that worqr.IsPermanent reports
// would dead-letter it, any other would retry it. A panic in h is
// recovered and logged as a worker does it, and returned as the error a
// worker would retry (or, with PanicIsPermanent, dead-letter): one that
// errors.Is matches to worqr.ErrHandlerPanicked, with reason worqr.ReasonPanic.
// A process's Finish, Requeue, Retry, DeadLetter and Status return
// worqr.ErrDetached. To see what the retry policy then does with the
// errors, attempt after attempt, see RunPolicy.
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
		LastError: opts.LastError, EnqueuedAt: opts.EnqueuedAt, DueAt: opts.DueAt,
	})
	err = call(ctx, h, p, opts)
	return p.Result(), err
}

// call runs h on p, recovering a panic as a worker does: logged (with its
// stack, unless the previous attempt's error, opts.LastError, says it
// panicked too), and made the handler's error.
func call(ctx context.Context, h worqr.Handler, p *worqr.Process, opts RunOptions) (err error) {
	defer func() {
		if v := recover(); v != nil {
			logger := opts.Logger
			if logger == nil {
				logger = slog.Default()
			}
			stack := "as at the previous attempt"
			if !strings.HasPrefix(p.LastError(), worqr.ErrHandlerPanicked.Error()) {
				stack = string(debug.Stack())
			}
			logger.Error("worqr: handler panicked", "queue", p.Queue(), "process", p.ID(), "task", p.TaskID(),
				"attempt", p.Attempt(), "panic", v, "stack", stack)
			err = fmt.Errorf("%w: %v", worqr.ErrHandlerPanicked, v)
			if opts.PanicIsPermanent {
				err = worqr.Permanent(err)
			}
		}
	}()
	return h(ctx, p)
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
