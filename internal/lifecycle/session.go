package lifecycle

// Session is where a session stands with its queue lease. It changes
// only through the transitions below, each made under the session's mu:
//
//	serving --fence--> fenced --rejoin--> serving
//	serving --leave--> leaving --stay--> serving
//	fenced  --leave--> leavingFenced --stay--> fenced
//	leaving, leavingFenced --left--> left
//	serving, fenced --lose--> fenced     (re-registration could not reach the queue)
//	any --left--> left                   (the worker closed)
//
// Leaving and rejoining both hold the membership lock and the queue's gate,
// so no rejoin runs while a session leaves; a fence refuses a session that
// is not serving.
type Session uint8

const (
	// SessionServing: the worker holds the queue's lease, renews it and
	// takes work there.
	SessionServing Session = iota
	// SessionFenced: the lease was given up (not renewed in time, or not
	// reachable when the worker registered again); the worker takes no
	// work there, and a rejoin is on its way.
	SessionFenced
	// SessionLeaving: StopWork (or a StartWork undone) is releasing the
	// queue while its lease is held: a lease found gone then is no
	// evidence that the worker is dead.
	SessionLeaving
	// SessionLeavingFenced: the same, for a fenced session.
	SessionLeavingFenced
	// SessionLeft: the worker no longer serves the queue.
	SessionLeft
)

var sessionNames = [...]string{"serving", "fenced", "leaving", "leaving fenced", "left"}

func (st Session) String() string { return sessionNames[st] }

// Leased reports whether the worker holds (and renews) the queue's lease.
func (st Session) Leased() bool { return st == SessionServing || st == SessionLeaving }

// IsFenced reports whether the lease was given up and not yet taken again.
func (st Session) IsFenced() bool { return st == SessionFenced || st == SessionLeavingFenced }

// Fence gives up the lease of a serving session; false for any other.
func (st *Session) Fence() bool {
	if *st != SessionServing {
		return false
	}
	*st = SessionFenced
	return true
}

// Lose gives up the lease whatever it was (serving or fenced: a
// re-registration could not take the queue's lease).
func (st *Session) Lose() {
	switch *st {
	case SessionServing:
		*st = SessionFenced
	case SessionLeaving:
		*st = SessionLeavingFenced
	}
}

// Rejoin marks a new lease taken.
func (st *Session) Rejoin() {
	switch *st {
	case SessionFenced:
		*st = SessionServing
	case SessionLeavingFenced:
		*st = SessionLeaving
	}
}

// Leave marks the session being released.
func (st *Session) Leave() {
	switch *st {
	case SessionServing:
		*st = SessionLeaving
	case SessionFenced:
		*st = SessionLeavingFenced
	}
}

// Stay undoes leave, after releasing the queue failed.
func (st *Session) Stay() {
	switch *st {
	case SessionLeaving:
		*st = SessionServing
	case SessionLeavingFenced:
		*st = SessionFenced
	}
}

// Left ends the session.
func (st *Session) Left() { *st = SessionLeft }
