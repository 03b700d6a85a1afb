package engine

import "github.com/worqr/worqr/internal/lifecycle"

// The decisions a session makes over its books and its state at once:
// each is atomic under Mu, and the worker's side (its id, its lifecycle,
// whether the session is still the queue's) is the caller's to check
// under the worker's mu, taken before Mu.

// IsFenced reports whether the session gave up its lease on the queue
// (a fence, or a re-registration that could not reach it) and has not
// rejoined.
func (s *Session) IsFenced() bool {
	s.Mu.Lock()
	defer s.Mu.Unlock()
	return s.State.IsFenced()
}

// Lease reports whether the session holds a lease to renew, and its
// generation (see LeaseGen).
func (s *Session) Lease() (leased bool, gen uint64) {
	s.Mu.Lock()
	defer s.Mu.Unlock()
	return s.State.Leased(), s.LeaseGen
}

// Holds reports whether the session serves under its lease and, when p
// is not nil, holds p: otherwise a script finding the lease gone is no
// evidence against the worker, which gave that lease up, or the process.
func (s *Session) Holds(p *Proc) bool {
	s.Mu.Lock()
	defer s.Mu.Unlock()
	return s.State == lifecycle.SessionServing && (p == nil || s.Procs[p.ID] == p)
}

// AdoptAll records the processes a dequeue took, unless the session was
// fenced while the script ran (they are the peers' then), and reports
// whether it did.
func (s *Session) AdoptAll(ps []*Proc) bool {
	s.Mu.Lock()
	defer s.Mu.Unlock()
	if s.State.IsFenced() {
		return false
	}
	for _, p := range ps {
		s.Procs[p.ID] = p
	}
	return true
}

// Adopt records p, a process an enqueue handed the worker, unless the
// session is fenced, gave p's task back already (p's id is at most
// ReleasedUpTo: a reconciliation or a rejoin released it), or holds p
// already; it reports whether it did.
func (s *Session) Adopt(p *Proc) bool {
	s.Mu.Lock()
	defer s.Mu.Unlock()
	if s.State.IsFenced() || p.Seq <= s.ReleasedUpTo || s.Procs[p.ID] != nil {
		return false
	}
	s.Procs[p.ID] = p
	return true
}

// Keep lists the ids of the processes the session holds, which a
// reconciliation must not give back; ok is false once the session has
// left: only the session serving the queue now knows which of the
// worker's processes there are live, and one that has left would give
// back those of a session that followed it.
func (s *Session) Keep() (keep []string, ok bool) {
	s.Mu.Lock()
	defer s.Mu.Unlock()
	if s.State == lifecycle.SessionLeft {
		return nil, false
	}
	keep = make([]string, 0, len(s.Procs))
	for pid := range s.Procs {
		keep = append(keep, pid)
	}
	return keep, true
}

// Reconciled records a reconciliation that gave back the processes up to
// the queue's process id upTo: one pass fewer to look, and hand-off
// events for those given back are ignored.
func (s *Session) Reconciled(upTo uint64) {
	s.Mu.Lock()
	defer s.Mu.Unlock()
	s.Unsure--
	s.ReleasedUpTo = max(s.ReleasedUpTo, upTo)
}

// InterruptAll ends the handler contexts of every process the session
// holds with cause (proc.State.mu is taken under Mu), and, when giveUp,
// gives up their outcome writes being tried again (a closing worker's
// tasks go back with it; see proc.Persist).
func (s *Session) InterruptAll(cause error, giveUp bool) {
	s.Mu.Lock()
	defer s.Mu.Unlock()
	for _, p := range s.Procs {
		p.St.Interrupt(cause)
		if giveUp {
			p.St.GiveUp()
		}
	}
}

// Leaving marks the session as leaving its queue: its tasks are being
// given back.
func (s *Session) Leaving() {
	s.Mu.Lock()
	defer s.Mu.Unlock()
	s.State.Leave()
}

// Left marks the session as having left its queue (gone true), or, when
// leaving failed, as serving it still.
func (s *Session) Left(gone bool) {
	s.Mu.Lock()
	defer s.Mu.Unlock()
	if gone {
		s.State.Left()
	} else {
		s.State.Stay()
	}
}
