// Package subscription is a worker's listener on one queue's channel and
// the dispatcher that hands its events, one at a time, to the queue's
// session.
package subscription

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/worqr/worqr/internal/startstop"
	"github.com/worqr/worqr/internal/store"
)

// Mailbox hands events from the Redis reader goroutine to a dispatcher
// without ever blocking the reader: push only appends under a mutex.
type Mailbox struct {
	mu      sync.Mutex
	pending []Event
	signal  chan struct{}
}

// NewMailbox is an empty mailbox.
func NewMailbox() *Mailbox { return &Mailbox{signal: make(chan struct{}, 1)} }

func isWork(e Event) bool { return !e.Subscribed && e.Kind == store.EventWork }

// Subscription is a worker's listener on one queue's channel, and feeds
// its dispatcher. On Redis Cluster the channel is a shard channel
// (SSUBSCRIBE), on the node that owns the queue's slot. The store keeps
// one subscription per channel for all the client's listeners (see
// store.Listen), subscribed again whenever the server drops it; every
// confirmation queues a check, so a notification missed in between cannot
// strand a task.
//
// Its dispatcher is a service (startstop) on the worker's life: Started
// once it runs, Stopped once it has returned.
type Subscription struct {
	startstop.Base
	// handle applies an event to the queue's session.
	handle func(context.Context, Event)
	// inCallback says whether an application's callback of the queue is
	// running (see end).
	inCallback func() bool
	box        *Mailbox
	listener   *store.Listener
	// release ends the dispatcher's run without waiting for it: a
	// callback that stops its own subscription cannot wait for itself.
	release context.CancelFunc
	// ready is closed when the server first confirms the subscription.
	ready     chan struct{}
	readyOnce sync.Once
	// confirmed counts the confirmations heard: the first makes the
	// subscription ready, later ones say events may have been missed.
	confirmed atomic.Int64
}

// New starts the dispatcher of the queue's events, on the worker's life,
// handing each to handle, and listens on the queue's channel through st.
func New(life context.Context, st *store.Store, queue string, handle func(context.Context, Event), inCallback func() bool) *Subscription {
	sub := &Subscription{handle: handle, inCallback: inCallback, box: NewMailbox(), ready: make(chan struct{})}
	subscribed := func() {
		// Ready first: the dispatcher may handle the event before this
		// goroutine runs again, and its check wakes the runtime, whose
		// dequeue parks it in the idle set only if the subscription is
		// ready by then (see engine.Dequeue). Closed after the push, a
		// runtime could miss its parking dequeue and stay out of the idle
		// set until its next event.
		sub.readyOnce.Do(func() { close(sub.ready) })
		sub.box.Push(Event{Subscribed: true, Again: sub.confirmed.Add(1) > 1})
	}
	message := func(msg string) {
		if e, ok := store.ParseEvent(msg); ok {
			sub.box.Push(Event{Event: e})
		}
	}
	run, release := context.WithCancel(life)
	sub.release = release
	_ = sub.Start(run)
	sub.listener = st.Listen(queue, subscribed, message)
	return sub
}

// Start runs the dispatcher on ctx, until ctx ends or the subscription
// stops.
func (sub *Subscription) Start(ctx context.Context) error {
	ctx, ok, started, stopped := sub.Begin(ctx)
	if !ok {
		return nil
	}
	go func() {
		defer stopped()
		started()
		sub.dispatch(ctx)
	}()
	return nil
}

// Push adds an event, merging work events that pile up.
func (m *Mailbox) Push(e Event) {
	m.mu.Lock()
	if n := len(m.pending); isWork(e) && n > 0 && isWork(m.pending[n-1]) {
		last := &m.pending[n-1]
		last.Count += e.Count
		if last.To == "" || e.To == "" {
			last.To = "" // one of them wakes everyone
		} else {
			last.To += "," + e.To
		}
	} else {
		m.pending = append(m.pending, e)
	}
	m.mu.Unlock()
	select {
	case m.signal <- struct{}{}:
	default:
	}
}

// Take is the events pushed since the last Take.
func (m *Mailbox) Take() []Event {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := m.pending
	m.pending = nil
	return out
}

// IsReady reports whether the server has confirmed the subscription once:
// events published since are heard, or, if it drops, the subscription that
// comes back says they may have been missed.
func (sub *Subscription) IsReady() bool {
	select {
	case <-sub.ready:
		return true
	default:
		return false
	}
}

// Unsubscribe ends the subscription and waits for its dispatcher, except for a
// callback that is running: that may be the caller itself (a Delete
// callback calling StopWork), and the dispatcher ends when it returns. The
// queue's last listener of the client unsubscribes on the server too.
func (sub *Subscription) Unsubscribe(ctx context.Context) { sub.end(ctx, true) }

func (sub *Subscription) dispatch(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-sub.box.signal:
		}
		for _, e := range sub.box.Take() {
			if ctx.Err() != nil {
				return
			}
			sub.handle(ctx, e)
		}
	}
}

// Halt ends the subscription, as Unsubscribe does, without telling the server.
func (sub *Subscription) Halt(ctx context.Context) { sub.end(ctx, false) }

func (sub *Subscription) end(ctx context.Context, unsubscribe bool) {
	sub.listener.Stop(ctx, unsubscribe)
	sub.release()
	if !sub.inCallback() {
		sub.Stop()
	}
}
