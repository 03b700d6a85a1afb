package proc

import (
	"time"

	"github.com/worqr/worqr/internal/clock"
)

// progress is a process's reports: the last one made, and the throttle
// of its writes. Guarded by State.mu.
type progress struct {
	set     bool // a report was made
	percent int
	note    string
	// sent is when the last write went out; sending is true while one is
	// in flight; timer, when set, writes the last report once the
	// interval since sent has passed. dirty is true while a report made
	// after the last write went out is not written yet.
	sent    time.Time
	sending bool
	dirty   bool
	timer   clock.Timer
}

// Throttle is what the throttle of a process's progress writes takes of
// its worker: at most one write per Interval, on Clock.
type Throttle struct {
	Clock    clock.Clock
	Interval time.Duration
}

// Flusher writes the last report the throttle held, when its timer
// fires: it calls FlushingProgress, writes, then ProgressWritten.
type Flusher interface{ FlushProgress() }

// KeepProgress keeps a report without writing it (a detached process's).
func (s *State) KeepProgress(percent int, note string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.progress.set, s.progress.percent, s.progress.note = true, percent, note
}

// ReportProgress keeps a report and says what becomes of it: write is
// true if the caller is to write it now (then call ProgressWritten);
// else it is held, for the write in flight or for the timer, which f
// writes (or the process had ended: ended is its reason).
func (s *State) ReportProgress(t Throttle, f Flusher, percent int, note string) (write bool, ended error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.progress.set, s.progress.percent, s.progress.note = true, percent, note
	if s.err != nil {
		return false, s.err
	}
	pr := &s.progress
	if pr.timer != nil || pr.sending {
		pr.dirty = true // the armed timer, or the write in flight, writes it
		return false, nil
	}
	if wait := t.Interval - t.Clock.Since(pr.sent); wait > 0 {
		pr.dirty = true
		pr.timer = t.Clock.AfterFunc(wait, f.FlushProgress)
		return false, nil
	}
	pr.sending, pr.dirty, pr.sent = true, false, t.Clock.Now()
	return true, nil
}

// Progress is the last report kept; ok is false if none was.
func (s *State) Progress() (percent int, note string, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.progress.percent, s.progress.note, s.progress.set
}

// FlushingProgress is the throttle's timer firing: it returns the last
// report held, to write now (then call ProgressWritten); ok is false if
// there is none to write (the process ended; or the write in flight
// rearms the timer).
func (s *State) FlushingProgress(t Throttle) (percent int, note string, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	pr := &s.progress
	pr.timer = nil
	if s.err != nil || pr.sending || !pr.dirty {
		return 0, "", false
	}
	pr.sending, pr.dirty, pr.sent = true, false, t.Clock.Now()
	return pr.percent, pr.note, true
}

// ProgressWritten ends the write in flight, and arms the timer if
// another report came while it was.
func (s *State) ProgressWritten(t Throttle, f Flusher) {
	s.mu.Lock()
	defer s.mu.Unlock()
	pr := &s.progress
	pr.sending = false
	if pr.dirty && pr.timer == nil && s.err == nil {
		pr.timer = t.Clock.AfterFunc(max(t.Interval-t.Clock.Since(pr.sent), 0), f.FlushProgress)
	}
}

// ProgressArmed tells whether the throttle's timer is armed.
func (s *State) ProgressArmed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.progress.timer != nil
}

// stopProgress disarms the throttle's timer: the process ended. Called
// with s.mu held.
func (s *State) stopProgress() {
	if t := s.progress.timer; t != nil {
		t.Stop()
		s.progress.timer = nil
	}
}
