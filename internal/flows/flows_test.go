package flows

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/worqr/worqr/internal/clock"
	"github.com/worqr/worqr/internal/store"
	"github.com/worqr/worqr/internal/testsignal"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const every = 30 * time.Second

// newFlows is a carrier on a fake clock whose sweeps send the queue they
// swept on the returned channel, and whose carries send the notices.
func newFlows(t *testing.T) (*Flows, *clock.Fake, chan string, chan []store.Notice) {
	t.Helper()
	fake := clock.NewFake(time.Unix(1_700_000_000, 0))
	swept := make(chan string, 16)
	carried := make(chan []store.Notice, 16)
	var sig testsignal.Signal[int]
	f := New(&Env{
		Clock: fake,
		Log:   slog.New(slog.NewTextHandler(io.Discard, nil)),
		Carry: func(_ context.Context, _ string, ns []store.Notice) ([]error, error) {
			carried <- ns
			return make([]error, len(ns)), nil
		},
		Sweep: func(_ context.Context, queue string, _ time.Duration) (int, error) {
			swept <- queue
			return 0, nil
		},
		BatchMax: 10,
		Every:    every,
		Swept:    &sig,
	})
	t.Cleanup(f.Close)
	return f, fake, swept, carried
}

func recv[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(testsignal.Wait):
		t.Fatalf("no %s in %v", what, testsignal.Wait)
		var zero T
		return zero
	}
}

func requireNone[T any](t *testing.T, ch <-chan T, what string) {
	t.Helper()
	select {
	case v := <-ch:
		t.Fatalf("unexpected %s: %v", what, v)
	default:
	}
}

// The sweeper runs from the first queue served while the client has a
// worker until its last worker leaves: a client whose workers are gone
// sweeps nothing, and a worker that joins later starts it again.
func TestSweeperRunsWhileTheClientHasWorkers(t *testing.T) {
	f, fake, swept, _ := newFlows(t)
	ctx := t.Context()

	f.Served(ctx, "q") // no worker: nothing swept, no timer
	requireNone(t, swept, "sweep without a worker")
	assert.Equal(t, 0, fake.Timers())

	f.Joined()
	f.Joined()
	f.Served(ctx, "p")
	assert.Equal(t, "p", recv(t, swept, "the first sweep of a queue served"))
	require.Equal(t, 1, fake.Timers(), "the sweeper's timer is set")
	f.Served(ctx, "p")
	requireNone(t, swept, "a second sweep of a queue at its serving")

	fake.Advance(every)
	got := []string{recv(t, swept, "a periodic sweep"), recv(t, swept, "a periodic sweep")}
	assert.ElementsMatch(t, []string{"p", "q"}, got)
	require.NoError(t, fake.WaitTimers(ctx, 1), "the next sweep is set")

	f.Left()
	assert.Equal(t, 1, fake.Timers(), "one worker left: the sweeper runs")
	f.Left()
	assert.Equal(t, 0, fake.Timers(), "no worker left: the sweeper stopped")
	fake.Advance(every)
	requireNone(t, swept, "a sweep with no worker")

	f.Joined()
	f.Served(ctx, "p")
	require.Equal(t, 1, fake.Timers(), "a new worker's serving starts the sweeper again")
	fake.Advance(every)
	recv(t, swept, "a periodic sweep")
	recv(t, swept, "a periodic sweep")
}

// Close stops the sweeper and waits for the carries under way; a notice
// ended after Close is left for a sweep.
func TestCloseStopsTheSweeperAndWaitsForCarries(t *testing.T) {
	fake := clock.NewFake(time.Unix(1_700_000_000, 0))
	entered := make(chan struct{})
	release := make(chan struct{})
	var calls int
	f := New(&Env{
		Clock: fake,
		Log:   slog.New(slog.NewTextHandler(io.Discard, nil)),
		Carry: func(ctx context.Context, _ string, ns []store.Notice) ([]error, error) {
			calls++
			close(entered)
			<-release
			return nil, errors.New("ended")
		},
		Sweep:    func(context.Context, string, time.Duration) (int, error) { return 0, nil },
		BatchMax: 10,
		Every:    every,
	})
	f.Joined()
	f.Served(t.Context(), "p")
	n, ok := store.ParseNotice("wf.a,t1,ok")
	require.True(t, ok)
	f.Ended("p", n)
	recv(t, entered, "the carry")

	closed := make(chan struct{})
	go func() {
		f.Close()
		close(closed)
	}()
	select {
	case <-closed:
		t.Fatal("Close returned with a carry under way")
	case <-time.After(10 * time.Millisecond):
	}
	close(release)
	recv(t, closed, "Close's return")
	assert.Equal(t, 0, fake.Timers(), "the sweeper stopped")
	f.Ended("p", n)
	assert.Equal(t, 1, calls, "no carry after Close")
}

// A sweep that fails because the client closed under it logs nothing (the
// client's store refuses calls once closed); one that fails otherwise
// logs one line.
func TestSweepFailingAsTheClientClosesLogsNothing(t *testing.T) {
	for _, closing := range []bool{false, true} {
		var logged bytes.Buffer
		entered := make(chan struct{})
		release := make(chan struct{})
		f := New(&Env{
			Clock: clock.NewFake(time.Unix(1_700_000_000, 0)),
			Log:   slog.New(slog.NewTextHandler(&logged, nil)),
			Carry: func(context.Context, string, []store.Notice) ([]error, error) { return nil, nil },
			Sweep: func(context.Context, string, time.Duration) (int, error) {
				close(entered)
				<-release
				return 0, errors.New("client closed")
			},
			BatchMax: 10,
			Every:    every,
		})
		f.Joined()
		served := make(chan struct{})
		go func() {
			f.Served(t.Context(), "p")
			close(served)
		}()
		recv(t, entered, "the first sweep")
		if closing {
			f.Close()
		}
		close(release)
		recv(t, served, "Served's return")
		if closing {
			assert.NotContains(t, logged.String(), "sweep failed", "closing: %v", closing)
		} else {
			assert.Contains(t, logged.String(), "sweep failed", "closing: %v", closing)
			f.Close()
		}
	}
}
