package worqr

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"time"
)

// DefaultConcurrency is how many handlers run at once per queue when
// HandleOptions.Concurrency is zero.
const DefaultConcurrency = 10

// Causes of a handler's context ending, as context.Cause reports them.
// (ErrTaskCancelled, ErrQueueDeleted and ErrWorkerFenced are causes too.)
var (
	// ErrShutdown is the cause when Shutdown's grace period ended, or the
	// worker was closed or failed, while the handler ran.
	ErrShutdown = errors.New("worqr: worker shutting down")
	// ErrHandledQueue is returned by Dequeue on a queue served by Handle:
	// its runtime does the dequeuing, so that its concurrency accounting
	// stays right.
	ErrHandledQueue = errors.New("worqr: queue is served by Handle")
)

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
// error puts the task back at the end of its queue (a retry), unless the
// error is wrapped with Permanent. The context ends, with a cause that
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
// task (an open connection, a subscription): see the README.
type Handler func(ctx context.Context, p *Process) error

// HandleOptions configure Handle.
type HandleOptions struct {
	// Concurrency is how many handlers may run at once for the queue.
	// Default DefaultConcurrency.
	Concurrency int
	// PanicIsPermanent finishes the process of a handler that panicked,
	// instead of retrying it.
	PanicIsPermanent bool
	// Events are low-level callbacks called as well, after the runtime has
	// handled each event.
	Events Events
	// Middleware wraps the handler, the first outermost, inside the
	// worker's WorkerOptions.Middleware.
	Middleware []Middleware
}

// permanentError marks a handler error that must not be retried.
type permanentError struct{ err error }

func (e permanentError) Error() string { return "permanent: " + e.err.Error() }
func (e permanentError) Unwrap() error { return e.err }

// Permanent wraps a handler's error so the process is finished, and the
// failure logged, instead of retried.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return permanentError{err}
}

// IsPermanent reports whether err was wrapped with Permanent.
func IsPermanent(err error) bool {
	var p permanentError
	return errors.As(err, &p)
}

// runner is the runtime of one queue served by Handle: it dequeues while it
// has free slots and the queue may have tasks, and runs the handler for
// each process.
type runner struct {
	w       *Worker
	queue   string
	handler Handler
	opts    HandleOptions

	wake chan struct{} // a work event came, or a slot was freed

	mu      sync.Mutex
	running map[*Process]context.CancelCauseFunc
	// more is true while the queue may still hold tasks: set by work
	// events, cleared when a dequeue comes back short.
	more bool
	gen  uint64 // counts work events
	// loop controls the running dequeue loop; nil before it starts.
	loop *loopControl
	// handlers counts running handlers.
	handlers sync.WaitGroup
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
		wake:    make(chan struct{}, 1),
		running: make(map[*Process]context.CancelCauseFunc),
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

// job is a process to run, with its handler's context.
type job struct {
	p      *Process
	ctx    context.Context
	cancel context.CancelCauseFunc
}

// startLoop starts the dequeue loop (again, after a StopWork that failed
// and left the queue served).
func (r *runner) startLoop() {
	ctx, cancel := context.WithCancel(context.Background())
	lc := &loopControl{ctx: ctx, cancel: cancel, done: make(chan struct{}), idle: make(chan job)}
	r.mu.Lock()
	r.loop = lc
	r.mu.Unlock()
	go r.run(lc)
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
	r.gen++
	r.mu.Unlock()
	r.poke()
}

func (r *runner) poke() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// free is how many more handlers may start.
func (r *runner) free() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.opts.Concurrency - len(r.running)
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
			n := r.free()
			if n <= 0 {
				break // a handler that ends wakes the loop
			}
			r.mu.Lock()
			gen := r.gen
			r.mu.Unlock()
			ps, err := r.w.dequeue(lc.ctx, r.queue, n, true)
			switch {
			case err != nil && lc.ctx.Err() != nil:
				return
			case errors.Is(err, ErrNoTask):
				r.clearMore(gen)
			case errors.Is(err, ErrWorkerFenced):
				// Registering again raises a work event.
			case errors.Is(err, ErrWorkerClosed), errors.Is(err, ErrNotServing):
				return
			case err != nil:
				r.w.logger().Warn("worqr: dequeue failed; retrying", "queue", r.queue, "err", err)
				if !retry.wait(lc.ctx) {
					return
				}
				r.poke()
			}
			if err != nil {
				break
			}
			retry.reset()
			if len(ps) < n {
				r.clearMore(gen)
			}
			for _, p := range ps {
				r.start(lc, p)
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

// start runs the handler for p on a handler goroutine: one that finished
// its last task and waits for another if there is one, else a new one. On
// a busy queue goroutines (and the stacks they have grown) are reused
// rather than started for every task. The handler's context ends when the
// process ends for a reason the worker learns of (cancel, delete,
// fencing), with that reason as its cause.
func (r *runner) start(lc *loopControl, p *Process) {
	ctx, cancel := context.WithCancelCause(context.Background())
	r.mu.Lock()
	r.running[p] = cancel
	r.mu.Unlock()
	r.handlers.Add(1)
	p.onEnd(func(reason error) { cancel(reason) })
	j := job{p: p, ctx: ctx, cancel: cancel}
	select {
	case lc.idle <- j:
	default:
		go r.serve(lc, j)
	}
}

// serve runs j, then the jobs the loop hands it while the loop runs.
func (r *runner) serve(lc *loopControl, j job) {
	for {
		r.runJob(j)
		select {
		case j = <-lc.idle:
		case <-lc.ctx.Done():
			return
		}
	}
}

// runJob runs the handler for one process and settles its outcome.
func (r *runner) runJob(j job) {
	defer r.handlers.Done()
	err := r.call(j.ctx, j.p)
	r.settle(j.ctx, j.p, err)
	j.cancel(nil)
	r.mu.Lock()
	delete(r.running, j.p)
	more := r.more
	r.mu.Unlock()
	if more {
		r.poke()
	}
}

// errPanic marks a handler that panicked.
var errPanic = errors.New("worqr: handler panicked")

func (r *runner) call(ctx context.Context, p *Process) (err error) {
	defer func() {
		if v := recover(); v != nil {
			r.w.logger().Error("worqr: handler panicked", "queue", r.queue, "process", p.ID(), "panic", v, "stack", string(debug.Stack()))
			err = fmt.Errorf("%w: %v", errPanic, v)
			if r.opts.PanicIsPermanent {
				err = Permanent(err)
			}
		}
	}()
	return r.handler(ctx, p)
}

// settle applies the outcome of a handler to its process.
func (r *runner) settle(ctx context.Context, p *Process, err error) {
	// Built only when something is logged: settle runs once per task.
	log := func() *slog.Logger { return r.w.logger().With("queue", r.queue, "process", p.ID(), "task", p.TaskID()) }
	var write func(context.Context) error
	switch ended := p.Err(); {
	case errors.Is(ended, ErrProcessLost):
		return // fenced or given back: the task is not ours to touch
	case errors.Is(ended, ErrTaskCancelled), errors.Is(ended, ErrQueueDeleted):
		// Requeue, not Finish: Requeue drops a process Redis has marked
		// cancelled or deleted, and requeues one it has not, so an event
		// that Redis's state does not back (stale, or forged by anyone
		// allowed to publish on the channel) cannot lose the task.
		write = func(ctx context.Context) error { return p.requeue(ctx, err) }
	case errors.Is(context.Cause(ctx), ErrShutdown) && err != nil:
		return // still held: shutting down returns it to the front
	case err == nil:
		write = p.Finish
	case IsPermanent(err):
		log().Error("worqr: task failed permanently; finished", "err", err)
		write = func(ctx context.Context) error { return p.finish(ctx, OutcomeFailed, err) }
	default:
		log().Warn("worqr: task failed; retrying", "err", err, "attempt", p.Attempt())
		write = func(ctx context.Context) error { return p.requeue(ctx, err) }
	}
	// Writes after the handler must not hang on a dead Redis for ever; one
	// that failed on the connection left the process ours in Redis, so it
	// is tried again while the worker lives, or it would be held for ever.
	b := newBackoff(50*time.Millisecond, time.Second)
	for {
		wctx, cancel := context.WithTimeout(r.w.life, r.w.opts.TTL)
		outcome := write(wctx)
		cancel()
		switch {
		case outcome == nil, errors.Is(outcome, ErrProcessLost),
			errors.Is(outcome, ErrTaskCancelled), errors.Is(outcome, ErrQueueDeleted): // Requeue dropped it, as it should
			return
		case !retryable(outcome) || !b.wait(r.w.life):
			log().Warn("worqr: could not record the task's outcome", "err", outcome)
			return
		}
		log().Warn("worqr: could not record the task's outcome; retrying", "err", outcome)
	}
}

// retryable tells whether an outcome write may not have reached Redis and
// can be sent again (the scripts check ownership, so a repeat is safe): it
// failed on the connection, or got no answer within its TTL-long deadline
// while the worker lives (a hung node).
func retryable(err error) bool {
	return errors.Is(err, ErrUnavailable) || errors.Is(err, context.DeadlineExceeded)
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
}

// cancelAll ends every running handler's context with cause.
func (r *runner) cancelAll(cause error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, cancel := range r.running {
		cancel(cause)
	}
}

// Shutdown stops the worker gracefully, like http.Server.Shutdown: it
// stops taking tasks at once, waits for running handlers until ctx ends,
// then cancels their contexts (cause ErrShutdown) and waits a short while
// (ShutdownCancelWait) for them to return. What is still unfinished goes
// back to the front of its queue, the worker deregisters and its
// subscriptions close. It returns ctx's error if the grace period ran out.
// A second call, or Close after it, is safe. Like http.Server.Shutdown, a
// Shutdown called from a handler waits for that handler too: give it a
// context with a deadline.
func (w *Worker) Shutdown(ctx context.Context) error {
	w.mu.Lock()
	closed := w.closed
	w.mu.Unlock()
	if closed {
		return nil
	}
	grace := w.drain(ctx)
	closeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), w.opts.TTL)
	defer cancel()
	err := w.shutdown(closeCtx, "shutdown")
	if errors.Is(err, ErrWorkerClosed) {
		err = nil
	}
	return errors.Join(grace, err)
}

// ShutdownCancelWait is how long Shutdown, Close and Fail wait for handlers
// to return once their contexts were cancelled.
const ShutdownCancelWait = time.Second

// drain stops every runner taking tasks and waits for their handlers
// until ctx ends, then cancels them (see stopRunners). It returns ctx's
// error if the handlers outlasted it.
func (w *Worker) drain(ctx context.Context) error {
	w.mu.Lock()
	w.draining = true
	runners := w.runnersLocked()
	w.mu.Unlock()
	if !w.stopRunners(ctx, context.Background(), runners) {
		return ctx.Err()
	}
	return nil
}

// runnersLocked lists the Handle runtimes of the served queues. Callers
// hold w.mu.
func (w *Worker) runnersLocked() []*runner {
	var rs []*runner
	for _, s := range w.serving {
		if s.runner != nil {
			rs = append(rs, s.runner)
		}
	}
	return rs
}

// idle reports whether no handler of the runners is running.
func idle(runners []*runner) bool {
	for _, r := range runners {
		r.mu.Lock()
		n := len(r.running)
		r.mu.Unlock()
		if n > 0 {
			return false
		}
	}
	return true
}

// stopRunners stops the runners taking tasks and waits for their handlers
// until grace ends; then it cancels the handlers' contexts (cause
// ErrShutdown) and waits up to ShutdownCancelWait more, or until ctx ends.
// It reports whether the handlers ended within grace.
func (w *Worker) stopRunners(grace, ctx context.Context, runners []*runner) bool {
	for _, r := range runners {
		r.stopTaking()
	}
	done := make(chan struct{})
	go func() {
		for _, r := range runners {
			r.handlers.Wait()
		}
		close(done)
	}()
	select {
	case <-done:
		return true
	case <-grace.Done():
	}
	// A grace period that was over before it began outlasted no handler
	// if none was running (http.Server.Shutdown returns nil then too); the
	// goroutine above may just not have noticed yet.
	if idle(runners) {
		<-done
		return true
	}
	for _, r := range runners {
		r.cancelAll(ErrShutdown)
	}
	t := time.NewTimer(ShutdownCancelWait)
	defer t.Stop()
	select {
	case <-done:
	case <-ctx.Done():
	case <-t.C:
		w.logger().Warn("worqr: handlers still running after their contexts ended; their tasks go back to the queue")
	}
	return false
}
