// Package clock is the engine's source of time. Every component reads the
// time and sets its timers through a Clock, so that a test can drive the
// lease, reclaim, retry and schedule logic with a Fake instead of waiting
// for real leases to run out.
package clock

import "time"

// Clock tells the time and makes timers.
type Clock interface {
	// Now is the current time.
	Now() time.Time
	// Since is Now().Sub(t).
	Since(t time.Time) time.Duration
	// Until is t.Sub(Now()).
	Until(t time.Time) time.Duration
	// NewTimer makes a timer that sends the time on its channel after d.
	NewTimer(d time.Duration) Timer
	// AfterFunc calls f on a goroutine of its own after d.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a time.Timer behind an interface, so that a Fake can make them.
type Timer interface {
	// C is the channel the time is sent on; nil for an AfterFunc timer.
	C() <-chan time.Time
	// Stop stops the timer; false if it had already fired or been stopped.
	Stop() bool
	// Reset makes the timer fire after d; false if it had already fired or
	// been stopped. With Go 1.23's timers a Reset never delivers a stale
	// time, for real and fake timers alike.
	Reset(d time.Duration) bool
}

// Real is the system clock.
func Real() Clock { return realClock{} }

type realClock struct{}

func (realClock) Now() time.Time                  { return time.Now() }
func (realClock) Since(t time.Time) time.Duration { return time.Since(t) }
func (realClock) Until(t time.Time) time.Duration { return time.Until(t) }

func (realClock) NewTimer(d time.Duration) Timer {
	t := time.NewTimer(d)
	return realTimer{t: t, c: t.C}
}

func (realClock) AfterFunc(d time.Duration, f func()) Timer {
	return realTimer{t: time.AfterFunc(d, f)}
}

type realTimer struct {
	t *time.Timer
	c <-chan time.Time
}

func (t realTimer) C() <-chan time.Time        { return t.c }
func (t realTimer) Stop() bool                 { return t.t.Stop() }
func (t realTimer) Reset(d time.Duration) bool { return t.t.Reset(d) }

// Or is c, or the system clock when c is nil: components take an optional
// clock in their config.
func Or(c Clock) Clock {
	if c == nil {
		return Real()
	}
	return c
}
