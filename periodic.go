package worqr

import (
	"context"
	"fmt"
	"time"

	"github.com/worqr/worqr/internal/periodic"
	"github.com/worqr/worqr/internal/store"
)

// Schedule says when a periodic task is due: Next returns the first tick
// strictly after t (given in UTC), or the zero time if there is none. It
// must be deterministic: every worker that registers a schedule under a
// name must compute the same ticks. The cron sub-package parses cron
// expressions into Schedules; Every makes an interval.
type Schedule interface {
	Next(t time.Time) time.Time
}

// Every is a schedule that ticks every d, at the multiples of d since the
// Unix epoch (so Every(time.Hour) ticks on the hour, UTC), whatever the
// time the workers start. d must be at least a millisecond.
func Every(d time.Duration) Schedule { return periodic.Every(d) }

// PeriodicOptions configure a periodic schedule's tasks.
type PeriodicOptions struct {
	// MaxAttempts, Timeout and Retain are the tasks' own, as the enqueue
	// options of those names give them (0: the queue's, or none; a
	// negative MaxAttempts: no limit).
	MaxAttempts int
	Timeout     time.Duration
	Retain      time.Duration
	// Weight is the tasks' weight under the queue's concurrency limit, as
	// the Weight enqueue option gives it (0 or 1: one slot each).
	Weight int
	// Payload, when set, makes each tick's payload from the tick's time
	// (UTC) instead of the fixed payload, for handlers that want to know
	// which tick they run for. It must be deterministic, as the schedule
	// must: whichever worker enqueues a tick calls it.
	Payload func(tick time.Time) []byte
}

// MaxPeriodicNameLen is the longest schedule name accepted, in bytes.
const MaxPeriodicNameLen = 1024

const _ = uint(MaxPeriodicNameLen-periodic.MaxNameLen) + uint(periodic.MaxNameLen-MaxPeriodicNameLen)

// Periodic registers a schedule: from now on, at every tick of sched, the
// worker enqueues payload on queue, as long as the worker runs (until
// Shutdown, Close or StopPeriodic). Register the same schedule, under the
// same name, on several workers: each tick is enqueued once across the
// fleet, by the Redis clock, never before the tick, and the ticks go on
// while any of them lives; of several ticks due at once, only the latest
// is enqueued (Periodic tasks in docs/scheduling.md tells how).
//
// Workers registering a name should give the same schedule: a tick of any
// of them later than the last one enqueued is enqueued. A bad name (empty
// or over MaxPeriodicNameLen bytes), a nil schedule or one whose ticks do
// not advance by at least a millisecond, negative options, or a name
// already registered on the worker for the queue give ErrInvalidOptions.
// ctx bounds the registration only, which reads the schedule's last tick
// from Redis.
func (w *Worker) Periodic(ctx context.Context, name, queue string, sched Schedule, payload []byte, opts PeriodicOptions) error {
	c := w.c
	if err := c.core.Validate(ctx, "periodic", queue); err != nil {
		return err
	}
	if err := periodic.Check(name, sched, periodic.Options(opts), c.core.Clock.Now()); err != nil {
		return fmt.Errorf("worqr: periodic %q on %q: %w", name, queue, err)
	}
	if len(payload) > c.core.MaxTaskSize {
		return fmt.Errorf("worqr: periodic %q on %q: %w", name, queue, c.tooLarge(-1, len(payload)))
	}
	p := periodic.New(w.parts.PeriodicEnv(), queue, name, sched, payload, periodic.Options(opts))
	key := periodic.Key{Queue: queue, Name: name}
	if w.parts.Periodics.Has(key) {
		return fmt.Errorf("worqr: periodic %q on %q: already registered on this worker: %w", name, queue, ErrInvalidOptions)
	}
	sent := c.core.Clock.Now()
	t, err := c.core.Store.Tick(ctx, queue, name, 0, p.NextMs(w.parts.Clock.Now(c.core.Clock)), nil, store.EnqueueArgs{})
	if err != nil {
		return c.core.Fail("periodic", queue, err)
	}
	w.parts.Clock.Observe(t.Now, sent, c.core.Clock.Now())
	switch ok, closed := w.parts.Periodics.Start(key, p, w.core.Life(), time.UnixMilli(t.Last).UTC()); {
	case closed:
		return fmt.Errorf("worqr: periodic %q on %q: %w", name, queue, ErrWorkerClosed)
	case !ok:
		return fmt.Errorf("worqr: periodic %q on %q: already registered on this worker: %w", name, queue, ErrInvalidOptions)
	}
	return nil
}

// StopPeriodic stops running the schedule registered under name for
// queue on this worker, and reports whether there was one. Other workers
// that registered it go on; the record of its last tick stays in Redis.
func (w *Worker) StopPeriodic(name, queue string) bool {
	return w.parts.Periodics.Stop(periodic.Key{Queue: queue, Name: name})
}
