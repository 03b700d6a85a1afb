package store

import (
	"context"
	"sync"
	"time"

	"github.com/redis/rueidis"
)

// Publish sends a message on a queue's channel from outside a script:
// SPUBLISH on a cluster, like the scripts (see scripts.Load).
func (s *Store) Publish(ctx context.Context, queue, msg string) error {
	if err := s.enter(ctx, OpPublish, queue); err != nil {
		return err
	}
	return s.rdb.Do(ctx, s.publishCmd(s.queueKeys(queue).Channel, msg)).Error()
}

func (s *Store) publishCmd(channel, msg string) rueidis.Completed {
	if s.sharded {
		return s.b().Spublish().Channel(channel).Message(msg).Build().Pin()
	}
	return s.b().Publish().Channel(channel).Message(msg).Build().Pin()
}

// A store keeps one subscription per channel (a hub), which every
// listener of the channel shares: the workers of a client serving a queue
// and its waiters. Subscribing is the connection's, not the caller's, so
// listeners of their own would gain nothing: rueidis calls every Receive
// of a channel for every confirmation on it, so each new listener would
// tell each one before it that its subscription came back (and each would
// check its queue again: a fleet of N workers of one client on one queue
// made N*N/2 checks as it started), and an UNSUBSCRIBE by one ends them
// all. Joining a channel that is subscribed costs no command; the first
// listener subscribes and the last one unsubscribes.

// Listener is one listener's place on its channel's subscription.
type Listener struct {
	s          *Store
	h          *hub
	subscribed func()
	message    func(string)
	stopped    bool // guarded by the store's hubsMu
}

// hub is the subscription of one channel, shared by its listeners.
type hub struct {
	queue, channel string
	// prev is the hub that held the channel before, if it was still
	// ending (unsubscribing) when this one was made: this one subscribes
	// once that one is gone, so its UNSUBSCRIBE cannot end this one's
	// subscription.
	prev   *hub
	cancel context.CancelFunc
	done   chan struct{} // closed when the receive loop has ended
	gone   chan struct{} // closed when the hub is gone (after its UNSUBSCRIBE, if any)
	ending bool          // its last listener left; guarded by the store's hubsMu

	mu sync.RWMutex // guards the fields below; held while listeners are called
	// listeners are the listeners, each called on every confirmation and
	// message.
	listeners map[*Listener]struct{}
	// confirmed is set while the subscription is confirmed: a listener
	// that joins then is told at once.
	confirmed bool
}

// Listen adds a listener to a queue's channel, subscribing to it unless the
// store is subscribed already. subscribed is called once the subscription
// is confirmed (at once if it is), and again whenever the server confirms
// it anew (after a reconnect, or the server dropped it): events published
// in between may have been missed. message is called with every message.
// Neither may block, nor call the store's Listen or Stop: they run on
// rueidis's reader or the channel's receiving goroutine, one listener
// after another.
func (s *Store) Listen(queue string, subscribed func(), message func(string)) *Listener {
	return s.listen(queue, s.queueKeys(queue).Channel, subscribed, message)
}

// ListenWorkflow is Listen on a workflow's channel (see WorkflowKeys).
func (s *Store) ListenWorkflow(id string, subscribed func(), message func(string)) *Listener {
	return s.listen(workflowOp(id), s.keys.Workflow(id).Channel, subscribed, message)
}

// listen is Listen on channel; queue names the channel for faults.
func (s *Store) listen(queue, channel string, subscribed func(), message func(string)) *Listener {
	l := &Listener{s: s, subscribed: subscribed, message: message}
	s.hubsMu.Lock()
	defer s.hubsMu.Unlock()
	if s.hubs == nil {
		s.hubs = make(map[string]*hub)
	}
	h := s.hubs[channel]
	if h == nil || h.ending {
		h = s.startHub(queue, channel, h)
		s.hubs[channel] = h
	}
	l.h = h
	h.mu.Lock()
	h.listeners[l] = struct{}{}
	if h.confirmed {
		subscribed()
	}
	h.mu.Unlock()
	return l
}

// Stop removes the listener: neither of its functions is called once Stop
// has returned. The channel's last listener ends the subscription, and
// with unsubscribe tells the server so (best effort, bounded by ctx and a
// second: rueidis retries an UNSUBSCRIBE until its context ends, and
// Redis may be gone), since ending a Receive leaves the server's
// subscription in place. Stop is safe to call twice.
func (l *Listener) Stop(ctx context.Context, unsubscribe bool) {
	s, h := l.s, l.h
	s.hubsMu.Lock()
	if l.stopped {
		s.hubsMu.Unlock()
		return
	}
	l.stopped = true
	h.mu.Lock()
	delete(h.listeners, l)
	last := len(h.listeners) == 0
	h.mu.Unlock()
	if last {
		h.ending = true
	}
	s.hubsMu.Unlock()
	if !last {
		return
	}
	h.cancel()
	<-h.done
	if unsubscribe {
		uctx, cancel := context.WithTimeout(ctx, time.Second)
		_ = s.rdb.Do(uctx, s.unsubscribeCmd(h.channel)).Error()
		cancel()
	}
	s.hubsMu.Lock()
	if s.hubs[h.channel] == h {
		delete(s.hubs, h.channel)
	}
	s.hubsMu.Unlock()
	close(h.gone)
}

// Listeners counts the listeners of a queue's channel, and reports
// whether the store has a subscription to it. For tests.
func (s *Store) Listeners(queue string) (n int, subscribed bool) {
	channel := s.queueKeys(queue).Channel
	s.hubsMu.Lock()
	defer s.hubsMu.Unlock()
	h := s.hubs[channel]
	if h == nil {
		return 0, false
	}
	h.mu.RLock()
	defer h.mu.RUnlock()
	return len(h.listeners), true
}

// startHub makes a channel's hub and starts its receive loop. Callers hold
// hubsMu.
func (s *Store) startHub(queue, channel string, prev *hub) *hub {
	ctx, cancel := context.WithCancel(context.Background())
	h := &hub{
		queue: queue, channel: channel, prev: prev, cancel: cancel,
		done: make(chan struct{}), gone: make(chan struct{}),
		listeners: make(map[*Listener]struct{}),
	}
	go s.receive(ctx, h)
	return h
}

// receive keeps the hub's channel subscribed until ctx ends. rueidis
// subscribes again by itself after a reconnect; its Receive returns nil
// when the server drops the subscription (a slot that moved, a failover,
// an UNSUBSCRIBE from another user of the connection), and the loop then
// subscribes again at once if the subscription held for a second; after an
// error, or a drop sooner than that, it waits, longer each time, up to a
// second.
func (s *Store) receive(ctx context.Context, h *hub) {
	defer close(h.done)
	if h.prev != nil {
		select {
		case <-h.prev.gone:
		case <-ctx.Done():
			return
		}
		h.prev = nil
	}
	const first, most = 10 * time.Millisecond, time.Second
	wait := first
	hooked := rueidis.WithOnSubscriptionHook(ctx, h.confirm)
	deliver := func(m rueidis.PubSubMessage) { h.deliver(m.Message) }
	for {
		start := s.clock.Now()
		err := s.enter(ctx, OpSubscribe, h.queue)
		if err == nil {
			err = s.rdb.Receive(hooked, s.subscribeCmd(h.channel), deliver)
		}
		h.mu.Lock()
		h.confirmed = false
		h.mu.Unlock()
		if ctx.Err() != nil {
			return
		}
		if err == nil && s.clock.Since(start) >= most {
			// Dropped by the server after it held a while: come straight
			// back. One dropped as soon as it was made backs off like an
			// error: each comeback makes every listener check its queue.
			wait = first
		}
		t := s.clock.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
		}
		wait = min(2*wait, most)
	}
}

// confirm runs on rueidis's reader for every (un)subscription event on
// the connection.
func (h *hub) confirm(sub rueidis.PubSubSubscription) {
	if sub.Channel != h.channel {
		return
	}
	switch sub.Kind {
	case "subscribe", "ssubscribe":
		h.mu.Lock()
		h.confirmed = true
		for l := range h.listeners {
			l.subscribed()
		}
		h.mu.Unlock()
	case "unsubscribe", "sunsubscribe":
		h.mu.Lock()
		h.confirmed = false
		h.mu.Unlock()
	}
}

// deliver hands a message to every listener.
func (h *hub) deliver(msg string) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	for l := range h.listeners {
		l.message(msg)
	}
}

func (s *Store) subscribeCmd(channel string) rueidis.Completed {
	if s.sharded {
		return s.b().Ssubscribe().Channel(channel).Build().Pin()
	}
	return s.b().Subscribe().Channel(channel).Build().Pin()
}

func (s *Store) unsubscribeCmd(channel string) rueidis.Completed {
	if s.sharded {
		return s.b().Sunsubscribe().Channel(channel).Build().Pin()
	}
	return s.b().Unsubscribe().Channel(channel).Build().Pin()
}
