// Package pacer holds a runtime member's timers: each looks for work
// again at a time a dequeue's reply set (a failed dequeue's backoff, the
// queue's rate limit), as if told of work.
package pacer

import (
	"sync"
	"time"

	"github.com/worqr/worqr/internal/backoff"
	"github.com/worqr/worqr/internal/clock"
	"github.com/worqr/worqr/internal/delayed"
)

// Dequeue retries: a member whose dequeue failed on the connection looks
// again after a backoff from RetryMin, doubling up to RetryMax.
const (
	RetryMin = 10 * time.Millisecond
	RetryMax = time.Second
)

// Clocks is what a member's timers take of its worker.
type Clocks interface {
	// Clock is the worker's clock, on which the timers run.
	Clock() clock.Clock
	// RedisClock is the worker's estimate of the Redis clock, in which
	// the rate limit's times are given.
	RedisClock() *delayed.RedisClock
}

// Pacer holds a member's timers: each looks for work again at a time a
// dequeue's reply set, as if told of work (wake) if the member still takes
// work. Stop stops them.
type Pacer struct {
	env  Clocks
	wake func() // engine.Runtime.wakeIfTaking
	// Retry is the backoff of the member's dequeues that failed on the
	// connection. The scheduler's loop's own.
	Retry *backoff.Backoff

	mu sync.Mutex // guards the timers below; a leaf
	// retryAt unblocks a member whose dequeue failed, after its backoff.
	retryAt clock.Timer
	// limited wakes the member when the queue's rate limit allows the
	// next start; limitedAt is when (Unix µs, Redis clock).
	limited   clock.Timer
	limitedAt int64
}

// New is the timers of a member that wake calls on.
func New(env Clocks, wake func()) Pacer {
	return Pacer{env: env, wake: wake, Retry: backoff.New(RetryMin, RetryMax)}
}

// RetryLater unblocks the member after its backoff, as if told of work,
// for a dequeue that failed: the scheduler serves its other members
// meanwhile.
func (p *Pacer) RetryLater() {
	d := p.Retry.Step()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.retryAt != nil {
		p.retryAt.Stop()
	}
	p.retryAt = p.env.Clock().AfterFunc(d, p.wake)
}

// WakeAt arms the member's timer for when the rate limit allows the next
// start (Unix µs, Redis clock), unless it is armed for an earlier time; it
// then looks for work as if told of it, if it still takes work.
func (p *Pacer) WakeAt(until int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.limited != nil && p.limitedAt != 0 && p.limitedAt <= until {
		return
	}
	p.limitedAt = until
	d := time.UnixMicro(until).Sub(p.env.RedisClock().Now(p.env.Clock()))
	fire := func() {
		p.mu.Lock()
		p.limitedAt = 0
		p.mu.Unlock()
		p.wake()
	}
	if p.limited != nil {
		p.limited.Stop()
	}
	p.limited = p.env.Clock().AfterFunc(d, fire)
}

// Limited tells whether the rate limit's timer is armed and has not
// fired.
func (p *Pacer) Limited() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.limitedAt != 0
}

// Stop stops the timers, for a member that stops taking work. The rate
// limit's is forgotten too: a member started again (after a StopWork that
// failed) must arm its own, not take this one as armed.
func (p *Pacer) Stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.limited != nil {
		p.limited.Stop()
		p.limitedAt = 0
	}
	if p.retryAt != nil {
		p.retryAt.Stop()
	}
}
