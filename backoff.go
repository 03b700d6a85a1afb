package worqr

import (
	"context"
	"time"
)

// backoff is a capped exponential delay for reconnect loops.
type backoff struct {
	min, max, next time.Duration
}

func newBackoff(min, max time.Duration) *backoff { return &backoff{min: min, max: max, next: min} }

func (b *backoff) reset() { b.next = b.min }

// step returns the next delay, and doubles the one after (up to max).
func (b *backoff) step() time.Duration {
	d := b.next
	b.next = min(b.next*2, b.max)
	return d
}

// wait sleeps for the next delay; false if ctx ended first.
func (b *backoff) wait(ctx context.Context) bool {
	t := time.NewTimer(b.step())
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
