package worqr

// The worker's registry entry: its registration under a fresh id, the
// queues it records there, and the handler slots it records per queue.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/worqr/worqr/internal/store"
)

// registry is the worker's side of Redis's registry of workers: it
// registers the worker (a fresh id and its lease), records the queues the
// worker joins and the handler slots it has in each. Its mu serialises
// every change to what the worker is registered as and serves (StartWork,
// StopWork, a rejoin, a re-registration, shutdown), so that the records
// are written in the order of the changes.
type registry struct {
	w  *Worker
	mu sync.Mutex
}

// register registers a fresh worker id with a new registry lease, and
// returns when the registration was sent (the lease counts from then).
func (g *registry) register(ctx context.Context) (id string, sent time.Time, err error) {
	c := g.w.c
	sent = c.clock.Now()
	id, err = workerID(sent)
	if err != nil {
		return "", sent, fmt.Errorf("worqr: register worker: %w", err)
	}
	if err := c.store.RegisterWorker(ctx, id, g.w.opts.TTL); err != nil {
		return "", sent, c.fail("register worker", "", err)
	}
	return id, sent, nil
}

// join records the queue in the registry entry of worker id, then takes a
// lease on it that expires with the registry lease (see join.lua for
// why). A registry lease found gone fences the worker.
func (g *registry) join(ctx context.Context, id, queue string) error {
	c := g.w.c
	unregistered, err := c.store.JoinQueue(ctx, queue, id)
	switch {
	case errors.Is(err, store.ErrLeaseGone):
		g.w.lease.fence(id, errors.New("registry lease gone when starting work"))
		return fmt.Errorf("worqr: start work %q: %w", queue, ErrWorkerFenced)
	case err != nil:
		return c.fail("start work", queue, err)
	case unregistered:
		if err := c.store.RegisterQueue(ctx, queue); err != nil {
			return c.fail("register queue", queue, err)
		}
	}
	c.flows.Served(ctx, queue) // sweeps its workflow notices: now, then now and then
	return nil
}

// recordSlots writes, for inspection (WorkerInfo.Slots), the handler
// slots the worker has in each queue it handles (sessions.slots), as
// Handle or HandleQueues starts on a queue or StopWork ends one, and
// under its new id when it registers again after fencing: never per
// renewal. The caller holds mu. A failure is only logged: the worker
// works the same without it, and its deregistration removes the record.
func (g *registry) recordSlots(ctx context.Context, id string) {
	w := g.w
	w.mu.Lock()
	qs := w.sessions.slots()
	w.mu.Unlock()
	err := w.c.store.SetWorkerSlots(ctx, id, qs)
	if err != nil && !errors.Is(err, store.ErrLeaseGone) {
		w.logger().Warn("worqr: could not record the worker's handler slots (shown by Workers)", "worker", id, "err", err)
	}
}

// slots are the handler slots of each queue of ss served by Handle,
// HandleBatch or HandleQueues, sorted by queue.
func (ss sessions) slots() []store.QueueSlots {
	var qs []store.QueueSlots
	for name, s := range ss {
		if s.runner != nil {
			qs = append(qs, store.QueueSlots{Queue: name, Slots: s.runner.Sched().Size()})
		}
	}
	slices.SortFunc(qs, func(a, b store.QueueSlots) int { return strings.Compare(a.Queue, b.Queue) })
	return qs
}

// workerID is a fresh worker id: a UUIDv7 of the time now, read from the
// client's clock, which tells the reclaimers when the worker joined (the
// poison-pill guard's age of a holder). The reclaimers compare that time
// with Redis's, which the client's clock is read against everywhere else,
// so it must not be the system's own when the client runs on another.
func workerID(now time.Time) (string, error) {
	u, err := uuid.NewV7()
	if err != nil {
		return "", err
	}
	ms := now.UnixMilli()
	for i := 5; i >= 0; i-- { // the 48-bit big-endian Unix milliseconds
		u[i] = byte(ms)
		ms >>= 8
	}
	return u.String(), nil
}
