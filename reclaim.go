package worqr

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/worqr/worqr/internal/members"
	"github.com/worqr/worqr/internal/startstop"
	"github.com/worqr/worqr/internal/store"
)

// Peers reclaim the work of dead workers. A live worker asks the registry
// for the workers whose lease has expired, and for each one returns its
// processes, queue by queue, to the front of their queues. Only then is the
// dead worker removed from the registry, so a reclaimer that dies half-way
// leaves the rest to the next one. Each step is idempotent: peers
// reclaiming the same worker at once move every task once.
//
// A worker asks at the moment the next peer's lease runs out, which it
// learns from every renewal of its own lease (keepalive.lua) and from each
// of its looks: a dead worker's tasks go back within milliseconds of its
// lease's expiry, not a check interval later. In a healthy fleet every
// peer renews before its lease runs out, and each renewal moves the
// wake-up on, so the reclaimer never looks: an idle fleet costs Redis its
// renewals and nothing more. A renewal also says when a dead worker waits
// unclaimed, and the reclaimer looks at once then. (A worker that joins is
// seen at each peer's next renewal: in time for its expiry when the fleet
// shares its options, since a TTL is longer than a RenewInterval; a worker
// with a TTL shorter than its peers' RenewInterval that dies at once waits
// for their renewal after its expiry.) The workers of one client that
// share their options share a reclaimer, which looks once for all of
// them. Every client with live workers wakes for the same expiry, so the
// registry hands each dead worker to one of them (a claim of one
// RenewInterval, see expired.lua); the others' calls cost one short
// script each.

// reclaimBatch bounds how many dead workers one pass handles.
const reclaimBatch = 100

// reclaimMargin is added to a peer's lease expiry before asking: Redis
// judges leases in whole milliseconds.
const reclaimMargin = 2 * time.Millisecond

// reclaimer reclaims dead peers for the workers of a client that share a
// TTL and a RenewInterval: they see the same registry, so one look serves
// them all, where a reclaimer per worker would wake every worker of the
// client at a peer's expiry (10,000 scripts for a peer that died, from a
// client of 10,000 workers). Each member's renewals tell it when the next
// peer's lease runs out (heard); its loop looks then, once.
type reclaimer struct {
	c *Client
	// every is the RenewInterval: how long a look's claims last, and
	// about how long to wait after a look that failed.
	every time.Duration
	// window is the poison-pill guard's: twice the workers' TTL, so that
	// a holder that died at once (reclaimed at most TTL and a check
	// interval later) counts, and one that held its task a while does
	// not.
	window time.Duration
	loop   *startstop.Loop
	// kick tells the loop that the times below moved earlier than it
	// had armed its timer for.
	kick chan struct{}

	// members are the workers it reclaims for; it stops with the last.
	members members.Set[*Worker]

	mu sync.Mutex // guards the fields below
	// peer is when the next peer's lease runs out, as last heard (zero:
	// no peer).
	peer time.Time
	// again is when the reclaimer must look again whatever the peers do
	// (zero: no need): a pass was full or failed, a dead worker's queue
	// lease outlived its registry lease, or a renewal saw a dead worker.
	again time.Time
	// armed is when the loop's timer fires (zero: not armed). A heard
	// time later than it needs no wake-up: the timer fires, finds
	// nothing due yet, and is armed again, so that a fleet's renewals,
	// which move the time on every RenewInterval, do not each wake the
	// loop.
	armed time.Time
}

// groupKey groups the workers of a client that one reclaimer, and one
// beat, serve: those of the same TTL and RenewInterval.
type groupKey struct{ ttl, every time.Duration }

// joinReclaimer makes w a member of its client's reclaimer for its
// options, starting one (which looks at once, so the first worker learns
// of its peers) if there is none.
func (c *Client) joinReclaimer(w *Worker) *reclaimer {
	key := groupKey{ttl: w.opts.TTL, every: w.opts.RenewInterval}
	c.reclaimMu.Lock()
	defer c.reclaimMu.Unlock()
	r := c.reclaimers[key]
	if r != nil {
		r.members.Add(w)
		return r
	}
	r = &reclaimer{c: c, every: key.every, window: 2 * key.ttl, kick: make(chan struct{}, 1)}
	r.members.Add(w)
	c.reclaimers[key] = r
	r.loop = startstop.NewLoop(r.run)
	_ = r.loop.Start(context.Background()) // a Loop's Start does not fail
	return r
}

// leave removes w from the reclaimer's members, and stops the reclaimer
// (waiting for its loop) when w was the last.
func (r *reclaimer) leave(w *Worker) {
	c := r.c
	c.reclaimMu.Lock()
	last := r.members.Remove(w)
	if last && c.reclaimers[groupKey{ttl: r.window / 2, every: r.every}] == r {
		delete(c.reclaimers, groupKey{ttl: r.window / 2, every: r.every})
	}
	c.reclaimMu.Unlock()
	if last {
		r.loop.Stop()
	}
}

// heard takes what a renewal of a member's lease learned from the
// registry: how long until the next peer's lease runs out (0: no peer),
// and whether a dead worker waits unclaimed.
func (r *reclaimer) heard(next time.Duration, dead bool) {
	now := r.c.clock.Now()
	r.mu.Lock()
	r.peer = time.Time{}
	if next > 0 {
		r.peer = now.Add(next + reclaimMargin)
	}
	if dead {
		r.again = now
	}
	at := r.next()
	wake := !at.IsZero() && (r.armed.IsZero() || at.Before(r.armed))
	r.mu.Unlock()
	if wake {
		select {
		case r.kick <- struct{}{}:
		default:
		}
	}
}

// next is when the next look is due (zero: none). Callers hold mu.
func (r *reclaimer) next() time.Time {
	at := r.peer
	if !r.again.IsZero() && (at.IsZero() || r.again.Before(at)) {
		at = r.again
	}
	return at
}

// run is the reclaimer's loop: it looks at once, then whenever a look is
// due.
func (r *reclaimer) run(ctx context.Context) {
	clk := r.c.clock
	r.look(ctx) // at once: the first worker learns of its peers
	t := clk.NewTimer(time.Hour)
	defer t.Stop()
	for {
		r.mu.Lock()
		at := r.next()
		r.armed = at
		r.mu.Unlock()
		if at.IsZero() {
			t.Stop()
		} else {
			t.Reset(clk.Until(at))
		}
		select {
		case <-ctx.Done():
			return
		case <-r.kick:
		case <-t.C():
			r.mu.Lock()
			at := r.next()
			r.mu.Unlock()
			if !at.IsZero() && !clk.Now().Before(at) {
				r.look(ctx)
			}
		}
	}
}

// member is one of the members (nil if none): the look runs under its
// id, which the registry does not count as a peer's. The members renew
// together, so their leases run out together.
func (r *reclaimer) member() *Worker { return r.members.One() }

// lastFenced is how long ago the member that fenced itself last did so
// (a large value if none ever did).
func (r *reclaimer) lastFenced() time.Duration {
	since := 24 * time.Hour
	for _, w := range r.members.List() {
		w.mu.Lock()
		since = min(since, w.state.fencedSince(w.c.clock.Now()))
		w.mu.Unlock()
	}
	return since
}

// healthyAfter is the poison-pill guard of a worker giving its own work
// back: a task it held longer than the guard's window was healthy, and its
// count of deaths in a row is cleared (a persistent task given back at
// every deploy or fence is never taken for a poison pill).
func (r *reclaimer) healthyAfter() store.Poison {
	return store.Poison{Window: r.window}
}

// look runs one pass, and sets when to look next from what it found: the
// loop's one run, which a test calls by hand.
func (r *reclaimer) look(ctx context.Context) {
	w := r.member()
	if w == nil {
		return
	}
	var tasks int64
	defer func() { r.c.signals.looked.Signal(tasks) }()
	// A worker that just came back from an outage does not count its
	// peers' deaths in the outage as poison.
	outage := r.lastFenced() < 2*r.window
	log := w.logger()
	sent := r.c.outage.Begin()
	pass, err := r.c.reclaimDead(ctx, log, reclaimPass{self: w.ID(), window: r.window, outage: outage, claim: r.every})
	switch {
	case err == nil:
		r.c.outage.OK(sent)
	case ctx.Err() == nil && !r.c.outage.Failed(sent, "reclaim", err):
		log.Warn("worqr: reclaiming dead workers failed", "err", err)
	}
	tasks = pass.tasks
	now := r.c.clock.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.again = time.Time{}
	switch {
	case err != nil:
		// Try again in about a RenewInterval (with jitter, so that peers
		// that failed together do not come back together), and not at the
		// peer's expiry the failed look was for: past now, that would
		// look again at once, and again, for as long as the looks fail.
		r.again = now.Add(r.every + time.Duration(rand.Int64N(int64(r.every)/5+1)) - r.every/10)
		r.peer = time.Time{}
	case pass.again > 0:
		r.again = now.Add(pass.again)
	}
	if err == nil {
		r.peer = time.Time{}
		if pass.next > 0 {
			r.peer = now.Add(pass.next + reclaimMargin)
		}
	}
}

// reclaimPass is one pass's parameters.
type reclaimPass struct {
	self   string        // the caller's worker id, if any
	window time.Duration // the poison-pill guard's (see reclaimWorker)
	outage bool          // the guard counts no deaths (see reclaimWorker)
	claim  time.Duration // how long the registry keeps the dead for the caller
}

// reclaimed is what one pass did and when the next should run.
type reclaimed struct {
	tasks int64
	// next is how long until the next peer's lease runs out (0: no peer).
	next time.Duration
	// again is when to look again whatever the peers do (0: no need): when
	// a dead worker's queue lease that outlived its registry lease runs
	// out, or at once if the pass was full.
	again time.Duration
}

// soonest lowers r.again to d (d > 0).
func (r *reclaimed) soonest(d time.Duration) {
	if r.again == 0 || d < r.again {
		r.again = d
	}
}

// reclaimDead reclaims the workers whose registry lease has expired and
// that no peer has claimed.
func (c *Client) reclaimDead(ctx context.Context, log *slog.Logger, p reclaimPass) (reclaimed, error) {
	var out reclaimed
	claim := p.claim
	if claim <= 0 {
		claim = DefaultRenewInterval
	}
	exp, err := c.store.ExpiredWorkers(ctx, reclaimBatch, p.self, claim)
	if err != nil {
		return out, c.fail("find dead workers", "", err)
	}
	out.next = exp.Next
	if len(exp.Dead) == reclaimBatch {
		out.soonest(time.Millisecond)
	}
	// Several workers dead at once is an outage (Redis paused, restarted
	// or failing over, a network cut), not a task killing its worker: the
	// poison-pill guard counts nothing then.
	outage := p.outage || len(exp.Dead) > 1
	var errs []error
	for _, id := range exp.Dead {
		r, err := c.reclaimWorker(ctx, log, id, p.window, outage)
		out.tasks += r.requeued
		if err != nil {
			errs = append(errs, err)
		}
		if r.left > 0 {
			out.soonest(r.left + reclaimMargin)
		}
		if r.done {
			log.Info("worqr: reclaimed dead worker", "dead", id, "requeued", r.requeued, "poison", r.buried, "dropped", r.dropped)
			c.obs.reclaimed(ctx, ReclaimEvent{DeadWorker: id, Tasks: r.requeued, Poison: r.buried, Dropped: r.dropped})
		}
	}
	return out, errors.Join(errs...)
}

// reclaim is what reclaiming one dead worker did.
type reclaim struct {
	requeued int64 // tasks back at the front of their queues
	buried   int64 // tasks the poison-pill guard sent to the dead letters
	dropped  int64 // cancelled tasks, and those of deleted queues
	// done is false while the worker still holds a live lease on some
	// queue; left then says how long the longest such lease has to run.
	done bool
	left time.Duration
}

// reclaimWorker returns one dead worker's processes in every queue it
// served, then deregisters it. It leaves the worker registered for a later
// pass while the worker still holds a live lease on some queue (its
// registry lease expired first, or it joined a queue late). Each task the
// poison-pill guard buries is logged at WARN.
//
// window is the poison-pill guard's: a task whose holder died within it of
// starting the task counts the death (see PoisonLimit and return_to_front
// in common.lua, which says what else a death needs to count), and one
// held longer is marked as healthy. In an outage no death is counted,
// but the marks are made.
func (c *Client) reclaimWorker(ctx context.Context, log *slog.Logger, id string, window time.Duration, outage bool) (out reclaim, err error) {
	queues, err := c.store.WorkerQueues(ctx, id)
	if err != nil {
		return out, c.fail("reclaim", "", err)
	}
	poison := store.Poison{Limit: c.poisonLimit, Window: window, Born: joinedAt(id), Bounds: c.deadBounds}
	if outage {
		poison.Limit = 0
	}
	rs := make([]store.Release, len(queues))
	for i, q := range queues {
		rs[i] = store.Release{Queue: q, Worker: id, Mode: store.ReleaseExpired, Poison: poison}
	}
	leased := false
	for i, r := range c.store.ReleaseAll(ctx, rs) {
		if r.Err != nil {
			return out, c.fail("reclaim", queues[i], r.Err)
		}
		if r.Refused {
			leased = true
			out.left = max(out.left, r.LeaseLeft)
		}
		out.requeued += r.Returned
		out.dropped += r.Dropped
		out.buried += int64(len(r.Buried))
		for _, task := range r.Buried {
			log.Warn("worqr: task buried as poison: its holders died soon after starting it",
				"queue", queues[i], "task", task, "deaths", c.poisonLimit, "dead", id)
		}
	}
	if leased {
		return out, nil
	}
	if _, err := c.store.Deregister(ctx, id, true); err != nil {
		return out, c.fail("reclaim", "", err)
	}
	out.done = true
	return out, nil
}

// joinedAt is when a worker registered, read from its id (a UUIDv7 made
// by the worker at registration, so by its clock), or zero for an id that
// does not tell.
func joinedAt(id string) time.Time {
	u, err := uuid.Parse(id)
	if err != nil || u.Version() != 7 {
		return time.Time{}
	}
	ms := int64(u[0])<<40 | int64(u[1])<<32 | int64(u[2])<<24 | int64(u[3])<<16 | int64(u[4])<<8 | int64(u[5])
	return time.UnixMilli(ms)
}
