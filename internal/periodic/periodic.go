// Package periodic runs a worker's periodic schedules: a timer per
// schedule, by the worker's estimate of the Redis clock, and tick.lua,
// which enqueues each tick once across the fleet, with no leader: the
// queue's periodic hash keeps the last tick enqueued per schedule name.
// Of several ticks due at once only the latest is enqueued
// (docs/scheduling.md tells the whole story).
package periodic

import (
	"context"
	"log/slog"
	"time"

	"github.com/worqr/worqr/internal/clock"
	"github.com/worqr/worqr/internal/delayed"
	"github.com/worqr/worqr/internal/outage"
	"github.com/worqr/worqr/internal/startstop"
	"github.com/worqr/worqr/internal/store"
	"github.com/worqr/worqr/internal/testsignal"
)

// Schedule says when a schedule's ticks are (the root's Schedule).
type Schedule interface {
	// Next is the first tick after t (zero: none).
	Next(t time.Time) time.Time
}

// Options are a schedule's tasks' own (the root's PeriodicOptions).
type Options struct {
	MaxAttempts int
	Timeout     time.Duration
	Retain      time.Duration
	Weight      int
	Payload     func(tick time.Time) []byte
}

// Env is what a worker's schedules take of it.
type Env struct {
	Clock  clock.Clock
	Redis  *delayed.RedisClock // the worker's estimate of the Redis clock
	Store  *store.Store
	Outage *outage.Outage
	// Fail wraps an error of the call op on queue as the client's errors
	// say it.
	Fail func(op, queue string, err error) error
	// Log is the worker's logger.
	Log func() *slog.Logger
	// TTL bounds a tick: an answer after it is useless.
	TTL time.Duration
	// MaxTaskSize bounds a tick's payload.
	MaxTaskSize int
	// Enqueued tells the client's observer of a tick's task.
	Enqueued func(ctx context.Context, queue, id string)
	// Ticked is the test signal of a tick run (the tick's time).
	Ticked *testsignal.Signal[time.Time]
	// Waiting is the test signal of a wait for a tick, or to try one
	// again, its timer set (the tick's time); nil is off.
	Waiting *testsignal.Signal[time.Time]
}

// Periodic is one registered schedule's component on a worker.
type Periodic struct {
	w       *Env
	queue   string
	name    string
	sched   Schedule
	payload []byte
	opts    Options
	loop    *startstop.Loop
}

// New is the component of the schedule registered under name on queue,
// enqueueing payload (or opts.Payload's) at each tick of sched.
func New(w *Env, queue, name string, sched Schedule, payload []byte, opts Options) *Periodic {
	return &Periodic{w: w, queue: queue, name: name, sched: sched, payload: payload, opts: opts}
}

// Start runs the schedule on life from last, the last tick enqueued as
// far as Redis knows.
func (p *Periodic) Start(life context.Context, last time.Time) {
	p.loop = startstop.NewLoop(func(ctx context.Context) { p.run(ctx, last) })
	_ = p.loop.Start(life) // a Loop's Start does not fail
}

// Stop stops the schedule and waits for a tick under way.
func (p *Periodic) Stop() { p.loop.Stop() }

// retryTickAfter is how long a tick that failed waits to try again.
const retryTickAfter = 250 * time.Millisecond

// maxCatchUpSteps bounds the walk to the latest missed tick.
const maxCatchUpSteps = 10_000

// TickMs is a tick's identity: its time in Unix ms, rounded up, so that
// its task is never enqueued before it.
func TickMs(t time.Time) int64 {
	ms := t.UnixMilli()
	if t.Sub(time.UnixMilli(ms)) > 0 {
		ms++
	}
	return ms
}

// run runs the schedule: it waits for the tick after last (the last tick
// enqueued, as far as the worker knows) and enqueues it, or, when several
// are due already, the latest of them.
func (p *Periodic) run(ctx context.Context, last time.Time) {
	w := p.w
	for ctx.Err() == nil {
		next := p.sched.Next(last)
		if next.IsZero() {
			w.Log().Warn("worqr: periodic schedule has no more ticks", "queue", p.queue, "name", p.name)
			<-ctx.Done()
			return
		}
		next = next.UTC()
		if now := w.Redis.Now(w.Clock); next.After(now) {
			if !p.wait(ctx, next, next.Sub(now)) {
				return
			}
		} else {
			next = latestDue(p.sched, next, now.UTC())
		}
		sent := w.Outage.Begin()
		t, err := p.tick(ctx, next)
		if err == nil {
			w.Outage.OK(sent)
		}
		w.Ticked.Signal(next)
		switch {
		case err != nil:
			if ctx.Err() != nil {
				return
			}
			if !w.Outage.Failed(sent, "periodic", err) {
				w.Log().Warn("worqr: periodic tick failed; retrying", "queue", p.queue, "name", p.name, "tick", next, "err", err)
			}
			if !p.wait(ctx, next, retryTickAfter) {
				return
			}
		case t.Status == store.TickEarly:
			// The clock estimate ran ahead of Redis's; wait the rest.
			if !p.wait(ctx, next, max(time.Millisecond, time.UnixMilli(TickMs(next)).Sub(time.UnixMicro(t.Now)))) {
				return
			}
		default:
			if l := time.UnixMilli(t.Last).UTC(); l.After(last) {
				last = l
			}
			if !next.Before(last) {
				last = next // a tick whose ms rounds up stays behind us
			}
		}
	}
}

// wait waits d for the tick next (or to try it again), or until ctx ends;
// false if it ended.
func (p *Periodic) wait(ctx context.Context, next time.Time, d time.Duration) bool {
	t := p.w.Clock.NewTimer(d)
	defer t.Stop()
	if p.w.Waiting != nil {
		p.w.Waiting.Signal(next)
	}
	select {
	case <-ctx.Done():
		return false
	case <-t.C():
		return true
	}
}

// tick runs tick.lua for one tick, keeping the clock estimate fresh.
func (p *Periodic) tick(ctx context.Context, at time.Time) (store.Ticked, error) {
	w := p.w
	payload := p.payload
	if p.opts.Payload != nil {
		payload = p.opts.Payload(at)
		if len(payload) > w.MaxTaskSize {
			w.Log().Error("worqr: periodic payload too large; tick skipped", "queue", p.queue, "name", p.name, "tick", at, "size", len(payload), "limit", w.MaxTaskSize)
			return store.Ticked{Status: store.TickSkipped, Last: TickMs(at)}, nil
		}
	}
	tctx, cancel := context.WithTimeout(ctx, w.TTL)
	defer cancel()
	sent := w.Clock.Now()
	t, err := w.Store.Tick(tctx, p.queue, p.name, TickMs(at), p.NextMs(at), payload, store.EnqueueArgs{MaxAttempts: p.opts.MaxAttempts, Timeout: p.opts.Timeout, Retain: p.opts.Retain, Weight: p.opts.Weight})
	if t.Now > 0 {
		w.Redis.Observe(t.Now, sent, w.Clock.Now())
	}
	if err != nil {
		return t, w.Fail("periodic", p.queue, err)
	}
	if t.Status == store.TickEnqueued {
		w.Enqueued(ctx, p.queue, t.ID)
	}
	return t, nil
}

// NextMs is the schedule's first tick after t (Unix ms, as TickMs), 0 if
// none: what Redis keeps of when the schedule ticks next, for inspection.
func (p *Periodic) NextMs(t time.Time) int64 {
	next := p.sched.Next(t)
	if next.IsZero() {
		return 0
	}
	return TickMs(next)
}

// latestDue is the latest tick of s not after now, given first, a tick
// not after now. It jumps close to now before walking, so that a schedule
// idle for long does not walk every tick it missed.
func latestDue(s Schedule, first, now time.Time) time.Time {
	latest := first
	for d := time.Millisecond; now.Add(-d).After(latest); d *= 2 {
		if t := s.Next(now.Add(-d)); !t.IsZero() && !t.After(now) && t.After(latest) {
			latest = t
			break
		}
	}
	for range maxCatchUpSteps {
		t := s.Next(latest)
		if t.IsZero() || t.After(now) || !t.After(latest) {
			break
		}
		latest = t
	}
	return latest.UTC()
}
