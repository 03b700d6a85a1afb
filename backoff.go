package worqr

// backoff: the capped exponential delay of the loops that retry a call to
// Redis until it answers.

import (
	"context"
	"time"

	"github.com/worqr/worqr/internal/clock"
)

// backoff is a capped exponential delay for reconnect loops.
type backoff struct {
	min, max, next time.Duration
	clock          clock.Clock // nil: the system clock
}

func newBackoff(min, max time.Duration) *backoff { return &backoff{min: min, max: max, next: min} }

// on makes b wait on c's timers, and returns b.
func (b *backoff) on(c clock.Clock) *backoff {
	b.clock = c
	return b
}

func (b *backoff) reset() { b.next = b.min }

// step returns the next delay, and doubles the one after (up to max).
func (b *backoff) step() time.Duration {
	d := b.next
	b.next = min(b.next*2, b.max)
	return d
}

// wait sleeps for the next delay; false if ctx ended first.
func (b *backoff) wait(ctx context.Context) bool {
	return sleepCtx(ctx, clock.Or(b.clock), b.step())
}

// sleepCtx sleeps for d on clk, or until ctx ends: it reports whether it
// slept.
func sleepCtx(ctx context.Context, clk clock.Clock, d time.Duration) bool {
	t := clk.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C():
		return true
	}
}
