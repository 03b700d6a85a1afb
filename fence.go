package worqr

// The fences are the engine's: of the whole worker, its lease keeper's
// (engine.Keeper.Fence), and of one session, whose lease on its queue
// alone ran out (engine.Session.Fence). Here is what the worker tells of
// them.

import "github.com/worqr/worqr/internal/engine"

// leaseLost handles evidence from a script that the lease of worker id on
// a queue is gone (engine.Keeper.LeaseLost): sent is the session the
// script was sent for, if any, p the process it was about, if any.
func (k *leaseKeeper) leaseLost(id, queue string, sent *session, p *engine.Proc, cause error) {
	var es *engine.Session
	if sent != nil {
		es = &sent.Session
	}
	k.LeaseLost(id, queue, es, p, cause)
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
