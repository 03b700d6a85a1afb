package engine

// The worker's registry entry: its registration under a fresh id, the
// queues it records there, and the handler slots it records per queue.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/worqr/worqr/internal/clock"
	"github.com/worqr/worqr/internal/errs"
	"github.com/worqr/worqr/internal/store"
)

// RegistryEnv is what a worker's registry entry takes of the worker and
// its client.
type RegistryEnv struct {
	Clock clock.Clock
	Store *store.Store
	// Fail wraps a failed script call's error.
	Fail func(op, queue string, err error) error
	// TTL is the registry lease's length.
	TTL time.Duration
	// Fence fences the whole worker under id: its registry lease is gone.
	Fence func(id string, cause error)
	// Served tells the client's workflow notices that the worker serves
	// queue.
	Served func(ctx context.Context, queue string)
	// Slots are the worker's handler slots in each queue it handles,
	// sorted by queue.
	Slots func() []store.QueueSlots
	// Log is the worker's logger, with its id.
	Log func() *slog.Logger
}

// Registry is the worker's side of Redis's registry of workers: it
// registers the worker (a fresh id and its lease), records the queues the
// worker joins and the handler slots it has in each. Its lock (Lock,
// Unlock) serialises every change to what the worker is registered as and
// serves (StartWork, StopWork, a rejoin, a re-registration, shutdown), so
// that the records are written in the order of the changes.
type Registry struct {
	env *RegistryEnv
	mu  sync.Mutex
}

// Init sets up the registry entry of a worker with env.
func (g *Registry) Init(env *RegistryEnv) { g.env = env }

// Lock takes the registry's lock: it is taken before a session's gate and
// the worker's mu.
func (g *Registry) Lock() { g.mu.Lock() }

// Unlock releases the registry's lock.
func (g *Registry) Unlock() { g.mu.Unlock() }

// Register registers a fresh worker id with a new registry lease, and
// returns when the registration was sent (the lease counts from then).
func (g *Registry) Register(ctx context.Context) (id string, sent time.Time, err error) {
	env := g.env
	sent = env.Clock.Now()
	id, err = WorkerID(sent)
	if err != nil {
		return "", sent, fmt.Errorf("worqr: register worker: %w", err)
	}
	if err := env.Store.RegisterWorker(ctx, id, env.TTL); err != nil {
		return "", sent, env.Fail("register worker", "", err)
	}
	return id, sent, nil
}

// Join records the queue in the registry entry of worker id, then takes a
// lease on it that expires with the registry lease (see join.lua for
// why). A registry lease found gone fences the worker.
func (g *Registry) Join(ctx context.Context, id, queue string) error {
	env := g.env
	unregistered, err := env.Store.JoinQueue(ctx, queue, id)
	switch {
	case errors.Is(err, store.ErrLeaseGone):
		env.Fence(id, errors.New("registry lease gone when starting work"))
		return fmt.Errorf("worqr: start work %q: %w", queue, errs.ErrWorkerFenced)
	case err != nil:
		return env.Fail("start work", queue, err)
	case unregistered:
		if err := env.Store.RegisterQueue(ctx, queue); err != nil {
			return env.Fail("register queue", queue, err)
		}
	}
	env.Served(ctx, queue) // sweeps its workflow notices: now, then now and then
	return nil
}

// RecordSlots writes, for inspection (the root's WorkerInfo.Slots), the
// handler slots the worker has in each queue it handles, as Handle or
// HandleQueues starts on a queue or StopWork ends one, and under its new
// id when it registers again after fencing: never per renewal. The caller
// holds the registry's lock. A failure is only logged: the worker works
// the same without it, and its deregistration removes the record.
func (g *Registry) RecordSlots(ctx context.Context, id string) {
	env := g.env
	err := env.Store.SetWorkerSlots(ctx, id, env.Slots())
	if err != nil && !errors.Is(err, store.ErrLeaseGone) {
		env.Log().Warn("worqr: could not record the worker's handler slots (shown by Workers)", "worker", id, "err", err)
	}
}

// WorkerID is a fresh worker id: a UUIDv7 of the time now, read from the
// client's clock, which tells the reclaimers when the worker joined (the
// poison-pill guard's age of a holder). The reclaimers compare that time
// with Redis's, which the client's clock is read against everywhere else,
// so it must not be the system's own when the client runs on another.
func WorkerID(now time.Time) (string, error) {
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
