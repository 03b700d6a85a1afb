package proc

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/worqr/worqr/internal/clock"
)

var errA, errB = errors.New("a"), errors.New("b")

func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// The first reason ends the process and closes Done, whenever Done was
// asked for; a later end settles it without changing its reason, once.
func TestFirstEndWins(t *testing.T) {
	var s State
	early := s.Done()
	var reasons []error
	s.OnEnd(func(r error) { reasons = append(reasons, r) })
	assert.False(t, closed(early))
	assert.NoError(t, s.Err())

	first, settled := s.End(errA, false)
	assert.True(t, first)
	assert.False(t, settled, "an event ends a process without settling it")
	assert.False(t, s.IsSettled())
	first, settled = s.End(errB, true)
	assert.False(t, first)
	assert.True(t, settled, "lost after an event: settled now")
	_, settled = s.End(errB, true)
	assert.False(t, settled, "settled once")

	assert.Equal(t, errA, s.Err())
	assert.True(t, closed(early))
	assert.True(t, closed(s.Done()))
	assert.Equal(t, []error{errA}, reasons, "the handler's context ended once, with the first reason")
	var late error
	s.OnEnd(func(r error) { late = r })
	assert.Equal(t, errA, late, "asked after the end: told at once")
}

// Done asked for after the end is closed already; a detached process's
// is never closed.
func TestDoneAfterEnd(t *testing.T) {
	var s State
	s.End(errA, true)
	assert.True(t, closed(s.Done()))
	var d State
	d.MakeDone()
	assert.False(t, closed(d.Done()))
}

// The observer is told once however many paths end the process.
func TestObservedOnce(t *testing.T) {
	var s State
	assert.True(t, s.Observe())
	assert.False(t, s.Observe())
}

// Interrupt ends the handler's context without ending the process.
func TestInterrupt(t *testing.T) {
	var s State
	var got error
	s.OnEnd(func(r error) { got = r })
	s.Interrupt(errB)
	assert.Equal(t, errB, got)
	assert.NoError(t, s.Err())
}

// The result is a copy.
func TestResultIsCopied(t *testing.T) {
	var s State
	b := []byte("ok")
	s.SetResult(b)
	b[0] = 'x'
	assert.Equal(t, []byte("ok"), s.Result())
	assert.Equal(t, "ok", s.ResultText())
}

// flusher tells of each time the throttle's timer fired (on a goroutine
// of the fake clock's).
type flusher chan struct{}

func (f flusher) FlushProgress() { f <- struct{}{} }

// The throttle writes the first report at once, holds the ones that come
// within the interval (the last wins), writes the held one when the
// interval has passed, and never once the process ended.
func TestProgressThrottle(t *testing.T) {
	clk := clock.NewFake(time.Unix(1000, 0))
	th := Throttle{Clock: clk, Interval: 100 * time.Millisecond}
	f := make(flusher, 1)
	var s State

	write, ended := s.ReportProgress(th, f, 10, "first")
	require.NoError(t, ended)
	assert.True(t, write, "the first report is written at once")
	write, _ = s.ReportProgress(th, f, 20, "during the write")
	assert.False(t, write, "held: a write is in flight")
	assert.False(t, s.ProgressArmed())
	s.ProgressWritten(th, f)
	assert.True(t, s.ProgressArmed(), "the write that ended rearms for the report held")

	write, _ = s.ReportProgress(th, f, 30, "coalesced")
	assert.False(t, write)
	clk.Advance(100 * time.Millisecond)
	select {
	case <-f:
	case <-time.After(10 * time.Second):
		t.Fatal("the timer did not fire")
	}
	percent, note, ok := s.FlushingProgress(th)
	require.True(t, ok)
	assert.Equal(t, 30, percent)
	assert.Equal(t, "coalesced", note)
	s.ProgressWritten(th, f)
	assert.False(t, s.ProgressArmed(), "nothing held")

	write, _ = s.ReportProgress(th, f, 40, "soon after")
	assert.False(t, write)
	assert.True(t, s.ProgressArmed(), "held until the interval since the last write passed")
	s.End(errA, true)
	assert.False(t, s.ProgressArmed(), "the end disarmed the throttle")
	_, _, ok = s.FlushingProgress(th)
	assert.False(t, ok)
	write, ended = s.ReportProgress(th, f, 50, "after the end")
	assert.False(t, write)
	assert.Equal(t, errA, ended)
	percent, note, ok = s.Progress()
	assert.True(t, ok)
	assert.Equal(t, 50, percent, "kept all the same")
	assert.Equal(t, "after the end", note)
}

// Stopped is closed once the process is settled or its handler
// interrupted, whether asked for before or after; an end by an event
// (not settled) leaves it open.
func TestStopped(t *testing.T) {
	var s State
	early := s.Stopped()
	s.End(errA, false)
	assert.False(t, closed(early), "an event's end stops no write")
	s.End(errB, true)
	assert.True(t, closed(early), "settled")
	assert.True(t, closed(s.Stopped()))

	var i State
	early = i.Stopped()
	i.Interrupt(errB)
	assert.True(t, closed(early), "interrupted")
	i.Interrupt(errB)
	i.End(errA, true) // closed once

	var late State
	late.Interrupt(errB)
	assert.True(t, closed(late.Stopped()), "asked after the interrupt")
	var settled State
	settled.End(errA, true)
	assert.True(t, closed(settled.Stopped()), "asked after the settling")
}
