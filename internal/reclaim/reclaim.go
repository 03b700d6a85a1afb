// Package reclaim is the reclaimer of dead peers: it returns the work of
// workers whose lease is gone to the front of their queues.
package reclaim

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/worqr/worqr/internal/clock"
	"github.com/worqr/worqr/internal/members"
	"github.com/worqr/worqr/internal/outage"
	"github.com/worqr/worqr/internal/startstop"
	"github.com/worqr/worqr/internal/store"
	"github.com/worqr/worqr/internal/testsignal"
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
// them.
//
// Every client with live workers learns of the same expiry, but only a
// few look then (Lookers, on average): each reclaimer looks with a chance
// of Lookers times its share of the registry's live workers, which every
// renewal counts (the dead do not look: the survivors of a fleet that
// mostly died each look the more). A fleet of 10,000 one-worker processes that all looked
// would cost Redis 10,000 expired.lua calls for each lease that runs out
// (55 µs each, measured: half a second of Redis), delay the renewals
// queued behind them past the TTL, and so let more leases run out, each
// another herd. The registry hands each dead worker to one of the
// lookers (a claim of one RenewInterval, see expired.lua). A reclaimer
// that does not look waits for its next renewal, which says whether a
// dead worker still waits unclaimed; it draws again then. In a fleet of
// no more than Lookers workers every reclaimer looks at once, and in a
// larger one the chance that none does is e^-Lookers (0.03 %), after which
// the renewals of the next RenewInterval bring about Lookers more looks.

// Env is what the reclaimers take of their client.
type Env struct {
	Clock  clock.Clock
	Store  *store.Store
	Outage *outage.Outage
	// Fail wraps an error of the call op (on queue, if any) as the
	// client's errors say it.
	Fail func(op, queue string, err error) error
	// Reclaimed tells the client's observer of a dead worker reclaimed.
	Reclaimed func(ctx context.Context, dead string, tasks, poison, dropped int64)
	// Looked is the test signal of a look's end (the tasks it sent back).
	Looked *testsignal.Signal[int64]
	// PoisonLimit is the poison-pill guard's count of deaths (0: off).
	PoisonLimit int
	DeadBounds  store.DeadBounds
	// DefaultClaim is how long a pass without a claim of its own keeps
	// the dead it is handed.
	DefaultClaim time.Duration
}

// Member is a worker a reclaimer serves.
type Member interface {
	comparable
	// ID is the worker's id.
	ID() string
	// Logger is the worker's logger.
	Logger() *slog.Logger
	// FencedSince is how long before now the worker last fenced itself
	// (a large value if it never did).
	FencedSince(now time.Time) time.Duration
}

// Reclaimers are a client's reclaimers, one per groupKey.
type Reclaimers[M Member] struct {
	*Env
	mu sync.Mutex
	m  map[groupKey]*Reclaimer[M] // guarded by mu
}

// New makes a client's set of reclaimers.
func New[M Member](env *Env) *Reclaimers[M] {
	return &Reclaimers[M]{Env: env, m: make(map[groupKey]*Reclaimer[M])}
}

// reclaimBatch bounds how many dead workers one pass handles.
const reclaimBatch = Batch

// Batch bounds how many dead workers one pass handles.
const Batch = 100

// Lookers is how many reclaimers of a fleet, on average, look for a dead
// worker when a lease runs out, or when renewals say a dead worker waits
// unclaimed (see the package's comment): enough that the chance none
// does is small (e^-8, 0.03 %), few enough that their calls cost Redis
// half a millisecond, whatever the fleet's size.
const Lookers = 8

// reclaimMargin is added to a peer's lease expiry before asking: Redis
// judges leases in whole milliseconds.
const reclaimMargin = 2 * time.Millisecond

// Reclaimer reclaims dead peers for the workers of a client that share a
// TTL and a RenewInterval: they see the same registry, so one look serves
// them all, where a reclaimer per worker would wake every worker of the
// client at a peer's expiry (10,000 scripts for a peer that died, from a
// client of 10,000 workers). Each member's renewals tell it when the next
// peer's lease runs out (heard); its loop looks then, once.
type Reclaimer[M Member] struct {
	c *Reclaimers[M]
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
	members members.Set[M]
	// draw is a number in [0, 1), drawn for each look that only some
	// reclaimers make (rand.Float64; a test's to set).
	draw func() float64

	mu sync.Mutex // guards the fields below
	// peer is when the next peer's lease runs out, as last heard (zero:
	// no peer).
	peer time.Time
	// again is when the reclaimer must look again whatever the peers do
	// (zero: no need): a pass was full or failed, or a dead worker's
	// queue lease outlived its registry lease.
	again time.Time
	// dead is when a renewal said a dead worker waits unclaimed (zero:
	// none since the last look). Like peer, it is a look that only some
	// of the fleet's reclaimers make (see due).
	dead time.Time
	// workers is how many live workers the registry held at the last
	// renewal (0: not heard yet).
	workers int64
	// heard counts the renewals heard (Heard), so that a look can tell
	// whether one came while it was under way.
	heard uint64
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

// Join makes w a member of its client's reclaimer for its options (ttl
// and every, its RenewInterval), starting one (which looks at once, so the
// first worker learns of its peers) if there is none.
func (c *Reclaimers[M]) Join(w M, ttl, every time.Duration) *Reclaimer[M] {
	key := groupKey{ttl: ttl, every: every}
	c.mu.Lock()
	defer c.mu.Unlock()
	r := c.m[key]
	if r != nil {
		r.members.Add(w)
		return r
	}
	r = &Reclaimer[M]{c: c, every: key.every, window: 2 * key.ttl, kick: make(chan struct{}, 1), draw: rand.Float64}
	r.members.Add(w)
	c.m[key] = r
	r.loop = startstop.NewLoop(r.run)
	_ = r.loop.Start(context.Background()) // a Loop's Start does not fail
	return r
}

// Lookup is the reclaimer of the workers of ttl and every (nil if none),
// and how many members it has.
func (c *Reclaimers[M]) Lookup(ttl, every time.Duration) (*Reclaimer[M], int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	r := c.m[groupKey{ttl: ttl, every: every}]
	if r == nil {
		return nil, 0
	}
	return r, len(r.members.List())
}

// Leave removes w from the reclaimer's members, and stops the reclaimer
// (waiting for its loop) when w was the last.
func (r *Reclaimer[M]) Leave(w M) {
	c := r.c
	c.mu.Lock()
	last := r.members.Remove(w)
	if last && c.m[groupKey{ttl: r.window / 2, every: r.every}] == r {
		delete(c.m, groupKey{ttl: r.window / 2, every: r.every})
	}
	c.mu.Unlock()
	if last {
		r.loop.Stop()
	}
}

// Heard takes what a renewal of a member's lease learned from the
// registry: how long until the next peer's lease runs out (0: no peer),
// whether a dead worker waits unclaimed, and how many live workers the
// registry holds.
func (r *Reclaimer[M]) Heard(next time.Duration, dead bool, workers int64) {
	now := r.c.Clock.Now()
	r.mu.Lock()
	r.heard++
	r.workers = workers
	r.peer = time.Time{}
	if next > 0 {
		r.peer = now.Add(next + reclaimMargin)
	}
	if dead {
		r.dead = now
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
func (r *Reclaimer[M]) next() time.Time {
	at := time.Time{}
	for _, t := range []time.Time{r.peer, r.again, r.dead} {
		if !t.IsZero() && (at.IsZero() || t.Before(at)) {
			at = t
		}
	}
	return at
}

// due reports whether a look is due at now and this reclaimer makes it.
// A look it must make (again) it makes; one that only some of the fleet's
// reclaimers make (a peer's expiry, a dead worker a renewal heard of) it
// makes with a chance of Lookers times its share of the registry's live
// workers, and otherwise forgets, until a renewal tells it of the next
// expiry or of a dead worker still unclaimed. Callers hold mu.
func (r *Reclaimer[M]) due(now time.Time) bool {
	at := r.next()
	switch {
	case at.IsZero() || now.Before(at):
		return false
	case !r.again.IsZero() && !now.Before(r.again):
		return true
	case r.draw() < r.share():
		return true
	}
	if !r.peer.IsZero() && !now.Before(r.peer) {
		r.peer = time.Time{}
	}
	if !r.dead.IsZero() && !now.Before(r.dead) {
		r.dead = time.Time{}
	}
	return false
}

// share is the chance that this reclaimer makes a look that only some
// make: Lookers times its members' share of the registry's live workers, so
// that the fleet's reclaimers make Lookers such looks on average (1 while
// the registry's size is unknown). Callers hold mu.
func (r *Reclaimer[M]) share() float64 {
	if r.workers <= 0 {
		return 1
	}
	return min(1, Lookers*float64(r.members.Len())/float64(r.workers))
}

// run is the reclaimer's loop: it looks at once, then whenever a look is
// due.
func (r *Reclaimer[M]) run(ctx context.Context) {
	clk := r.c.Clock
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
			due := r.due(clk.Now())
			r.mu.Unlock()
			if due {
				r.look(ctx)
			}
		}
	}
}

// member is one of the members (nil if none): the look runs under its
// id, which the registry does not count as a peer's. The members renew
// together, so their leases run out together.
func (r *Reclaimer[M]) member() (M, bool) {
	w := r.members.One()
	var none M
	return w, w != none
}

// lastFenced is how long ago the member that fenced itself last did so
// (a large value if none ever did).
func (r *Reclaimer[M]) lastFenced() time.Duration {
	since := 24 * time.Hour
	for _, w := range r.members.List() {
		since = min(since, w.FencedSince(r.c.Clock.Now()))
	}
	return since
}

// HealthyAfter is the poison-pill guard of a worker giving its own work
// back: a task it held longer than the guard's window was healthy, and its
// count of deaths in a row is cleared (a persistent task given back at
// every deploy or fence is never taken for a poison pill).
func (r *Reclaimer[M]) HealthyAfter() store.Poison {
	return store.Poison{Window: r.window}
}

// look runs one pass, and sets when to look next from what it found: the
// loop's one run, which a test calls by hand.
func (r *Reclaimer[M]) look(ctx context.Context) {
	w, ok := r.member()
	if !ok {
		return
	}
	var tasks int64
	defer func() { r.c.Looked.Signal(tasks) }()
	// The look answers the dead worker heard of so far, and the look
	// again asked for; a renewal heard while it is under way may have
	// read the registry after it did, and what that renewal heard stands
	// (see below).
	r.mu.Lock()
	r.again, r.dead = time.Time{}, time.Time{}
	heard := r.heard
	r.mu.Unlock()
	// A worker that just came back from an outage does not count its
	// peers' deaths in the outage as poison.
	outage := r.lastFenced() < 2*r.window
	log := w.Logger()
	sent := r.c.Outage.Begin()
	pass, err := r.c.Dead(ctx, log, Pass{Self: w.ID(), Window: r.window, Outage: outage, Claim: r.every})
	switch {
	case err == nil:
		r.c.Outage.OK(sent)
	case ctx.Err() == nil && !r.c.Outage.Failed(sent, "reclaim", err):
		log.Warn("worqr: reclaiming dead workers failed", "err", err)
	}
	tasks = pass.Tasks
	now := r.c.Clock.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case err != nil:
		// Try again in about a RenewInterval (with jitter, so that peers
		// that failed together do not come back together), and not at the
		// peer's expiry the failed look was for: past now, that would
		// look again at once, and again, for as long as the looks fail.
		r.again = now.Add(r.every + time.Duration(rand.Int64N(int64(r.every)/5+1)) - r.every/10)
	case pass.Again > 0:
		r.again = now.Add(pass.Again)
	}
	var peer time.Time
	if err == nil && pass.Next > 0 {
		peer = now.Add(pass.Next + reclaimMargin)
	}
	// A renewal heard during the look keeps what it set: its dead worker
	// (r.dead, cleared when the look began) may have expired after the
	// look read the registry, and its peer's expiry, if sooner, may be
	// one the look's older answer did not see. Overwritten, they would
	// wait for the next renewal's news, a RenewInterval late, or, on a
	// clock that jumps (a test's), for ever.
	if r.heard != heard && !r.peer.IsZero() && (peer.IsZero() || r.peer.Before(peer)) {
		peer = r.peer
	}
	r.peer = peer
}

// Pass is one pass's parameters.
type Pass struct {
	Self   string        // the caller's worker id, if any
	Window time.Duration // the poison-pill guard's (see Worker)
	Outage bool          // the guard counts no deaths (see Worker)
	Claim  time.Duration // how long the registry keeps the dead for the caller
}

// Passed is what one pass did and when the next should run.
type Passed struct {
	Tasks int64
	// Next is how long until the next peer's lease runs out (0: no peer).
	Next time.Duration
	// Again is when to look again whatever the peers do (0: no need): when
	// a dead worker's queue lease that outlived its registry lease runs
	// out, or at once if the pass was full.
	Again time.Duration
}

// soonest lowers r.Again to d (d > 0).
func (r *Passed) soonest(d time.Duration) {
	if r.Again == 0 || d < r.Again {
		r.Again = d
	}
}

// Dead reclaims the workers whose registry lease has expired and
// that no peer has claimed.
func (c *Env) Dead(ctx context.Context, log *slog.Logger, p Pass) (Passed, error) {
	var out Passed
	claim := p.Claim
	if claim <= 0 {
		claim = c.DefaultClaim
	}
	exp, err := c.Store.ExpiredWorkers(ctx, reclaimBatch, p.Self, claim)
	if err != nil {
		return out, c.Fail("find dead workers", "", err)
	}
	out.Next = exp.Next
	if len(exp.Dead) == reclaimBatch {
		out.soonest(time.Millisecond)
	}
	// Several workers dead at once is an outage (Redis paused, restarted
	// or failing over, a network cut), not a task killing its worker: the
	// poison-pill guard counts nothing then.
	outage := p.Outage || len(exp.Dead) > 1
	var errs []error
	for _, id := range exp.Dead {
		r, err := c.Worker(ctx, log, id, p.Window, outage)
		out.Tasks += r.Requeued
		if err != nil {
			errs = append(errs, err)
		}
		if r.Left > 0 {
			out.soonest(r.Left + reclaimMargin)
		}
		if r.Done {
			log.Info("worqr: reclaimed dead worker", "dead", id, "requeued", r.Requeued, "poison", r.Buried, "dropped", r.Dropped)
			c.Reclaimed(ctx, id, r.Requeued, r.Buried, r.Dropped)
		}
	}
	return out, errors.Join(errs...)
}

// Reclaimed is what reclaiming one dead worker did.
type Reclaimed struct {
	Requeued int64 // tasks back at the front of their queues
	Buried   int64 // tasks the poison-pill guard sent to the dead letters
	Dropped  int64 // cancelled tasks, and those of deleted queues
	// Done is false while the worker still holds a live lease on some
	// queue; Left then says how long the longest such lease has to run.
	Done bool
	Left time.Duration
}

// Worker returns one dead worker's processes in every queue it
// served, then deregisters it. It leaves the worker registered for a later
// pass while the worker still holds a live lease on some queue (its
// registry lease expired first, or it joined a queue late). Each task the
// poison-pill guard buries is logged at WARN.
//
// window is the poison-pill guard's: a task whose holder died within it of
// starting the task counts the death (see PoisonLimit and return_to_front
// in internal/scripts/common/processes.lua, which says what else a death
// needs to count), and one held longer is marked as healthy. In an outage no
// death is counted, but the marks are made.
func (c *Env) Worker(ctx context.Context, log *slog.Logger, id string, window time.Duration, outage bool) (out Reclaimed, err error) {
	queues, err := c.Store.WorkerQueues(ctx, id)
	if err != nil {
		return out, c.Fail("reclaim", "", err)
	}
	poison := store.Poison{Limit: c.PoisonLimit, Window: window, Born: joinedAt(id), Bounds: c.DeadBounds}
	if outage {
		poison.Limit = 0
	}
	rs := make([]store.Release, len(queues))
	for i, q := range queues {
		rs[i] = store.Release{Queue: q, Worker: id, Mode: store.ReleaseExpired, Poison: poison}
	}
	leased := false
	for i, r := range c.Store.ReleaseAll(ctx, rs) {
		if r.Err != nil {
			return out, c.Fail("reclaim", queues[i], r.Err)
		}
		if r.Refused {
			leased = true
			out.Left = max(out.Left, r.LeaseLeft)
		}
		out.Requeued += r.Returned
		out.Dropped += r.Dropped
		out.Buried += int64(len(r.Buried))
		for _, task := range r.Buried {
			log.Warn("worqr: task buried as poison: its holders died soon after starting it",
				"queue", queues[i], "task", task, "deaths", c.PoisonLimit, "dead", id)
		}
	}
	if leased {
		return out, nil
	}
	if _, err := c.Store.Deregister(ctx, id, true); err != nil {
		return out, c.Fail("reclaim", "", err)
	}
	out.Done = true
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
