package worqr

// The root's side of the engine's components under internal/: what each
// takes of the client, and the worker as each one's member.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/worqr/worqr/internal/beat"
	"github.com/worqr/worqr/internal/checker"
	"github.com/worqr/worqr/internal/delayed"
	"github.com/worqr/worqr/internal/engine"
	"github.com/worqr/worqr/internal/outage"
	"github.com/worqr/worqr/internal/periodic"
	"github.com/worqr/worqr/internal/reclaim"
	"github.com/worqr/worqr/internal/store"
	"github.com/worqr/worqr/internal/workflow"
)

// reclaimEnv is what the client's reclaimers take of it.
func reclaimEnv(c *Client) *reclaim.Env {
	return &reclaim.Env{
		Clock:  c.clock,
		Store:  c.store,
		Outage: c.outage,
		Fail:   c.fail,
		Reclaimed: func(ctx context.Context, dead string, tasks, poison, dropped int64) {
			c.obs.reclaimed(ctx, ReclaimEvent{DeadWorker: dead, Tasks: tasks, Poison: poison, Dropped: dropped})
		},
		Looked:       &c.signals.looked,
		PoisonLimit:  c.poisonLimit,
		DeadBounds:   c.deadBounds,
		DefaultClaim: DefaultRenewInterval,
	}
}

// delayedEnv is what the timers of the worker's queues' delayed tasks
// take of it.
func delayedEnv(w *Worker) *delayed.Env {
	return &delayed.Env{
		Clock:    w.c.clock,
		Redis:    &w.clock,
		Store:    w.c.store,
		Outage:   w.c.outage,
		Fail:     w.c.fail,
		Log:      w.logger,
		TTL:      w.opts.TTL,
		Armed:    &w.c.signals.armed,
		Promoted: &w.c.signals.promoted,
	}
}

// unsurePasses is how many renewals look for processes after a dequeue's
// reply was lost.
const unsurePasses = 3

// processEnv is what the worker's processes, sessions and lease keeper
// take of it.
func processEnv(w *Worker) engine.Env {
	c := w.c
	return engine.Env{
		Clock:    c.clock,
		Store:    c.store,
		Log:      c.log,
		Writer:   (*outcomeWriter)(w),
		WorkerID: w.ID,
		Validate: c.validateCtx,
		Fail:     c.fail,
		FlowEnded: func(queue, flow, taskID string, outcome engine.Outcome, read *store.NoticeRead) {
			c.flowEnded(queue, flow, taskID, Outcome(outcome), read)
		},
		Finishes:         c.finishes,
		Retries:          c.retries,
		DeadBounds:       c.deadBounds,
		TTL:              w.opts.TTL,
		ProgressInterval: ProgressInterval,
		MaxAttempts:      DefaultMaxAttempts,
		UnsurePasses:     unsurePasses,
		CancelWait:       ShutdownCancelWait,
		Redis:            &w.clock,
		RenewInterval:    w.opts.RenewInterval,
		StayFenced:       w.opts.StayFenced,
		HealthyAfter:     func() store.Poison { return w.reclaimer.HealthyAfter() },
		Signals: engine.Signals{
			Rejoined:     &c.signals.rejoined,
			Registered:   &c.signals.registered,
			QueueRenewed: &c.signals.queueRenewed,
		},
	}
}

// outcomeWriter is a worker as what seeing its processes' outcome writes
// through takes of it (proc.Persist).
type outcomeWriter Worker

func (w *outcomeWriter) Outage() *outage.Outage    { return w.c.outage }
func (w *outcomeWriter) Life() context.Context     { return w.core.Life() }
func (w *outcomeWriter) WriteCtx() context.Context { return w.writes.Ctx(w.core.Life(), w.opts.TTL) }

// beatEnv is what the client's beats take of it; born is when it was
// made, from which its beats count.
func beatEnv(c *Client, born time.Time) *beat.Env {
	return &beat.Env{
		Clock:  c.clock,
		Store:  c.store,
		Outage: c.outage,
		Log:    c.log,
		Fail:   c.fail,
		Born:   born,
		Beat:   &c.signals.beat,
	}
}

// periodicEnv is what the worker's periodic schedules take of it.
func periodicEnv(w *Worker) *periodic.Env {
	c := w.c
	return &periodic.Env{
		Clock:       c.clock,
		Redis:       &w.clock,
		Store:       c.store,
		Outage:      c.outage,
		Fail:        c.fail,
		Log:         w.logger,
		TTL:         w.opts.TTL,
		MaxTaskSize: c.maxTaskSize,
		Enqueued: func(ctx context.Context, queue, id string) {
			c.obs.enqueued(ctx, EnqueueEvent{Queue: queue, TaskIDs: []string{id}})
		},
		Ticked:  &c.signals.ticked,
		Waiting: &c.signals.waiting,
	}
}

// checkEnv is what a consistency check takes of the client.
func checkEnv(c *Client) *checker.Env {
	return &checker.Env{
		Store: c.store,
		Fail:  c.fail,
		Valid: func(queue string) bool { return validQueue("", queue) == nil },
		Reclaim: func(ctx context.Context, id string) (reclaim.Reclaimed, error) {
			return c.reclaimers.Worker(ctx, c.log, id, 2*DefaultTTL, true)
		},
		StepQueue:    workflow.SpecQueue,
		EnqueueSteps: c.enqueueSteps,
		StepTask:     workflow.StepTask,
		ResumeRelease: func(ctx context.Context, queue, id string, end store.StepEnd) error {
			// The end as the workflow recorded it, stamp and all: a
			// replay that records nothing and carries the release on.
			n := store.Notice{Workflow: id, Step: end.Step, Task: end.Task, Status: end.Status,
				Read: &store.NoticeRead{At: end.At, Found: true}}
			errs, err := c.carrier.Batch(ctx, queue, []store.Notice{n})
			if err != nil {
				return err
			}
			return errors.Join(errs...)
		},
	}
}

// reclaimMember is a worker as a member of its client's reclaimer.
type reclaimMember struct{ w *Worker }

func (m reclaimMember) ID() string           { return m.w.ID() }
func (m reclaimMember) Logger() *slog.Logger { return m.w.logger() }

func (m reclaimMember) FencedSince(now time.Time) time.Duration {
	return m.w.core.FencedSince(now)
}

// registryEnv is what the worker's registry entry takes of it (its core
// fills in the fence and the slots).
func registryEnv(w *Worker) *engine.RegistryEnv {
	c := w.c
	return &engine.RegistryEnv{
		Clock:  c.clock,
		Store:  c.store,
		Fail:   c.fail,
		TTL:    w.opts.TTL,
		Served: c.flows.Served,
		Log:    w.logger,
	}
}

// workerHost is the worker as its core takes it (engine.CoreHost): what
// builds or tells of the public types, and what the client holds; a
// conversion, not an allocation.
type workerHost Worker

func (h *workerHost) Started(ctx context.Context, p *engine.Proc) { h.c.obs.started(ctx, p) }

func (h *workerHost) Validate(ctx context.Context, op, queue string) error {
	return h.c.validate(ctx, op, queue)
}

func (h *workerHost) NewProc(queue string, sp store.Proc, started time.Time) *engine.Proc {
	return &newProcessAt((*Worker)(h), queue, sp, started).rec
}

func (h *workerHost) Heard(next time.Duration, dead bool, workers int64) {
	h.reclaimer.Heard(next, dead, workers)
}

func (h *workerHost) Fenced(id, queue string, cause error, lost []*engine.Proc) {
	ev := FenceEvent{WorkerID: id, Queue: queue, Cause: fmt.Errorf("%w: %w", ErrWorkerFenced, cause), Lost: processesOf(lost)}
	// Each is told on a goroutine of its own: a fence happens on the
	// lease keeper's goroutine and under the worker's locks, and either
	// may well call StopWork or Close.
	if h.opts.OnFenced != nil {
		go h.opts.OnFenced(ev)
	}
	if h.c.obs.fence != nil {
		go h.c.obs.fenced(ev)
	}
}

func (h *workerHost) Services() []func() {
	w := (*Worker)(h)
	return []func(){func() { w.reclaimer.Leave(reclaimMember{w}) }, w.periodics.Close}
}

func (h *workerHost) StopTicks()                { h.periodics.Close() }
func (h *workerHost) Flush(ctx context.Context) { h.c.flushStats(ctx, "") }

// Left counts the worker out of its client's workers; the last one's
// leaving stops the workflow sweeps.
func (h *workerHost) Left() {
	c := h.c
	c.mu.Lock()
	_, member := c.workers[(*Worker)(h)]
	delete(c.workers, (*Worker)(h))
	c.mu.Unlock()
	if member {
		c.flows.Left()
	}
}

// Delayed is the timer of queue's delayed tasks, on the worker's life.
func (h *workerHost) Delayed(life context.Context, queue string) *delayed.Scheduler {
	return delayed.New(delayedEnv((*Worker)(h)), life, queue)
}
