package worqr

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/worqr/worqr/internal/clock"
	"github.com/worqr/worqr/internal/engine"
	"github.com/worqr/worqr/internal/testsignal"
)

// Batch handler defaults, for a zero BatchOptions.Size and MaxWait.
const (
	DefaultBatchSize = 100
	DefaultBatchWait = 100 * time.Millisecond
)

// BatchHandler runs a batch of tasks at once (a bulk insert, one call to
// an API that takes many items). Each task of the batch is still a
// process of its own, settled on its own as a Handler's is:
//
//   - returning nil finishes every process of the batch;
//   - returning a BatchErrors (or an error wrapping one) settles each
//     process by its entry: a process without one (or with nil) is
//     finished, one with an error is retried, or dead-lettered once its
//     attempts are spent or at once if the error is Permanent, as a
//     Handler's error would;
//   - returning any other error applies it to every process of the batch.
//
// A process that ended while the batch ran (its task cancelled, its queue
// deleted, the worker fenced: p.Err() says which, and p.Done() is closed)
// is settled as it would be under Handle, whatever the handler returns for
// it; a handler with a long batch may look at p.Err() and skip those. A
// handler may also settle a process itself (p.Retry, p.DeadLetter), as
// under Handle.
//
// The batch's context ends with the cause ErrShutdown when Shutdown's grace
// period ended (a process for which the handler then returns an error goes
// back to the front of its queue, one for which it returns nil is
// finished); with ErrTaskTimeout when BatchOptions.Timeout ran out; and,
// with the last one's cause, once every process of the batch has ended.
// The processes are in the order their handler calls joined the batch,
// which need not be the order their tasks were dequeued in.
type BatchHandler func(ctx context.Context, batch []*Process) error

// BatchErrors is a batch handler's outcome per process: the processes it
// names with a non-nil error fail with it, the others of the batch are
// finished. Entries for processes not in the batch are ignored.
type BatchErrors map[*Process]error

// Error summarizes the failures: how many, and the first task's error.
func (e BatchErrors) Error() string {
	var first *Process
	n := 0
	for p, err := range e {
		if err == nil {
			continue
		}
		n++
		if first == nil || p.rec.ID < first.rec.ID {
			first = p
		}
	}
	if first == nil {
		return "worqr: batch: no task failed"
	}
	return fmt.Sprintf("worqr: batch: %d task(s) failed; process %s: %v", n, first.rec.ID, e[first])
}

// BatchOptions configure HandleBatch.
type BatchOptions struct {
	// Size is the most tasks in one batch. Zero means DefaultBatchSize.
	Size int
	// MaxWait is how long a batch that is not full waits for more tasks,
	// from the moment its first task was dequeued: a batch starts when it
	// holds Size tasks or MaxWait has passed, whichever comes first, or
	// at once when the worker stops taking work (Shutdown, Close,
	// StopWork of the queue; see HandleBatch). Zero means
	// DefaultBatchWait.
	MaxWait time.Duration
	// Batches is how many full batches may be in hand at once (running,
	// or one filling while the others run): the worker holds at most
	// Size × Batches tasks of the queue. Zero means 1: a full batch's
	// tasks are then settled before the next batch's are taken, while the
	// slots a partial batch (started by MaxWait) left free fill the next
	// batch as it runs.
	Batches int
	// Timeout bounds each batch's run: the batch's context ends with the
	// cause ErrTaskTimeout, and the processes the handler then fails are
	// retried under Retry (reason ReasonTimeout when they die). Zero means
	// no limit. A task's own Timeout enqueue option still ends that
	// process's wait and run from its dequeue on.
	Timeout time.Duration
	// Retry, PanicIsPermanent, Events and Middleware are as in
	// HandleOptions; the middleware wraps each task's part (from its
	// dequeue until its batch has returned), not the batch.
	Retry            RetryPolicy
	PanicIsPermanent bool
	Events           Events
	Middleware       []Middleware
}

// HandleBatch serves a queue with a batch handler: the worker takes up to
// Size tasks at a time and hands them to h together, then settles each
// task on its own (finished, retried or dead-lettered, see BatchHandler).
//
// It is Handle underneath, with Size × Batches slots: each task of a
// batch is a process holding a slot of its own, so leases, fencing,
// cancellation, the queue's controls (a concurrency limit counts each
// task of a batch) and the retry and dead-letter bookkeeping are those of
// single tasks. The dequeues take as many tasks per round trip as slots
// are free, and the finishes and retries of a batch are written together
// with those of the queue's other handlers (a few round trips for a
// batch, not one per task).
//
// A batch starts when it holds Size tasks, or MaxWait after its first
// task was dequeued, whichever comes first: a task never waits in hand for
// its batch longer than MaxWait. A task whose process ends while it waits
// (cancelled, its own Timeout) leaves the batch before it starts and is
// settled as under Handle.
//
// When the worker stops taking work from the queue (Shutdown begins,
// Close, StopWork of the queue), the batch filling starts at once with
// the tasks it holds, and so does the batch of a task whose handler call
// joins after that (its task was dequeued just before): under Shutdown
// the tasks in hand run within the grace period rather than wait out
// MaxWait, and are settled as the handler says. Close and StopWork give
// no grace: the tasks are cancelled at once (ErrShutdown), as those of a
// running batch are, and go back to the front of their queue unless the
// handler, if it was still called, returned nil for them.
func (w *Worker) HandleBatch(ctx context.Context, queue string, h BatchHandler, opts BatchOptions) error {
	b, err := newBatcher(w, queue, h, opts)
	if err != nil {
		return err
	}
	return b.handle(ctx)
}

// handle serves the batcher's queue with Handle, join its handler.
func (b *batcher) handle(ctx context.Context) error {
	opts := b.handleOptions()
	opts.Concurrency = b.eo.Slots()
	return b.w.handle(ctx, b.queue, b.join, opts, b.attach)
}

// handleOptions are the options of the Handle runtime (or pool member)
// serving the batcher's queue, but for its slots: the batch's Timeout is
// the batcher's own (see engine.Batcher), not each handler call's.
func (b *batcher) handleOptions() HandleOptions {
	return HandleOptions{
		PanicIsPermanent: b.opts.PanicIsPermanent,
		Events:           b.opts.Events,
		Middleware:       b.opts.Middleware,
		Retry:            b.opts.Retry,
	}
}

// attach makes the engine's batcher of the runtime serving the queue,
// before it takes work.
func (b *batcher) attach(r *engine.Runtime) {
	b.eb = engine.NewBatcher(r, b.call, b.eo, b.clock, func(n int) {
		b.w.c.core.Signals.Joined.Signal(testsignal.BatchJoin{Queue: b.queue, N: n})
	})
}

// pending is how many processes the batch filling holds.
func (b *batcher) pending() int {
	if b.eb == nil {
		return 0
	}
	return b.eb.Pending()
}

// batcher is a HandleBatch's queue: its options, and the engine's
// batcher (engine.Batcher) gathering its handler calls into batches,
// made when the runtime serving the queue is.
type batcher struct {
	w     *Worker
	queue string
	h     BatchHandler
	opts  BatchOptions
	eo    engine.BatchOptions // the engine's options: opts, defaults given
	clock clock.Clock
	eb    *engine.Batcher
}

func newBatcher(w *Worker, queue string, h BatchHandler, opts BatchOptions) (*batcher, error) {
	if what := checkBatch(h, opts); what != "" {
		return nil, fmt.Errorf("worqr: handle batch %q: %s: %w", queue, what, ErrInvalidOptions)
	}
	return newCheckedBatcher(w, queue, h, opts), nil
}

// checkBatch says what is wrong with a batch handler and its options, ""
// if nothing: HandleBatch and HandleQueues check them alike.
func checkBatch(h BatchHandler, opts BatchOptions) string {
	if h == nil {
		return "nil handler"
	}
	return engineBatch(opts).Check(DefaultBatchSize)
}

// newCheckedBatcher is newBatcher for options checkBatch passed.
func newCheckedBatcher(w *Worker, queue string, h BatchHandler, opts BatchOptions) *batcher {
	eo := engineBatch(opts).Defaults(DefaultBatchSize, DefaultBatchWait)
	return &batcher{w: w, queue: queue, h: h, opts: opts, eo: eo, clock: w.c.core.Clock}
}

// engineBatch is opts as the engine's batcher takes them.
func engineBatch(opts BatchOptions) engine.BatchOptions {
	return engine.BatchOptions{Size: opts.Size, Wait: opts.MaxWait, Batches: opts.Batches, Timeout: opts.Timeout, PanicIsPermanent: opts.PanicIsPermanent}
}

// join is the Handler of each process: the engine's batcher's Join.
func (b *batcher) join(ctx context.Context, p *Process) error { return b.eb.Join(ctx, &p.rec) }

// call runs the handler on a batch for the engine's batcher: with the
// public processes, and their entries when it returned BatchErrors.
func (b *batcher) call(ctx context.Context, batch []*engine.BatchMember) (func(*engine.Proc) error, error) {
	procs := make([]*Process, len(batch))
	for i, m := range batch {
		procs[i] = processOf(m.Proc())
	}
	err := b.h(ctx, procs)
	var per BatchErrors
	if errors.As(err, &per) {
		return func(p *engine.Proc) error { return per[processOf(p)] }, err
	}
	return nil, err
}
