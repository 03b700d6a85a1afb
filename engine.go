package worqr

// The root's side of the engine's components under internal/: what each
// takes of the client, and the worker as each one's member.

import (
	"context"
	"log/slog"
	"time"

	"github.com/worqr/worqr/internal/delayed"
	"github.com/worqr/worqr/internal/reclaim"
)

// reclaimEnv is what the client's reclaimers take of it.
func (c *Client) reclaimEnv() *reclaim.Env {
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
func (w *Worker) delayedEnv() *delayed.Env {
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

// reclaimMember is a worker as a member of its client's reclaimer.
type reclaimMember struct{ w *Worker }

func (m reclaimMember) ID() string           { return m.w.ID() }
func (m reclaimMember) Logger() *slog.Logger { return m.w.logger() }

func (m reclaimMember) FencedSince(now time.Time) time.Duration {
	m.w.mu.Lock()
	defer m.w.mu.Unlock()
	return m.w.state.fencedSince(now)
}
