package proc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/worqr/worqr/internal/clock"
	"github.com/worqr/worqr/internal/errs"
	"github.com/worqr/worqr/internal/outage"
	"github.com/worqr/worqr/internal/testsignal"
)

// The task's own budget wins over the policy's, which wins over the
// default; a negative budget never runs out.
func TestExhausted(t *testing.T) {
	for _, c := range []struct {
		policy, own, failed int
		want                bool
	}{
		{0, 0, 9, false}, {0, 0, 10, true},
		{3, 0, 2, false}, {3, 0, 3, true},
		{3, 5, 3, false}, {3, 5, 5, true},
		{-1, 0, 1000, false}, {3, -1, 1000, false},
	} {
		got := Policy{MaxAttempts: c.policy}.Exhausted(c.failed, c.own, 10)
		assert.Equal(t, c.want, got, "policy %d, own %d, failed %d", c.policy, c.own, c.failed)
	}
}

// The error text recorded is cut at MaxErrorLen bytes.
func TestErrorText(t *testing.T) {
	assert.Equal(t, "", ErrorText(nil))
	assert.Equal(t, "boom", ErrorText(errors.New("boom")))
	assert.Len(t, ErrorText(errors.New(strings.Repeat("x", MaxErrorLen+10))), MaxErrorLen)
}

type unrecordedLog struct{ errs []error }

func (u *unrecordedLog) Unrecorded(err error) { u.errs = append(u.errs, err) }

// writer is a worker as Persist takes it: an outage on a fake clock, and
// its life.
type writer struct {
	outage *outage.Outage
	life   context.Context
}

func (w writer) Outage() *outage.Outage    { return w.outage }
func (w writer) Life() context.Context     { return w.life }
func (w writer) WriteCtx() context.Context { return w.life }

func testWriter(life context.Context) writer {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	return writer{outage.New(log, clock.NewFake(time.Unix(1000, 0)), Retryable), life}
}

// blockedWrite is a write that tells the test of each try and fails or
// succeeds as the test says: until it does, Persist sets no timer, so the
// test sees the fake clock's timers as the wait before the try left them.
type blockedWrite struct {
	tried  chan struct{}
	answer chan error
}

func newBlockedWrite() blockedWrite {
	return blockedWrite{make(chan struct{}), make(chan error)}
}

func (b blockedWrite) write(context.Context) error {
	b.tried <- struct{}{}
	return <-b.answer
}

// persisting runs Persist on a goroutine for a write whose first try
// failed with first; the channel is closed once Persist returns.
func persisting(w writer, clk clock.Clock, s *State, u *unrecordedLog, b blockedWrite, first error) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		Persist(w, clk, s, u, "finish", b.write, w.outage.Begin(), first)
	}()
	return done
}

// timers is the context of a test's waits for Persist to set its timer:
// it ends, and fails the wait, after testsignal.Wait.
func timers(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), testsignal.Wait)
	t.Cleanup(cancel)
	return ctx
}

func waitDone(t *testing.T, done <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-done:
	case <-time.After(testsignal.Wait):
		t.Fatal(what)
	}
}

// A write that failed on the connection is tried again, after the waits
// of the backoff on the client's clock, until it goes through; the
// process is marked unwritten meanwhile.
func TestPersistTriesAgainAfterAnOutage(t *testing.T) {
	ctx := timers(t)
	w := testWriter(ctx)
	clk := clock.NewFake(time.Unix(1000, 0))
	var s State
	u := &unrecordedLog{}
	b := newBlockedWrite()
	down := fmt.Errorf("finish: %w", errs.ErrUnavailable)
	done := persisting(w, clk, &s, u, b, down)
	for _, answer := range []error{down, nil} {
		require.NoError(t, clk.WaitTimers(ctx, 1))
		clk.Advance(time.Second)
		<-b.tried
		b.answer <- answer
	}
	waitDone(t, done, "Persist did not return once the write went through")
	assert.True(t, s.IsUnwritten())
	assert.Empty(t, u.errs)
	assert.Nil(t, w.outage.Counts(), "the outage ended with the write")
}

// Persist waits on the client's clock between the tries of a write: 50
// ms before the first, doubling each time, up to a second (the ceiling:
// a write goes through within a second of Redis coming back). Each wait
// is measured to the nanosecond: a nanosecond short of it, the try has
// not come (the timer is still set); at it, the try comes.
func TestPersistBacksOffOnTheClientsClock(t *testing.T) {
	ctx := timers(t)
	life, cancel := context.WithCancel(ctx)
	w := testWriter(life)
	clk := clock.NewFake(time.Unix(1000, 0))
	var s State
	u := &unrecordedLog{}
	b := newBlockedWrite()
	down := fmt.Errorf("finish: %w", errs.ErrUnavailable)
	done := persisting(w, clk, &s, u, b, down)
	ms := time.Millisecond
	for i, d := range []time.Duration{50 * ms, 100 * ms, 200 * ms, 400 * ms, 800 * ms, time.Second, time.Second, time.Second} {
		require.NoError(t, clk.WaitTimers(ctx, 1))
		clk.Advance(d - time.Nanosecond)
		require.Equal(t, 1, clk.Timers(), "wait %d: over before %v", i+1, d)
		clk.Advance(time.Nanosecond)
		select {
		case <-b.tried:
		case <-time.After(testsignal.Wait):
			t.Fatalf("wait %d: not over at %v", i+1, d)
		}
		b.answer <- down
	}
	require.NoError(t, clk.WaitTimers(ctx, 1))
	cancel()
	waitDone(t, done, "Persist did not return when the worker's life ended")
	assert.Equal(t, []error{down}, u.errs)
}

// A write still being tried stops with its process: found lost (a fence
// ends it so), it is dropped without a word, for the fence counts it; its
// handler interrupted (Close), it is given up, and told. A cancel event
// that ends the process stops nothing: the write is what drops the task
// in Redis. Neither stop needs the clock to move.
func TestPersistStopsWithItsProcess(t *testing.T) {
	down := fmt.Errorf("finish: %w", errs.ErrUnavailable)
	for _, c := range []struct {
		name string
		stop func(*State)
		told []error
	}{
		{"lost", func(s *State) { s.End(errs.ErrProcessLost, true) }, nil},
		{"interrupted", func(s *State) { s.Interrupt(errA) }, []error{down}},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := timers(t)
			w := testWriter(ctx)
			clk := clock.NewFake(time.Unix(1000, 0))
			var s State
			u := &unrecordedLog{}
			b := newBlockedWrite()
			done := persisting(w, clk, &s, u, b, down)
			require.NoError(t, clk.WaitTimers(ctx, 1))
			s.End(errs.ErrTaskCancelled, false) // an event: the write goes on
			clk.Advance(time.Second)
			select {
			case <-b.tried:
			case <-time.After(testsignal.Wait):
				t.Fatal("Persist stopped when an event ended the process")
			}
			b.answer <- down
			require.NoError(t, clk.WaitTimers(ctx, 1)) // waiting again, on a clock that does not move now
			c.stop(&s)
			waitDone(t, done, "Persist went on after its process stopped")
			assert.Equal(t, c.told, u.errs)
		})
	}
}

// A write that failed for any other reason, or found the process lost or
// dropped, is not tried again; only the failure is told.
func TestPersistGivesUpAtOnce(t *testing.T) {
	ctx := timers(t)
	w := testWriter(ctx)
	bad := errors.New("script error")
	for _, outcome := range []error{nil, errs.ErrTaskCancelled, errs.ErrQueueDeleted, errs.ErrProcessLost, bad} {
		var s State
		u := &unrecordedLog{}
		Persist(w, clock.NewFake(time.Unix(1000, 0)), &s, u, "finish", func(context.Context) error {
			t.Fatal("tried again")
			return nil
		}, w.outage.Begin(), outcome)
		assert.False(t, s.IsUnwritten(), "%v", outcome)
		if outcome == bad {
			assert.Equal(t, []error{bad}, u.errs)
		} else {
			assert.Empty(t, u.errs, "%v", outcome)
		}
	}
}

// A write still failing when the worker's life ends is given up, and
// told.
func TestPersistEndsWithTheWorker(t *testing.T) {
	ctx := timers(t)
	life, cancel := context.WithCancel(ctx)
	w := testWriter(life)
	clk := clock.NewFake(time.Unix(1000, 0))
	var s State
	u := &unrecordedLog{}
	down := fmt.Errorf("finish: %w", errs.ErrUnavailable)
	done := persisting(w, clk, &s, u, newBlockedWrite(), down)
	require.NoError(t, clk.WaitTimers(ctx, 1)) // waiting to try again
	cancel()
	waitDone(t, done, "Persist did not return when the worker's life ended")
	assert.Equal(t, []error{down}, u.errs)
}
