package engine

import "github.com/worqr/worqr/internal/slotpolicy"

// slots counts a scheduler's slots in use, or a member's share of them.
type slots struct {
	// busy counts the handlers running (a slot is taken from the dequeue
	// or claim until the handler returns). The processes themselves are in
	// the session's Books.
	busy int
	// settling counts the outcomes of returned handlers being written. A
	// slot is handed on when its handler returns, not when Redis has the
	// outcome, so the next task's dequeue overlaps the finish; settling
	// bounds how far the writes may lag (see slotpolicy.Free).
	settling int
	// asking counts the slots a dequeue in flight asked for: a process an
	// enqueue hands over meanwhile (claim) must not take one of them.
	asking int
}

// memberSlots is a member's share of its scheduler's slots: its counts,
// which move with the scheduler's, its cap, and the signal that its
// handlers have all ended (Drained). A Runtime holds one; so that a
// member's counts and the scheduler's change together, its state is
// guarded by the scheduler's mu (sched.mu), as the member's work flags
// are, and it takes no lock of its own.
type memberSlots struct {
	sched *Scheduler // set when made, as is maxSlots
	// maxSlots caps how many of the scheduler's slots the member holds at
	// once (QueueSpec.MaxSlots); 0: as many as there are.
	maxSlots int

	// Guarded by sched.mu.
	slots
	// drain is closed when no handler runs and no outcome is being
	// written (busy and settling both zero), for those waiting for that
	// (Drained): a Finish is written after the handler's goroutine went
	// back for work (see Settler.FinishLater), and StopTaking's callers
	// wait for it too. Made when one asks while handlers run, dropped
	// once closed.
	// Not a sync.WaitGroup: a StopWork whose handlers outlived their
	// cancel, and whose release failed, starts the member again while its
	// waiting goroutine still waits, and a WaitGroup's Add then races that
	// Wait (and may panic, "reused before previous Wait has returned").
	drain chan struct{}
}

// count moves the member's slot counts, and the scheduler's, by busy and
// settling; then, if a member may take the slot that freed, it wakes the
// loop, and if the member's handlers have all ended it closes the drain
// channel those waiting for that hold.
func (m *memberSlots) count(busy, settling int) {
	s := m.sched
	s.mu.Lock()
	m.busy += busy
	m.settling += settling
	s.busy += busy
	s.settling += settling
	wanted := s.wantedLocked()
	drained := m.takeDrainLocked()
	s.mu.Unlock()
	if wanted {
		s.poke()
	}
	if drained != nil {
		close(drained)
	}
}

// Full reports whether the member could not start a handler now for want
// of a slot: the scheduler's are all taken, or its maxSlots is reached.
func (m *memberSlots) Full() bool {
	s := m.sched
	s.mu.Lock()
	defer s.mu.Unlock()
	return slotpolicy.Free(s.size, s.busy, s.settling) <= 0 || (m.maxSlots > 0 && m.busy >= m.maxSlots)
}

// Free is how many more handlers the member may start now.
func (m *memberSlots) Free() int {
	s := m.sched
	s.mu.Lock()
	defer s.mu.Unlock()
	n := slotpolicy.Free(s.size, s.busy, s.settling)
	if m.maxSlots > 0 {
		n = min(n, m.maxSlots-m.busy)
	}
	return n
}

// Drained returns a channel closed once no handler runs and no outcome
// is being written: at once if none is. A waiter waits for that once,
// whatever handlers start after it.
func (m *memberSlots) Drained() <-chan struct{} {
	m.sched.mu.Lock()
	defer m.sched.mu.Unlock()
	if m.busy+m.settling == 0 {
		return closedChan
	}
	if m.drain == nil {
		m.drain = make(chan struct{})
	}
	return m.drain
}

// takeDrainLocked returns the drain channel to close, if handlers have
// just all ended and someone waits, and forgets it. Callers hold
// sched.mu.
func (m *memberSlots) takeDrainLocked() chan struct{} {
	d := m.drain
	if d == nil || m.busy+m.settling > 0 {
		return nil
	}
	m.drain = nil
	return d
}

// Idle reports whether none of the member's handlers runs or has its
// outcome being written.
func (m *memberSlots) Idle() bool {
	m.sched.mu.Lock()
	defer m.sched.mu.Unlock()
	return m.busy+m.settling == 0
}

// Counts are the member's handlers running and outcomes being written.
func (m *memberSlots) Counts() (busy, settling int) {
	m.sched.mu.Lock()
	defer m.sched.mu.Unlock()
	return m.busy, m.settling
}
