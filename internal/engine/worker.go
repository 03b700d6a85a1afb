package engine

// The worker as its engine holds it: its lock, its lifecycle, the
// sessions of the queues it serves, its slot schedulers, its life, and
// the components over them (registry entry, lease keeper, closer).

import (
	"context"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/worqr/worqr/internal/delayed"
	"github.com/worqr/worqr/internal/lifecycle"
	"github.com/worqr/worqr/internal/store"
	"github.com/worqr/worqr/worqrtype"
)

// CoreHost is what a worker's core takes of the root and its client
// (internal/wiring's Worker, given the root's processes and fence
// callback): what builds or tells of the public types (a process, an observer's events, the
// application's fence callback) and what the client holds (its
// validation, its reclaimer, its periodic schedules, its stats, its
// count of workers).
type CoreHost interface {
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
	// Fenced tells the application (and the observer) that worker id
	// fenced itself (queue is empty) or gave up its lease on queue, for
	// cause, ending lost. It is called under the worker's locks: it
	// tells them on goroutines of their own.
	Fenced(id, queue string, cause error, lost []*Proc)
	// Heard tells the reclaimer what a registry renewal heard: when the
	// next peer's lease runs out, whether a dead worker waits, and how
	// many workers the registry holds.
	Heard(next time.Duration, dead bool, workers int64)
	// Services are the stops of the worker's services the engine does
	// not hold (its membership of the reclaimer, its periodic
	// schedules), run in parallel with the rest.
	Services() []func()
	// StopTicks stops the worker's periodic schedules: a draining worker
	// enqueues no more ticks.
	StopTicks()
	// Flush writes the stats counts the client holds.
	Flush(ctx context.Context)
	// Left tells the client that the worker no longer counts among its
	// workers.
	Left()
	// Delayed is the timer of queue's delayed tasks, on life.
	Delayed(life context.Context, queue string) *delayed.Scheduler
}

// WorkerHost is a worker's core as every component of its engine takes it:
// the host of its runtimes, dequeues and slot schedulers, of its
// sessions (their serving, fences, rejoins and reconciliations), of its
// lease keeper and deadline, and of its closer.
type WorkerHost interface {
	PoolHost
	RuntimeHost
	KeeperHost
	CloserHost
}

// Core is a worker as its engine holds it: its mu and what the mu guards
// (its lifecycle, the sessions of the queues it serves, the slot
// schedulers of its pools), its life, and its registry entry, lease
// keeper, closer and environment. A wiring.Worker holds one and is its
// host (CoreHost), with what needs the public types from the root. Init
// and Start set it up; its components are set up by Start and never
// change after.
//
// # Lock order
//
// Every mutex of the root package (worqr) and of its packages under
// internal/ (named by package where they are not the engine's), in the
// one order they are taken: a goroutine holding one takes only those
// after it. Each edge of the nesting (a lock taken while another is
// held) goes forward in this list, so the order is acyclic. The engine's
// hosts lock no mutex of their own: Locked's Lock is Core.mu (the
// worker's mu), Joiner's is Registry.mu.
//
//  1. Registry.mu (the worker's registry entry: changes to what
//     it serves; held across its Redis calls)
//  2. Scheduler.turn (held while it dequeues for a member and starts
//     its handlers)
//  3. Session.Gate (a queue's gate; dequeues hold it shared)
//  4. Keeper.beatMu (the beat reads what to renew, and takes in
//     answers, under it: it is held around Core.mu, Lease.mu,
//     Books.mu, proc.State.mu, reclaim.Reclaimer.mu and the
//     worker's tasks)
//  5. Core.mu
//  6. Lease.mu, then Books.mu (a session's lease and its
//     books of processes: taken under Core.mu where a session's
//     decision must be atomic with the worker's identity and lifecycle,
//     or alone; the lease takes its books' mu under its own for a
//     decision over both. A session never takes Core.mu while holding
//     either, and holds one session's at a time; under the books' mu
//     only proc.State.mu is taken, by Runtime.CancelAll through
//     Books.InterruptAll)
//  7. beat.Beats.mu, then reclaim.Reclaimers.mu (each around its loops'
//     members.Set.mu)
//  8. store.Store.hubsMu (the channels' hubs), then store.hub.mu (an
//     RWMutex, held shared while the hub's listeners are called: they
//     take subscription.Mailbox.mu, or waiters.Waiters.mu)
//  9. waiters.Waiters.mu, then waiters.Waiter.mu
//  10. periodic.Set.mu (the worker's schedules: it starts one under it),
//     statsflush.Flusher.mu (it takes the store's statsBuf.mu, and starts
//     a run), delayed.Scheduler.mu (a queue's timer of delayed tasks:
//     it starts its loop under it), wiring.Client.mu then flows.Flows.mu (a new
//     worker is counted in under both; the workflow sweeper starts and
//     stops under flows.Flows.mu), Batcher.mu (a HandleBatch's batch
//     filling: it asks the runtime under it whether it takes work, which
//     takes Scheduler.mu)
//  11. startstop.Base.mu of a service (taken to start one: under
//     periodic.Set.mu for a periodic schedule, under delayed.Scheduler.mu for
//     a timer of delayed tasks, under beat.Beats.mu or
//     reclaim.Reclaimers.mu for their loops, under waiters.Waiters.mu for
//     a Wait's subscription, under statsflush.Flusher.mu for the
//     flusher's run, under flows.Flows.mu for the sweeper), then startstop.Group.mu (the worker's tasks, taken
//     under Core.mu and Keeper.beatMu; a coalescer's senders)
//  12. reclaim.Reclaimer.mu (a reclaimer's next look), then members.Set.mu
//     (its loop's draw counts the members under it: reclaim.Reclaimer.share)
//  13. The leaves, under which nothing else is locked: Scheduler.mu
//     (the slots and every member's work flags), pacer.Pacer.mu (a
//     member's retry and rate-limit timers), proc.State.mu (a process's
//     end, result and progress), subscription.Mailbox.mu (a dispatcher's
//     events), outage.Outage.mu (the client's outage), coalesce.Coalescer.mu
//     (the batches waiting), flows.Flows.qmu (the workflow sweeper's
//     queues), worqr.Router.mu (its registrations), connect.boundDials.mu (the
//     dials made while a client is made), store.statsBuf.mu (the stats
//     counts pending), store.idHints.mu (an enqueue's guess of its ids),
//     queuestats.Reader.mu (held across a stats read's Redis calls, which
//     lock none of these) and queuestats.bound.mu (the admission of a new
//     label value), the last two taken by the exporters under no other
//     lock. (The worker's delayed.RedisClock takes no lock:
//     Scheduler.mu and delayed.Scheduler.mu read it.)
//  14. In tests, clock.Fake.mu: timers are set and stopped under any of
//     the above, and its AfterFunc callbacks run on goroutines of their
//     own.
//
// A service's Stop holds its Base.mu until the run has ended, so it is
// called holding no lock its run takes: the worker stops its services
// (Closer.StopComponents) holding none, and the stats flusher is stopped only
// after it was closed under statsflush.Flusher.mu, so that pending, which
// starts a run under that lock, no longer does. The workflow sweeper is
// stopped under flows.Flows.mu, which its run never takes.
type Core struct {
	// Registry registers the worker and records what it serves; its lock
	// serialises changes to those.
	Registry Registry
	// Lease renews the leases and fences the worker; its Deadline is
	// guarded by mu.
	Lease Keeper
	// Closer drains and closes the worker: it owns life's end and the
	// worker's one-shot goroutines.
	Closer Closer
	// Env is what the worker's processes, sessions and components take
	// of it.
	Env Env

	root CoreHost
	// life is the worker's run context: every loop and one-shot goroutine
	// of the worker runs on it (or on a context derived from it), and the
	// closer ends it before it stops them.
	life context.Context

	mu sync.Mutex // guards the fields below, and the lease keeper's deadlines
	// state is the worker's lifecycle: its id, its phase, its fence.
	state lifecycle.Worker
	// sessions are the queues served, by name; each holds its in-flight
	// processes (Books, the one map of them).
	sessions Sessions
	// pools are the slot schedulers of HandleQueues, each a running loop
	// (Handle's are reached through the queues served).
	pools []*Scheduler
}

// Init sets up the core of a worker over root, with its registry entry's
// environment reg, whose Fence and Slots it fills in: the core's lease
// keeper fences, and its sessions hold the slots. Register with Registry,
// then Start.
func (c *Core) Init(root CoreHost, reg *RegistryEnv) {
	c.root = root
	c.sessions = make(Sessions)
	reg.Fence = func(id string, cause error) { c.Lease.Fence(id, cause) }
	reg.Slots = func() []store.QueueSlots {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.sessions.Slots()
	}
	c.Registry.Init(reg)
}

// Start makes the core that of the worker registered as id, living on
// life until end, with env, and sets up its closer and lease keeper (the
// caller starts the keeper).
func (c *Core) Start(id string, life context.Context, end context.CancelFunc, env Env) {
	c.mu.Lock()
	c.state.ToRegistered(id)
	c.mu.Unlock()
	c.life, c.Env = life, env
	h := c.Host()
	c.Closer.Init(h, &c.Env, end)
	c.Lease.Init(h, &c.Env, &c.Registry)
}

// Host is the core as its components take it (pointer-shaped: no
// allocation).
func (c *Core) Host() WorkerHost { return coreHost{c} }

// Life is the worker's run context.
func (c *Core) Life() context.Context { return c.life }

// Lock takes the worker's mu.
func (c *Core) Lock() { c.mu.Lock() }

// Unlock releases the worker's mu.
func (c *Core) Unlock() { c.mu.Unlock() }

// Worker is the worker's lifecycle. The caller holds the worker's mu.
func (c *Core) Worker() *lifecycle.Worker { return &c.state }

// Session is the session serving queue, nil if none. The caller holds
// the worker's mu.
func (c *Core) Session(queue string) *Session { return c.sessions[queue] }

// Served is the worker's sessions. The caller holds the worker's mu.
func (c *Core) Served() Sessions { return c.sessions }

// ID is the worker's current id.
func (c *Core) ID() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.state.ID()
}

// Queues lists the queues the worker serves.
func (c *Core) Queues() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.AppendSeq(make([]string, 0, len(c.sessions)), maps.Keys(c.sessions))
}

// Pools are the worker's current id and its slot schedulers: those of
// its HandleQueues calls and of the Handle calls of the queues it
// serves.
func (c *Core) Pools() (id string, pools []*Scheduler) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.state.ID(), c.sessions.Pools(c.pools)
}

// Slots is a snapshot of the handler slots of the worker's pools, those
// with a queue still served (the root's Worker.Slots).
func (c *Core) Slots() []worqrtype.PoolSlots {
	id, scheds := c.Pools()
	var out []worqrtype.PoolSlots
	for _, s := range scheds {
		if qs, size, busy, free, taking := s.Snapshot(); taking {
			out = append(out, worqrtype.PoolSlots{Worker: id, Queues: qs, Size: size, Busy: busy, Free: free})
		}
	}
	return out
}

// Closed reports whether the worker is closed, or closing.
func (c *Core) Closed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.state.IsClosed()
}

// FencedSince is how long the worker has been fenced at now, zero if it
// is not.
func (c *Core) FencedSince(now time.Time) time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.state.FencedSince(now)
}

// coreHost is a core as its components take it (WorkerHost): what only the
// root has it asks of its CoreHost.
type coreHost struct{ c *Core }

func (h coreHost) Lock()                         { h.c.mu.Lock() }
func (h coreHost) Unlock()                       { h.c.mu.Unlock() }
func (h coreHost) Worker() *lifecycle.Worker     { return &h.c.state }
func (h coreHost) Session(queue string) *Session { return h.c.sessions[queue] }
func (h coreHost) Served() Sessions              { return h.c.sessions }
func (h coreHost) Env() *Env                     { return &h.c.Env }
func (h coreHost) Deadline() *Deadline           { return &h.c.Lease.Deadline }
func (h coreHost) Registry() Joiner              { return &h.c.Registry }
func (h coreHost) Go(f func(life context.Context)) {
	h.c.Closer.Go(func() { f(h.c.life) })
}

func (h coreHost) Sessions(dst []*Session) []*Session {
	return slices.AppendSeq(slices.Grow(dst, len(h.c.sessions)), maps.Values(h.c.sessions))
}

// LeaseLost hands the lease keeper the evidence that the lease of worker
// id on s's queue is gone; the keeper judges whether s still serves it.
func (h coreHost) LeaseLost(id string, s *Session, cause error) {
	h.c.Lease.LeaseLost(id, s.Name, s, nil, cause)
}

func (h coreHost) AddPool(pool *Scheduler) { h.c.pools = append(h.c.pools, pool) }

func (h coreHost) TakePools() []*Scheduler {
	pools := h.c.pools
	h.c.pools = nil
	return pools
}

func (h coreHost) RecordSlots(ctx context.Context, id string) { h.c.Registry.RecordSlots(ctx, id) }

// NewSession makes the session of a queue, over the core as its host,
// and subscribes it to the queue's events.
func (h coreHost) NewSession(queue string, events Events, r *Runtime, deadline time.Time) *Session {
	s := new(Session)
	s.Init(h, &h.c.Env, queue, events, r, deadline, h.c.root.Delayed(h.c.life, queue))
	s.Subscribe(h.c.life)
	return s
}

// Services are the lease keeper's stop and the root's services'.
func (h coreHost) Services() []func() {
	return append([]func(){h.c.Lease.Stop}, h.c.root.Services()...)
}

func (h coreHost) NewProc(queue string, sp store.Proc, started time.Time) *Proc {
	return h.c.root.NewProc(queue, sp, started)
}

func (h coreHost) Started(ctx context.Context, p *Proc) { h.c.root.Started(ctx, p) }

func (h coreHost) Validate(ctx context.Context, op, queue string) error {
	return h.c.root.Validate(ctx, op, queue)
}

func (h coreHost) Fenced(id, queue string, cause error, lost []*Proc) {
	h.c.root.Fenced(id, queue, cause, lost)
}

func (h coreHost) Heard(next time.Duration, dead bool, workers int64) {
	h.c.root.Heard(next, dead, workers)
}

func (h coreHost) StopTicks()                { h.c.root.StopTicks() }
func (h coreHost) Flush(ctx context.Context) { h.c.root.Flush(ctx) }
func (h coreHost) Left()                     { h.c.root.Left() }
