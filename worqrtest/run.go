package worqrtest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"runtime/debug"
	"strconv"
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
	// Members, when not nil, make the task an aggregated one (see
	// worqr.Aggregate): Process.Aggregated returns them, one or more, in
	// this order, and Run's payload is not used. Run only: a RunBatch
	// task is not aggregated.
	Members []worqr.AggregateMember
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
	if opts.Members != nil && len(opts.Members) == 0 {
		// An aggregated task gathers one task at least.
		return nil, fmt.Errorf("worqrtest: run: no member in Members: %w", worqr.ErrInvalidOptions)
	}
	for i := len(opts.Middleware) - 1; i >= 0; i-- {
		if opts.Middleware[i] != nil {
			h = opts.Middleware[i](h)
		}
	}
	p := worqr.NewDetachedProcess(payload, worqr.DetachedOptions{
		Queue: opts.Queue, TaskID: opts.TaskID, Attempt: opts.Attempt,
		LastError: opts.LastError, EnqueuedAt: opts.EnqueuedAt, DueAt: opts.DueAt,
		Members: opts.Members,
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

// BatchResult is what became of one task of a batch RunBatch ran.
type BatchResult struct {
	// Task is the process the handler was given for the task, with its
	// id (Process.TaskID) and payload.
	Task *worqr.Process
	// Result is what the handler set with Process.SetResult, nil if
	// nothing.
	Result []byte
	// Err is the task's own outcome, as a worker settles it: nil means a
	// worker would finish the task, an error that worqr.IsPermanent
	// reports would dead-letter it, any other would retry it.
	Err error
}

// RunBatch calls a batch handler (worqr.Worker.HandleBatch's) on one
// batch of tasks with these payloads, in this order, as a worker would,
// but with no worker and no Redis: each task is a detached process
// (worqr.NewDetachedProcess) with the RunOptions' accessors, its id
// TaskID (default the clock in microseconds, in hex) followed by "-" and
// its place in the batch from 1, and ctx is the batch's context. It
// returns each task's outcome, in the batch's order, read from what h
// returned as a worker reads it: nil finishes every task; a
// worqr.BatchErrors (or an error wrapping one) fails the tasks it names
// with their error and finishes the others; any other error fails every
// task. A panic in h is recovered and logged as a worker does it, and
// fails every task with the error a worker would retry (or, with
// PanicIsPermanent, dead-letter). The error RunBatch returns is for
// arguments it refuses (worqr.ErrInvalidOptions): a nil handler, no
// payload, Members, or Middleware, which wraps each task's part of a
// batch in a worker and is tested with Run.
func RunBatch(ctx context.Context, h worqr.BatchHandler, payloads [][]byte, opts RunOptions) ([]BatchResult, error) {
	switch {
	case h == nil:
		return nil, fmt.Errorf("worqrtest: run batch: nil handler: %w", worqr.ErrInvalidOptions)
	case len(payloads) == 0:
		return nil, fmt.Errorf("worqrtest: run batch: no task: %w", worqr.ErrInvalidOptions)
	case opts.Members != nil:
		return nil, fmt.Errorf("worqrtest: run batch: Members is for Run: %w", worqr.ErrInvalidOptions)
	case len(opts.Middleware) > 0:
		return nil, fmt.Errorf("worqrtest: run batch: Middleware is for Run: %w", worqr.ErrInvalidOptions)
	}
	base := opts.TaskID
	if base == "" {
		base = strconv.FormatInt(time.Now().UnixMicro(), 16)
	}
	batch := make([]*worqr.Process, len(payloads))
	for i, payload := range payloads {
		batch[i] = worqr.NewDetachedProcess(payload, worqr.DetachedOptions{
			Queue: opts.Queue, TaskID: base + "-" + strconv.Itoa(i+1), Attempt: opts.Attempt,
			LastError: opts.LastError, EnqueuedAt: opts.EnqueuedAt, DueAt: opts.DueAt,
		})
	}
	err := callBatch(ctx, h, batch, opts)
	var per worqr.BatchErrors
	perTask := errors.As(err, &per)
	out := make([]BatchResult, len(batch))
	for i, p := range batch {
		e := err
		if perTask {
			e = per[p]
		}
		out[i] = BatchResult{Task: p, Result: p.Result(), Err: e}
	}
	return out, nil
}

// callBatch runs h on batch, recovering a panic as a worker does: logged
// once for the batch, with its stack, and made the handler's error.
func callBatch(ctx context.Context, h worqr.BatchHandler, batch []*worqr.Process, opts RunOptions) (err error) {
	defer func() {
		if v := recover(); v != nil {
			logger := opts.Logger
			if logger == nil {
				logger = slog.Default()
			}
			logger.Error("worqr: batch handler panicked", "queue", batch[0].Queue(), "tasks", len(batch),
				"first_process", batch[0].ID(), "panic", v, "stack", string(debug.Stack()))
			err = fmt.Errorf("%w: %v", worqr.ErrHandlerPanicked, v)
			if opts.PanicIsPermanent {
				err = worqr.Permanent(err)
			}
		}
	}()
	return h(ctx, batch)
}
