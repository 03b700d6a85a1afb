// Package flows carries workflow tasks' notices to their workflows: at
// once, for a task one of the client's workers ended, and in sweeps, for
// the notices a crash left behind. A carry (carry.go: read, release,
// enqueue the steps made ready, forget) takes the client's store and its
// enqueue of ready steps (release.go); flows.go decides when carries and
// sweeps run.
//
// A workflow's step whose parents have not all ended waits outside its
// queue, in the workflow's state; the end of its last parent releases it
// into its queue. How that stays exact across slots (a workflow's state and its
// queues live in different slots of a cluster) is told in
// docs/workflows.md; in short:
//
//  1. finish.lua and bury.lua (and release.lua for a poison pill) leave a
//     notice of a workflow task's end in its queue's flows set, in the
//     script that ends it; for a workflow whose keys share the queue's
//     slot (a random id is made so: workflow.HomeQueue), finish.lua records a
//     success that makes no step ready in the workflow itself, and leaves
//     no notice: the steps below are for the other ends;
//  2. the worker that ended it then carries the notice to the workflow
//     (wf_release.lua, in the workflow's slot), which records the step's
//     end once (a second carry records nothing) and answers the steps
//     that end made ready; it settles a thousand children a call, and a
//     step with more has steps 2 and 3 run again, from where its
//     release stands, until none is left;
//  3. each ready step is enqueued with a unique key of its own, held for
//     the workflow's keep and a day more, so a second enqueue adds
//     nothing and answers the first task's id (flow_enqueue.lua, many
//     steps a call, in the queue's slot); then marked queued
//     (wf_enqueued.lua); a step of a workflow whose keys share its
//     queue's slot holds no unique key: flow_enqueue.lua enqueues it only
//     while it is ready and marks it queued in the same script, so its
//     state makes a second enqueue add nothing (one whose unique key a
//     release that takes it holds is marked with the holder's id);
//  4. the notice is removed.
//
// Notices of a queue that arrive close together are carried together
// (Flows): one call of each of these per batch (per workflow, for
// those in its slot), not per notice.
//
// A crash between any two of these leaves the notice, and a sweep
// (Flows: when a worker starts serving a queue, and every
// FlowSweepEvery) carries every notice older than FlowSweepAge again;
// each step being idempotent, the replay neither loses a child nor
// enqueues one twice.
package flows

import (
	"cmp"
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/worqr/worqr/internal/clock"
	"github.com/worqr/worqr/internal/coalesce"
	"github.com/worqr/worqr/internal/startstop"
	"github.com/worqr/worqr/internal/store"
	"github.com/worqr/worqr/internal/testsignal"
)

// Env is what the carries and the sweeps take of the client.
type Env struct {
	Clock clock.Clock
	Log   *slog.Logger
	// Carry takes notices of a queue to their workflows, together; it
	// returns an error per notice, or one for all.
	Carry func(ctx context.Context, queue string, notices []store.Notice) ([]error, error)
	// Sweep carries a queue's notices at least age old, and returns how
	// many it carried.
	Sweep func(ctx context.Context, queue string, age time.Duration) (int, error)
	// BatchMax is the most notices carried together.
	BatchMax int
	// Every is how often the sweeper sweeps the queues served; Age how
	// old a notice must be before a sweep carries it (a test's may be 0).
	Every, Age time.Duration
	// Swept is a test signal (may be nil): a sweep of a queue ended,
	// with the notices it carried.
	Swept *testsignal.Signal[int]
}

// Flows is the client's component that carries notices. The notices of a
// queue that arrive while a carry is under way are carried together after
// it (a coalescer, as finishes are joined), so that a fan-out's children
// cost a few script calls per batch, not per child. Its sweeper is a
// service (startstop) that runs only while the client has workers, from
// the first queue one of them serves until the last of them leaves: a
// client whose workers are gone sweeps nothing.
type Flows struct {
	env     *Env
	carries *coalesce.Coalescer[store.Notice, error]
	sweeper *sweeper

	// carryCtx is the carries' own context, ended by Close; carrying
	// tracks the carries under way.
	carryCtx   context.Context
	endCarries context.CancelFunc
	carrying   startstop.Group
	mu         sync.Mutex // guards members, and the sweeper's start and stop
	members    int        // the client's workers
	// closed is set by Close before it stops anything: a sweep that fails
	// because the client is closing says nothing.
	closed atomic.Bool
	qmu    sync.Mutex      // a leaf: the sweeper takes it
	queues map[string]bool // the queues the client's workers served: swept
	age    time.Duration   // Env.Age, or a test's (SetAge)
}

// New makes the carrier of env's client.
func New(env *Env) *Flows {
	f := &Flows{env: env, queues: make(map[string]bool), age: env.Age}
	f.carryCtx, f.endCarries = context.WithCancel(context.Background())
	f.carries = coalesce.New(env.BatchMax, env.Carry)
	f.sweeper = &sweeper{f: f}
	return f
}

// Ended carries n, the notice of a workflow task that a worker of the
// client just ended (the script that ended it wrote the notice), in the
// queue's next batch of carries, on a goroutine of its own, without
// holding up the caller; Close waits for it. A notice not carried stays
// in the queue, for a sweep.
func (f *Flows) Ended(queue string, n store.Notice) {
	f.carrying.Go(func() {
		failed, err := f.carries.Do(f.carryCtx, queue, n)
		if err = cmp.Or(err, failed); err != nil && f.carryCtx.Err() == nil {
			f.env.Log.Warn("worqr: could not release a workflow's next steps; a sweep will", "queue", queue, "workflow", n.Workflow, "step", n.Step, "err", err)
		}
	})
}

// Joined counts a worker of the client in: while it has one, the queues
// its workers serve are swept.
func (f *Flows) Joined() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.members++
}

// Left counts a worker of the client out; the last one's leaving stops the
// sweeper, and waits for a sweep under way (its context ended).
func (f *Flows) Left() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.members--
	if f.members == 0 {
		f.sweeper.Stop()
	}
}

// Served adds a queue a worker of the client starts serving to those
// swept, and sweeps it now, the first time, for notices a crash of an
// earlier worker left; it starts the sweeper if it is not running.
func (f *Flows) Served(ctx context.Context, queue string) {
	f.qmu.Lock()
	first := !f.queues[queue]
	f.queues[queue] = true
	f.qmu.Unlock()
	f.mu.Lock()
	live := !f.closed.Load() && f.members > 0
	if live {
		// The sweeper's own context: it runs until the last worker
		// leaves or Close, not for the caller's call.
		_ = f.sweeper.Start(context.WithoutCancel(ctx))
	}
	f.mu.Unlock()
	if first && live {
		f.sweep(ctx, queue)
	}
}

// SetAge sets how old a notice must be before a sweep carries it, in
// place of Env.Age: a test's sweep carries the notices it just left.
func (f *Flows) SetAge(age time.Duration) {
	f.qmu.Lock()
	defer f.qmu.Unlock()
	f.age = age
}

// Close stops the sweeper and the carries, and waits for those under way.
func (f *Flows) Close() {
	f.closed.Store(true)
	f.mu.Lock()
	f.sweeper.Stop()
	f.mu.Unlock()
	f.endCarries()
	f.carrying.Close()
	f.carries.Close()
}

// sweepAll sweeps every queue served.
func (f *Flows) sweepAll(ctx context.Context) {
	f.qmu.Lock()
	queues := make([]string, 0, len(f.queues))
	for q := range f.queues {
		queues = append(queues, q)
	}
	f.qmu.Unlock()
	for _, q := range queues {
		if ctx.Err() != nil {
			return
		}
		f.sweep(ctx, q)
	}
}

func (f *Flows) sweep(ctx context.Context, queue string) {
	f.qmu.Lock()
	age := f.age
	f.qmu.Unlock()
	n, err := f.env.Sweep(ctx, queue, age)
	if err != nil && ctx.Err() == nil && !f.closed.Load() {
		f.env.Log.Warn("worqr: workflow sweep failed", "queue", queue, "err", err)
	}
	if f.env.Swept != nil {
		f.env.Swept.Signal(n)
	}
}

// sweeper sweeps the queues served every Env.Every, while it runs.
type sweeper struct {
	startstop.Base
	f *Flows
}

// Start starts the sweeper on ctx, unless it runs. Its timer is set
// before Start returns, so that a test that drives the clock by hand
// finds it set.
func (s *sweeper) Start(ctx context.Context) error {
	ctx, ok, started, stopped := s.Begin(ctx)
	if !ok {
		return nil
	}
	every := s.f.env.Every
	t := s.f.env.Clock.NewTimer(every)
	go func() {
		defer stopped()
		defer t.Stop()
		started()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C():
			}
			s.f.sweepAll(ctx)
			t.Reset(every)
		}
	}()
	return nil
}
