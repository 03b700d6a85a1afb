package worqr

import (
	"fmt"
	"time"
)

// phase is where a worker is in its life. It only moves forward:
//
//	serving --drain--> draining --close--> closed
//	serving -------------close-----------> closed
type phase uint8

const (
	// phaseServing: it takes work.
	phaseServing phase = iota
	// phaseDraining: Shutdown, Close or Fail began; it takes no new work and
	// serves no new queue, and its running handlers are finishing.
	phaseDraining
	// phaseClosed: its loops have stopped; it is releasing its work and
	// deregistering, or has.
	phaseClosed
)

// lifecycle is a worker's state: its identity, its phase, and whether its
// registry lease stands. Phase and fence are independent (a worker may
// lose its lease while it drains), and each changes only through the
// transitions below, all made under w.mu (every method of lifecycle is
// called with w.mu held):
//
//	live --fence--> fenced --registered(new id)--> live
//
// A fenced worker takes no work under its old id: the peers reclaim
// everything it held. Each queue's lease has a state of its own
// (sessionState).
type lifecycle struct {
	// id is the worker's current identity; it changes when a fenced
	// worker registers again.
	id     string
	phase  phase
	fenced bool
	// fencedAt is when the worker last fenced itself (zero if never).
	fencedAt time.Time
}

// isCurrent reports whether id is the worker's live identity: it is its
// id, it is not fenced and not closed. An answer from Redis about an id
// that is no longer current says nothing about the worker now.
func (l *lifecycle) isCurrent(id string) bool {
	return l.id == id && !l.fenced && l.phase != phaseClosed
}

// toFenced fences the worker under id at now, unless id is no longer
// current. It reports whether it did.
func (l *lifecycle) toFenced(id string, now time.Time) bool {
	if !l.isCurrent(id) {
		return false
	}
	l.fenced, l.fencedAt = true, now
	return true
}

// toRegistered makes id, a fresh registration, the worker's identity and
// ends its fence. It refuses (false) once the worker is closed.
func (l *lifecycle) toRegistered(id string) bool {
	if l.phase == phaseClosed {
		return false
	}
	l.id, l.fenced = id, false
	return true
}

// toDraining stops the taking of work.
func (l *lifecycle) toDraining() {
	if l.phase == phaseServing {
		l.phase = phaseDraining
	}
}

// toClosed closes the worker; false if it already was.
func (l *lifecycle) toClosed() bool {
	if l.phase == phaseClosed {
		return false
	}
	l.phase = phaseClosed
	return true
}

// isClosed reports whether the worker is closed.
func (l *lifecycle) isClosed() bool { return l.phase == phaseClosed }

// isFenced reports whether the worker is fenced.
func (l *lifecycle) isFenced() bool { return l.fenced }

// takesWork reports why the worker may not take work now, if it may not:
// ErrWorkerClosed once it drains or is closed, ErrWorkerFenced while it is
// fenced.
func (l *lifecycle) takesWork() error {
	switch {
	case l.phase != phaseServing:
		return ErrWorkerClosed
	case l.fenced:
		return ErrWorkerFenced
	}
	return nil
}

// current returns the worker's id if it may act: not closed, not fenced.
func (l *lifecycle) current(op string) (string, error) {
	switch {
	case l.phase == phaseClosed:
		return "", fmt.Errorf("worqr: %s: %w", op, ErrWorkerClosed)
	case l.fenced:
		return "", fmt.Errorf("worqr: %s: %w", op, ErrWorkerFenced)
	}
	return l.id, nil
}

// fencedSince is how long before now the worker last fenced itself, or a
// day if it never did.
func (l *lifecycle) fencedSince(now time.Time) time.Duration {
	if l.fencedAt.IsZero() {
		return 24 * time.Hour
	}
	return now.Sub(l.fencedAt)
}
