// Package lifecycle holds the engine's two state machines: a worker's
// (its identity, its phase, its fence) and a session's (where it stands
// with its queue lease). Each changes only through the named transitions
// here; the caller holds the lock that guards it (the worker's mu, the
// session's mu).
package lifecycle

import (
	"fmt"
	"time"

	"github.com/worqr/worqr/internal/errs"
)

// Phase is where a worker is in its life. It only moves forward:
//
//	serving --drain--> draining --close--> closed
//	serving -------------close-----------> closed
type Phase uint8

const (
	// Serving: it takes work.
	Serving Phase = iota
	// Draining: Shutdown, Close or Fail began; it takes no new work and
	// serves no new queue, and its running handlers are finishing.
	Draining
	// Closed: its loops have stopped; it is releasing its work and
	// deregistering, or has.
	Closed
)

// Worker is a worker's state: its identity, its phase, and whether its
// registry lease stands. Phase and fence are independent (a worker may
// lose its lease while it drains), and each changes only through the
// transitions below, all made under the worker's mu:
//
//	live --fence--> fenced --registered(new id)--> live
//
// A fenced worker takes no work under its old id: the peers reclaim
// everything it held. Each queue's lease has a state of its own
// (Session).
type Worker struct {
	// id is the worker's current identity; it changes when a fenced
	// worker registers again.
	id     string
	phase  Phase
	fenced bool
	// fencedAt is when the worker last fenced itself (zero if never).
	fencedAt time.Time
}

// ID is the worker's current identity (fenced or not).
func (l *Worker) ID() string { return l.id }

// Phase is where the worker is in its life.
func (l *Worker) Phase() Phase { return l.phase }

// FencedAt is when the worker last fenced itself (zero if never).
func (l *Worker) FencedAt() time.Time { return l.fencedAt }

// IsCurrent reports whether id is the worker's live identity: it is its
// id, it is not fenced and not closed. An answer from Redis about an id
// that is no longer current says nothing about the worker now.
func (l *Worker) IsCurrent(id string) bool {
	return l.id == id && !l.fenced && l.phase != Closed
}

// ToFenced fences the worker under id at now, unless id is no longer
// current. It reports whether it did.
func (l *Worker) ToFenced(id string, now time.Time) bool {
	if !l.IsCurrent(id) {
		return false
	}
	l.fenced, l.fencedAt = true, now
	return true
}

// ToRegistered makes id, a fresh registration, the worker's identity and
// ends its fence. It refuses (false) once the worker is closed.
func (l *Worker) ToRegistered(id string) bool {
	if l.phase == Closed {
		return false
	}
	l.id, l.fenced = id, false
	return true
}

// ToDraining stops the taking of work.
func (l *Worker) ToDraining() {
	if l.phase == Serving {
		l.phase = Draining
	}
}

// ToClosed closes the worker; false if it already was.
func (l *Worker) ToClosed() bool {
	if l.phase == Closed {
		return false
	}
	l.phase = Closed
	return true
}

// IsClosed reports whether the worker is closed.
func (l *Worker) IsClosed() bool { return l.phase == Closed }

// IsFenced reports whether the worker is fenced.
func (l *Worker) IsFenced() bool { return l.fenced }

// TakesWork reports why the worker may not take work now, if it may not:
// ErrWorkerClosed once it drains or is closed, ErrWorkerFenced while it is
// fenced.
func (l *Worker) TakesWork() error {
	switch {
	case l.phase != Serving:
		return errs.ErrWorkerClosed
	case l.fenced:
		return errs.ErrWorkerFenced
	}
	return nil
}

// Current returns the worker's id if it may act: not closed, not fenced.
func (l *Worker) Current(op string) (string, error) {
	switch {
	case l.phase == Closed:
		return "", fmt.Errorf("worqr: %s: %w", op, errs.ErrWorkerClosed)
	case l.fenced:
		return "", fmt.Errorf("worqr: %s: %w", op, errs.ErrWorkerFenced)
	}
	return l.id, nil
}

// FencedSince is how long before now the worker last fenced itself, or a
// day if it never did.
func (l *Worker) FencedSince(now time.Time) time.Duration {
	if l.fencedAt.IsZero() {
		return 24 * time.Hour
	}
	return now.Sub(l.fencedAt)
}
