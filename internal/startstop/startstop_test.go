package startstop

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestLoopStartsOnceStopsAndStartsAgain(t *testing.T) {
	var runs atomic.Int32
	var cause atomic.Value
	l := NewLoop(func(ctx context.Context) {
		runs.Add(1)
		<-ctx.Done()
		cause.Store(context.Cause(ctx))
	})
	l.Stop() // never started: nothing to do

	require.NoError(t, l.Start(context.Background()))
	require.NoError(t, l.Start(context.Background())) // running: ignored
	<-l.Started()
	stopped := l.Stopped()
	l.Stop()
	<-stopped
	require.Equal(t, int32(1), runs.Load())
	require.ErrorIs(t, cause.Load().(error), ErrStopped)
	l.Stop()

	require.NoError(t, l.Start(context.Background()))
	<-l.Started()
	l.Stop()
	require.Equal(t, int32(2), runs.Load())
}

func TestLoopStopsWhenItsContextEndsAndCanStartAgain(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	l := NewLoop(func(ctx context.Context) { <-ctx.Done() })
	require.NoError(t, l.Start(ctx))
	cancel()
	<-l.Stopped()

	require.NoError(t, l.Start(context.Background()))
	<-l.Started()
	l.Stop()
}

type failing struct{ Base }

func (*failing) Start(context.Context) error { return errors.New("no") }

func TestStartAllStopsTheStartedOnesWhenOneFails(t *testing.T) {
	a := NewLoop(func(ctx context.Context) { <-ctx.Done() })
	stopped := a.Stopped()
	err := StartAll(context.Background(), a, &failing{})
	require.Error(t, err)
	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
		t.Fatal("the started loop was not stopped")
	}
}

func TestStopAllStopsInParallel(t *testing.T) {
	release := make(chan struct{})
	var stopping atomic.Int32
	mk := func() *Loop {
		return NewLoop(func(ctx context.Context) {
			<-ctx.Done()
			// Each waits for the other to be stopping too: a serial
			// StopAll would never return.
			if stopping.Add(1) == 2 {
				close(release)
			}
			<-release
		})
	}
	a, b := mk(), mk()
	require.NoError(t, StartAll(context.Background(), a, b))
	StopAll(a, nil, b)
}

func TestGroupWaitsAndRefusesAfterClose(t *testing.T) {
	var g Group
	block := make(chan struct{})
	var ran atomic.Bool
	require.True(t, g.Go(func() { <-block; ran.Store(true) }))
	closed := make(chan struct{})
	go func() { g.Close(); close(closed) }()
	select {
	case <-closed:
		t.Fatal("Close returned while a goroutine ran")
	case <-time.After(20 * time.Millisecond):
	}
	close(block)
	<-closed
	require.True(t, ran.Load())
	require.False(t, g.Go(func() { t.Error("ran after Close") }))
}
