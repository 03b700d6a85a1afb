package worqr

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"strings"
	"sync"
	"time"
)

// runner is the runtime of one queue served by Handle: it dequeues while it
// has free slots and the queue may have tasks, and runs the handler for
// each process. A member of a pool (HandleQueues) has no dequeue loop of
// its own: the pool's loop dequeues for it, into the pool's slots.
type runner struct {
	w       *Worker // set when made, as are the next four
	queue   string
	handler Handler // with the middleware around it
	opts    HandleOptions
	pool    *pool // the pool it is a member of, if any

	wake chan struct{} // a work event came, or a slot was freed (not for a pool member)

	mu sync.Mutex // guards the fields below
	// busy counts the handlers running (a slot is taken from the dequeue
	// until the handler returns). The processes themselves are in the
	// worker's books, serving.procs.
	busy int
	// settling counts the outcomes of returned handlers being written. A
	// slot is handed on when its handler returns, not when Redis has the
	// outcome, so the next task's dequeue overlaps the finish; settling
	// bounds how far the writes may lag (see free).
	settling int
	// asking counts the slots a dequeue in flight asked for: a process an
	// enqueue hands over meanwhile (claim) must not take one of them.
	asking int
	// more is true while the queue may still hold tasks: set by work
	// events, cleared when a dequeue comes back short.
	more bool
	gen  uint64 // counts work events
	// blocked is set when a pool member could not take work (fenced,
	// not serving, or Redis failed) until the next work event; the pool
	// passes it over.
	blocked bool
	// retryAt unblocks a pool member whose dequeue failed, after its
	// backoff (retry, the pool loop's own).
	retryAt *time.Timer
	retry   *backoff
	// loop controls the running dequeue loop; nil before it starts.
	loop *loopControl
	// limited wakes the loop when the queue's rate limit allows the next
	// start; limitedAt is when (Unix µs, Redis clock).
	limited   *time.Timer
	limitedAt int64
	// drain is closed when no handler runs and no outcome is being
	// written (busy and settling both zero), for those waiting for that
	// (drained): a Finish is written after the handler's goroutine went
	// back for work (see finishLater), and stopTaking's callers wait for
	// it too. Made when one asks while handlers run, dropped once closed.
	// Not a sync.WaitGroup: a StopWork whose handlers outlived their
	// cancel, and whose release failed, starts the loop again while its
	// waiting goroutine still waits, and a WaitGroup's Add then races that
	// Wait (and may panic, "reused before previous Wait has returned").
	drain chan struct{}
}

// Handle serves a queue with a handler: the worker starts work on it and,
// woken by work events, dequeues while fewer than Concurrency handlers run
// and tasks wait, several at a time when several slots are free. It never
// polls: after a missed notification the check on resubscribing wakes it.
func (w *Worker) Handle(ctx context.Context, queue string, h Handler, opts HandleOptions) error {
	if h == nil {
		return fmt.Errorf("worqr: handle %q: nil handler: %w", queue, ErrInvalidOptions)
	}
	if opts.Concurrency == 0 {
		opts.Concurrency = DefaultConcurrency
	}
	if opts.Concurrency < 0 {
		return fmt.Errorf("worqr: handle %q: negative concurrency: %w", queue, ErrInvalidOptions)
	}
	r := &runner{
		w: w, queue: queue, handler: chain(h, w.opts.Middleware, opts.Middleware), opts: opts,
		wake: make(chan struct{}, 1),
	}
	// The worker tells the runtime of work events itself (workArrived),
	// before it calls these.
	if err := w.startWork(ctx, queue, opts.Events, r); err != nil {
		w.mu.Lock()
		s := w.serving[queue]
		w.mu.Unlock()
		if s == nil || s.runner != r {
			r.stopTaking()
		}
		return err
	}
	return nil
}

// loopControl starts and stops one run of the dequeue loop.
type loopControl struct {
	ctx    context.Context // ends to stop taking tasks; bounds the dequeues
	cancel context.CancelFunc
	done   chan struct{} // closed when the loop has ended
	// idle hands a task to a handler goroutine that has finished its last
	// one and waits for more; they leave when ctx ends.
	idle chan job
}

// job is a process to run, with its runner and its handler's context.
type job struct {
	r      *runner
	p      *Process
	ctx    context.Context
	cancel context.CancelCauseFunc
	// handed marks a process an enqueue handed over (see handoff.go).
	handed bool
}

// startLoop starts the dequeue loop (again, after a StopWork that failed
// and left the queue served), marked as maybe having work so that it
// looks. A pool member's loop is the pool's: it is only marked so, and
// the pool looks.
func (r *runner) startLoop() {
	ctx, cancel := context.WithCancel(context.Background())
	lc := &loopControl{ctx: ctx, cancel: cancel, done: make(chan struct{}), idle: make(chan job)}
	r.mu.Lock()
	r.loop = lc
	// The first dequeue parks the runtime (or takes what waits).
	r.more, r.blocked = true, false
	r.mu.Unlock()
	if r.pool != nil {
		close(lc.done)
	} else {
		go r.run(lc)
	}
	r.poke()
}

// taking reports whether the dequeue loop runs.
func (r *runner) taking() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.loop != nil && r.loop.ctx.Err() == nil
}

// workArrived records that the queue may hold tasks and wakes the loop:
// a work event named this worker, or named nobody, or the worker has
// (re)subscribed.
func (r *runner) workArrived() {
	r.mu.Lock()
	r.more = true
	r.blocked = false
	r.gen++
	r.mu.Unlock()
	r.poke()
}

func (r *runner) poke() {
	if r.pool != nil {
		r.pool.poke()
		return
	}
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// block passes a pool member over until the next work event, unless one
// came since gen was read.
func (r *runner) block(gen uint64) {
	r.mu.Lock()
	if r.gen == gen {
		r.blocked = true
	}
	r.mu.Unlock()
}

// retryLater blocks a pool member whose dequeue failed (unless a work
// event came since gen was read) and unblocks it after its backoff, as if
// told of work: the pool serves its other queues meanwhile. The timer ends
// with the member's loop.
func (r *runner) retryLater(lc *loopControl, gen uint64) {
	d := r.retry.step()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.gen == gen {
		r.blocked = true
	}
	if r.retryAt != nil {
		r.retryAt.Stop()
	}
	r.retryAt = time.AfterFunc(d, func() {
		if lc.ctx.Err() == nil {
			r.workArrived()
		}
	})
}

func (r *runner) run(lc *loopControl) {
	defer close(lc.done)
	retry := newBackoff(10*time.Millisecond, time.Second)
	for {
		select {
		case <-lc.ctx.Done():
			return
		case <-r.wake:
		}
		for {
			n, gen := r.ask()
			if n <= 0 {
				break // a handler that ends wakes the loop
			}
			sent := r.w.c.outage.begin()
			ps, until, err := r.w.dequeue(lc.ctx, r.queue, n, true)
			r.took(n, len(ps))
			if until > 0 {
				// The rate limit is used up: look again when the next
				// start is allowed, and not before.
				r.wakeAt(lc, until)
			}
			switch {
			case err != nil && lc.ctx.Err() != nil:
				return
			case errors.Is(err, ErrNoTask), errors.Is(err, ErrRateLimited):
				r.w.c.outage.ok(sent)
				r.clearMore(gen)
			case errors.Is(err, ErrWorkerFenced):
				// Registering again raises a work event.
			case errors.Is(err, ErrWorkerClosed), errors.Is(err, ErrNotServing):
				return
			case err != nil:
				if !r.w.c.outage.failed(sent, "dequeue", err) {
					r.w.logger().Warn("worqr: dequeue failed; retrying", "queue", r.queue, "err", err)
				}
				if !retry.wait(lc.ctx) {
					return
				}
				r.poke()
			}
			if err != nil {
				break
			}
			r.w.c.outage.ok(sent)
			retry.reset()
			if len(ps) < n {
				r.clearMore(gen)
			}
			for _, p := range ps {
				r.launch(lc.idle, lc.ctx, p, false)
			}
			if len(ps) < n {
				break
			}
		}
	}
}

// clearMore records that the queue looked empty, unless a work event
// came since gen was read.
func (r *runner) clearMore(gen uint64) {
	r.mu.Lock()
	if r.gen == gen {
		r.more = false
	}
	r.mu.Unlock()
}

// launch runs the handler for p, whose slot is taken (took, claim), on a
// handler goroutine: one that finished its last task and waits for
// another if there is one, else a new one. On a busy queue goroutines (and
// the stacks they have grown) are reused rather than started for every
// task. The handler's context ends when the process ends for a reason the
// worker learns of (cancel, delete, fencing), with that reason as its
// cause. Goroutines wait on idle for their next job until stop ends: the
// loop's (a pool's goroutines serve every member).
func (r *runner) launch(idle chan job, stop context.Context, p *Process, handed bool) {
	ctx, cancel := context.WithCancelCause(context.Background())
	p.onEnd(cancel)
	j := job{r: r, p: p, ctx: ctx, cancel: cancel, handed: handed}
	select {
	case idle <- j:
	default:
		go serve(idle, stop, j)
	}
}

// serve runs j, then the jobs the loop hands it while the loop runs.
func serve(idle chan job, stop context.Context, j job) {
	for {
		j.r.runJob(j)
		select {
		case j = <-idle:
		case <-stop.Done():
			return
		}
	}
}

// runJob runs the handler for one process and settles its outcome. A
// handler that succeeded has its Finish written asynchronously (see
// finishLater): its goroutine is free for the next job at once, and the
// rest of the settling, up to settled, runs when the write returns.
func (r *runner) runJob(j job) {
	if j.handed {
		r.lookAgain() // from here: the handler's goroutine runs first
	}
	ctx := j.ctx
	if d := r.timeout(j.p); d > 0 {
		var stop context.CancelFunc
		ctx, stop = context.WithTimeoutCause(ctx, d, ErrTaskTimeout)
		defer stop()
	}
	err := r.call(ctx, j.p)
	if err != nil && errors.Is(context.Cause(ctx), ErrTaskTimeout) {
		// The handler gave up because its time ran out: a retry, under
		// the policy, with reason timeout (unless it gave one itself), whose
		// error says so once (a handler may return the cause itself).
		if !errors.Is(err, ErrTaskTimeout) {
			err = fmt.Errorf("%w: %w", ErrTaskTimeout, err)
		}
		err = WithReason(reasonOf(err, ReasonTimeout), err)
	}
	// The slot is handed on now: the next task's dequeue goes out while
	// this outcome is written (both ride the same pipeline).
	r.mu.Lock()
	r.busy--
	r.settling++
	more := r.more
	r.mu.Unlock()
	r.handOn(more, 1)
	if err == nil && j.p.Err() == nil {
		r.finishLater(j) // what settle would do: Finish
		return
	}
	r.settle(ctx, j.p, err)
	r.settled(j)
}

// settled ends a job whose outcome was written (or given up): its
// context ends, it stops counting against the writes in flight, and the
// handler is done (stopTaking and shutdown wait for that).
func (r *runner) settled(j job) {
	j.cancel(nil)
	r.mu.Lock()
	r.settling--
	more := r.more
	drained := r.takeDrainLocked()
	r.mu.Unlock()
	r.handOn(more, -1)
	if drained != nil {
		close(drained)
	}
}

// drained returns a channel closed once no handler runs and no outcome
// is being written: at once if none is. A waiter waits for that once,
// whatever handlers start after it.
func (r *runner) drained() <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.busy+r.settling == 0 {
		ch := make(chan struct{})
		close(ch)
		return ch
	}
	if r.drain == nil {
		r.drain = make(chan struct{})
	}
	return r.drain
}

// takeDrainLocked returns the drain channel to close, if handlers have
// just all ended and someone waits, and forgets it. Callers hold mu.
func (r *runner) takeDrainLocked() chan struct{} {
	d := r.drain
	if d == nil || r.busy+r.settling > 0 {
		return nil
	}
	r.drain = nil
	return d
}

// handOn wakes the dequeue loop for a slot that freed (d 1: a handler
// returned; d -1: its outcome was written, which frees one only when the
// writes were at their bound).
func (r *runner) handOn(more bool, d int) {
	if r.pool != nil {
		r.pool.release(d) // the slot may go to any member
	} else if more {
		r.poke()
	}
}

// timeout is how long p's handler may run: the task's own timeout, else
// the queue's; 0 for no limit.
func (r *runner) timeout(p *Process) time.Duration {
	if p.timeout > 0 {
		return p.timeout
	}
	return r.opts.Timeout
}

func (r *runner) call(ctx context.Context, p *Process) (err error) {
	defer func() {
		if v := recover(); v != nil {
			// The stack once a task, not on every retry of a task that
			// panics each time: not when its previous attempt panicked too,
			// as the error recorded with its retry says.
			stack := "as at the previous attempt"
			if !strings.HasPrefix(p.LastError(), ErrHandlerPanicked.Error()) {
				stack = string(debug.Stack())
			}
			r.w.logger().Error("worqr: handler panicked", "queue", r.queue, "process", p.ID(), "task", p.TaskID(),
				"attempt", p.Attempt(), "panic", v, "stack", stack)
			err = fmt.Errorf("%w: %v", ErrHandlerPanicked, v)
			if r.opts.PanicIsPermanent {
				err = Permanent(err)
			}
		}
	}()
	return r.handler(ctx, p)
}

// stopTaking stops the dequeue loop and waits for it.
func (r *runner) stopTaking() {
	r.mu.Lock()
	lc := r.loop
	r.mu.Unlock()
	if lc == nil {
		return
	}
	lc.cancel()
	<-lc.done
	if r.pool != nil {
		// Wait out a dequeue of the pool's that may be starting handlers
		// for this queue; any later one sees lc ended.
		r.pool.turn.Lock()
		//lint:ignore SA2001 an empty critical section is the barrier
		r.pool.turn.Unlock()
	}
	r.mu.Lock()
	if r.limited != nil {
		// Forgotten too: a loop started again (after a StopWork that
		// failed) must arm its own, not take this one as armed.
		r.limited.Stop()
		r.limitedAt = 0
	}
	if r.retryAt != nil {
		r.retryAt.Stop()
	}
	r.mu.Unlock()
}

// cancelAll ends every running handler's context with cause. A handler
// runs for a process the worker holds in the queue, or for one that has
// ended already, whose context ended with it.
func (r *runner) cancelAll(cause error) {
	r.w.mu.Lock()
	defer r.w.mu.Unlock()
	if s := r.w.serving[r.queue]; s != nil {
		for _, p := range s.procs {
			p.interrupt(cause)
		}
	}
}

// wakeAt arms the runtime's timer for when the rate limit allows the next
// start (Unix µs, Redis clock), unless it is armed for an earlier time; it
// then looks for work as if told of it. The timer ends with the loop.
func (r *runner) wakeAt(lc *loopControl, until int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.limited != nil && r.limitedAt != 0 && r.limitedAt <= until {
		return
	}
	r.limitedAt = until
	d := time.UnixMicro(until).Sub(r.w.clock.now())
	fire := func() {
		r.mu.Lock()
		r.limitedAt = 0
		r.mu.Unlock()
		if lc.ctx.Err() == nil {
			r.workArrived()
		}
	}
	if r.limited != nil {
		r.limited.Stop()
	}
	r.limited = time.AfterFunc(d, fire)
}
