package engine

import (
	"time"

	"github.com/worqr/worqr/internal/lifecycle"
)

// A session's side of its lease on the queue: the deadline by which the
// worker fences it, and the generation that tells an answer about the
// lease held now from one about a lease given up. The worker's side (its
// id, the deadline timer, the renewals) is the root's lease keeper.

// Deadline is when the lease on the queue may expire, less the fence
// margin, while the session serves (ok false otherwise: a fenced or
// departing session holds no lease to fence).
func (s *Session) Deadline() (at time.Time, ok bool) {
	s.Mu.Lock()
	defer s.Mu.Unlock()
	return s.DeadlineAt, s.State == lifecycle.SessionServing
}

// Due reports whether the session serves under a lease whose deadline
// is not after now.
func (s *Session) Due(now time.Time) bool {
	at, ok := s.Deadline()
	return ok && !now.Before(at)
}

// Renewed takes in the answer to a renewal of the queue's lease sent
// while its lease generation was gen, by a worker whose id was current
// (whether it still is: the caller holds the worker's mu): it moves the
// deadline to deadline if that is later, and reports whether the lease
// was renewed, or found gone. An answer about a lease the session has
// since given up (a fence, or leaving the queue), or held under an id no
// longer current, says neither: the worker may serve the queue again by
// then, under another session.
func (s *Session) Renewed(current bool, gen uint64, gone bool, deadline time.Time) (renewed, lost bool) {
	s.Mu.Lock()
	defer s.Mu.Unlock()
	switch {
	case !current || s.State.IsFenced() || s.State == lifecycle.SessionLeft || s.LeaseGen != gen:
		return false, false
	case gone:
		return false, true
	}
	if deadline.After(s.DeadlineAt) {
		s.DeadlineAt = deadline
	}
	return true, false
}

// Rejoined records a new lease on the queue, held until deadline, after
// the worker gave back every process it held there up to the queue's
// process id upTo (0 if it gave back none): hand-off events for those
// may still come, and are ignored.
func (s *Session) Rejoined(upTo uint64, deadline time.Time) {
	s.Mu.Lock()
	defer s.Mu.Unlock()
	s.ReleasedUpTo = max(s.ReleasedUpTo, upTo)
	s.State.Rejoin()
	s.DeadlineAt = deadline
}

// Lost records that the worker, registering again, could not take a
// lease on the queue: the session is fenced until it rejoins, and an
// answer about the lease given up says nothing.
func (s *Session) Lost() {
	s.Mu.Lock()
	defer s.Mu.Unlock()
	s.State.Lose()
	s.LeaseGen++
}
