package worqr

// The fences are the engine's: of the whole worker, its lease keeper's
// (engine.Keeper.Fence), and of one session, whose lease on its queue
// alone ran out (engine.Session.Fence). Here is what the worker tells of
// them.

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
