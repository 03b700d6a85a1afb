// Package backoff is the capped exponential delay of the loops that retry a
// call to Redis until it answers.
package backoff

import (
	"context"
	"time"

	"github.com/worqr/worqr/internal/clock"
)

// Backoff is a capped exponential delay for reconnect loops.
type Backoff struct {
	min, max, next time.Duration
	clock          clock.Clock // nil: the system clock
}

// New is a Backoff from min doubling up to max.
func New(min, max time.Duration) *Backoff { return &Backoff{min: min, max: max, next: min} }

// On makes b wait on c's timers, and returns b.
func (b *Backoff) On(c clock.Clock) *Backoff {
	b.clock = c
	return b
}

// Reset starts the delays again from min.
func (b *Backoff) Reset() { b.next = b.min }

// Step returns the next delay, and doubles the one after (up to max).
func (b *Backoff) Step() time.Duration {
	d := b.next
	b.next = min(b.next*2, b.max)
	return d
}

// Wait sleeps for the next delay; false if ctx ended first.
func (b *Backoff) Wait(ctx context.Context) bool {
	return SleepCtx(ctx, clock.Or(b.clock), b.Step())
}

// SleepCtx sleeps for d on clk, or until ctx ends: it reports whether it
// slept.
func SleepCtx(ctx context.Context, clk clock.Clock, d time.Duration) bool {
	t := clk.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C():
		return true
	}
}
