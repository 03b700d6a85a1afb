package worqr

import (
	"context"
	"sync"
	"time"

	"github.com/worqr/worqr/internal/store"
)

// Events are a worker's callbacks for one queue, given to StartWork. Each
// may be nil. They run one at a time per queue, in the order the events
// arrived, on a goroutine of the worker's: never on the Redis connection's
// reader, so a slow callback delays only its own queue's events.
type Events struct {
	// Work is called when tasks may be waiting: after an enqueue, a stop
	// or a reclaim (count is how many tasks that added), and after every
	// (re)subscription and re-registration when the queue is not empty
	// (count is the queue's length then). Work events that pile up while a
	// callback runs are merged into one, with their counts added.
	Work func(queue string, count int64)
	// Cancel is called with the id of each cancelled task that was in
	// flight (on any worker) when it was cancelled. Processes of this
	// worker holding it have already ended with ErrTaskCancelled. A task
	// cancelled while it waited is simply gone: no event is raised.
	Cancel func(queue string, taskID string)
	// Delete is called when the queue was deleted. Processes of this worker
	// in it have already ended with ErrQueueDeleted.
	Delete func(queue string)
}

// event is a message from a queue's channel, or (subscribed) a request
// to the dispatcher to look for anything missed while no subscription was
// in place.
type event struct {
	store.Event
	subscribed bool
}

// mailbox hands events from the Redis reader goroutine to a dispatcher
// without ever blocking the reader: push only appends under a mutex.
type mailbox struct {
	mu      sync.Mutex
	pending []event
	signal  chan struct{}
}

func newMailbox() *mailbox { return &mailbox{signal: make(chan struct{}, 1)} }

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

func isWork(e event) bool { return !e.subscribed && e.Kind == store.EventWork }

func (m *mailbox) take() []event {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := m.pending
	m.pending = nil
	return out
}

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

func (sub *subscription) receive(ctx context.Context) {
	defer close(sub.received)
	st := sub.w.c.store
	subscribed := func() {
		sub.box.push(event{subscribed: true})
		sub.readyOnce.Do(func() { close(sub.ready) })
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

// stop ends the subscription and waits for its goroutines, except for a
// callback that is running: that may be the caller itself (a Delete
// callback calling StopWork), and the dispatcher ends when it returns. It
// unsubscribes on the server too, since a cancelled Receive leaves the
// server-side subscription in place.
func (sub *subscription) stop(ctx context.Context) {
	sub.cancel()
	<-sub.received
	if !sub.s.inCallback.Load() {
		<-sub.dispatched
	}
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

// backoff is a capped exponential delay for reconnect loops.
type backoff struct {
	min, max, next time.Duration
}

func newBackoff(min, max time.Duration) *backoff { return &backoff{min: min, max: max, next: min} }

func (b *backoff) reset() { b.next = b.min }

// wait sleeps for the next delay; false if ctx ended first.
func (b *backoff) wait(ctx context.Context) bool {
	t := time.NewTimer(b.next)
	defer t.Stop()
	b.next = min(b.next*2, b.max)
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
