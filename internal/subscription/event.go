package subscription

import (
	"sync"

	"github.com/worqr/worqr/internal/store"
)

// Event is a message from a queue's channel, or (Subscribed) a request
// to the dispatcher to look for anything missed while no subscription was
// in place.
type Event struct {
	store.Event
	Subscribed bool
	// Again marks a subscription that came back: events published while
	// it was away were missed.
	Again bool
}

// Confirmed is how many confirmations of the subscription it heard.
func (sub *Subscription) Confirmed() int64 { return sub.confirmed.Load() }

// Ready is closed when the server first confirms the subscription.
func (sub *Subscription) Ready() <-chan struct{} { return sub.ready }

// Push hands the dispatcher an event, as the channel does.
func (sub *Subscription) Push(e Event) { sub.box.Push(e) }

// Hold stops the channel's reader at its next push to the mailbox until
// the returned func is called (once), for tests.
func (sub *Subscription) Hold() (release func()) {
	sub.box.mu.Lock()
	return sync.OnceFunc(sub.box.mu.Unlock)
}
