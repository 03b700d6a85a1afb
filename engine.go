package worqr

// The root's side of the engine's components under internal/: what each
// takes of the client, and the worker as each one's member.

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/worqr/worqr/internal/beat"
	"github.com/worqr/worqr/internal/checker"
	"github.com/worqr/worqr/internal/clock"
	"github.com/worqr/worqr/internal/delayed"
	"github.com/worqr/worqr/internal/engine"
	"github.com/worqr/worqr/internal/lifecycle"
	"github.com/worqr/worqr/internal/outage"
	"github.com/worqr/worqr/internal/periodic"
	"github.com/worqr/worqr/internal/reclaim"
	"github.com/worqr/worqr/internal/store"
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

// processEnv is what the worker's processes take of it.
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
	}
}

// outcomeWriter is a worker as what seeing its processes' outcome writes
// through takes of it (proc.Persist).
type outcomeWriter Worker

func (w *outcomeWriter) Outage() *outage.Outage    { return w.c.outage }
func (w *outcomeWriter) Life() context.Context     { return w.life }
func (w *outcomeWriter) WriteCtx() context.Context { return w.writes.Ctx(w.life, w.opts.TTL) }

// slotHost is a worker as its runtimes and dequeues take it
// (engine.Worker; a conversion, not an allocation).
type slotHost Worker

func (h *slotHost) Clock() clock.Clock                          { return h.c.clock }
func (h *slotHost) RedisClock() *delayed.RedisClock             { return &h.clock }
func (h *slotHost) Env() *engine.Env                            { return &h.env }
func (h *slotHost) Lock()                                       { h.mu.Lock() }
func (h *slotHost) Unlock()                                     { h.mu.Unlock() }
func (h *slotHost) StateLocked() *lifecycle.Worker              { return &h.state }
func (h *slotHost) Started(ctx context.Context, p *engine.Proc) { h.c.obs.started(ctx, p) }

func (h *slotHost) Validate(ctx context.Context, op, queue string) error {
	return h.c.validate(ctx, op, queue)
}

func (h *slotHost) SessionLocked(queue string) (*engine.Session, *engine.Runtime) {
	if s := h.sessions[queue]; s != nil {
		return &s.Session, s.runtime
	}
	return nil, nil
}

func (h *slotHost) NewProc(queue string, sp store.Proc, started time.Time) *engine.Proc {
	return &newProcessAt((*Worker)(h), queue, sp, started).rec
}

// LeaseLost hands the lease keeper the evidence that the lease of worker
// id on s's queue is gone; the keeper judges whether s still serves it.
func (h *slotHost) LeaseLost(id string, s *engine.Session, cause error) {
	(*Worker)(h).lease.LeaseLost(id, s.Name, s, nil, cause)
}

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
		StepQueue: func(spec string) (string, bool) {
			var s stepSpec
			if err := json.Unmarshal([]byte(spec), &s); err != nil {
				return "", false
			}
			return s.Queue, true
		},
		EnqueueSteps: c.enqueueSteps,
		StepTask:     stepTask,
	}
}

// reclaimMember is a worker as a member of its client's reclaimer.
type reclaimMember struct{ w *Worker }

func (m reclaimMember) ID() string           { return m.w.ID() }
func (m reclaimMember) Logger() *slog.Logger { return m.w.logger() }

func (m reclaimMember) FencedSince(now time.Time) time.Duration {
	m.w.mu.Lock()
	defer m.w.mu.Unlock()
	return m.w.state.FencedSince(now)
}

// registryEnv is what the worker's registry entry takes of it.
func registryEnv(w *Worker) *engine.RegistryEnv {
	c := w.c
	return &engine.RegistryEnv{
		Clock:  c.clock,
		Store:  c.store,
		Fail:   c.fail,
		TTL:    w.opts.TTL,
		Fence:  func(id string, cause error) { w.lease.Fence(id, cause) },
		Served: c.flows.Served,
		Slots: func() []store.QueueSlots {
			w.mu.Lock()
			defer w.mu.Unlock()
			return w.sessions.slots()
		},
		Log: w.logger,
	}
}

// sessionHost is a worker as the host of its sessions' fences, rejoins
// and reconciliations (engine.SessionHost), and of its lease keeper's
// deadline (engine.DeadlineHost).
type sessionHost Worker

func (w *sessionHost) Lock()                           { w.mu.Lock() }
func (w *sessionHost) Unlock()                         { w.mu.Unlock() }
func (w *sessionHost) Worker() *lifecycle.Worker       { return &w.state }
func (w *sessionHost) Env() *engine.Env                { return &w.env }
func (w *sessionHost) Outage() *outage.Outage          { return w.c.outage }
func (w *sessionHost) RenewInterval() time.Duration    { return w.opts.RenewInterval }
func (w *sessionHost) Logger() *slog.Logger            { return (*Worker)(w).logger() }
func (w *sessionHost) HealthyAfter() store.Poison      { return w.reclaimer.HealthyAfter() }
func (w *sessionHost) Margin() time.Duration           { return w.lease.Margin() }
func (w *sessionHost) LeaseAt() time.Time              { return w.lease.At() }
func (w *sessionHost) Arm()                            { w.lease.Arm() }
func (w *sessionHost) Registry() sync.Locker           { return &w.registry }
func (w *sessionHost) Go(f func(life context.Context)) { w.closer.tasks.Go(func() { f(w.life) }) }
func (w *sessionHost) Rejoined(queue string)           { w.c.signals.rejoined.Signal(queue) }

func (w *sessionHost) FenceWorker(id string, cause error) { w.lease.Fence(id, cause) }
func (w *sessionHost) StayFenced() bool                   { return w.opts.StayFenced }
func (w *sessionHost) Alive() bool                        { return w.life.Err() == nil }
func (w *sessionHost) QueueRenewed(queue string)          { w.c.signals.queueRenewed.Signal(queue) }

func (w *sessionHost) Heard(next time.Duration, dead bool, workers int64) {
	w.reclaimer.Heard(next, dead, workers)
}

func (w *sessionHost) Registered(id string) { w.c.signals.registered.Signal(id) }

func (w *sessionHost) Session(queue string) *engine.Session {
	if s := w.sessions[queue]; s != nil {
		return &s.Session
	}
	return nil
}

func (w *sessionHost) Sessions() []*engine.Session {
	out := make([]*engine.Session, 0, len(w.sessions))
	for _, s := range w.sessions {
		out = append(out, &s.Session)
	}
	return out
}

func (w *sessionHost) Serves(s *engine.Session) bool {
	cur := w.sessions[s.Name]
	return cur != nil && &cur.Session == s
}

func (w *sessionHost) Join(ctx context.Context, id, queue string) error {
	return w.registry.Join(ctx, id, queue)
}

func (w *sessionHost) Fenced(id, queue string, cause error, lost []*engine.Proc) {
	ev := FenceEvent{WorkerID: id, Queue: queue, Cause: fmt.Errorf("%w: %w", ErrWorkerFenced, cause), Lost: processesOf(lost)}
	w.c.tellFenced(w.opts.OnFenced, ev)
}
