package worqr

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/worqr/worqr/internal/store"
)

// mailbox hands events from the Redis reader goroutine to a dispatcher
// without ever blocking the reader: push only appends under a mutex.
type mailbox struct {
	mu      sync.Mutex
	pending []event
	signal  chan struct{}
}

func newMailbox() *mailbox { return &mailbox{signal: make(chan struct{}, 1)} }

func isWork(e event) bool { return !e.subscribed && e.Kind == store.EventWork }

// subscription keeps one queue's channel subscribed for a worker and feeds
// its dispatcher. On Redis Cluster it is a shard channel (SSUBSCRIBE), on
// the node that owns the queue's slot. rueidis resubscribes by itself after
// a reconnect, and its Receive returns nil when the server drops the
// subscription (a slot that moved, a failover, or another user of the
// connection unsubscribing the channel); either way the loop
// subscribes again, and every confirmed subscription queues a check so a
// notification missed in between cannot strand a task.
type subscription struct {
	w      *Worker
	s      *serving
	box    *mailbox
	cancel context.CancelFunc
	// ready is closed when the server first confirms the subscription.
	ready     chan struct{}
	readyOnce sync.Once
	// received and dispatched are closed when the goroutines end.
	received, dispatched chan struct{}
}

func (w *Worker) subscribe(s *serving) *subscription {
	ctx, cancel := context.WithCancel(context.Background())
	sub := &subscription{
		w: w, s: s, box: newMailbox(), cancel: cancel,
		ready: make(chan struct{}), received: make(chan struct{}), dispatched: make(chan struct{}),
	}
	go sub.receive(ctx)
	go sub.dispatch(ctx)
	return sub
}

func (m *mailbox) push(e event) {
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

func (m *mailbox) take() []event {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := m.pending
	m.pending = nil
	return out
}

func (sub *subscription) receive(ctx context.Context) {
	defer close(sub.received)
	st := sub.w.c.store
	var confirmed atomic.Int64
	subscribed := func() {
		// Ready first: the dispatcher may handle the event before this
		// goroutine runs again, and its check wakes the runtime, whose
		// dequeue parks it in the idle set only if the subscription is
		// ready by then (see Worker.dequeue). Closed after the push, a
		// runtime could miss its parking dequeue and stay out of the idle
		// set until its next event.
		sub.readyOnce.Do(func() { close(sub.ready) })
		sub.box.push(event{subscribed: true, again: confirmed.Add(1) > 1})
	}
	message := func(msg string) {
		if e, ok := store.ParseEvent(msg); ok {
			sub.box.push(event{Event: e})
		}
	}
	backoff := newBackoff(10*time.Millisecond, time.Second)
	for {
		err := st.Subscribe(ctx, sub.s.name, subscribed, message)
		if ctx.Err() != nil {
			return
		}
		sub.w.logger().Debug("worqr: subscription ended, subscribing again", "queue", sub.s.name, "err", err)
		if err == nil {
			backoff.reset() // dropped by the server: come straight back
		}
		if !backoff.wait(ctx) {
			return
		}
	}
}

// isReady reports whether the server has confirmed the subscription once:
// events published since are heard, or, if it drops, the subscription that
// comes back says they may have been missed.
func (sub *subscription) isReady() bool {
	select {
	case <-sub.ready:
		return true
	default:
		return false
	}
}

// stop ends the subscription and waits for its goroutines, except for a
// callback that is running: that may be the caller itself (a Delete
// callback calling StopWork), and the dispatcher ends when it returns. It
// unsubscribes on the server too, since a cancelled Receive leaves the
// server-side subscription in place.
func (sub *subscription) stop(ctx context.Context) {
	sub.halt()
	// Best effort, and bounded: rueidis retries UNSUBSCRIBE until its
	// context ends, and Redis may be gone (a fenced, cut-off worker).
	uctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	_ = sub.w.c.store.Unsubscribe(uctx, sub.s.name)
}

func (sub *subscription) dispatch(ctx context.Context) {
	defer close(sub.dispatched)
	for {
		select {
		case <-ctx.Done():
			return
		case <-sub.box.signal:
		}
		for _, e := range sub.box.take() {
			if ctx.Err() != nil {
				return
			}
			sub.w.handle(ctx, sub.s, e)
		}
	}
}

// halt ends the subscription's goroutines, as stop does, without telling
// the server.
func (sub *subscription) halt() {
	sub.cancel()
	<-sub.received
	if !sub.s.inCallback.Load() {
		<-sub.dispatched
	}
}
