package proc

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
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

// Stopped is closed once the process is settled or given up, whether
// asked for before or after; an end by an event (not settled), or an
// interrupt of its handler alone, leaves it open.
func TestStopped(t *testing.T) {
	var s State
	early := s.Stopped()
	s.End(errA, false)
	assert.False(t, closed(early), "an event's end stops no write")
	s.Interrupt(errB)
	assert.False(t, closed(early), "an interrupt alone stops no write")
	s.End(errB, true)
	assert.True(t, closed(early), "settled")
	assert.True(t, closed(s.Stopped()))

	var g State
	early = g.Stopped()
	g.GiveUp()
	assert.True(t, closed(early), "given up")
	g.GiveUp()
	g.End(errA, true) // closed once

	var late State
	late.GiveUp()
	assert.True(t, closed(late.Stopped()), "asked after giving up")
	var settled State
	settled.End(errA, true)
	assert.True(t, closed(settled.Stopped()), "asked after the settling")
}
