package engine

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
	"github.com/worqr/worqr/internal/errs"
)

// BatchCall runs the application's batch handler (the root's
// HandleBatch) on the processes of a batch, in the order their handler
// calls joined it. per, when not nil, is each process's own outcome (the
// root's BatchErrors); without it err is every process's.
type BatchCall func(ctx context.Context, batch []*BatchMember) (per func(*Proc) error, err error)

// BatchOptions are what a batcher takes of the application's options.
type BatchOptions struct {
	Size    int           // the most tasks in one batch
	Wait    time.Duration // how long a batch that is not full waits for more
	Batches int           // how many full batches may be in hand at once
	Timeout time.Duration // bounds each batch's run; 0 for no limit
	// PanicIsPermanent dead-letters every process of a batch whose
	// handler panicked at once.
	PanicIsPermanent bool
}

// MaxBatchSlots bounds Size × Batches, the slots a HandleBatch holds: far
// above any useful batch, and far from overflowing an int.
const MaxBatchSlots = 1 << 24

// Check says what is wrong with a HandleBatch's options as given (a zero
// Size standing for size), "" if nothing.
func (o BatchOptions) Check(size int) string {
	switch {
	case o.Size < 0:
		return "negative size"
	case o.Wait < 0:
		return "negative max wait"
	case o.Batches < 0:
		return "negative batches"
	case o.Timeout < 0:
		return "negative timeout"
	}
	if o.Size != 0 {
		size = o.Size
	}
	if max(o.Batches, 1) > MaxBatchSlots/size {
		return fmt.Sprintf("size × batches over %d", MaxBatchSlots)
	}
	return ""
}

// Defaults is o with a zero Size, Wait or Batches given its default:
// size, wait, and one batch.
func (o BatchOptions) Defaults(size int, wait time.Duration) BatchOptions {
	if o.Size == 0 {
		o.Size = size
	}
	if o.Wait == 0 {
		o.Wait = wait
	}
	if o.Batches == 0 {
		o.Batches = 1
	}
	return o
}

// Slots is how many tasks a batcher of o holds at most: Size × Batches.
func (o BatchOptions) Slots() int { return o.Size * o.Batches }

// Batcher gathers the processes of a runtime's handler calls into
// batches (HandleBatch). Each process's handler call (Join) waits until
// its batch has run and returns the process's own outcome, which the
// runtime settles as any handler's.
type Batcher struct {
	queue string
	call  BatchCall
	opts  BatchOptions
	clock clock.Clock
	env   *Env
	// joined is told, under mu, how many processes the batch filling
	// holds once a handler call joined it (a test signal).
	joined func(n int)
	// r is the runtime serving the queue: a batch starts when it stops
	// taking work (startOnStop), and at once while it does not (see
	// Join).
	r *Runtime

	mu   sync.Mutex
	open *batch // the batch filling, if any
}

// batch is a set of processes handed to the handler together.
type batch struct {
	members []*BatchMember
	timer   clock.Timer // starts it after the wait
	// gone is closed once the batch is no longer the one filling (it
	// started, or emptied): its watcher (startOnStop) then returns.
	gone chan struct{}
}

// BatchMember is one process of a batch, with its handler call's
// context; done is closed once err, its outcome, is set.
type BatchMember struct {
	p    *Proc
	ctx  context.Context
	done chan struct{}
	err  error
	// shutdown is set with err when Shutdown's grace period ended the
	// batch: the runtime is ending every handler's context, this one's
	// too, and its outcome is settled as that context says once it has.
	shutdown bool
}

// Proc is the member's process.
func (m *BatchMember) Proc() *Proc { return m.p }

// outcome is the member's outcome once its batch has run: after the
// batch was cut by Shutdown, only once the member's own context has
// ended too (a moment later), so that the runtime settles it as a
// handler interrupted by Shutdown (back to the front of its queue), not
// as a failure to retry.
func (m *BatchMember) outcome() error {
	if m.shutdown {
		<-m.ctx.Done()
	}
	return m.err
}

// NewBatcher is the batcher of the runtime r, running call with opts on
// clk; joined, if set, is told how many processes the batch filling
// holds after each join.
func NewBatcher(r *Runtime, call BatchCall, opts BatchOptions, clk clock.Clock, joined func(n int)) *Batcher {
	return &Batcher{queue: r.queue, call: call, opts: opts, clock: clk, env: r.sched.env, joined: joined, r: r}
}

// Pending is how many processes the batch filling holds.
func (b *Batcher) Pending() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.open == nil {
		return 0
	}
	return len(b.open.members)
}

// Join is the handler of each process: it adds the process to the batch
// filling (starting one, with its wait's timer, if none is), runs the
// batch if that filled it, and returns the process's outcome once its
// batch has run. A process whose context ends before its batch starts
// leaves it.
func (b *Batcher) Join(ctx context.Context, p *Proc) error {
	m := &BatchMember{p: p, ctx: ctx, done: make(chan struct{})}
	b.mu.Lock()
	bt := b.open
	if bt == nil {
		bt = &batch{gone: make(chan struct{})}
		b.open = bt
		bt.timer = b.clock.AfterFunc(b.opts.Wait, func() { b.startOpen(bt) })
		go b.startOnStop(bt, b.r.Stopping())
	}
	bt.members = append(bt.members, m)
	if b.joined != nil {
		b.joined(len(bt.members))
	}
	// Once the runtime stops taking work no task is coming to fill the
	// batch: a handler that joins after its stop (started just before it)
	// runs at once. Read under b.mu, which the watcher takes only after
	// the stop: one of the two starts the batch.
	full := len(bt.members) >= b.opts.Size || !b.r.Taking()
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
		bt.members = slices.DeleteFunc(bt.members, func(o *BatchMember) bool { return o == m })
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

// startOpen runs bt, the batch filling when its wait's timer was armed,
// if it has not started (full) or emptied since.
func (b *Batcher) startOpen(bt *batch) {
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
func (b *Batcher) closeOpen() {
	bt := b.open
	b.open = nil
	bt.timer.Stop()
	close(bt.gone)
}

// startOnStop is the watcher of bt, a batch filling while the runtime
// takes work (stop is that period's Stopping): it starts bt once the
// runtime stops taking work (Shutdown, Close, StopWork), since its tasks
// are all it will get and they should run within the grace period rather
// than wait out the wait. It returns once bt is no longer filling.
func (b *Batcher) startOnStop(bt *batch, stop <-chan struct{}) {
	select {
	case <-stop:
		b.startOpen(bt)
	case <-bt.gone:
	}
}

// run calls the handler with the processes of a batch whose contexts have
// not ended, and gives every member its outcome.
func (b *Batcher) run(members []*BatchMember) {
	live := make([]*BatchMember, 0, len(members))
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
		ctx, stop = context.WithTimeoutCause(ctx, b.opts.Timeout, errs.ErrTaskTimeout)
		defer stop()
	}
	// The batch's context ends on shutdown (every process is interrupted
	// together then), or once no process of it is left.
	left := atomic.Int64{}
	left.Store(int64(len(live)))
	for _, m := range live {
		stop := context.AfterFunc(m.ctx, func() {
			cause := context.Cause(m.ctx)
			if left.Add(-1) == 0 || errors.Is(cause, errs.ErrShutdown) {
				cancel(cause)
			}
		})
		defer stop()
	}
	per, err := b.callSafe(ctx, live)
	timedOut := errors.Is(context.Cause(ctx), errs.ErrTaskTimeout)
	shutdown := errors.Is(context.Cause(ctx), errs.ErrShutdown)
	for _, m := range live {
		e := err
		if per != nil {
			e = per(m.p)
		}
		if e != nil && timedOut && !errors.Is(e, errs.ErrTaskTimeout) {
			// As runJob marks a handler that gave up on its time.
			e = WithReason(Reason(e, ReasonTimeout), fmt.Errorf("%w: %w", errs.ErrTaskTimeout, e))
		}
		m.err, m.shutdown = e, shutdown
		close(m.done)
	}
}

// callSafe runs the handler on a batch, recovering a panic: every process
// of the batch then fails with ErrHandlerPanicked.
func (b *Batcher) callSafe(ctx context.Context, batch []*BatchMember) (per func(*Proc) error, err error) {
	defer func() {
		if v := recover(); v != nil {
			b.env.logger().Error("worqr: batch handler panicked", "queue", b.queue, "tasks", len(batch),
				"first_process", batch[0].p.ID, "panic", v, "stack", string(debug.Stack()))
			per, err = nil, fmt.Errorf("%w: %v", errs.ErrHandlerPanicked, v)
			if b.opts.PanicIsPermanent {
				err = Permanent(err)
			}
		}
	}()
	return b.call(ctx, batch)
}
