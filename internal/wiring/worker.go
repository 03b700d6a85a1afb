package wiring

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/worqr/worqr/internal/delayed"
	"github.com/worqr/worqr/internal/engine"
	"github.com/worqr/worqr/internal/errs"
	"github.com/worqr/worqr/internal/outage"
	"github.com/worqr/worqr/internal/periodic"
	"github.com/worqr/worqr/internal/reclaim"
	"github.com/worqr/worqr/internal/store"
	"github.com/worqr/worqr/internal/writedeadline"
	"github.com/worqr/worqr/worqrtype"
)

// WorkerConfig is what a worker is made of: its options, checked and
// defaulted, and what only the root makes or tells.
type WorkerConfig struct {
	TTL, RenewInterval time.Duration
	StayFenced         bool
	// NewProc makes the record of the process Redis made for sp, held by
	// the root's process (engine.CoreHost's NewProc).
	NewProc func(queue string, sp store.Proc, started time.Time) *engine.Proc
	// Fenced tells the application and the root's observer of a fence
	// (engine.CoreHost's Fenced).
	Fenced func(id, queue string, cause error, lost []*engine.Proc)
}

// Worker is a worker's components besides its core, wired to its
// client's: the reclaimer of dead peers (the client's, shared), its
// estimate of the Redis clock, its periodic schedules and the bound on
// its outcome writes. It is its core's host (engine.CoreHost).
type Worker struct {
	c    *Client
	cfg  WorkerConfig
	Core *engine.Core

	Reclaimer *reclaim.Reclaimer[Member] // returns dead peers' work (the client's, shared)
	Clock     delayed.RedisClock         // the Redis clock, as far as the worker knows it (its own lock)
	// Periodics are the schedules registered (the root's Periodic), each
	// a running component (internal/periodic; their own lock).
	Periodics periodic.Set
	// writes bounds the outcome writes after handlers (engine.Settler).
	writes writedeadline.Deadline
}

// NewWorker registers a worker of core and starts its components: its
// lease keeper, and its membership of the client's reclaimer; ctx bounds
// only the registration. The worker counts among the client's workers
// once it returns.
func (c *Client) NewWorker(ctx context.Context, core *engine.Core, cfg WorkerConfig) (*Worker, error) {
	w := &Worker{c: c, cfg: cfg, Core: core}
	core.Init(w, w.registryEnv())
	id, sent, err := core.Registry.Register(ctx)
	if err != nil {
		return nil, err
	}
	// ctx bounds only the registration: the worker's life keeps its
	// values but not its end.
	life, end := context.WithCancel(context.WithoutCancel(ctx))
	core.Start(id, life, end, w.env())
	w.Reclaimer = c.Reclaimers.Join(Member{w}, cfg.TTL, cfg.RenewInterval)

	core.Lock()
	core.Lease.Extend(sent)
	core.Unlock()
	core.Lease.Start(life, c.Beats, cfg.TTL, cfg.RenewInterval)

	c.mu.Lock()
	if c.closed.Load() {
		c.mu.Unlock()
		_ = w.Close(ctx)
		return nil, fmt.Errorf("worqr: new worker: %w", errs.ErrClientClosed)
	}
	c.workers[w] = struct{}{}
	c.Flows.Joined()
	c.mu.Unlock()
	return w, nil
}

// Close stops the worker at once (the root's Worker.Close): it stops
// taking tasks and cancels its handlers, then closes it; a worker closed
// already is no error.
func (w *Worker) Close(ctx context.Context) error {
	_ = w.Core.Closer.Drain(engine.Expired(ctx)) // stop taking tasks, and cancel handlers at once
	err := w.Core.Closer.Close(ctx, "close")
	if errors.Is(err, errs.ErrWorkerClosed) {
		return nil
	}
	return err
}

// Logger is the client's logger with the worker's current id. Never call
// it while holding the worker's mu (engine.Core).
func (w *Worker) Logger() *slog.Logger {
	return w.c.Log.With("worker", w.Core.ID())
}

// env is what the worker's processes, sessions and lease keeper take of
// it.
func (w *Worker) env() engine.Env {
	c := w.c
	return engine.Env{
		Clock:            c.Clock,
		Store:            c.Store,
		Log:              c.Log,
		Writer:           (*outcomeWriter)(w),
		WorkerID:         w.Core.ID,
		Validate:         c.ValidateCtx,
		Fail:             c.Fail,
		FlowEnded:        c.flowEnded,
		Finishes:         c.Finishes,
		Retries:          c.Retries,
		DeadBounds:       c.cfg.DeadBounds,
		TTL:              w.cfg.TTL,
		ProgressInterval: c.cfg.ProgressInterval,
		MaxAttempts:      c.cfg.MaxAttempts,
		UnsurePasses:     UnsurePasses,
		CancelWait:       c.cfg.CancelWait,
		Redis:            &w.Clock,
		RenewInterval:    w.cfg.RenewInterval,
		StayFenced:       w.cfg.StayFenced,
		HealthyAfter:     func() store.Poison { return w.Reclaimer.HealthyAfter() },
		Signals: engine.Signals{
			Rejoined:     &c.Signals.Rejoined,
			Registered:   &c.Signals.Registered,
			QueueRenewed: &c.Signals.QueueRenewed,
		},
	}
}

// registryEnv is what the worker's registry entry takes of it (its core
// fills in the fence and the slots).
func (w *Worker) registryEnv() *engine.RegistryEnv {
	c := w.c
	return &engine.RegistryEnv{
		Clock:  c.Clock,
		Store:  c.Store,
		Fail:   c.Fail,
		TTL:    w.cfg.TTL,
		Served: c.Flows.Served,
		Log:    w.Logger,
	}
}

// PeriodicEnv is what the worker's periodic schedules take of it.
func (w *Worker) PeriodicEnv() *periodic.Env {
	c := w.c
	return &periodic.Env{
		Clock:       c.Clock,
		Redis:       &w.Clock,
		Store:       c.Store,
		Outage:      c.Outage,
		Fail:        c.Fail,
		Log:         w.Logger,
		TTL:         w.cfg.TTL,
		MaxTaskSize: c.cfg.MaxTaskSize,
		Enqueued: func(ctx context.Context, queue, id string) {
			c.Obs.Enqueued(ctx, worqrtype.EnqueueEvent{Queue: queue, TaskIDs: []string{id}})
		},
		Ticked:  &c.Signals.Ticked,
		Waiting: &c.Signals.Waiting,
	}
}

// outcomeWriter is a worker as what seeing its processes' outcome writes
// through takes of it (proc.Persist).
type outcomeWriter Worker

func (w *outcomeWriter) Outage() *outage.Outage    { return w.c.Outage }
func (w *outcomeWriter) Life() context.Context     { return w.Core.Life() }
func (w *outcomeWriter) WriteCtx() context.Context { return w.writes.Ctx(w.Core.Life(), w.cfg.TTL) }

// The worker as its core's host (engine.CoreHost).

func (w *Worker) NewProc(queue string, sp store.Proc, started time.Time) *engine.Proc {
	return w.cfg.NewProc(queue, sp, started)
}

func (w *Worker) Started(ctx context.Context, p *engine.Proc) {
	if w.c.Obs.Start == nil {
		return
	}
	w.c.Obs.Started(ctx, worqrtype.StartEvent{Queue: p.Queue, TaskID: p.TaskID, ProcessID: p.ID, WorkerID: p.Owner, Kind: p.Kind, Attempt: p.Attempt, EnqueuedAt: p.EnqueuedAt})
}

func (w *Worker) Validate(ctx context.Context, op, queue string) error {
	return w.c.Validate(ctx, op, queue)
}

func (w *Worker) Fenced(id, queue string, cause error, lost []*engine.Proc) {
	w.cfg.Fenced(id, queue, cause, lost)
}

func (w *Worker) Heard(next time.Duration, dead bool, workers int64) {
	w.Reclaimer.Heard(next, dead, workers)
}

func (w *Worker) Services() []func() {
	return []func(){func() { w.Reclaimer.Leave(Member{w}) }, w.Periodics.Close}
}

func (w *Worker) StopTicks()                { w.Periodics.Close() }
func (w *Worker) Flush(ctx context.Context) { w.c.FlushStats(ctx, "") }

// Left counts the worker out of its client's workers; the last one's
// leaving stops the workflow sweeps.
func (w *Worker) Left() {
	c := w.c
	c.mu.Lock()
	_, member := c.workers[w]
	delete(c.workers, w)
	c.mu.Unlock()
	if member {
		c.Flows.Left()
	}
}

// Delayed is the timer of queue's delayed tasks, on the worker's life.
func (w *Worker) Delayed(life context.Context, queue string) *delayed.Scheduler {
	c := w.c
	return delayed.New(&delayed.Env{
		Clock:    c.Clock,
		Redis:    &w.Clock,
		Store:    c.Store,
		Outage:   c.Outage,
		Fail:     c.Fail,
		Log:      w.Logger,
		TTL:      w.cfg.TTL,
		Armed:    &c.Signals.Armed,
		Promoted: &c.Signals.Promoted,
	}, life, queue)
}

// Finished tells the observer how the process r ended.
func (c *Client) Finished(r *engine.Proc, outcome engine.Outcome, reason string, err error) {
	obs := c.Obs.Finish
	if obs == nil {
		return
	}
	obs.ObserveFinish(context.Background(), worqrtype.FinishEvent{
		Queue: r.Queue, TaskID: r.TaskID, ProcessID: r.ID, WorkerID: r.Owner, Kind: r.Kind, Attempt: r.Attempt,
		Outcome: worqrtype.Outcome(outcome), Reason: reason, Duration: c.Clock.Since(r.Started), Err: err,
	})
}

// Member is a worker as a member of its client's reclaimer.
type Member struct{ w *Worker }

func (m Member) ID() string           { return m.w.Core.ID() }
func (m Member) Logger() *slog.Logger { return m.w.Logger() }

func (m Member) FencedSince(now time.Time) time.Duration {
	return m.w.Core.FencedSince(now)
}
