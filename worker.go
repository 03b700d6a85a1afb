package worqr

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/redis/rueidis"

	"github.com/worqr/worqr/internal/store"
)

// Worker defaults and limits.
const (
	// DefaultTTL is how long a worker's lease lasts without renewal.
	DefaultTTL = 3 * time.Second
	// DefaultRenewInterval is how often the lease is renewed, and how often
	// the worker looks for dead peers to reclaim.
	DefaultRenewInterval = time.Second
	// MinTTL is the shortest TTL accepted.
	MinTTL = time.Second
)

// WorkerOptions configure a Worker.
type WorkerOptions struct {
	// TTL is the lease length: a worker that has not renewed its lease for
	// this long is dead, and its peers return its tasks to their queues.
	// Default DefaultTTL, at least MinTTL.
	TTL time.Duration
	// RenewInterval is how often the lease is renewed and dead peers are
	// looked for. Default DefaultRenewInterval, or TTL/3 if that is less;
	// it must be at most TTL/3, so that two renewals in a row can be lost
	// before the worker fences itself (at 0.9 TTL).
	RenewInterval time.Duration
	// OnFenced is called, on a goroutine of its own, when the worker treats
	// itself as dead: it could not renew its lease in time (judged on its
	// own clock from when it sent the last renewal that succeeded) or found
	// the lease gone. Every process it held has already ended with
	// ErrProcessLost: their tasks belong to the peers now. It is called
	// too when only the lease on one queue was lost (FenceEvent.Queue set):
	// the worker keeps its id and serves that queue again later.
	OnFenced func(FenceEvent)
	// Middleware wraps the handler of every queue served with Handle, the
	// first outermost, outside HandleOptions.Middleware.
	Middleware []Middleware
	// StayFenced stops a fenced worker from registering again under a new
	// id once Redis answers, which it does by default. A worker that stays
	// fenced returns ErrWorkerFenced until it is closed.
	StayFenced bool
}

// FenceEvent tells the application that a worker fenced itself.
type FenceEvent struct {
	// WorkerID is the id the worker had; it will not be used again,
	// unless Queue is set (the worker keeps its id then).
	WorkerID string
	// Cause says why.
	Cause error
	// Queue is set when only the lease on this queue was lost (its Redis
	// node could not be reached in time, as when a cluster shard fails
	// over): the worker keeps its id and other queues, and takes a new
	// lease on this one once the node answers. It is empty when the whole
	// worker fenced itself.
	Queue string
	// Lost are the processes the worker held (in Queue, when set); each
	// has ended.
	Lost []*Process
}

// Worker takes tasks from the queues it serves. It holds a lease in Redis,
// renews it, fences itself when it cannot, and reclaims dead peers' work.
// It is safe for concurrent use.
type Worker struct {
	c    *Client
	opts WorkerOptions

	// membership serialises changes to what the worker is registered as
	// and serves: StartWork, StopWork, re-registration, Fail and Close.
	membership sync.Mutex

	mu      sync.Mutex
	id      string
	fenced  bool
	closed  bool
	serving map[string]*serving
	// draining is set when Shutdown, Close or Fail stopped the taking of
	// tasks.
	draining bool
	// deadline fires at deadlineAt, when the lease may expire by the
	// worker's own clock, and fences the worker.
	deadline   *time.Timer
	deadlineAt time.Time

	life context.Context    // the worker's lifetime; ends at Fail or Close
	stop context.CancelFunc // ends life: keepalive and reclaim stop
	kick chan struct{}      // wakes keepalive early
	wg   sync.WaitGroup
}

// serving is one queue a worker serves.
type serving struct {
	name   string
	events Events
	sub    *subscription
	procs  map[string]*Process // by process id
	// gate lets a reconciliation stop dequeues on this queue while it
	// decides which processes in Redis the worker really holds.
	gate sync.RWMutex
	// unsure counts the renewals that will still look for processes Redis
	// says the worker holds but it does not know of. A dequeue whose reply
	// was lost sets it; it stays set for more than one pass because the
	// lost command may still run late on another pooled connection.
	unsure int
	// leaving is set while StopWork releases the queue: a script that
	// finds the lease gone then is not evidence that the worker is dead.
	leaving bool
	// deadlineAt is when the worker's lease on this queue may expire, by
	// its own clock, less the fence margin (see keepalive.go).
	deadlineAt time.Time
	// fenced is set when the lease on this queue was not renewed in time:
	// the worker takes no work here until rejoin has taken a new lease.
	fenced bool
	// leaseGen counts the times the worker gave up its lease on this
	// queue (fenceQueue): an answer to a renewal sent before says nothing
	// about the lease it holds now.
	leaseGen uint64
	// runner is the Handle runtime serving the queue, if any.
	runner *runner
	// inCallback is set while the dispatcher runs one of the application's
	// callbacks, which may itself call StopWork or Close: stopping the
	// subscription then does not wait for the dispatcher. It is not set
	// during the dispatcher's own Redis calls (the catch-up), so stopping
	// waits for those.
	inCallback atomic.Bool
}

// call runs an application callback, unless the subscription was stopped.
// Setting inCallback before checking ctx means a stop that cancelled ctx
// first skips the callback, and one that cancelled it later does not wait.
func (s *serving) call(ctx context.Context, f func()) {
	s.inCallback.Store(true)
	defer s.inCallback.Store(false)
	if ctx.Err() == nil {
		f()
	}
}

// NewWorker registers a new worker and starts its keepalive and its
// reclaim of dead peers. Call StartWork to serve queues, and Close when
// done.
func (c *Client) NewWorker(ctx context.Context, opts WorkerOptions) (*Worker, error) {
	if err := c.validateCtx(ctx, "new worker"); err != nil {
		return nil, err
	}
	if opts.TTL == 0 {
		opts.TTL = DefaultTTL
	}
	if opts.TTL < MinTTL {
		return nil, fmt.Errorf("%w: TTL %v is below %v", ErrInvalidOptions, opts.TTL, MinTTL)
	}
	if opts.RenewInterval == 0 {
		opts.RenewInterval = min(DefaultRenewInterval, opts.TTL/3)
	}
	if opts.RenewInterval < 0 || opts.RenewInterval > opts.TTL/3 {
		return nil, fmt.Errorf("%w: RenewInterval %v must be positive and at most TTL/3 (%v)", ErrInvalidOptions, opts.RenewInterval, opts.TTL/3)
	}
	w := &Worker{
		c:       c,
		opts:    opts,
		serving: make(map[string]*serving),
		kick:    make(chan struct{}, 1),
	}
	id, sent, err := w.register(ctx)
	if err != nil {
		return nil, err
	}
	w.id = id
	w.deadline = time.AfterFunc(time.Hour, w.onDeadline)
	w.mu.Lock()
	w.extendDeadline(sent)
	w.mu.Unlock()
	w.life, w.stop = context.WithCancel(context.Background())
	w.wg.Add(2)
	go w.keepalive(w.life)
	go w.reclaimLoop(w.life)

	c.mu.Lock()
	if c.closed.Load() {
		c.mu.Unlock()
		_ = w.Close(ctx)
		return nil, fmt.Errorf("worqr: new worker: %w", ErrClientClosed)
	}
	c.workers[w] = struct{}{}
	c.mu.Unlock()
	return w, nil
}

// register registers a fresh worker id with a new registry lease, and
// returns when the registration was sent (the lease counts from then).
func (w *Worker) register(ctx context.Context) (id string, sent time.Time, err error) {
	c := w.c
	id, sent = uuid.NewString(), time.Now()
	if err := c.store.RegisterWorker(ctx, id, w.opts.TTL); err != nil {
		return "", sent, c.fail("register worker", "", err)
	}
	return id, sent, nil
}

// ID is the worker's current id. It changes when a fenced worker registers
// again.
func (w *Worker) ID() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.id
}

// served lists the queues being served. Callers hold w.mu.
func (w *Worker) served() []*serving {
	ss := make([]*serving, 0, len(w.serving))
	for _, s := range w.serving {
		ss = append(ss, s)
	}
	return ss
}

// logger is the client's logger with the worker's current id. Never call
// it while holding w.mu.
func (w *Worker) logger() *slog.Logger {
	return w.c.log.With("worker", w.ID())
}

// Queues lists the queues the worker serves.
func (w *Worker) Queues() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]string, 0, len(w.serving))
	for q := range w.serving {
		out = append(out, q)
	}
	return out
}

// StartWork makes the worker serve a queue: it records the queue in the
// registry, takes a lease on it, subscribes to its events, and then raises
// a Work event if tasks are already waiting.
func (w *Worker) StartWork(ctx context.Context, queue string, events Events) error {
	return w.startWork(ctx, queue, events, nil)
}

// startWork serves a queue, driven by the application (r nil) or by a
// Handle runtime.
func (w *Worker) startWork(ctx context.Context, queue string, events Events, r *runner) error {
	if err := w.c.validate(ctx, "start work", queue); err != nil {
		return err
	}
	w.membership.Lock()
	defer w.membership.Unlock()
	id, err := w.current("start work")
	if err != nil {
		return err
	}
	w.mu.Lock()
	_, already := w.serving[queue]
	w.mu.Unlock()
	if already {
		return fmt.Errorf("worqr: start work %q: %w", queue, ErrAlreadyServing)
	}
	w.mu.Lock()
	// The queue lease expires with the registry lease that join reads,
	// which is no earlier than the one this deadline was set for.
	deadline := w.deadlineAt
	w.mu.Unlock()
	if err := w.join(ctx, id, queue); err != nil {
		return err
	}
	s := &serving{name: queue, events: events, procs: make(map[string]*Process), runner: r, deadlineAt: deadline}
	s.sub = w.subscribe(s)
	w.mu.Lock()
	w.serving[queue] = s
	draining := w.draining
	if r != nil && !draining {
		r.startLoop() // a served queue's runner always has a loop to stop
	}
	w.mu.Unlock()
	if draining { // Shutdown or Close began meanwhile: serve nothing new
		undo, cancel := context.WithTimeout(context.WithoutCancel(ctx), w.opts.TTL)
		defer cancel()
		_ = w.leave(undo, id, s)
		return fmt.Errorf("worqr: start work %q: %w", queue, ErrWorkerClosed)
	}
	// Return once events published from now on will be heard.
	var why error
	select {
	case <-s.sub.ready:
		return nil
	case <-ctx.Done():
		why = ctx.Err()
	case <-w.life.Done():
		why = ErrWorkerClosed
	}
	undo, cancel := context.WithTimeout(context.WithoutCancel(ctx), w.opts.TTL)
	defer cancel()
	if err := w.leave(undo, id, s); err != nil {
		why = fmt.Errorf("%w (and leaving the queue again failed, so it stays served: %w)", why, err)
	}
	return fmt.Errorf("worqr: start work %q: waiting for the subscription: %w", queue, why)
}

// join records the queue in the worker's registry entry, then takes a lease
// on it that expires with the registry lease (see join.lua for why).
func (w *Worker) join(ctx context.Context, id, queue string) error {
	c := w.c
	unregistered, err := c.store.JoinQueue(ctx, queue, id)
	switch {
	case errors.Is(err, store.ErrLeaseGone):
		w.fence(id, errors.New("registry lease gone when starting work"))
		return fmt.Errorf("worqr: start work %q: %w", queue, ErrWorkerFenced)
	case err != nil:
		return c.fail("start work", queue, err)
	case unregistered:
		if err := c.store.RegisterQueue(ctx, queue); err != nil {
			return c.fail("register queue", queue, err)
		}
	}
	return nil
}

// StopWork stops serving a queue: it unsubscribes, returns every task the
// worker holds in that queue to the front of the queue, and gives up the
// lease. Processes it held end with ErrProcessLost. On a queue served by
// Handle it first cancels the running handlers (cause ErrShutdown) and
// gives them ShutdownCancelWait to return, so none still holds a task a
// peer may take. If giving the tasks back fails, the queue stays served.
func (w *Worker) StopWork(ctx context.Context, queue string) error {
	if err := w.c.validate(ctx, "stop work", queue); err != nil {
		return err
	}
	w.membership.Lock()
	defer w.membership.Unlock()
	w.mu.Lock()
	s, ok := w.serving[queue]
	id, closed := w.id, w.closed
	w.mu.Unlock()
	if closed {
		return fmt.Errorf("worqr: stop work %q: %w", queue, ErrWorkerClosed)
	}
	if !ok {
		return fmt.Errorf("worqr: stop work %q: %w", queue, ErrNotServing)
	}
	if r := s.runner; r != nil {
		// End the handlers, with no grace, before their tasks are given
		// away.
		w.stopRunners(expired(), ctx, []*runner{r})
	}
	err := w.leave(ctx, id, s)
	if err != nil && s.runner != nil {
		s.runner.startLoop() // the queue is still served: keep handling it
	}
	return err
}

// leave ends the worker's service of a queue. It first gives the worker's
// tasks there back in Redis, with dequeues on the queue held off; only when
// that succeeded does the worker stop serving the queue. If it fails the
// queue stays served (and its lease renewed), so nothing is left in a
// process that no one would reclaim, and the caller may try again.
func (w *Worker) leave(ctx context.Context, id string, s *serving) error {
	s.gate.Lock()
	w.mu.Lock()
	s.leaving = true
	w.mu.Unlock()
	err := w.releaseOwn(ctx, id, []*serving{s})
	w.mu.Lock()
	s.leaving = false
	if err == nil && w.serving[s.name] == s {
		delete(w.serving, s.name)
	}
	w.mu.Unlock()
	s.gate.Unlock()
	if err != nil {
		return err
	}
	s.sub.stop(ctx)
	w.endAll(s, ErrProcessLost)
	c := w.c
	// The queue is left. A failure here leaves only a name in the worker's
	// queue set, with no lease or process behind it: reclaimers pass over
	// it. Reporting it would tell the caller the queue is still served,
	// and a retry would fail with ErrNotServing.
	if err := c.store.LeaveQueue(ctx, id, s.name); err != nil {
		w.logger().Warn("worqr: left the queue but could not drop it from the worker's queue set", "queue", s.name, "err", err)
	}
	return nil
}

// releaseOwn returns every task the worker holds in the given queues to
// the front of each queue and drops its leases there, one script per queue
// in one round trip.
func (w *Worker) releaseOwn(ctx context.Context, id string, ss []*serving) error {
	if len(ss) == 0 {
		return nil
	}
	c := w.c
	rs := make([]store.Release, len(ss))
	for i, s := range ss {
		rs[i] = store.Release{Queue: s.name, Worker: id, Mode: store.ReleaseForce}
	}
	var errs []error
	for i, r := range c.store.ReleaseAll(ctx, rs) {
		if r.Err != nil {
			errs = append(errs, c.fail("release", ss[i].name, r.Err))
		}
	}
	return errors.Join(errs...)
}

// Dequeue takes the task at the front of a queue the worker serves. It
// returns ErrNoTask when none is waiting, and ErrWorkerFenced when the
// worker's lease is not live.
func (w *Worker) Dequeue(ctx context.Context, queue string) (*Process, error) {
	ps, err := w.DequeueN(ctx, queue, 1)
	if err != nil {
		return nil, err
	}
	return ps[0], nil
}

// DequeueN takes up to n tasks from the front of a queue in one script
// call, in queue order. It returns ErrNoTask when none is waiting.
func (w *Worker) DequeueN(ctx context.Context, queue string, n int) ([]*Process, error) {
	return w.dequeue(ctx, queue, n, false)
}

// dequeue is DequeueN for the application or, with runtime set, for the
// Handle runtime of the queue.
func (w *Worker) dequeue(ctx context.Context, queue string, n int, runtime bool) ([]*Process, error) {
	c := w.c
	if err := c.validate(ctx, "dequeue", queue); err != nil {
		return nil, err
	}
	if n < 1 {
		return nil, fmt.Errorf("worqr: dequeue %q: count %d: %w", queue, n, ErrInvalidOptions)
	}
	w.mu.Lock()
	s, ok := w.serving[queue]
	id, fenced, closed := w.id, w.fenced || (ok && s.fenced), w.closed || w.draining
	w.mu.Unlock()
	switch {
	case closed:
		return nil, fmt.Errorf("worqr: dequeue %q: %w", queue, ErrWorkerClosed)
	case !ok:
		return nil, fmt.Errorf("worqr: dequeue %q: %w", queue, ErrNotServing)
	case s.runner != nil && !runtime:
		return nil, fmt.Errorf("worqr: dequeue %q: %w", queue, ErrHandledQueue)
	case fenced:
		return nil, fmt.Errorf("worqr: dequeue %q: %w", queue, ErrWorkerFenced)
	}
	s.gate.RLock()
	defer s.gate.RUnlock()
	w.mu.Lock()
	left := w.serving[queue] != s
	w.mu.Unlock()
	if left { // StopWork ran while this call waited at the gate
		return nil, fmt.Errorf("worqr: dequeue %q: %w", queue, ErrNotServing)
	}
	sps, err := c.store.Dequeue(ctx, queue, id, n, runtime)
	if errors.Is(err, store.ErrLeaseGone) {
		w.leaseLost(id, queue, s, nil, fmt.Errorf("dequeue found the lease on %q gone", queue))
		return nil, fmt.Errorf("worqr: dequeue %q: %w", queue, ErrWorkerFenced)
	}
	if err != nil {
		if _, isReply := rueidis.IsRedisErr(err); !isReply {
			// The script may have run and its reply been lost: reconcile
			// once Redis answers, so no process stays ours unknowingly.
			w.mu.Lock()
			s.unsure = unsurePasses
			w.mu.Unlock()
		}
		return nil, c.fail("dequeue", queue, err)
	}
	if len(sps) == 0 {
		return nil, fmt.Errorf("worqr: dequeue %q: %w", queue, ErrNoTask)
	}
	ps := make([]*Process, len(sps))
	for i, sp := range sps {
		ps[i] = newProcess(w, queue, sp)
	}
	w.mu.Lock()
	fenced = w.id != id || w.fenced || s.fenced
	adopted := !fenced && w.serving[queue] == s
	if adopted {
		for _, p := range ps {
			s.procs[p.id] = p
		}
	}
	w.mu.Unlock()
	if !adopted {
		// The worker fenced itself while the script ran: these processes
		// are already the peers'. (Leaving the queue cannot overlap a
		// dequeue: it holds the gate.)
		for _, p := range ps {
			p.end(ErrProcessLost, true)
		}
		return nil, fmt.Errorf("worqr: dequeue %q: %w", queue, ErrWorkerFenced)
	}
	for _, p := range ps {
		c.obs.started(ctx, p)
	}
	return ps, nil
}

// forget drops a process from the worker's books and ends it.
func (w *Worker) forget(p *Process, reason error) {
	w.mu.Lock()
	if s := w.serving[p.queue]; s != nil && s.procs[p.id] == p {
		delete(s.procs, p.id)
	}
	w.mu.Unlock()
	p.end(reason, true)
}

// endAll ends every process the worker holds in a queue it no longer
// serves (the caller removed s from w.serving).
func (w *Worker) endAll(s *serving, reason error) {
	w.mu.Lock()
	procs := s.procs
	s.procs = make(map[string]*Process)
	w.mu.Unlock()
	for _, p := range procs {
		p.end(reason, true)
	}
}

// handle applies an event to the worker's own processes, then calls the
// application's callback. It runs on the queue's dispatcher goroutine.
func (w *Worker) handle(ctx context.Context, s *serving, e event) {
	if e.subscribed {
		// The subscription may come back before the command connection
		// does: keep checking until a check succeeds, or nothing missed
		// would ever be found.
		b := newBackoff(10*time.Millisecond, time.Second)
		for {
			err := w.catchUp(ctx, s)
			if err == nil || ctx.Err() != nil {
				return // stopped meanwhile
			}
			w.logger().Debug("worqr: check after subscribing failed; retrying", "queue", s.name, "err", err)
			if !b.wait(ctx) {
				return
			}
		}
	}
	switch e.Kind {
	case store.EventWork:
		if e.Count <= 0 {
			return
		}
		if s.runner != nil && (e.To == "" || strings.Contains(e.To, w.ID())) {
			if s.runner.taking() {
				s.runner.workArrived()
			} else if e.To != "" {
				// Named while stopping (Shutdown's grace period, StopWork):
				// the tasks are someone else's to take.
				w.passOn(ctx, s, e.Count)
			}
		}
		if s.events.Work != nil {
			s.call(ctx, func() { s.events.Work(s.name, e.Count) })
		}
	case store.EventCancel:
		ids := make(map[string]bool, len(e.TaskIDs))
		for _, id := range e.TaskIDs {
			ids[id] = true
		}
		w.endMatching(s, func(p *Process) bool { return ids[p.taskID] }, ErrTaskCancelled)
		if s.events.Cancel != nil {
			for _, id := range e.TaskIDs {
				s.call(ctx, func() { s.events.Cancel(s.name, id) })
			}
		}
	case store.EventDelete:
		w.endMatching(s, func(p *Process) bool { return p.seq <= e.UpTo }, ErrQueueDeleted)
		if s.events.Delete != nil {
			s.call(ctx, func() { s.events.Delete(s.name) })
		}
	}
}

// passOn wakes every runtime serving the queue, for a work event that named
// this one when it could not take work. Best effort: a failure leaves the
// tasks to the next event, a catch-up, or the wake that releasing the
// queue publishes.
func (w *Worker) passOn(ctx context.Context, s *serving, count int64) {
	if err := w.c.store.Publish(ctx, s.name, store.WorkMessage(count)); err != nil && ctx.Err() == nil {
		w.logger().Warn("worqr: could not pass a work event on", "queue", s.name, "err", err)
	}
}

// endMatching ends (without settling: Finish still works) the processes of
// a queue that match.
func (w *Worker) endMatching(s *serving, match func(*Process) bool, reason error) {
	w.mu.Lock()
	var hit []*Process
	for _, p := range s.procs {
		if match(p) {
			hit = append(hit, p)
		}
	}
	w.mu.Unlock()
	for _, p := range hit {
		p.end(reason, false)
	}
}

// catchUp runs after every (re)subscription and re-registration: it raises
// the events a missed notification would have raised. Cancel and delete
// marks on the worker's processes are found through the states script,
// and waiting tasks through the queue's length.
func (w *Worker) catchUp(ctx context.Context, s *serving) error {
	c := w.c
	w.mu.Lock()
	id := w.id
	procs := make([]*Process, 0, len(s.procs))
	for _, p := range s.procs {
		procs = append(procs, p)
	}
	w.mu.Unlock()
	if len(procs) > 0 {
		pids := make([]string, len(procs))
		for i, p := range procs {
			pids[i] = p.id
		}
		states, err := c.store.States(ctx, s.name, id, pids)
		if err != nil {
			return err
		}
		w.applyStates(ctx, s, procs, states)
	}
	n, err := c.store.QueueLen(ctx, s.name)
	if err != nil {
		return err
	}
	// A runtime looks even at an empty queue: finding it empty parks it in
	// the idle set (under the worker's current id), where enqueues find it.
	if s.runner != nil {
		s.runner.workArrived()
	}
	if n > 0 && s.events.Work != nil {
		s.call(ctx, func() { s.events.Work(s.name, n) })
	}
	return nil
}

// applyStates ends processes whose state in Redis says they should end and
// raises one Cancel event per cancelled payload and one Delete event.
func (w *Worker) applyStates(ctx context.Context, s *serving, procs []*Process, states []store.State) {
	cancelled := make(map[string]bool)
	deleted := false
	for i, p := range procs {
		switch err := stateErr(states[i]); {
		case err == nil:
		case errors.Is(err, ErrProcessLost):
			w.forget(p, ErrProcessLost)
		case errors.Is(err, ErrTaskCancelled):
			// Raise the event only if the message did not already.
			if p.end(err, false) {
				cancelled[p.taskID] = true
			}
		default:
			if p.end(err, false) {
				deleted = true
			}
		}
	}
	for task := range cancelled {
		if s.events.Cancel != nil {
			s.call(ctx, func() { s.events.Cancel(s.name, task) })
		}
	}
	if deleted && s.events.Delete != nil {
		s.call(ctx, func() { s.events.Delete(s.name) })
	}
}

// Fail returns every task the worker holds to the front of its queue and
// deregisters the worker at once; the worker is closed afterwards. Running
// handlers have their contexts cancelled (cause ErrShutdown) and are given
// ShutdownCancelWait to return. Use it
// when the process is going away and should not leave its work waiting a
// TTL for its peers. If Redis cannot be reached the peers still reclaim
// the work once the lease expires.
func (w *Worker) Fail(ctx context.Context) error {
	w.drainNow()
	return w.shutdown(ctx, "fail")
}

// Close stops the worker like Fail does, except that a second call
// returns nil. Use Shutdown to let running handlers finish first. Processes still held end with ErrProcessLost and their
// tasks go back to the front of their queues.
func (w *Worker) Close(ctx context.Context) error {
	w.drainNow()
	err := w.shutdown(ctx, "close")
	if errors.Is(err, ErrWorkerClosed) {
		return nil
	}
	return err
}

// drainNow stops taking tasks and cancels running handlers at once.
func (w *Worker) drainNow() { _ = w.drain(expired()) }

// expired is a context that has already ended: no grace period.
func expired() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}

func (w *Worker) shutdown(ctx context.Context, op string) error {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return fmt.Errorf("worqr: %s: %w", op, ErrWorkerClosed)
	}
	w.closed = true
	w.deadline.Stop()
	w.mu.Unlock()
	// Stop keepalive and reclaim before taking membership: a
	// re-registration in progress holds it and ends when its context does.
	w.stop()
	w.wg.Wait()

	w.membership.Lock()
	defer w.membership.Unlock()
	w.mu.Lock()
	id, ss := w.id, w.served()
	w.serving = make(map[string]*serving)
	w.mu.Unlock()
	for _, s := range ss {
		s.sub.stop(ctx)
		w.endAll(s, ErrProcessLost)
	}
	w.c.mu.Lock()
	delete(w.c.workers, w)
	w.c.mu.Unlock()

	if err := ctx.Err(); err != nil {
		return fmt.Errorf("worqr: %s: %w", op, err)
	}
	if err := w.releaseOwn(ctx, id, ss); err != nil {
		return err
	}
	return w.deregister(ctx, id)
}

// deregister removes a worker id from the registry at once.
func (w *Worker) deregister(ctx context.Context, id string) error {
	if _, err := w.c.store.Deregister(ctx, id, false); err != nil {
		return w.c.fail("deregister", "", err)
	}
	return nil
}

// current returns the worker's id if it may act: not closed, not fenced.
func (w *Worker) current(op string) (string, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case w.closed:
		return "", fmt.Errorf("worqr: %s: %w", op, ErrWorkerClosed)
	case w.fenced:
		return "", fmt.Errorf("worqr: %s: %w", op, ErrWorkerFenced)
	}
	return w.id, nil
}
