package engine

import (
	"sync"

	"github.com/worqr/worqr/internal/lifecycle"
)

// Locked is the worker as every component of its engine takes it: its
// mu, and what the mu guards that a decision must be atomic with (its
// lifecycle: its id, phase and fence; the session of each queue it
// serves). Each component's host adds to it what that component alone
// needs: DeadlineHost, KeeperHost, SessionHost, RuntimeHost. The core's
// one adapter (Core.Host) implements them all.
type Locked interface {
	// Lock and Unlock take and release the worker's mu, which is taken
	// before a session's lease and books.
	sync.Locker
	// Worker is the worker's lifecycle. The caller holds the worker's mu.
	Worker() *lifecycle.Worker
	// Session is the session serving queue, nil if none. The caller
	// holds the worker's mu.
	Session(queue string) *Session
}
