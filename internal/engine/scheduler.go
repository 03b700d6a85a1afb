package engine

import (
	"context"
	"sync"

	"github.com/worqr/worqr/internal/pacer"
	"github.com/worqr/worqr/internal/slotpolicy"
	"github.com/worqr/worqr/internal/startstop"
)

// Scheduler owns the handler slots of one Handle or HandleQueues call
// and the loop that fills them: woken by a member's work event or a slot
// freeing, it plans which members the free slots go to (by its order) and
// dequeues for each, several tasks at a time. Handle is a scheduler with
// one member. A member (Runtime) holds what is per queue: its handler,
// options, work flag, timers. The counts of slots (busy, settling, asking)
// are the scheduler's and each member's share of them (memberSlots,
// slots.go), under one lock, the scheduler's mu.
//
// A slot is taken from a dequeue's request (asking) or a hand-off's claim
// until the handler returns; the outcomes still being written (settling)
// hold new starts back when they lag (see slotpolicy.Free).
type Scheduler struct {
	startstop.Base // the loop's run

	host    RuntimeHost // set when made, as are the next five
	env     *Env
	size    int        // the slots
	strict  bool       // the order: strict, else shared
	members []*Runtime // in the order given
	parts   []int      // members' shares (QueueSpec.Share)

	wake chan struct{} // a member may have work, or a slot freed

	// idle hands a job to a handler goroutine that finished its last one
	// and waits for more, of any member; they leave when the run they were
	// started in ends (quit).
	idle chan job
	// jobs tracks the goroutines the scheduler starts: handler goroutines
	// and outcome writes that are tried again (see Settler.FinishLater).
	jobs startstop.Group

	// turn is held by the loop while it dequeues for a member and starts
	// its handlers. A member that stops taking waits for it, so no handler
	// starts for the member once it has stopped.
	turn sync.Mutex

	// current is the smooth weighted round robin's state, per member. The
	// loop's own, as are room and shares, which fill reuses.
	current []int
	room    []int
	shares  []slotpolicy.Share

	mu sync.Mutex // guards the fields below and every member's slots and work flags
	slots
	// ready is set once every member is served: the loop runs only then,
	// so that the first slots already follow the order.
	ready bool
	// quit is closed when the running loop ends (closed while none runs):
	// handler goroutines leave on it.
	quit <-chan struct{}
}

var closedChan = func() chan struct{} { ch := make(chan struct{}); close(ch); return ch }()

// NewScheduler is the scheduler of size slots of the worker h, its
// members ordered strictly (strict) or shared. A scheduler made ready
// runs its loop once a member takes work; else once SetReady says its
// members are all served.
func NewScheduler(h RuntimeHost, size int, strict, ready bool) *Scheduler {
	return &Scheduler{
		host: h, env: h.Env(), size: size, strict: strict, ready: ready,
		wake: make(chan struct{}, 1), idle: make(chan job), quit: closedChan,
	}
}

// Add makes a member serving queue with call, at most maxSlots of the
// slots at once (0: as many as there are), with share of them under the
// shared order.
func (s *Scheduler) Add(queue string, call Call, opts MemberOptions, maxSlots, share int) *Runtime {
	r := &Runtime{
		host: s.host, queue: queue, call: call, opts: opts, sched: s,
		memberSlots: memberSlots{sched: s, maxSlots: maxSlots},
	}
	r.pace = pacer.New(clocks{s.env}, r.wakeIfTaking)
	st := &r.starter
	st.r = r
	st.settler = Settler[job]{Policy: opts.Policy, Delay: opts.Delay, Jobs: &s.jobs, Settled: st.settled}
	s.members = append(s.members, r)
	s.parts = append(s.parts, share)
	s.current = append(s.current, 0)
	s.room = append(s.room, 0)
	return r
}

// Members are the scheduler's members, in the order given. Callers must
// not modify it.
func (s *Scheduler) Members() []*Runtime { return s.members }

// Size is the scheduler's slots.
func (s *Scheduler) Size() int { return s.size }

// Jobs are the goroutines the scheduler started (handler goroutines,
// outcome writes tried again).
func (s *Scheduler) Jobs() *startstop.Group { return &s.jobs }

// Start runs the loop on ctx (the worker's life): it ends with ctx or
// Stop. It does nothing before the scheduler is ready (SetReady), or
// while the loop runs.
func (s *Scheduler) Start(ctx context.Context) error {
	s.mu.Lock()
	ready := s.ready
	s.mu.Unlock()
	if !ready {
		return nil
	}
	ctx, ok, started, stopped := s.Begin(ctx)
	if !ok {
		return nil
	}
	s.mu.Lock()
	s.quit = ctx.Done()
	s.mu.Unlock()
	go func() {
		defer stopped()
		started()
		s.run(ctx)
	}()
	s.poke()
	return nil
}

// SetReady marks every member served and starts the loop.
func (s *Scheduler) SetReady() {
	s.mu.Lock()
	s.ready = true
	s.mu.Unlock()
	_ = s.Start(s.env.Writer.Life())
}

// close ends the loop for good, as the worker closes: the handler
// goroutines waiting for a job leave, and no goroutine of the scheduler's
// is started again. Once no handler runs, it waits for them all; a
// handler that outlived its cancel (Runtimes.Stop gave up on
// it) is the application's, and its goroutine leaves as soon as it
// returns.
func (s *Scheduler) close() {
	s.Stop()
	s.mu.Lock()
	done := s.busy+s.settling == 0
	s.mu.Unlock()
	if done {
		s.jobs.Close()
	}
}

func (s *Scheduler) poke() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *Scheduler) run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.wake:
		}
		for s.fill(ctx) {
		}
	}
}

// fill plans the free slots and dequeues for each member planned. It
// reports whether to plan again: a member came back short, or could not
// take work (it is passed over then, so the slots left go elsewhere).
func (s *Scheduler) fill(ctx context.Context) bool {
	if ctx.Err() != nil {
		return false
	}
	n := s.reserve(s.room)
	if n <= 0 {
		return false
	}
	shares := slotpolicy.Plan(s.strict, n, s.room, s.parts, s.current, s.shares[:0])
	s.shares = shares
	planned := 0
	for _, sh := range shares {
		planned += sh.N
	}
	if planned < n {
		s.mu.Lock()
		s.asking -= n - planned // the slots no member was planned for
		s.mu.Unlock()
	}
	again := false
	for _, sh := range shares {
		if !s.take(ctx, s.members[sh.Member], sh.N) {
			again = true
		}
	}
	return again
}

// reserve marks the free slots as asked for by the dequeues about to be
// planned, and returns how many they are; room gets each member's room
// for them.
func (s *Scheduler) reserve(room []int) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := slotpolicy.Free(s.size, s.busy, s.settling)
	if n <= 0 {
		return n
	}
	s.asking += n
	for i, r := range s.members {
		room[i] = r.roomLocked()
	}
	return n
}

// roomLocked is how many slots the member may take now: none unless it
// takes work, may have tasks and is not blocked; else up to its maxSlots,
// or the scheduler's size. Callers hold sched.mu.
func (r *Runtime) roomLocked() int {
	if !r.takes || !r.more || r.blocked {
		return 0
	}
	if r.maxSlots > 0 {
		return r.maxSlots - r.busy - r.asking
	}
	return r.sched.size
}

// take dequeues up to n tasks (slots reserved for them) for a member and
// starts their handlers. It reports whether it got them all; when not, the
// member is passed over until it may have work again (see afterDequeue).
func (s *Scheduler) take(ctx context.Context, r *Runtime, n int) bool {
	s.turn.Lock()
	defer s.turn.Unlock()
	s.mu.Lock()
	if !r.takes {
		s.asking -= n
		s.mu.Unlock()
		return true // stopped: it has no room in any plan from now on
	}
	gen := r.gen
	r.asking += n
	// The dequeue ends with the loop, or when the member stops taking.
	dctx, cancel := context.WithCancel(ctx)
	r.abort = cancel
	s.mu.Unlock()
	out := s.env.Writer.Outage()
	sent := out.Begin()
	ps, until, err := Dequeue(dctx, s.host, r.queue, n, true)
	s.mu.Lock()
	r.abort = nil
	r.asking -= n
	s.asking -= n
	r.busy += len(ps)
	s.busy += len(ps)
	// Processes handed over while the dequeue was in flight waited for
	// this reply: they take the slots it left free, or compete with the
	// tasks it took for those (start).
	held, room := r.starter.takeHeldLocked()
	s.mu.Unlock()
	stopped := dctx.Err() != nil
	cancel()
	if until > 0 {
		// The rate limit is used up: look again when the next start is
		// allowed, and not before.
		r.pace.WakeAt(until)
	}
	if err != nil {
		if !stopped {
			r.afterDequeue(slotpolicy.Decide(err), sent, gen, err)
		}
	} else {
		out.OK(sent)
		r.pace.Retry.Reset()
		if len(ps) < n {
			r.clearMore(gen)
		}
	}
	var sess *Session
	if len(held) > 0 {
		sess = r.session()
	}
	r.starter.start(ctx, ctx.Done(), sess, ps, held, len(ps)+room)
	if err != nil {
		return stopped // the member or the loop stopped: nothing to plan again
	}
	return len(ps) == n
}

// session is the session serving the member's queue, nil if none does
// (it left the queue).
func (r *Runtime) session() *Session {
	h := r.host
	h.Lock()
	defer h.Unlock()
	if s := h.Session(r.queue); s != nil && s.Runtime == r {
		return s
	}
	return nil
}

// wantedLocked reports whether a member may take a slot that frees:
// whether the loop has something to plan. Callers hold mu.
func (s *Scheduler) wantedLocked() bool {
	for _, r := range s.members {
		if r.takes && r.more && !r.blocked {
			return true
		}
	}
	return false
}

// CloseAll ends the loops of slot schedulers, each once and all at once,
// for good: their worker is closing.
func CloseAll(scheds []*Scheduler) {
	seen := make(map[*Scheduler]bool, len(scheds))
	var wg sync.WaitGroup
	for _, s := range scheds {
		if !seen[s] {
			seen[s] = true
			wg.Go(s.close)
		}
	}
	wg.Wait()
}

// Snapshot is the scheduler's slots (size, busy, free) and its members'
// queues, in the order given; taking is false when none of its members
// takes work.
func (s *Scheduler) Snapshot() (queues []string, size, busy, free int, taking bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	queues = make([]string, len(s.members))
	for i, r := range s.members {
		queues[i] = r.queue
		taking = taking || r.takes
	}
	return queues, s.size, s.busy, max(slotpolicy.Free(s.size, s.busy, s.settling), 0), taking
}
