package clock

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func TestFakeFiresTimersInDeadlineOrderAtTheirOwnTime(t *testing.T) {
	f := NewFake(epoch)
	late := f.NewTimer(3 * time.Second)
	early := f.NewTimer(time.Second)
	ran := make(chan time.Time, 1)
	f.AfterFunc(2*time.Second, func() { ran <- f.Now() })

	f.Advance(500 * time.Millisecond)
	require.Equal(t, 3, f.Timers())
	select {
	case <-early.C():
		t.Fatal("fired before its deadline")
	default:
	}

	f.Advance(5 * time.Second)
	require.Equal(t, epoch.Add(time.Second), <-early.C())
	require.Equal(t, epoch.Add(3*time.Second), <-late.C())
	at := <-ran
	require.False(t, at.Before(epoch.Add(2*time.Second)))
	require.Equal(t, epoch.Add(5500*time.Millisecond), f.Now())
	require.Zero(t, f.Timers())
}

func TestFakeStopAndResetDropAStaleTime(t *testing.T) {
	f := NewFake(epoch)
	tm := f.NewTimer(time.Second)
	require.True(t, tm.Stop())
	require.False(t, tm.Stop())
	f.Advance(2 * time.Second)
	select {
	case <-tm.C():
		t.Fatal("a stopped timer fired")
	default:
	}

	tm = f.NewTimer(time.Second)
	f.Advance(time.Second) // fired: its time waits in the channel
	require.False(t, tm.Reset(time.Second))
	select {
	case <-tm.C():
		t.Fatal("Reset kept the stale time")
	default:
	}
	f.Advance(time.Second)
	require.Equal(t, epoch.Add(4*time.Second), <-tm.C())
}

func TestWaitTimersWaitsForATimerToBeSet(t *testing.T) {
	f := NewFake(epoch)
	set := make(chan struct{})
	go func() {
		<-set
		f.NewTimer(time.Minute)
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	require.ErrorIs(t, f.WaitTimers(ctx, 1), context.DeadlineExceeded)

	close(set)
	ctx, cancel = context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, f.WaitTimers(ctx, 1))
}

func TestWaitTimerAtWaitsForATimerSetAfterTheMark(t *testing.T) {
	f := NewFake(epoch)
	f.NewTimer(time.Minute) // set before the mark, at the same deadline
	mark := f.Mark()
	f.NewTimer(time.Second) // after it, at another
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	require.ErrorIs(t, f.WaitTimerAt(ctx, mark, epoch.Add(time.Minute)), context.DeadlineExceeded)

	go f.NewTimer(time.Minute)
	ctx, cancel = context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, f.WaitTimerAt(ctx, mark, epoch.Add(time.Minute)))
}

func TestRealClockTimers(t *testing.T) {
	c := Or(nil)
	tm := c.NewTimer(time.Millisecond)
	<-tm.C()
	done := make(chan struct{})
	c.AfterFunc(time.Millisecond, func() { close(done) })
	<-done
	require.Nil(t, c.AfterFunc(time.Hour, func() {}).C())
	require.Positive(t, c.Since(c.Now().Add(-time.Second)))
}
