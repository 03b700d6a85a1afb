package worqr

import (
	"context"
	"fmt"

	"github.com/worqr/worqr/internal/engine"
	"github.com/worqr/worqr/internal/lifecycle"
	"github.com/worqr/worqr/internal/pacer"
)

// runner is a queue served by a slot scheduler (Handle's, of one queue,
// or HandleQueues'): a member, which holds what is per queue (its handler,
// options, work flag, timers). The scheduler dequeues for it into its
// slots and keeps its counts.
type runner struct {
	w       *Worker // set when made, as are the next five
	queue   string
	handler Handler // with the middleware around it
	opts    HandleOptions
	// maxSlots caps how many of the scheduler's slots the member holds at
	// once (QueueSpec.MaxSlots); 0: as many as there are.
	maxSlots int
	sched    *slotScheduler
	// pace holds its timers, which a dequeue's reply sets (dequeue.go).
	pace pacer.Pacer
	// settler writes its handlers' outcomes (internal/engine).
	settler engine.Settler[job]

	// Guarded by sched.mu.
	slots // its share of the scheduler's
	// hand claims slots for handed processes and holds those that race
	// the member's dequeue (start.go).
	hand handoffs
	// takes is set while the member takes work (between startLoop and
	// stopTaking).
	takes bool
	// more is true while the queue may still hold tasks: set by work
	// events, cleared when a dequeue comes back short.
	more bool
	gen  uint64 // counts work events
	// blocked is set when the member could not take work (fenced, not
	// serving, or Redis failed) until the next work event; the scheduler
	// passes it over.
	blocked bool
	// abort ends the dequeue in flight for the member, if any.
	abort context.CancelFunc
	// stops is closed when the member stops taking work (stopTaking:
	// Shutdown, Close, StopWork), once no handler starts for it any more,
	// for any number of observers (stopping); startLoop makes a new one
	// each time the member starts taking work again.
	stops chan struct{}
	// drain is closed when no handler runs and no outcome is being
	// written (busy and settling both zero), for those waiting for that
	// (drained): a Finish is written after the handler's goroutine went
	// back for work (see engine.Settler.FinishLater), and stopTaking's
	// callers wait for it too. Made when one asks while handlers run,
	// dropped once closed.
	// Not a sync.WaitGroup: a StopWork whose handlers outlived their
	// cancel, and whose release failed, starts the member again while its
	// waiting goroutine still waits, and a WaitGroup's Add then races that
	// Wait (and may panic, "reused before previous Wait has returned").
	drain chan struct{}
}

// Handle serves a queue with a handler: the worker starts work on it and,
// woken by work events, dequeues while fewer than Concurrency handlers run
// and tasks wait, several at a time when several slots are free. It never
// polls: after a missed notification the check on resubscribing wakes it.
// It is HandleQueues with one queue.
func (w *Worker) Handle(ctx context.Context, queue string, h Handler, opts HandleOptions) error {
	return w.handle(ctx, queue, h, opts, nil)
}

// handle is Handle; attach, if set, is given the runtime before it takes
// work (HandleBatch's batcher watches it from its handler calls).
func (w *Worker) handle(ctx context.Context, queue string, h Handler, opts HandleOptions, attach func(*runner)) error {
	if h == nil {
		return fmt.Errorf("worqr: handle %q: nil handler: %w", queue, ErrInvalidOptions)
	}
	size, err := slotsOf(opts.Concurrency)
	if err != nil {
		return fmt.Errorf("worqr: handle %q: %w", queue, err)
	}
	s := newSlotScheduler(w, size, OrderStrict)
	r := s.add(queue, chain(h, w.opts.Middleware, opts.Middleware), opts, 0, 1)
	s.ready = true // one member: ready once it is served
	if attach != nil {
		attach(r)
	}
	// The worker tells the member of work events itself (workArrived),
	// before it calls these.
	if err := w.startWork(ctx, queue, opts.Events, r); err != nil {
		w.mu.Lock()
		sv := w.sessions[queue]
		w.mu.Unlock()
		if sv == nil || sv.runner != r {
			r.stopTaking()
		}
		return err
	}
	return nil
}

// slotsOf is the slots for a Concurrency option: DefaultConcurrency for
// zero.
func slotsOf(concurrency int) (int, error) {
	switch {
	case concurrency == 0:
		return DefaultConcurrency, nil
	case concurrency < 0:
		return 0, fmt.Errorf("negative concurrency: %w", ErrInvalidOptions)
	}
	return concurrency, nil
}

// startLoop makes the member take work (again, after a StopWork that
// failed and left the queue served), marked as maybe having work so that
// the scheduler looks; it starts the scheduler's loop if it is ready and
// not running.
func (r *runner) startLoop() {
	s := r.sched
	s.mu.Lock()
	if !r.takes {
		r.stops = make(chan struct{})
	}
	r.takes = true
	// The first dequeue parks the member (or takes what waits).
	r.more, r.blocked = true, false
	r.gen++
	s.mu.Unlock()
	_ = s.Start(r.w.life)
	s.poke()
}

// workArrived records that the queue may hold tasks and wakes the
// scheduler: a work event named this worker, or named nobody, or the
// worker has (re)subscribed.
func (r *runner) workArrived() {
	s := r.sched
	s.mu.Lock()
	r.more = true
	r.blocked = false
	r.gen++
	s.mu.Unlock()
	s.poke()
}

// roomLocked is how many slots the member may take now: none unless it
// takes work, may have tasks and is not blocked; else up to its maxSlots,
// or the scheduler's size. Callers hold sched.mu.
func (r *runner) roomLocked() int {
	if !r.takes || !r.more || r.blocked {
		return 0
	}
	if r.maxSlots > 0 {
		return r.maxSlots - r.busy - r.asking
	}
	return r.sched.size
}

// wakeIfTaking is workArrived for a member that takes work.
func (r *runner) wakeIfTaking() {
	if r.taking() {
		r.workArrived()
	}
}

// taking reports whether the member takes work.
func (r *runner) taking() bool {
	r.sched.mu.Lock()
	defer r.sched.mu.Unlock()
	return r.takes
}

// stopping returns a channel closed once the member has stopped taking
// work, and no handler starts for it any more: the current period's if it
// takes work, else one closed already. Any number may wait on it; a
// member started again has a new one.
func (r *runner) stopping() <-chan struct{} {
	r.sched.mu.Lock()
	defer r.sched.mu.Unlock()
	if !r.takes || r.stops == nil {
		return closedChan
	}
	return r.stops
}

// drained returns a channel closed once no handler runs and no outcome
// is being written: at once if none is. A waiter waits for that once,
// whatever handlers start after it.
func (r *runner) drained() <-chan struct{} {
	r.sched.mu.Lock()
	defer r.sched.mu.Unlock()
	if r.busy+r.settling == 0 {
		return closedChan
	}
	if r.drain == nil {
		r.drain = make(chan struct{})
	}
	return r.drain
}

// takeDrainLocked returns the drain channel to close, if handlers have
// just all ended and someone waits, and forgets it. Callers hold
// sched.mu.
func (r *runner) takeDrainLocked() chan struct{} {
	d := r.drain
	if d == nil || r.busy+r.settling > 0 {
		return nil
	}
	r.drain = nil
	return d
}

// idle reports whether none of the member's handlers runs or has its
// outcome being written.
func (r *runner) idle() bool {
	r.sched.mu.Lock()
	defer r.sched.mu.Unlock()
	return r.busy+r.settling == 0
}

// stopTaking makes the member stop taking work: its dequeue in flight
// ends, and once it returns no handler starts for it, which it then tells
// stopping's observers. The last member to stop stops the scheduler's
// loop. Its running handlers are drained's.
func (r *runner) stopTaking() {
	s := r.sched
	s.mu.Lock()
	var stops chan struct{} // closed below, if this call ends a period of taking work
	if r.takes {
		stops = r.stops
	}
	r.takes = false
	abort := r.abort
	last := true
	for _, m := range s.members {
		if m.takes {
			last = false
		}
	}
	s.mu.Unlock()
	if abort != nil {
		abort()
	}
	if last {
		s.Stop()
	}
	// Wait out a dequeue of the scheduler's that may be starting handlers
	// for this member; any later one sees it stopped.
	s.turn.Lock()
	//lint:ignore SA2001 an empty critical section is the barrier
	s.turn.Unlock()
	r.pace.Stop()
	if stops != nil {
		close(stops)
	}
}

// cancelAll ends every running handler's context with cause. A handler
// runs for a process the worker holds in the queue, or for one that has
// ended already, whose context ended with it.
func (r *runner) cancelAll(cause error) {
	w := r.w
	w.mu.Lock()
	defer w.mu.Unlock()
	// A closing worker gives its tasks back, so an outcome write being
	// tried again is given up; a StopWork's give-back may fail, and then
	// the queue stays served and the write must go on (proc.Persist).
	closing := w.state.Phase() != lifecycle.Serving
	if s := w.sessions[r.queue]; s != nil {
		s.InterruptAll(cause, closing)
	}
}
