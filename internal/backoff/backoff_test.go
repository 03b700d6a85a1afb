package backoff

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/worqr/worqr/internal/clock"
)

// The reconnect loops back off exponentially, and no further than their
// cap, so a worker comes back soon after a long outage. The delays are
// waited on a fake clock, which the test moves by each one.
func TestBackoffIsCapped(t *testing.T) {
	clk := clock.NewFake(time.Unix(0, 0))
	b := New(time.Millisecond, 8*time.Millisecond).On(clk)
	ctx := context.Background()
	var delays []time.Duration
	for range 6 {
		d := b.next
		delays = append(delays, d)
		waited := make(chan bool)
		go func() { waited <- b.Wait(ctx) }()
		require.NoError(t, clk.WaitTimers(ctx, 1))
		clk.Advance(d)
		require.True(t, <-waited)
	}
	assert.Equal(t, []time.Duration{1, 2, 4, 8, 8, 8}, scale(delays, time.Millisecond))
	b.Reset()
	assert.Equal(t, time.Millisecond, b.next)
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	assert.False(t, b.Wait(cancelled))
}

func scale(ds []time.Duration, unit time.Duration) []time.Duration {
	out := make([]time.Duration, len(ds))
	for i, d := range ds {
		out[i] = d / unit
	}
	return out
}
