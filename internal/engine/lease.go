package engine

import (
	"sync"
	"time"

	"github.com/worqr/worqr/internal/lifecycle"
)

// Lease is a session's side of its lease on the queue: where the session
// stands with it (lifecycle.Session), the deadline by which the worker
// fences it, and the generation that tells an answer about the lease
// held now from one about a lease given up. The worker's side (its id,
// the deadline timer, the renewals) is the lease keeper's (Keeper). Its
// state is its own, guarded by its mu; the decisions over the lease and
// the session's books at once are its too (they take the Books' mu
// under its own), each told the books it decides over.
type Lease struct {
	mu sync.Mutex
	// state is where the session stands with its lease. Guarded by mu.
	state lifecycle.Session
	// deadline is when the worker's lease on the queue may expire, by
	// its own clock, less the fence margin (see deadline.go).
	// Guarded by mu.
	deadline time.Time
	// gen counts the times the worker gave up its lease on the queue
	// (fence, or a re-registration that could not reach it): an answer
	// to a renewal sent before says nothing about the lease it holds
	// now. Guarded by mu.
	gen uint64
}

// LeaseView is a copy of the lease's state, for inspection.
type LeaseView struct {
	State    lifecycle.Session
	Deadline time.Time
	Gen      uint64
}

// View is a copy of the lease's state.
func (l *Lease) View() LeaseView {
	l.mu.Lock()
	defer l.mu.Unlock()
	return LeaseView{State: l.state, Deadline: l.deadline, Gen: l.gen}
}

// Deadline is when the lease on the queue may expire, less the fence
// margin, while the session serves (ok false otherwise: a fenced or
// departing session holds no lease to fence).
func (l *Lease) Deadline() (at time.Time, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.deadline, l.state == lifecycle.SessionServing
}

// Due reports whether the session serves under a lease whose deadline
// is not after now.
func (l *Lease) Due(now time.Time) bool {
	at, ok := l.Deadline()
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
func (l *Lease) Renewed(current bool, gen uint64, gone bool, deadline time.Time) (renewed, lost bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case !current || l.state.IsFenced() || l.state == lifecycle.SessionLeft || l.gen != gen:
		return false, false
	case gone:
		return false, true
	}
	if deadline.After(l.deadline) {
		l.deadline = deadline
	}
	return true, false
}

// Lost records that the worker, registering again, could not take a
// lease on the queue: the session is fenced until it rejoins, and an
// answer about the lease given up says nothing.
func (l *Lease) Lost() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.state.Lose()
	l.gen++
}

// IsFenced reports whether the session gave up its lease on the queue
// (a fence, or a re-registration that could not reach it) and has not
// rejoined.
func (l *Lease) IsFenced() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.state.IsFenced()
}

// Leased reports whether the session holds a lease to renew, and its
// generation.
func (l *Lease) Leased() (leased bool, gen uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.state.Leased(), l.gen
}

// Leaving marks the session as leaving its queue: its tasks are being
// given back.
func (l *Lease) Leaving() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.state.Leave()
}

// Left marks the session as having left its queue (gone true), or, when
// leaving failed, as serving it still.
func (l *Lease) Left(gone bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if gone {
		l.state.Left()
	} else {
		l.state.Stay()
	}
}

// The decisions over the lease and the books b at once: each is atomic
// under the lease's mu, which is taken before the books' (their methods
// take it). Those adopting a process are in books.go, with the books'
// intake, so that a process's way into the books and out is one file. The worker's side (its id, its lifecycle, whether the session
// is still the queue's) is the caller's to check under the worker's mu,
// taken before both.

// holds reports whether the session serves under its lease and, when p
// is not nil, b holds p.
func (l *Lease) holds(b *Books, p *Proc) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.state == lifecycle.SessionServing && (p == nil || b.has(p))
}

// keep lists the ids of the processes b holds; ok is false once the
// session has left.
func (l *Lease) keep(b *Books) (keep []string, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.state == lifecycle.SessionLeft {
		return nil, false
	}
	return b.ids(), true
}

// fence gives up the lease, when it could not be renewed in time: it
// takes every process out of b, with no reconciliation left to run, and
// returns them and the deadline the lease was held to. ok is false when
// the session was not serving.
func (l *Lease) fence(b *Books) (lost []*Proc, deadline time.Time, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.state.Fence() {
		return nil, time.Time{}, false
	}
	l.gen++
	return b.TakeAll(), l.deadline, true
}

// rejoined records a new lease, held until deadline, after the worker
// gave back every process it held in the queue up to its process id
// upTo: b ignores hand-offs of those before the session serves again.
func (l *Lease) rejoined(b *Books, upTo uint64, deadline time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	b.released(upTo)
	l.state.Rejoin()
	l.deadline = deadline
}
