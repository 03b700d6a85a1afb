package engine

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/redis/rueidis"

	"github.com/worqr/worqr/internal/errs"
	"github.com/worqr/worqr/internal/slotpolicy"
	"github.com/worqr/worqr/internal/store"
)

// A process's start: how a task that came to a runtime becomes a running
// handler, whichever way it came. A dequeue's reply brings tasks the
// runtime asked for (Scheduler.take); an enqueue hands a task straight
// to an idle runtime in an event (HandedOff). Both end in one step, start,
// which chooses the tasks that have slots, takes handed ones into the
// session's books and tells the observer of them (a dequeue does both for
// the tasks it took), runs each on a handler goroutine (launch, runJob),
// and gives the others back to the front of the queue. A handler's slot
// is counted from its claim until its outcome is written (count, in
// slots.go): a task's way from its arrival to its outcome is this file's
// and settle.go's.
//
// A hand-off is an enqueue that put its task straight into a process of
// an idle runtime (enqueue.lua and, for a plain task, enqueue_one.lua say
// when it may: a single task, due now, on a queue where nothing waits and
// no control holds back): the event
// carries the process, so the runtime starts it without a dequeue, a
// round trip saved on the path from enqueue to handler. In Redis the
// process is the worker's from the enqueue on, as if its runtime had
// dequeued it: if the worker dies before it hears of it, its lease covers
// the process as it covers every other.
//
// The worker hears of it on the queue's dispatcher (HandedOff). The task
// takes a free slot that no dequeue in flight asked for (claim); when the
// member's own dequeue is in flight and asked for the last slots, the
// task waits for that dequeue's reply (claimOrHold), which is one round
// trip away, and the reply's start chooses; otherwise (the member stops
// taking work, or other queues of its pool took the slots) it goes back
// to the front of the queue (store.GiveBack).
//
// Order: process ids count up in the order Redis starts them, and an
// enqueue hands a task over only when none waits, so the tasks a dequeue
// takes after a hand-off entered the queue after the handed one. When a
// start has more tasks than slots, those Redis started first run and the
// later ones go back to the front: a task handed over while the member's
// dequeue was on its way runs before the task enqueued after it that the
// dequeue took, and neither waits for a slot on a busy member.
//
// Three things keep a handed process from being lost or run twice:
//   - a runtime parks only once its queue's channel is subscribed (see
//     Dequeue), and a subscription that comes back may have missed events:
//     the queue is then reconciled (Session.Dispatch, dispatch.go), which
//     gives back what Redis says the worker holds that it does not know of;
//   - a reconciliation, or a rejoin, gives back every such process up to
//     the queue's last process id (the books' releasedUpTo): an event for one
//     of them that arrives later is ignored, never started;
//   - events naming another worker, or an id the worker no longer has
//     (fenced, registered again), are ignored: that id's lease covers them.

// Starter is a member's start of its processes, as above: it claims the
// slot of each process an enqueue hands the member, or holds the process
// for the member's dequeue in flight; it chooses which of the tasks that
// came have slots, adopts the handed ones and gives back the rest; and it
// runs each on a handler goroutine up to its outcome, which its settler
// writes. Its member owns it (Runtime.Starter) and makes it with itself
// (Scheduler.Add).
type Starter struct {
	r *Runtime // its member; set when made, as is settler
	// settler writes its handlers' outcomes (settle.go).
	settler Settler[job]

	// Guarded by sched.mu, as the member's slot counts are.
	// held are processes enqueues handed over while the member's dequeue
	// was in flight and had asked for the last free slots: that dequeue's
	// reply starts them or gives them back (see claimOrHold).
	held []store.Event
}

// HandedOff takes a process an enqueue handed to this worker's runtime
// for the queue s serves. It runs on the queue's dispatcher.
func (st *Starter) HandedOff(ctx context.Context, s *Session, e store.Event) {
	quit, room := st.claimOrHold(e)
	if room < 0 {
		return // held: the reply of the member's dequeue starts it (take)
	}
	st.start(ctx, quit, s, nil, []store.Event{e}, room)
}

// start makes running processes of the tasks that came to the member, in
// the room slots taken for them: dequeued (the dequeue adopted them) and
// handed over (adopted here). Past room, the tasks Redis started last go
// back to the front of the queue (see Order above). s is the member's
// session, nil when it is not served any more (handed tasks are then
// left to the release that leaving made).
func (st *Starter) start(ctx context.Context, quit <-chan struct{}, s *Session, dequeued []*Proc, handed []store.Event, room int) {
	r := st.r
	if len(handed) == 0 { // a dequeue's reply alone: every task has its slot
		for _, p := range dequeued {
			st.launch(quit, p, false)
		}
		return
	}
	all := make([]arrival, 0, len(dequeued)+len(handed))
	for _, p := range dequeued {
		all = append(all, arrival{seq: p.Seq, p: p})
	}
	for _, e := range handed {
		all = append(all, arrival{seq: store.PIDSeq(e.PID), e: e})
	}
	if len(all) > room {
		slices.SortStableFunc(all, func(a, b arrival) int { return cmp.Compare(a.seq, b.seq) })
	}
	for _, a := range all[:min(room, len(all))] {
		p := a.p
		if p == nil {
			if p = st.adoptHanded(s, a.e); p == nil {
				r.count(-1, 0)  // the slot claimed for it
				r.WorkArrived() // look again (see runJob)
				continue
			}
			r.sched.env.Store.Started(r.queue, a.e.HandedProc()) // the stats' started and wait, as a dequeue's
			r.host.Started(ctx, p)                               // as the dequeue told of its own: before anything can end it
		}
		st.launch(quit, p, a.p == nil)
	}
	if len(all) <= room {
		return
	}
	// Latest first, so that each goes in front of the later ones.
	for i := len(all) - 1; i >= room; i-- {
		a := all[i]
		ref := store.ProcRef{Worker: a.e.To, PID: a.e.PID}
		if a.p != nil {
			// Started by no handler: out of the books (the observer,
			// told of its start by the dequeue, hears it was lost, as of
			// a task given back by StopWork), and given back unstarted,
			// as a handed task is.
			a.p.Forget(errs.ErrProcessLost)
			ref = store.ProcRef{Worker: a.p.Owner, PID: a.p.ID}
		}
		st.giveBack(ctx, s, ref)
	}
	// The tasks wait now: the scheduler plans for them when a slot frees,
	// as after a work event, rather than when the give-back's own event
	// comes.
	r.WorkArrived()
}

// arrival is a task come to a member to start: a dequeued process (p), or
// one handed over in an event (e), not adopted yet; seq is its process id
// as a number.
type arrival struct {
	seq uint64
	p   *Proc
	e   store.Event
}

// adoptHanded puts a handed process in the session's books, as dequeue
// does with those it took, unless the event came too late for it (see
// above): the worker is fenced, closed, or left the queue, the queue is
// fenced, or the process went back with others it did not know of. It
// holds the queue's gate, so no reconciliation, rejoin or leaving overlaps
// it, and the worker's mu, so no fence of the worker does.
func (st *Starter) adoptHanded(s *Session, e store.Event) *Proc {
	r := st.r
	if s == nil {
		return nil
	}
	h := r.host
	s.Gate.RLock()
	defer s.Gate.RUnlock()
	h.Lock()
	defer h.Unlock()
	if !h.Worker().IsCurrent(e.To) || h.Session(s.Name) != s {
		return nil
	}
	if p := h.NewProc(s.Name, e.HandedProc(), r.sched.env.Clock.Now()); s.Adopt(p) {
		return p
	}
	return nil
}

// giveBack returns a process the runtime cannot start to the front of the
// queue, where the next dequeue takes it: not behind tasks enqueued after
// it. A fenced, closed or departed worker leaves it to its lease, its
// rejoin or the release that leaving made, which cover it; so does a
// runtime whose loop has ended (ctx done: it stops because its worker
// leaves the queue, closes or is fenced), whose call could only fail and
// warn. If Redis may not have had the give-back, the queue is reconciled.
func (st *Starter) giveBack(ctx context.Context, s *Session, ref store.ProcRef) {
	r := st.r
	if s == nil || ctx.Err() != nil {
		return
	}
	h, env := r.host, r.sched.env
	h.Lock()
	mine := h.Worker().IsCurrent(ref.Worker) && h.Session(s.Name) == s && !s.Lease.IsFenced()
	h.Unlock()
	if !mine {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, env.TTL)
	defer cancel()
	out := env.Writer.Outage()
	sent := out.Begin()
	_, err := env.Store.GiveBack(ctx, s.Name, ref)
	if err == nil {
		// Any outcome will do: given back; or no longer the worker's
		// (reconciled, or its lease gone: the peers reclaim it).
		out.OK(sent)
		return
	}
	if _, isReply := rueidis.IsRedisErr(err); !isReply {
		s.Books.MarkUnsure(env.UnsurePasses, false)
	}
	if err = env.Fail("give back", s.Name, err); !out.Failed(sent, "give back", err) {
		env.logger().Warn("worqr: could not give back a task its runtime could not start; reconciling", "queue", s.Name, "process", ref.PID, "err", err)
	}
}

// claim takes a slot for a process an enqueue handed the member, if it
// takes work and one is free that no dequeue in flight asked for (and the
// member is under its maxSlots): a hand-off never runs more handlers than
// the slots allow. It returns what the handler goroutine leaves on
// (launch).
func (st *Starter) claim() (quit <-chan struct{}, ok bool) {
	s := st.r.sched
	s.mu.Lock()
	defer s.mu.Unlock()
	if !st.claimLocked() {
		return nil, false
	}
	return s.quit, true
}

// claimOrHold is claim for the process of event e, with a slot (room 1)
// or none (room 0: it goes back); or, when no slot is free but the
// member's own dequeue is in flight, held for that dequeue's reply
// (room -1), whose start chooses between them (see Order above).
func (st *Starter) claimOrHold(e store.Event) (quit <-chan struct{}, room int) {
	r, s := st.r, st.r.sched
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case st.claimLocked():
		return s.quit, 1
	case r.takes && r.asking > 0:
		st.held = append(st.held, e)
		return nil, -1
	}
	return nil, 0
}

// claimLocked is claim's rule, counting the slot it takes. Callers hold
// sched.mu.
func (st *Starter) claimLocked() bool {
	r, s := st.r, st.r.sched
	ok := r.takes && slotpolicy.Free(s.size, s.busy+s.asking, s.settling) > 0 &&
		(r.maxSlots == 0 || r.busy+r.asking < r.maxSlots)
	if ok {
		// Under mu: stopTaking clears taking under mu, so a handler counted
		// here is waited for, and none starts after.
		r.busy++
		s.busy++
	}
	return ok
}

// takeHeldLocked returns the handed processes held for the member's
// dequeue, whose reply has come, and how many of them claimed a slot
// that is free now. Callers hold sched.mu, with the dequeue's slots
// counted as busy (those it filled) or free (the rest).
func (st *Starter) takeHeldLocked() (held []store.Event, room int) {
	held, st.held = st.held, nil
	for room < len(held) && st.claimLocked() {
		room++
	}
	return held, room
}

// launch runs the handler for p, whose slot is taken (take, claim), on a
// handler goroutine: one that finished its last task and waits for
// another if there is one, else a new one. On a busy queue goroutines (and
// the stacks they have grown) are reused rather than started for every
// task. The handler's context ends when the process ends for a reason the
// worker learns of (cancel, delete, fencing), with that reason as its
// cause. A new goroutine waits for its next job until quit is closed (the
// run of the loop it was started in ends).
func (st *Starter) launch(quit <-chan struct{}, p *Proc, handed bool) {
	r, s := st.r, st.r.sched
	ctx, cancel := context.WithCancelCause(context.Background())
	p.St.OnEnd(cancel)
	j := job{st: st, p: p, ctx: ctx, cancel: cancel, handed: handed}
	select {
	case s.idle <- j:
	default:
		if !s.jobs.Go(func() { serve(s.idle, quit, j) }) {
			// The worker is closed: the process is left held, to be given
			// back with the others.
			cancel(errs.ErrShutdown)
			r.count(-1, 0) // its slot
		}
	}
}

// job is a process to run, with its member's starter and its handler's
// context.
type job struct {
	st     *Starter
	p      *Proc
	ctx    context.Context
	cancel context.CancelCauseFunc
	// handed marks a process an enqueue handed over.
	handed bool
}

// serve runs j, then the jobs the loop hands it until quit is closed.
func serve(idle chan job, quit <-chan struct{}, j job) {
	for {
		j.st.runJob(j)
		select {
		case j = <-idle:
		case <-quit:
			return
		}
	}
}

// runJob runs the handler for one process and settles its outcome. A
// handler that succeeded has its Finish written asynchronously (see
// Settler.FinishLater): its goroutine is free for the next job at
// once, and the rest of the settling, up to settled, runs when the write
// returns.
func (st *Starter) runJob(j job) {
	r := st.r
	if j.handed {
		// Dequeue for the free slots after a process handed over started:
		// that parks the runtime again if the queue is empty, for the
		// enqueue took it out of the idle set. It marks that the queue may
		// hold tasks, as a work event does, so the loop looks again when a
		// slot frees if it has none now: a hand-off that took the last
		// free slot would otherwise leave the runtime unparked, out of
		// every later hand-off, until some other enqueue's work event (and
		// the scheduler plans no dequeue for a member not so marked). From
		// here: the handler's goroutine runs first.
		r.WorkArrived()
	}
	ctx := j.ctx
	if d := handlerTimeout(j.p, r.opts.Timeout); d > 0 {
		var stop context.CancelFunc
		ctx, stop = context.WithTimeoutCause(ctx, d, errs.ErrTaskTimeout)
		defer stop()
	}
	err := st.run(ctx, j.p)
	if err != nil && errors.Is(context.Cause(ctx), errs.ErrTaskTimeout) {
		// The handler gave up because its time ran out: a retry, under
		// the policy, with reason timeout (unless it gave one itself), whose
		// error says so once (a handler may return the cause itself).
		if !errors.Is(err, errs.ErrTaskTimeout) {
			err = fmt.Errorf("%w: %w", errs.ErrTaskTimeout, err)
		}
		err = WithReason(Reason(err, ReasonTimeout), err)
	}
	// The slot is handed on now: the next task's dequeue goes out while
	// this outcome is written (both ride the same pipeline).
	r.count(-1, +1) // busy to settling
	if err == nil && j.p.St.Err() == nil {
		st.settler.FinishLater(j, j.p) // what settle would do: Finish
		return
	}
	st.settler.Settle(ctx, j, j.p, err)
}

// settled ends a job whose outcome was written (or given up): its
// context ends, it stops counting against the writes in flight, and the
// handler is done (StopTaking and shutdown wait for that).
func (st *Starter) settled(j job) {
	j.cancel(nil)
	st.r.count(0, -1) // a slot frees if the writes were at their bound
}

// handlerTimeout is how long p's handler may run: the task's own timeout,
// else the queue's (queue); 0 for no limit.
func handlerTimeout(p *Proc, queue time.Duration) time.Duration {
	if p.Timeout > 0 {
		return p.Timeout
	}
	return queue
}

// run calls the handler for p, recovering a panic: the process fails
// with ErrHandlerPanicked then.
func (st *Starter) run(ctx context.Context, p *Proc) (err error) {
	r := st.r
	defer func() {
		if v := recover(); v != nil {
			// The stack once a task, not on every retry of a task that
			// panics each time: not when its previous attempt panicked too,
			// as the error recorded with its retry says.
			stack := "as at the previous attempt"
			if !strings.HasPrefix(p.LastError, errs.ErrHandlerPanicked.Error()) {
				stack = string(debug.Stack())
			}
			r.sched.env.logger().Error("worqr: handler panicked", "queue", r.queue, "process", p.ID, "task", p.TaskID,
				"attempt", p.Attempt, "panic", v, "stack", stack)
			err = fmt.Errorf("%w: %v", errs.ErrHandlerPanicked, v)
			if r.opts.PanicIsPermanent {
				err = Permanent(err)
			}
		}
	}()
	return r.call(ctx, p)
}
