package pacer

// The pacer on its own: a member's timers, on a Fake clock, with no Redis
// and no scheduler. Each test counts the wake-ups the pacer
// gives and moves the clock by hand.

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/worqr/worqr/internal/clock"
	"github.com/worqr/worqr/internal/delayed"
)

// pacerOnFake is a pacer whose worker reads clk (as its own clock and, with
// no observation yet, as the Redis clock), and whose wake-ups go to woke.
func pacerOnFake(clk *clock.Fake) (*Pacer, chan struct{}) {
	woke := make(chan struct{}, 10)
	p := New(clocks{clk, &delayed.RedisClock{}}, func() { woke <- struct{}{} })
	return &p, woke
}

// clocks is a worker's clock and its Redis clock, as a pacer takes them.
type clocks struct {
	clk   clock.Clock
	redis *delayed.RedisClock
}

func (c clocks) Clock() clock.Clock              { return c.clk }
func (c clocks) RedisClock() *delayed.RedisClock { return c.redis }

func recv[T any](t *testing.T, ch <-chan T, within time.Duration, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(within):
		t.Fatalf("not within %v: %s", within, what)
		var zero T
		return zero
	}
}

// wokeN waits for n wake-ups, then makes sure no other is waiting.
func wokeN(t *testing.T, woke chan struct{}, n int) {
	t.Helper()
	for i := range n {
		recv(t, woke, 5*time.Second, "wake-up "+string(rune('1'+i)))
	}
	select {
	case <-woke:
		t.Fatalf("more than %d wake-ups", n)
	default:
	}
}

// A failed dequeue's retry wakes the member after its backoff (at most
// RetryMax); a later retry replaces the pending one rather than
// adding a second wake-up.
func TestPacerRetryLaterBacksOff(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Now())
	p, woke := pacerOnFake(clk)

	p.RetryLater()
	require.Equal(t, 1, clk.Timers())
	clk.Advance(RetryMax)
	wokeN(t, woke, 1)
	require.Zero(t, clk.Timers())

	p.RetryLater()
	p.RetryLater() // replaces the pending one
	require.Equal(t, 1, clk.Timers(), "one retry timer at a time")
	clk.Advance(RetryMax)
	wokeN(t, woke, 1)
}

// The rate limit's wake-up is set for the earliest time asked: a later
// time leaves it, an earlier one moves it; it fires once.
func TestPacerWakeAtKeepsTheEarliest(t *testing.T) {
	t.Parallel()
	start := time.Now()
	clk := clock.NewFake(start)
	p, woke := pacerOnFake(clk)
	at := func(d time.Duration) int64 { return start.Add(d).UnixMicro() }

	p.WakeAt(at(100 * time.Millisecond))
	p.WakeAt(at(300 * time.Millisecond)) // later: the timer stays
	clk.Advance(100 * time.Millisecond)
	wokeN(t, woke, 1)
	require.Zero(t, clk.Timers(), "the later time armed nothing of its own")

	p.WakeAt(at(500 * time.Millisecond))
	p.WakeAt(at(200 * time.Millisecond)) // earlier: the timer moves
	require.Equal(t, 1, clk.Timers())
	clk.Advance(100 * time.Millisecond)
	wokeN(t, woke, 1)
	clk.Advance(time.Second)
	wokeN(t, woke, 0)
}

// stop stops both timers and forgets the rate limit's time: a member
// started again arms its own wake-up, even for a later time than the one
// forgotten.
func TestPacerStopForgetsTheWakeUp(t *testing.T) {
	t.Parallel()
	start := time.Now()
	clk := clock.NewFake(start)
	p, woke := pacerOnFake(clk)

	p.WakeAt(start.Add(100 * time.Millisecond).UnixMicro())
	p.RetryLater()
	require.Equal(t, 2, clk.Timers())
	p.Stop()
	assert.Zero(t, clk.Timers(), "both timers stopped")
	clk.Advance(time.Second)
	wokeN(t, woke, 0)

	p.WakeAt(clk.Now().Add(time.Second).UnixMicro())
	require.Equal(t, 1, clk.Timers(), "armed again after the stop")
	clk.Advance(time.Second)
	wokeN(t, woke, 1)
}
