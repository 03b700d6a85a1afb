package worqr

// The fence of the whole worker: the lease keeper's, which owns the
// deadline timer and the loop that registers a fenced worker again. The
// fence of one session, whose lease on its queue alone ran out, is the
// engine's (engine.Session.Fence).

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
	k.due.Stop()
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
