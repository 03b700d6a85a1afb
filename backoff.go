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

// wait sleeps for the next delay; false if ctx ended first.
func (b *backoff) wait(ctx context.Context) bool {
	t := time.NewTimer(b.next)
	defer t.Stop()
	b.next = min(b.next*2, b.max)
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
