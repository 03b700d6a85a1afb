// Package proc is a process's state machine: how it ends (Done, Err, the
// first reason winning), whether a script that ends it succeeded
// (settled), whether the observer was told, its result, the context of
// the handler running it, and the throttle of its progress writes. The
// engine's record of a process (engine.Proc) holds a State by value (no
// allocation of its own); what a process is (its ids, its task) and what
// ends it in Redis are the engine's.
package proc

import (
	"sync"
)

// State is a process's state. The zero value is a process running whose
// Done channel is made when first asked for.
type State struct {
	mu sync.Mutex // guards the fields below
	// done is Done's channel, made when first asked for; closed when the
	// process ends (err set).
	done chan struct{}
	err  error // why the process ended, for Err; nil while it runs
	// settled is true once Finish or Requeue succeeded, or the process was
	// found lost: no further state change is sent to Redis for it.
	settled bool
	// observed is true once the observer was told how the process ended.
	observed bool
	// result is what SetResult set.
	result []byte
	// progress is what ReportProgress was told, and its throttle.
	progress progress
	// ended is called with the reason when the process ends: it cancels
	// the context of the handler running it, if any.
	ended func(reason error)
	// unwritten is set once a write of its handler's outcome failed on
	// the connection and is being tried again (see Persist): a fence
	// meanwhile drops it.
	unwritten bool
	// interrupted is set once Interrupt ended the handler's context.
	interrupted bool
	// stopped is Stopped's channel, made when first asked for; closed
	// once the process is settled or interrupted.
	stopped chan struct{}
}

// MakeDone makes Done's channel now, for a process that never ends (a
// detached one): Done is then never closed.
func (s *State) MakeDone() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done == nil {
		s.done = make(chan struct{})
	}
}

// SetResult keeps a copy of result.
func (s *State) SetResult(result []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.result = append([]byte(nil), result...)
}

// Result is what SetResult kept, nil if it was not called.
func (s *State) Result() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.result
}

// ResultText is Result as text.
func (s *State) ResultText() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return string(s.result)
}

// Done is closed when the process ends.
func (s *State) Done() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done == nil { // made on first use: most processes never need it
		s.done = make(chan struct{})
		if s.err != nil { // ended before anyone asked
			close(s.done)
		}
	}
	return s.done
}

// Err is why the process ended, nil while it runs.
func (s *State) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// End closes Done with a reason; the first reason wins. first reports
// whether this call ended the process; newlySettled whether it settled a
// process that was not (settled asks for it: a process ended by a cancel
// or delete event, not settled, can still be settled later, when it is
// lost).
func (s *State) End(reason error, settled bool) (first, newlySettled bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	newlySettled = settled && !s.settled
	if settled {
		s.settled = true
	}
	if newlySettled {
		s.closeStoppedLocked()
	}
	first = s.err == nil
	if first {
		s.err = reason
		if s.done != nil {
			close(s.done)
		}
		s.stopProgress()
		if s.ended != nil {
			s.ended(reason) // a context's CancelCauseFunc: quick, never blocks
		}
	}
	return first, newlySettled
}

// SetUnwritten marks the process's outcome write as being tried again.
func (s *State) SetUnwritten() {
	s.mu.Lock()
	s.unwritten = true
	s.mu.Unlock()
}

// IsUnwritten tells whether the process's outcome write is being tried
// again.
func (s *State) IsUnwritten() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.unwritten
}

// OnEnd arranges for fn to be called with the reason when the process
// ends, at once if it already has.
func (s *State) OnEnd(fn func(reason error)) {
	s.mu.Lock()
	reason := s.err
	if reason == nil {
		s.ended = fn
	}
	s.mu.Unlock()
	if reason != nil {
		fn(reason)
	}
}

// Interrupt ends the context of the handler running the process, if any,
// with cause, without ending the process.
func (s *State) Interrupt(cause error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.interrupted = true
	s.closeStoppedLocked()
	if s.ended != nil {
		s.ended(cause)
	}
}

// Stopped is closed once no outcome write of the process is worth
// trying again: it is settled (its write went through, or it was found
// lost, as a fence finds it), or its handler was interrupted (the worker
// is closing and gives its tasks back). An end by an event (cancel,
// delete) does not close it: the write still drops the task in Redis.
func (s *State) Stopped() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped == nil { // made on first use: only a write tried again asks
		s.stopped = make(chan struct{})
		if s.settled || s.interrupted {
			close(s.stopped)
		}
	}
	return s.stopped
}

// closeStoppedLocked closes Stopped's channel, if made and still open.
// Callers hold mu.
func (s *State) closeStoppedLocked() {
	if s.stopped == nil {
		return
	}
	select {
	case <-s.stopped:
	default:
		close(s.stopped)
	}
}

// IsSettled tells whether a script ended the process, or it was found
// lost.
func (s *State) IsSettled() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.settled
}

// Observe marks the observer told how the process ended, and reports
// whether this is the first time: the observer is told once.
func (s *State) Observe() (first bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	first = !s.observed
	s.observed = true
	return first
}
