package worqr

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/worqr/worqr/internal/clock"
	"github.com/worqr/worqr/internal/engine"
)

// maxBatchSlots bounds Size × Batches, the slots a HandleBatch holds: far
// above any useful batch, and far from overflowing an int.
const maxBatchSlots = 1 << 24

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
	opts.Concurrency = b.slots()
	return b.w.handle(ctx, b.queue, b.join, opts, b.attach)
}

// slots is how many tasks the batcher holds at most: Size × Batches.
func (b *batcher) slots() int { return b.size * b.batches }

// handleOptions are the options of the Handle runtime (or pool member)
// serving the batcher's queue, but for its slots: the batch's Timeout is
// the batcher's own (see run), not each handler call's.
func (b *batcher) handleOptions() HandleOptions {
	return HandleOptions{
		PanicIsPermanent: b.opts.PanicIsPermanent,
		Events:           b.opts.Events,
		Middleware:       b.opts.Middleware,
		Retry:            b.opts.Retry,
	}
}

// attach gives the batcher the runtime serving its queue, before it
// takes work.
func (b *batcher) attach(r *engine.Runtime) { b.r = r }

// pending is how many processes the batch filling holds.
func (b *batcher) pending() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.open == nil {
		return 0
	}
	return len(b.open.members)
}

// batcher gathers the processes of a HandleBatch's handler calls into
// batches. Each process's handler call (join) waits until its batch has
// run and returns the process's own outcome, which the runtime settles as
// any handler's.
type batcher struct {
	w       *Worker
	queue   string
	h       BatchHandler
	opts    BatchOptions
	size    int
	wait    time.Duration
	batches int
	clock   clock.Clock
	// r is the Handle runtime serving the queue, set before it takes
	// work: a batch starts when it stops taking work (startOnStop), and at
	// once while it does not (see join).
	r *engine.Runtime

	mu   sync.Mutex
	open *batch // the batch filling, if any
}

// batch is a set of processes handed to the handler together.
type batch struct {
	members []*member
	timer   clock.Timer // starts it after MaxWait
	// gone is closed once the batch is no longer the one filling (it
	// started, or emptied): its watcher (startOnStop) then returns.
	gone chan struct{}
}

// member is one process of a batch, with its handler call's context; done
// is closed once err, its outcome, is set.
type member struct {
	p    *Process
	ctx  context.Context
	done chan struct{}
	err  error
	// shutdown is set with err when Shutdown's grace period ended the
	// batch: the runtime is ending every handler's context, this one's
	// too, and its outcome is settled as that context says once it has.
	shutdown bool
}

// outcome is the member's outcome once its batch has run: after the
// batch was cut by Shutdown, only once the member's own context has
// ended too (a moment later), so that the runtime settles it as a
// handler interrupted by Shutdown (back to the front of its queue), not
// as a failure to retry.
func (m *member) outcome() error {
	if m.shutdown {
		<-m.ctx.Done()
	}
	return m.err
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
	switch {
	case h == nil:
		return "nil handler"
	case opts.Size < 0:
		return "negative size"
	case opts.MaxWait < 0:
		return "negative max wait"
	case opts.Batches < 0:
		return "negative batches"
	case opts.Timeout < 0:
		return "negative timeout"
	}
	size, batches := opts.Size, max(opts.Batches, 1)
	if size == 0 {
		size = DefaultBatchSize
	}
	if batches > maxBatchSlots/size {
		return fmt.Sprintf("size × batches over %d", maxBatchSlots)
	}
	return ""
}

// newCheckedBatcher is newBatcher for options checkBatch passed.
func newCheckedBatcher(w *Worker, queue string, h BatchHandler, opts BatchOptions) *batcher {
	b := &batcher{w: w, queue: queue, h: h, opts: opts, size: opts.Size, wait: opts.MaxWait, batches: opts.Batches, clock: w.c.clock}
	if b.size == 0 {
		b.size = DefaultBatchSize
	}
	if b.wait == 0 {
		b.wait = DefaultBatchWait
	}
	if b.batches == 0 {
		b.batches = 1
	}
	return b
}

// join is the Handler of each process: it adds the process to the batch
// filling (starting one, with its MaxWait timer, if none is), runs the
// batch if that filled it, and returns the process's outcome once its
// batch has run. A process whose context ends before its batch starts
// leaves it.
func (b *batcher) join(ctx context.Context, p *Process) error {
	m := &member{p: p, ctx: ctx, done: make(chan struct{})}
	b.mu.Lock()
	bt := b.open
	if bt == nil {
		bt = &batch{gone: make(chan struct{})}
		b.open = bt
		bt.timer = b.clock.AfterFunc(b.wait, func() { b.startOpen(bt) })
		go b.startOnStop(bt, b.r.Stopping())
	}
	bt.members = append(bt.members, m)
	b.w.c.signals.joined.Signal(batchJoin{b.queue, len(bt.members)})
	// Once the runtime stops taking work no task is coming to fill the
	// batch: a handler that joins after its stop (started just before it)
	// runs at once. Read under b.mu, which the watcher takes only after
	// the stop: one of the two starts the batch.
	full := len(bt.members) >= b.size || !b.r.Taking()
	if full {
		b.closeOpen()
	}
	b.mu.Unlock()
	if full {
		b.run(bt.members) // on this process's goroutine: the others wait
	}
	select {
	case <-m.done:
		return m.outcome()
	case <-ctx.Done():
	}
	b.mu.Lock()
	if b.open == bt { // not started: leave it
		bt.members = slices.DeleteFunc(bt.members, func(o *member) bool { return o == m })
		if len(bt.members) == 0 {
			b.closeOpen()
		}
		b.mu.Unlock()
		return context.Cause(ctx)
	}
	b.mu.Unlock()
	<-m.done // the batch holds the process: its outcome is the batch's
	return m.outcome()
}

// startOpen runs bt, the batch filling when its MaxWait timer was armed,
// if it has not started (full) or emptied since.
func (b *batcher) startOpen(bt *batch) {
	b.mu.Lock()
	if b.open != bt {
		b.mu.Unlock()
		return
	}
	b.closeOpen()
	b.mu.Unlock()
	b.run(bt.members)
}

// closeOpen makes the batch filling no longer the open one: it will not
// take more processes, its timer is stopped and its watcher returns.
// Callers hold b.mu.
func (b *batcher) closeOpen() {
	bt := b.open
	b.open = nil
	bt.timer.Stop()
	close(bt.gone)
}

// startOnStop is the watcher of bt, a batch filling while the runtime
// takes work (stop is that period's stopping): it starts bt once the
// runtime stops taking work (Shutdown, Close, StopWork), since its tasks
// are all it will get and they should run within the grace period rather
// than wait out MaxWait. It returns once bt is no longer filling.
func (b *batcher) startOnStop(bt *batch, stop <-chan struct{}) {
	select {
	case <-stop:
		b.startOpen(bt)
	case <-bt.gone:
	}
}

// run calls the handler with the processes of a batch whose contexts have
// not ended, and gives every member its outcome.
func (b *batcher) run(members []*member) {
	live := make([]*member, 0, len(members))
	for _, m := range members {
		if m.ctx.Err() != nil {
			// Ended as the batch started: settled as its context says.
			m.err = context.Cause(m.ctx)
			close(m.done)
			continue
		}
		live = append(live, m)
	}
	if len(live) == 0 {
		return
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	if b.opts.Timeout > 0 {
		var stop context.CancelFunc
		ctx, stop = context.WithTimeoutCause(ctx, b.opts.Timeout, ErrTaskTimeout)
		defer stop()
	}
	// The batch's context ends on shutdown (every process is interrupted
	// together then), or once no process of it is left.
	left := atomic.Int64{}
	left.Store(int64(len(live)))
	procs := make([]*Process, len(live))
	for i, m := range live {
		procs[i] = m.p
		stop := context.AfterFunc(m.ctx, func() {
			cause := context.Cause(m.ctx)
			if left.Add(-1) == 0 || errors.Is(cause, ErrShutdown) {
				cancel(cause)
			}
		})
		defer stop()
	}
	err := b.call(ctx, procs)
	var per BatchErrors
	perTask := errors.As(err, &per)
	timedOut := errors.Is(context.Cause(ctx), ErrTaskTimeout)
	shutdown := errors.Is(context.Cause(ctx), ErrShutdown)
	for _, m := range live {
		e := err
		if perTask {
			e = per[m.p]
		}
		if e != nil && timedOut && !errors.Is(e, ErrTaskTimeout) {
			// As the runtime's runJob marks a handler that gave up on its time.
			e = WithReason(engine.Reason(e, ReasonTimeout), fmt.Errorf("%w: %w", ErrTaskTimeout, e))
		}
		m.err, m.shutdown = e, shutdown
		close(m.done)
	}
}

// call runs the handler on a batch, recovering a panic: every process of
// the batch then fails with ErrHandlerPanicked.
func (b *batcher) call(ctx context.Context, procs []*Process) (err error) {
	defer func() {
		if v := recover(); v != nil {
			b.w.logger().Error("worqr: batch handler panicked", "queue", b.queue, "tasks", len(procs),
				"first_process", procs[0].ID(), "panic", v, "stack", string(debug.Stack()))
			err = fmt.Errorf("%w: %v", ErrHandlerPanicked, v)
			if b.opts.PanicIsPermanent {
				err = Permanent(err)
			}
		}
	}()
	return b.h(ctx, procs)
}
