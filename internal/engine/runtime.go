package engine

import (
	"context"
	"log/slog"
	"time"

	"github.com/worqr/worqr/internal/clock"
	"github.com/worqr/worqr/internal/delayed"
	"github.com/worqr/worqr/internal/lifecycle"
	"github.com/worqr/worqr/internal/pacer"
	"github.com/worqr/worqr/internal/proc"
	"github.com/worqr/worqr/internal/store"
)

// RuntimeHost is the worker as its runtimes and dequeues take it (the
// core's coreHost). Its lock is the worker's mu (Core.mu; see the lock
// order on Core).
type RuntimeHost interface {
	// Locked: a dequeue's or a hand-off's adoption is atomic with the
	// worker's identity and the session serving the queue.
	Locked
	// Env is the worker's environment, shared by its processes.
	Env() *Env
	// NewProc makes the record of the process Redis made for sp in
	// queue, started at started: the record held by the root's process,
	// one allocation.
	NewProc(queue string, sp store.Proc, started time.Time) *Proc
	// Started tells the observer of a process that started, before
	// anything can end it.
	Started(ctx context.Context, p *Proc)
	// Validate tells why the call op on queue cannot be made (a closed
	// client, a done ctx, a bad queue name), if it cannot.
	Validate(ctx context.Context, op, queue string) error
	// LeaseLost is told that a dequeue of s, under worker id, found the
	// lease on s's queue gone (cause says which).
	LeaseLost(id string, s *Session, cause error)
}

// clocks is a worker's environment as its members' timers take it
// (pacer.Clocks; pointer-shaped, so no allocation as an interface).
type clocks struct{ env *Env }

func (c clocks) Clock() clock.Clock              { return c.env.Clock }
func (c clocks) RedisClock() *delayed.RedisClock { return c.env.Redis }

// Call runs the application's handler (the root's, its middleware
// around it) for the process whose record p is.
type Call func(ctx context.Context, p *Proc) error

// MemberOptions are what a runtime takes of the application's options
// for its queue.
type MemberOptions struct {
	// Timeout bounds a handler's run when the task has no timeout of its
	// own; 0 for no limit.
	Timeout time.Duration
	// PanicIsPermanent dead-letters a task whose handler panicked at once.
	PanicIsPermanent bool
	// Policy is the retry policy's attempt budget; Delay its delay before
	// the attempt after attempt, which failed with err.
	Policy proc.Policy
	Delay  func(attempt int, err error) time.Duration
}

// Runtime is a queue served by a slot scheduler (Handle's, of one queue,
// or HandleQueues'): a member, which holds what is per queue (its handler,
// options, work flag, timers). The scheduler dequeues for it into its
// slots; the member's share of them is its memberSlots (slots.go), and
// its starter runs the processes that come to it (Starter, start.go).
type Runtime struct {
	host  RuntimeHost // set when made, as are the next four
	queue string
	call  Call // the application's handler
	opts  MemberOptions
	sched *Scheduler
	// pace holds its timers, which a dequeue's reply sets (dequeue.go).
	pace pacer.Pacer
	// starter starts its processes, whether a dequeue's reply or an
	// enqueue's hand-off brought their tasks, and runs their handlers
	// (start.go).
	starter Starter

	// memberSlots is its share of the scheduler's slots, its cap and its
	// drain; its counts are guarded by sched.mu, as the fields below are.
	memberSlots

	// Guarded by sched.mu.
	// takes is set while the member takes work (between StartLoop and
	// StopTaking).
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
	// stops is closed when the member stops taking work (StopTaking:
	// Shutdown, Close, StopWork), once no handler starts for it any more,
	// for any number of observers (Stopping); StartLoop makes a new one
	// each time the member starts taking work again.
	stops chan struct{}
}

// Queue is the queue the member serves.
func (r *Runtime) Queue() string { return r.queue }

// Sched is the member's scheduler.
func (r *Runtime) Sched() *Scheduler { return r.sched }

// Starter is the member's start of its processes (start.go).
func (r *Runtime) Starter() *Starter { return &r.starter }

// logger is the worker's logger with its current id. Never call it while
// holding the worker's lock.
func (e *Env) logger() *slog.Logger { return e.Log.With("worker", e.WorkerID()) }

// StartLoop makes the member take work (again, after a StopWork that
// failed and left the queue served), marked as maybe having work so that
// the scheduler looks; it starts the scheduler's loop if it is ready and
// not running.
func (r *Runtime) StartLoop() {
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
	_ = s.Start(s.env.Writer.Life())
	s.poke()
}

// WorkArrived records that the queue may hold tasks and wakes the
// scheduler: a work event named this worker, or named nobody, or the
// worker has (re)subscribed, or a handed process started (runJob).
func (r *Runtime) WorkArrived() {
	s := r.sched
	s.mu.Lock()
	r.more = true
	r.blocked = false
	r.gen++
	s.mu.Unlock()
	s.poke()
}

// wakeIfTaking is WorkArrived for a member that takes work.
func (r *Runtime) wakeIfTaking() {
	if r.Taking() {
		r.WorkArrived()
	}
}

// Taking reports whether the member takes work.
func (r *Runtime) Taking() bool {
	r.sched.mu.Lock()
	defer r.sched.mu.Unlock()
	return r.takes
}

// Stopping returns a channel closed once the member has stopped taking
// work, and no handler starts for it any more: the current period's if it
// takes work, else one closed already. Any number may wait on it; a
// member started again has a new one.
func (r *Runtime) Stopping() <-chan struct{} {
	r.sched.mu.Lock()
	defer r.sched.mu.Unlock()
	if !r.takes || r.stops == nil {
		return closedChan
	}
	return r.stops
}

// StopTaking makes the member stop taking work: its dequeue in flight
// ends, and once it returns no handler starts for it, which it then tells
// Stopping's observers. The last member to stop stops the scheduler's
// loop. Its running handlers are Drained's.
func (r *Runtime) StopTaking() {
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

// CancelAll ends every running handler's context with cause. A handler
// runs for a process the worker holds in the queue, or for one that has
// ended already, whose context ended with it.
func (r *Runtime) CancelAll(cause error) {
	h := r.host
	h.Lock()
	defer h.Unlock()
	// A closing worker gives its tasks back, so an outcome write being
	// tried again is given up; a StopWork's give-back may fail, and then
	// the queue stays served and the write must go on (proc.Persist).
	closing := h.Worker().Phase() != lifecycle.Serving
	if s := h.Session(r.queue); s != nil {
		s.Books.InterruptAll(cause, closing)
	}
}

// Limited reports whether the member waits for the queue's rate limit
// to allow its next start.
func (r *Runtime) Limited() bool { return r.pace.Limited() }
