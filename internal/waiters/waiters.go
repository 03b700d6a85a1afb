// Package waiters is the client's component for Wait: one subscription
// per queue with waiters, which wakes them when an outcome may be there to
// read.
package waiters

import (
	"context"
	"sync"

	"github.com/worqr/worqr/internal/errs"
	"github.com/worqr/worqr/internal/startstop"
	"github.com/worqr/worqr/internal/store"
)

// Waiters is the client's component for Wait: per queue with waiters, one
// subscription to the queue's channel, which wakes the waiters of a task
// when its outcome event comes, and every waiter of the queue after each
// (re)subscription (an event may have been missed). Events that say no
// outcome will come (a cancel naming the task, a retained task cancelled
// before it started, the queue deleted) wake them too, with the reason,
// which Wait returns if its read finds the task gone. The subscription
// ends when the queue's last waiter leaves.
type Waiters struct {
	store  *store.Store
	mu     sync.Mutex              // guards queues and closed
	queues map[string]*queueWaiter // queues with waiters
	closed chan struct{}           // closed when the client closes
	once   sync.Once
}

// queueWaiter is one queue's waiters and its subscription, a service
// (startstop) that listens until it is stopped.
type queueWaiter struct {
	ids    map[string]map[*Waiter]struct{} // guarded by Waiters.mu
	listen *startstop.Loop
}

// Waiter is one Wait call.
type Waiter struct {
	wake   chan struct{} // a signal to read the outcome (buffered, 1)
	closed chan struct{} // the client's
	// progress, for WaitWithProgress only (else nil), signals a report
	// heard, kept in report (the last one: a slow callback skips some).
	progress chan struct{}
	mu       sync.Mutex            // guards report and gone
	report   *store.ProgressRecord // guarded by mu
	// gone is why the task may have ended without an outcome
	// (ErrTaskCancelled, ErrQueueDeleted), as the last event that said so
	// told; nil if none did.
	gone error
}

// New is the waiters of the tasks of store s.
func New(s *store.Store) *Waiters {
	return &Waiters{store: s, queues: make(map[string]*queueWaiter), closed: make(chan struct{})}
}

// Add registers a waiter for a task, subscribing to its queue if needed.
// The waiter is woken once the subscription is confirmed. withProgress
// makes it hear the task's progress reports too.
func (ws *Waiters) Add(queue, id string, withProgress bool) *Waiter {
	w := &Waiter{wake: make(chan struct{}, 1), closed: ws.closed}
	if withProgress {
		w.progress = make(chan struct{}, 1)
	}
	ws.mu.Lock()
	defer ws.mu.Unlock()
	qw, ok := ws.queues[queue]
	if !ok {
		qw = &queueWaiter{ids: make(map[string]map[*Waiter]struct{})}
		qw.listen = startstop.NewLoop(func(ctx context.Context) { ws.listen(ctx, queue, qw) })
		ws.queues[queue] = qw
		// The subscription serves every Wait on the queue, not the one
		// that made it, and the client has no context of its own: it
		// runs until the queue's last waiter leaves or the client closes.
		_ = qw.listen.Start(context.Background())
	} else {
		w.poke() // subscribed already (or about to be: then it pokes again)
	}
	if qw.ids[id] == nil {
		qw.ids[id] = make(map[*Waiter]struct{})
	}
	qw.ids[id][w] = struct{}{}
	return w
}

// Remove unregisters a waiter, and ends the queue's subscription once it
// has no waiter left.
func (ws *Waiters) Remove(queue, id string, w *Waiter) {
	ws.mu.Lock()
	qw := ws.queues[queue]
	if qw == nil {
		ws.mu.Unlock()
		return
	}
	delete(qw.ids[id], w)
	if len(qw.ids[id]) == 0 {
		delete(qw.ids, id)
	}
	last := len(qw.ids) == 0
	if last {
		delete(ws.queues, queue)
	}
	ws.mu.Unlock()
	if last {
		qw.listen.Stop()
	}
}

// Wake is signalled when the task's outcome may be there to read.
func (w *Waiter) Wake() <-chan struct{} { return w.wake }

// Progress is signalled when a report was heard (TakeReport); nil, never
// ready, for a waiter added without progress.
func (w *Waiter) Progress() <-chan struct{} { return w.progress }

// Closed is closed when the client closes.
func (w *Waiter) Closed() <-chan struct{} { return w.closed }

func (w *Waiter) poke() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// wakeAll pokes every waiter of a queue, or those of one task.
func (ws *Waiters) wakeAll(qw *queueWaiter, id string) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	for tid, set := range qw.ids {
		if id != "" && tid != id {
			continue
		}
		for w := range set {
			w.poke()
		}
	}
}

// ended wakes the waiters of a task (every waiter of the queue for id "")
// with why it may have ended without an outcome.
func (ws *Waiters) ended(qw *queueWaiter, id string, why error) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	tell := func(set map[*Waiter]struct{}) {
		for w := range set {
			w.mu.Lock()
			w.gone = why
			w.mu.Unlock()
			w.poke()
		}
	}
	if id != "" {
		tell(qw.ids[id])
		return
	}
	for _, set := range qw.ids {
		tell(set)
	}
}

// TakeGone is why the task may have ended without an outcome, as the last
// event heard said, once; nil if none said so since the last call.
func (w *Waiter) TakeGone() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	why := w.gone
	w.gone = nil
	return why
}

// heard hands a progress report to the waiters of its task that listen for
// them.
func (ws *Waiters) heard(qw *queueWaiter, id string, r store.ProgressRecord) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	for w := range qw.ids[id] {
		if w.progress == nil {
			continue
		}
		w.mu.Lock()
		w.report = &r
		w.mu.Unlock()
		select {
		case w.progress <- struct{}{}:
		default:
		}
	}
}

// TakeReport is the last report heard, once; nil if none is new.
func (w *Waiter) TakeReport() *store.ProgressRecord {
	w.mu.Lock()
	defer w.mu.Unlock()
	r := w.report
	w.report = nil
	return r
}

// listen keeps the queue's channel subscribed while it has waiters.
func (ws *Waiters) listen(ctx context.Context, queue string, qw *queueWaiter) {
	subscribed := func() { ws.wakeAll(qw, "") }
	message := func(msg string) {
		e, ok := store.ParseEvent(msg)
		switch {
		case ok && e.Kind == store.EventOutcome:
			ws.wakeAll(qw, e.TaskIDs[0])
		case ok && (e.Kind == store.EventCancel || e.Kind == store.EventNoOutcome):
			for _, id := range e.TaskIDs {
				ws.ended(qw, id, errs.ErrTaskCancelled)
			}
		case ok && e.Kind == store.EventDelete:
			ws.ended(qw, "", errs.ErrQueueDeleted)
		case ok && e.Kind == store.EventProgress:
			ws.heard(qw, e.TaskIDs[0], e.Progress)
		}
	}
	// The store keeps the channel subscribed, and subscribes it again
	// whenever the server drops it, until the last listener leaves.
	l := ws.store.Listen(queue, subscribed, message)
	<-ctx.Done()
	// No UNSUBSCRIBE, which would hold up the last Wait's return for a
	// round trip: the channel stays subscribed on the connection until
	// the client closes (or a worker of the client that serves the queue
	// leaves it last); its messages go nowhere meanwhile.
	l.Stop(ctx, false)
}

// Quiet calls f with the number of the queue's waiters, under the lock
// the wakes are sent under, unless the queue has none or a wake waits to
// be taken; it returns f's answer, or false.
func (ws *Waiters) Quiet(queue string, f func(waiters int) bool) bool {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	qw := ws.queues[queue]
	if qw == nil {
		return false
	}
	registered := 0
	for _, set := range qw.ids {
		for w := range set {
			registered++
			if len(w.wake) > 0 {
				return false
			}
		}
	}
	return f(registered)
}

// Closed is closed when the client closes: a wait of another kind (a
// workflow's) ends with the client too.
func (ws *Waiters) Closed() <-chan struct{} { return ws.closed }

// Close ends every waiter (Closed) and subscription.
func (ws *Waiters) Close() {
	ws.once.Do(func() { close(ws.closed) })
	ws.mu.Lock()
	listens := make([]startstop.Service, 0, len(ws.queues))
	for q, qw := range ws.queues {
		listens = append(listens, qw.listen)
		delete(ws.queues, q)
	}
	ws.mu.Unlock()
	startstop.StopAll(listens...)
}
