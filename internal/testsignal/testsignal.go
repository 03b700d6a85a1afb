// Package testsignal lets a component tell a test that something happened
// (a reclaim ran, a timer was set, a lease was renewed), so that the test
// waits on the event rather than sleeping. A signal a test never set up
// costs one nil check and does nothing.
package testsignal

import (
	"testing"
	"time"
)

// Wait is how long WaitOrTimeout waits before failing the test.
const Wait = 10 * time.Second

// depth is how many signals a test may leave unread before Signal fails
// the test rather than block the component.
const depth = 100

// Signal carries values of T from a component to a test. Its zero value
// is off.
type Signal[T any] struct {
	c  chan T
	tb testing.TB
}

// Init turns the signal on, for tb.
func (s *Signal[T]) Init(tb testing.TB) {
	s.c, s.tb = make(chan T, depth), tb
}

// Signal sends v to the test, if the signal is on. It never blocks.
func (s *Signal[T]) Signal(v T) {
	if s.c == nil {
		return
	}
	select {
	case s.c <- v:
	default:
		s.tb.Errorf("testsignal: %d signals left unread", depth)
	}
}

// C is the signal's channel, for a test's select.
func (s *Signal[T]) C() <-chan T {
	s.mustBeOn()
	return s.c
}

// WaitOrTimeout returns the next value, or fails the test after Wait.
func (s *Signal[T]) WaitOrTimeout() T {
	s.mustBeOn()
	s.tb.Helper()
	select {
	case v := <-s.c:
		return v
	case <-time.After(Wait):
		s.tb.Fatalf("testsignal: nothing came in %v", Wait)
	}
	var zero T
	return zero
}

// RequireEmpty fails the test if a value is waiting.
func (s *Signal[T]) RequireEmpty() {
	s.mustBeOn()
	s.tb.Helper()
	select {
	case v := <-s.c:
		s.tb.Errorf("testsignal: unexpected %v", v)
	default:
	}
}

func (s *Signal[T]) mustBeOn() {
	if s.c == nil {
		panic("testsignal: signal used in a test without Init")
	}
}
