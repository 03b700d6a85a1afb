package worqr

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/worqr/worqr/internal/store"
)

// Peers reclaim the work of dead workers: every RenewInterval (with jitter,
// so peers spread out) each live worker lists the workers whose registry
// lease has expired, and for each one returns its processes, queue by
// queue, to the front of their queues. Only then is the dead worker removed
// from the registry, so a reclaimer that dies half-way leaves the rest to
// the next one. Each step is idempotent: peers reclaiming the same worker
// at once move every task once.

// reclaimBatch bounds how many dead workers one pass handles.
const reclaimBatch = 100

// reclaimer is the worker's component that reclaims dead peers.
type reclaimer struct {
	c     *Client
	every time.Duration // RenewInterval, less or more a tenth
	// window is the poison-pill guard's: twice the worker's TTL, so that
	// a holder that died at once (reclaimed at most TTL and a check
	// interval later) counts, and one that held its task a while does
	// not.
	window time.Duration
	// fencedSince is how long ago the worker last fenced itself (a large
	// value if never): a worker that just came back from an outage does
	// not count its peers' deaths in the outage as poison.
	fencedSince func() time.Duration
	log         func() *slog.Logger // the worker's logger
	svc         *service
}

func (r *reclaimer) start(life context.Context) { r.svc = startService(life, r.loop) }

func (r *reclaimer) stop() { r.svc.stop() }

func (r *reclaimer) loop(ctx context.Context) {
	for {
		window := r.window
		if r.fencedSince != nil && r.fencedSince() < 2*window {
			window = 0
		}
		if _, err := r.c.reclaimDead(ctx, r.log(), window); err != nil && ctx.Err() == nil {
			r.log().Warn("worqr: reclaiming dead workers failed", "err", err)
		}
		jitter := time.Duration(rand.Int64N(int64(r.every)/5+1)) - r.every/10
		t := time.NewTimer(r.every + jitter)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// reclaimDead reclaims every worker whose registry lease has expired and
// returns how many tasks went back to their queues.
func (c *Client) reclaimDead(ctx context.Context, log *slog.Logger, window time.Duration) (int64, error) {
	dead, err := c.store.ExpiredWorkers(ctx, reclaimBatch)
	if err != nil {
		return 0, c.fail("find dead workers", "", err)
	}
	// Several workers dead at once is an outage (Redis paused, restarted
	// or failing over, a network cut), not a task killing its worker: the
	// poison-pill guard counts nothing then.
	if len(dead) > 1 {
		window = 0
	}
	var total int64
	var errs []error
	for _, id := range dead {
		n, done, err := c.reclaimWorker(ctx, id, window)
		total += n
		if err != nil {
			errs = append(errs, err)
		}
		if done {
			log.Info("worqr: reclaimed dead worker", "dead", id, "tasks", n)
			c.obs.reclaimed(ctx, ReclaimEvent{DeadWorker: id, Tasks: n})
		}
	}
	return total, errors.Join(errs...)
}

// reclaimWorker returns one dead worker's processes in every queue it
// served, then deregisters it. It reports done=false, and leaves the worker
// registered for a later pass, while the worker still holds a live lease on
// some queue (its registry lease expired first, or it joined a queue late).
//
// window is the poison-pill guard's: a task whose holder died within it of
// starting the task counts the death (see PoisonLimit).
func (c *Client) reclaimWorker(ctx context.Context, id string, window time.Duration) (total int64, done bool, err error) {
	queues, err := c.store.WorkerQueues(ctx, id)
	if err != nil {
		return 0, false, c.fail("reclaim", "", err)
	}
	rs := make([]store.Release, len(queues))
	for i, q := range queues {
		rs[i] = store.Release{Queue: q, Worker: id, Mode: store.ReleaseExpired, Poison: store.Poison{Limit: c.poisonLimit, Window: window, Bounds: c.deadBounds}}
	}
	leased := false
	for i, r := range c.store.ReleaseAll(ctx, rs) {
		if r.Err != nil {
			return total, false, c.fail("reclaim", queues[i], r.Err)
		}
		leased = leased || r.Refused
		total += r.Returned
	}
	if leased {
		return total, false, nil
	}
	if _, err := c.store.Deregister(ctx, id, true); err != nil {
		return total, false, c.fail("reclaim", "", err)
	}
	return total, true, nil
}
