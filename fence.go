package worqr

// The fences: of the whole worker (the lease keeper's, which owns the
// deadline timer and the loop that registers a fenced worker again), and
// of one session, whose lease on its queue alone ran out.

import (
	"fmt"

	"github.com/worqr/worqr/internal/engine"
)

// leaseLost handles evidence from a script that the lease of worker id on
// a queue is gone: the worker is dead in Redis's eyes, so it fences itself.
// It is no evidence when the worker has left the queue, or is leaving it,
// since leaving drops the lease, nor when it has fenced the queue: it gave
// that lease up already, and a call sent before the fence may well reach
// Redis after the lease ran out. Nor is it when the script was sent for a
// service of the queue (sent) that has since ended, or about a process (p)
// the service no longer holds: the worker left the queue while the script
// was on its way, and may have started work on it again, under a new lease.
func (k *leaseKeeper) leaseLost(id, queue string, sent *session, p *engine.Proc, cause error) {
	w := k.w
	w.mu.Lock()
	s := w.sessions[queue]
	left := s == nil || (sent != nil && s != sent)
	if !left {
		// Leaving, fenced or left: the lease was given up, or is being.
		left = !s.Holds(p)
	}
	w.mu.Unlock()
	if !left {
		k.fence(id, cause)
	}
}

// fence makes the worker treat itself as dead: it takes no more work under
// id, ends every process it holds, tells the application, and wakes the
// keeper's loop to register again under a new id. The keeper's deadline
// timer stops: nothing under id is left to fence.
func (k *leaseKeeper) fence(id string, cause error) {
	w := k.w
	w.mu.Lock()
	if !w.state.ToFenced(id, w.c.clock.Now()) {
		w.mu.Unlock()
		return
	}
	k.timer.Stop()
	var lost []*engine.Proc
	for _, s := range w.sessions {
		// The peers reclaim everything under id: nothing to reconcile.
		lost = append(lost, s.TakeAll()...)
	}
	w.mu.Unlock()

	engine.EndLost(lost)
	next := "registering again"
	if w.opts.StayFenced {
		next = "staying fenced"
	}
	// An ordinary outage longer than the TTL ends here: nothing is lost,
	// the peers run the tasks again, and so does this worker once back.
	w.logger().Warn("worqr: worker fenced itself: its handlers stop, and their tasks go back to their queues to run again",
		"cause", cause, "processes", len(lost), "next", next)
	engine.LogDropped(w.logger(), lost)
	ev := FenceEvent{WorkerID: id, Cause: fmt.Errorf("%w: %w", ErrWorkerFenced, cause), Lost: processesOf(lost)}
	w.c.tellFenced(w.opts.OnFenced, ev)
	k.wake()
}

// fence makes the worker treat its lease on this queue as lost, when it
// could not renew that lease in time (its node unreachable) while the rest
// of its leases are fine. It takes no work here and ends the processes it
// held here, like a fence of the whole worker, but keeps its id and its
// other queues; rejoin gives the queue's tasks back and takes a new lease
// once the node answers. It does nothing unless id is the worker's
// current id and the session is serving and still the worker's.
func (s *session) fence(id string, cause error) {
	w := s.w
	w.mu.Lock()
	if !w.state.IsCurrent(id) || w.sessions[s.Name] != s {
		w.mu.Unlock()
		return
	}
	// A rejoin gives back everything under id in this queue: the fence
	// leaves nothing to reconcile.
	lost, deadline, ok := s.Fence()
	if !ok {
		w.mu.Unlock()
		return
	}
	// The lease in Redis may be live until TTL after the last renewal
	// that reached it was sent: give the tasks back no earlier than a peer
	// could have taken them, so handlers have the same time to stop.
	expiresBy := deadline.Add(w.lease.margin())
	w.closer.tasks.Go(func() { s.rejoin(w.life, id, expiresBy) })
	w.mu.Unlock()

	engine.EndLost(lost)
	log := w.logger()
	log.Warn("worqr: lease on a queue not renewed in time: its handlers there stop, and their tasks go back to the queue to run again",
		"queue", s.Name, "cause", cause, "processes", len(lost), "next", "taking the lease again")
	engine.LogDropped(log, lost)
	ev := FenceEvent{WorkerID: id, Queue: s.Name, Cause: fmt.Errorf("%w: %w", ErrWorkerFenced, cause), Lost: processesOf(lost)}
	w.c.tellFenced(w.opts.OnFenced, ev)
}

// tellFenced gives a fence event to the application's OnFenced and to the
// observer, each on a goroutine of its own: a fence happens on the lease
// keeper's goroutine and under the worker's locks, and either may well
// call StopWork or Close.
func (c *Client) tellFenced(onFenced func(FenceEvent), ev FenceEvent) {
	if onFenced != nil {
		go onFenced(ev)
	}
	if c.obs.fence != nil {
		go c.obs.fenced(ev)
	}
}
