package worqr

// The root's side of the engine's components under internal/: what each
// takes of the client, and the worker as each one's member.

import (
	"context"
	"encoding/json"
	"log/slog"
	"time"

	"github.com/worqr/worqr/internal/beat"
	"github.com/worqr/worqr/internal/checker"
	"github.com/worqr/worqr/internal/clock"
	"github.com/worqr/worqr/internal/delayed"
	"github.com/worqr/worqr/internal/engine"
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
		FlowEnded: func(queue, flow, taskID string, outcome engine.Outcome) {
			c.flowEnded(queue, flow, taskID, Outcome(outcome))
		},
		Finishes:         c.finishes,
		Retries:          c.retries,
		DeadBounds:       c.deadBounds,
		TTL:              w.opts.TTL,
		ProgressInterval: ProgressInterval,
		MaxAttempts:      DefaultMaxAttempts,
	}
}

// outcomeWriter is a worker as what seeing its processes' outcome writes
// through takes of it (proc.Persist).
type outcomeWriter Worker

func (w *outcomeWriter) Outage() *outage.Outage    { return w.c.outage }
func (w *outcomeWriter) Life() context.Context     { return w.life }
func (w *outcomeWriter) WriteCtx() context.Context { return w.writes.Ctx(w.life, w.opts.TTL) }

// pacerClocks is a worker as the clocks of its runtime members' timers.
type pacerClocks Worker

func (w *pacerClocks) Clock() clock.Clock              { return w.c.clock }
func (w *pacerClocks) RedisClock() *delayed.RedisClock { return &w.clock }

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

// beatMember is a worker's lease keeper as a member of its client's beat.
type beatMember struct{ k *leaseKeeper }

func (m beatMember) Renewal() (renewal, store.Keepalive, bool) {
	r, ok := m.k.renewal()
	return r, r.keepalive, ok
}

func (m beatMember) Renewed(r renewal, sent time.Time, k store.KeptAlive, err error) {
	m.k.renewed(r, sent, k, err)
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
