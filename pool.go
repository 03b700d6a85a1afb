package worqr

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Order is how a pool of handler slots shared by several queues
// (HandleQueues) chooses the queue a free slot goes to.
type Order uint8

const (
	// OrderStrict gives a free slot to the first queue, in the order
	// given, that may hold tasks: a later queue gets slots only while every
	// earlier one is empty (or paused, rate limited, at its concurrency
	// limit or at its cap in the pool).
	OrderStrict Order = iota
	// OrderShared shares the slots among the queues that may hold tasks
	// in proportion to their shares (QueueSpec.Share), by smooth weighted
	// round robin counted in tasks: with shares 3 and 1, both queues
	// backed up and slots freeing one at a time, starts go A A B A,
	// A A B A, ... Slots that are free together go to one queue in one
	// dequeue where it has room for them, and the shares even out over
	// the next ones.
	OrderShared
)

// String names the order.
func (o Order) String() string {
	switch o {
	case OrderStrict:
		return "strict"
	case OrderShared:
		return "shared"
	}
	return fmt.Sprintf("Order(%d)", uint8(o))
}

// QueueSpec is one queue of a pool served by HandleQueues.
type QueueSpec struct {
	// Queue is the queue's name.
	Queue string
	// Handler runs the queue's tasks.
	Handler Handler
	// Share is the queue's share of the slots under OrderShared (default
	// 1); OrderStrict ignores it. (A task's weight, the Weight enqueue
	// option, is another thing: the slots of its queue's concurrency
	// limit it holds.)
	Share int
	// Options are the queue's own: Retry, Timeout, PanicIsPermanent,
	// Middleware and Events work as they do for Handle. Concurrency, if
	// set, caps how many of the pool's slots the queue holds at once; zero
	// means no cap but the pool's.
	Options HandleOptions
}

// PoolOptions configure HandleQueues.
type PoolOptions struct {
	// Concurrency is how many handlers may run at once across the pool's
	// queues: the slots they share. Default DefaultConcurrency.
	Concurrency int
	// Order decides which queue a free slot goes to. Default OrderStrict.
	Order Order
}

// pool is the shared slots of the queues served by one HandleQueues call:
// one loop that, woken by a member's work event or a slot freeing, plans
// which members the free slots go to (by the order) and dequeues from
// each, several tasks at a time. Each member is a runner of its own (its
// handler, options, work flag, handlers and lease are per queue); only the
// dequeuing and the count of slots are the pool's.
type pool struct {
	w       *Worker // set when made, as are the next four
	size    int
	order   Order
	members []*runner // in the order given
	shares  []int     // members' shares

	wake chan struct{} // a member may have work, or a slot freed

	// turn is held by the loop while it dequeues for a member and starts
	// its handlers. A member that stops taking waits for it, so no handler
	// starts for the member once it has stopped.
	turn sync.Mutex

	mu sync.Mutex // guards busy, settling and asking
	// busy counts the slots taken, across members: handlers running.
	busy int
	// settling counts the outcomes being written of handlers that
	// returned (see runner.settling).
	settling int
	// asking counts the slots the loop's dequeues in flight asked for (see
	// runner.asking).
	asking int

	// current is the smooth weighted round robin's state, per member. The
	// loop's own.
	current []int

	// idle hands a job to a handler goroutine that finished its last one
	// and waits for more, of any member; they leave when ctx ends.
	idle   chan job
	ctx    context.Context // the pool's life; ends when the worker stops
	cancel context.CancelFunc
	done   chan struct{} // closed when the loop has ended
	// started records that the loop was started (guarded by w.mu).
	started bool
}

// HandleQueues serves several queues from one pool of Concurrency handler
// slots: at most that many handlers run at once across the queues, and a
// free slot goes to a queue with work in the pool's Order (strict: the
// first queue given that has work; shared: in proportion to the
// queues' shares). Like Handle it never polls: a slot freeing or a work
// event on any of the queues makes it dequeue, several tasks at a time when
// several slots are free, and a pool with free slots that found every
// queue empty is parked in each queue's idle set, where an enqueue on any
// of them wakes it. Everything else is per queue, as with Handle: leases,
// reclaim, fencing, retries, dead letters, controls, StopWork, events and
// middleware. If one of the queues cannot be served, those already served
// are left again and the error is returned.
func (w *Worker) HandleQueues(ctx context.Context, queues []QueueSpec, opts PoolOptions) error {
	if err := validatePool(queues, &opts); err != nil {
		return err
	}
	p := newPool(w, opts)
	for _, q := range queues {
		share := q.Share
		if share == 0 {
			share = 1
		}
		r := &runner{
			w: w, queue: q.Queue, handler: chain(q.Handler, w.opts.Middleware, q.Options.Middleware),
			opts: q.Options, pool: p, retry: newBackoff(10*time.Millisecond, time.Second),
		}
		p.members = append(p.members, r)
		p.shares = append(p.shares, share)
	}
	p.current = make([]int, len(p.members))
	for i, r := range p.members {
		err := w.startWork(ctx, r.queue, queues[i].Options.Events, r)
		if err == nil {
			continue
		}
		w.mu.Lock()
		s := w.serving[r.queue]
		w.mu.Unlock()
		if s == nil || s.runner != r {
			r.stopTaking()
		}
		p.cancel() // its loop never started
		// Leave the queues served already: the pool is served whole or
		// not at all.
		undo, cancel := context.WithTimeout(context.WithoutCancel(ctx), w.opts.TTL)
		defer cancel()
		for _, done := range p.members[:i] {
			if uerr := w.StopWork(undo, done.queue); uerr != nil && !errors.Is(uerr, ErrWorkerClosed) {
				err = undoFailed{err: err, what: fmt.Sprintf("leaving %q again failed", done.queue), undo: uerr}
			}
		}
		return err
	}
	// The loop starts once every member is served (each with its work flag
	// set), so that the first slots already follow the order.
	w.mu.Lock()
	closed := w.isClosed()
	if !closed {
		w.pools = append(w.pools, p)
		p.started = true
		go p.run()
	}
	w.mu.Unlock()
	if closed {
		return fmt.Errorf("worqr: handle queues: %w", ErrWorkerClosed)
	}
	return nil
}

// validatePool checks HandleQueues' arguments and fills in the defaults.
func validatePool(queues []QueueSpec, opts *PoolOptions) error {
	if len(queues) == 0 {
		return fmt.Errorf("worqr: handle queues: no queue: %w", ErrInvalidOptions)
	}
	if opts.Concurrency == 0 {
		opts.Concurrency = DefaultConcurrency
	}
	if opts.Concurrency < 0 {
		return fmt.Errorf("worqr: handle queues: negative concurrency: %w", ErrInvalidOptions)
	}
	if opts.Order > OrderShared {
		return fmt.Errorf("worqr: handle queues: unknown order %v: %w", opts.Order, ErrInvalidOptions)
	}
	seen := make(map[string]bool, len(queues))
	for _, q := range queues {
		switch {
		case q.Handler == nil:
			return fmt.Errorf("worqr: handle queues: %q: nil handler: %w", q.Queue, ErrInvalidOptions)
		case q.Share < 0:
			return fmt.Errorf("worqr: handle queues: %q: negative share: %w", q.Queue, ErrInvalidOptions)
		case q.Options.Concurrency < 0:
			return fmt.Errorf("worqr: handle queues: %q: negative concurrency: %w", q.Queue, ErrInvalidOptions)
		case seen[q.Queue]:
			return fmt.Errorf("worqr: handle queues: %q given twice: %w", q.Queue, ErrInvalidOptions)
		}
		seen[q.Queue] = true
	}
	return nil
}

func newPool(w *Worker, opts PoolOptions) *pool {
	ctx, cancel := context.WithCancel(context.Background())
	return &pool{
		w: w, size: opts.Concurrency, order: opts.Order,
		wake: make(chan struct{}, 1), idle: make(chan job),
		ctx: ctx, cancel: cancel, done: make(chan struct{}),
	}
}

func (p *pool) poke() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// free is how many more handlers may start across the pool.
func (p *pool) free() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slotsFree(p.size, p.busy, p.settling)
}

// reserve marks the free slots as asked for by the dequeues about to be
// planned, and returns how many they are.
func (p *pool) reserve() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := slotsFree(p.size, p.busy, p.settling)
	p.asking += max(n, 0)
	return n
}

// took records what dequeues that asked for asked slots got: got handlers
// about to start, which hold slots from now on.
func (p *pool) took(asked, got int) {
	p.mu.Lock()
	p.asking -= asked
	p.busy += got
	p.mu.Unlock()
}

// tryAcquire takes a slot for a process an enqueue handed a member (see
// runner.claim), if one is free that no dequeue in flight asked for.
func (p *pool) tryAcquire() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if slotsFree(p.size, p.busy+p.asking, p.settling) <= 0 {
		return false
	}
	p.busy++
	return true
}

// unacquire gives back a slot tryAcquire took and no handler used.
func (p *pool) unacquire() {
	p.mu.Lock()
	p.busy--
	p.mu.Unlock()
	p.poke()
}

// release gives a slot back and wakes the loop to fill it: d 1 when its
// handler returned (its outcome is being written), d -1 when the outcome
// is written.
func (p *pool) release(d int) {
	p.mu.Lock()
	if d > 0 {
		p.busy--
	}
	p.settling += d
	p.mu.Unlock()
	p.poke()
}

// stop ends the loop and waits for it; handler goroutines waiting for a
// job leave too. Running handlers are the members' to stop (stopTaking,
// stopRunners).
func (p *pool) stop() {
	p.cancel()
	p.w.mu.Lock()
	started := p.started
	p.w.mu.Unlock()
	if started {
		<-p.done
	}
}

func (p *pool) run() {
	defer close(p.done)
	for {
		select {
		case <-p.ctx.Done():
			return
		case <-p.wake:
		}
		for p.fill() {
		}
	}
}

// share is a number of slots planned for a member.
type share struct {
	r *runner
	n int
}

// fill plans the free slots and dequeues for each member planned. It
// reports whether to plan again: a member came back short, or could not
// take work (it is passed over then, so the slots left go elsewhere).
func (p *pool) fill() bool {
	if p.ctx.Err() != nil {
		return false
	}
	n := p.reserve()
	if n <= 0 {
		return false
	}
	shares := p.plan(n)
	for _, sh := range shares {
		n -= sh.n
	}
	p.took(n, 0) // the slots no member was planned for
	again := false
	for _, sh := range shares {
		if !p.take(sh.r, sh.n) {
			again = true
		}
	}
	return again
}

// plan shares n free slots among the members that may have work and have
// room, by the pool's order, in the order the dequeues are to be made.
func (p *pool) plan(n int) []share {
	room := make([]int, len(p.members))
	for i, r := range p.members {
		room[i] = r.room()
	}
	var out []share
	if p.order == OrderStrict {
		for i, r := range p.members {
			if k := min(n, room[i]); k > 0 {
				out = append(out, share{r, k})
				n -= k
			}
			if n == 0 {
				break
			}
		}
		return out
	}
	// Smooth weighted round robin by tasks: the next slot goes to the
	// member SWRR would give it to, and so do as many more as it has room
	// for, in one dequeue; every member with room is credited its share
	// for each of them and the chosen one debited the total. One slot at a
	// time this is SWRR exactly; in batches the shares stay proportional
	// over time, and each member planned costs one dequeue. A member
	// without room is taken out of the round (its state reset, so it does
	// not come back with a burst).
	chosen := make([]bool, len(p.members))
	for n > 0 {
		total, best := 0, -1
		for i := range p.members {
			if room[i] <= 0 || chosen[i] {
				if room[i] <= 0 {
					p.current[i] = 0
				}
				continue
			}
			total += p.shares[i]
			if best < 0 || p.current[i]+p.shares[i] > p.current[best]+p.shares[best] {
				best = i
			}
		}
		if best < 0 {
			break
		}
		k := min(n, room[best])
		for i := range p.members {
			if room[i] > 0 && !chosen[i] {
				p.current[i] += k * p.shares[i]
			}
		}
		p.current[best] -= k * total
		chosen[best] = true
		out = append(out, share{p.members[best], k})
		n -= k
	}
	return out
}

// take dequeues up to n tasks for a member and starts their handlers. It
// reports whether it got them all; when not, the member is passed over
// until it may have work again: its work flag is cleared (it came back
// short), or it is blocked (fenced, not serving, or Redis failed: then it
// is retried after a backoff, while the others are served).
func (p *pool) take(r *runner, n int) bool {
	p.turn.Lock()
	defer p.turn.Unlock()
	r.mu.Lock()
	lc, gen := r.loop, r.gen
	r.asking += n
	r.mu.Unlock()
	if lc == nil || lc.ctx.Err() != nil {
		r.took(n, 0)
		return true // stopped: it has no room in any plan from now on
	}
	// The dequeue ends with the member's loop or with the pool's.
	ctx, cancel := context.WithCancel(lc.ctx)
	defer cancel()
	defer context.AfterFunc(p.ctx, cancel)()
	sent := p.w.c.outage.begin()
	ps, until, err := p.w.dequeue(ctx, r.queue, n, true)
	r.took(n, len(ps))
	if until > 0 {
		r.wakeAt(lc, until)
	}
	switch {
	case err != nil && ctx.Err() != nil:
		return true // stopped (the member or the pool)
	case errors.Is(err, ErrNoTask), errors.Is(err, ErrRateLimited):
		p.w.c.outage.ok(sent)
		r.clearMore(gen)
		return false
	case errors.Is(err, ErrWorkerFenced), errors.Is(err, ErrWorkerClosed), errors.Is(err, ErrNotServing):
		// A rejoin or re-registration raises a work event, which
		// unblocks it.
		r.block(gen)
		return false
	case err != nil:
		if !p.w.c.outage.failed(sent, "dequeue", err) {
			r.w.logger().Warn("worqr: dequeue failed; retrying", "queue", r.queue, "err", err)
		}
		r.retryLater(lc, gen)
		return false
	}
	p.w.c.outage.ok(sent)
	r.retry.reset()
	if len(ps) < n {
		r.clearMore(gen)
	}
	for _, pr := range ps {
		r.launch(p.idle, p.ctx, pr, false)
	}
	return len(ps) == n
}

// stopPools ends the loops of the worker's pools.
func (w *Worker) stopPools() {
	w.mu.Lock()
	ps := w.pools
	w.pools = nil
	w.mu.Unlock()
	for _, p := range ps {
		p.stop()
	}
}
