package worqr

import "fmt"

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

// lifecycle is a worker's state: its phase, and whether its registry
// lease stands. The two are independent (a worker may lose its lease while
// it drains), and each changes only through the transitions below, all
// made under w.mu:
//
//	live --fence--> fenced --registered(new id)--> live
//
// A fenced worker takes no work under its old id: the peers reclaim
// everything it held.
type lifecycle struct {
	phase  phase
	fenced bool
}

// isCurrent reports whether id is the worker's live identity: it is its
// id, it is not fenced and not closed. An answer from Redis about an id
// that is no longer current says nothing about the worker now. Callers
// hold w.mu.
func (w *Worker) isCurrent(id string) bool {
	return w.id == id && !w.state.fenced && w.state.phase != phaseClosed
}

// toFenced fences the worker under id, unless id is no longer current.
// It reports whether it did. Callers hold w.mu.
func (w *Worker) toFenced(id string) bool {
	if !w.isCurrent(id) {
		return false
	}
	w.state.fenced = true
	return true
}

// toRegistered makes id, a fresh registration, the worker's identity and
// ends its fence. It refuses (false) once the worker is closed. Callers
// hold w.mu.
func (w *Worker) toRegistered(id string) bool {
	if w.state.phase == phaseClosed {
		return false
	}
	w.id, w.state.fenced = id, false
	return true
}

// toDraining stops the taking of work. Callers hold w.mu.
func (w *Worker) toDraining() {
	if w.state.phase == phaseServing {
		w.state.phase = phaseDraining
	}
}

// toClosed closes the worker; false if it already was. Callers hold w.mu.
func (w *Worker) toClosed() bool {
	if w.state.phase == phaseClosed {
		return false
	}
	w.state.phase = phaseClosed
	return true
}

// isClosed reports whether the worker is closed. Callers hold w.mu.
func (w *Worker) isClosed() bool { return w.state.phase == phaseClosed }

// isFenced reports whether the worker is fenced. Callers hold w.mu.
func (w *Worker) isFenced() bool { return w.state.fenced }

// takesWork reports why the worker may not take work now, if it may not:
// ErrWorkerClosed once it drains or is closed, ErrWorkerFenced while it is
// fenced. Callers hold w.mu.
func (w *Worker) takesWork() error {
	switch {
	case w.state.phase != phaseServing:
		return ErrWorkerClosed
	case w.state.fenced:
		return ErrWorkerFenced
	}
	return nil
}

// current returns the worker's id if it may act: not closed, not fenced.
func (w *Worker) current(op string) (string, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case w.state.phase == phaseClosed:
		return "", fmt.Errorf("worqr: %s: %w", op, ErrWorkerClosed)
	case w.state.fenced:
		return "", fmt.Errorf("worqr: %s: %w", op, ErrWorkerFenced)
	}
	return w.id, nil
}
