package worqr

import "context"

// A runtime's slots: Concurrency of them (a pool member's are its pool's,
// up to its cap). A slot is taken from a dequeue's request (asking) or a
// hand-off's claim until the handler returns, and the outcomes still being
// written (settling) hold new starts back when they lag.

// free is how many more handlers may start: Concurrency less those
// running, and no more than leaves at most Concurrency outcomes being
// written besides (a Redis that answers slowly holds new starts back
// rather than gathering unwritten outcomes).
func (r *runner) free() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slotsFree(r.opts.Concurrency, r.busy, r.settling)
}

// slotsFree is how many of size slots are free with busy handlers running
// and settling outcomes being written: a slot frees when its handler
// returns, while at most size outcomes are being written.
func slotsFree(size, busy, settling int) int {
	return min(size-busy, 2*size-busy-settling)
}

// room is how many of its pool's slots a pool member may take now: none
// unless it takes work, may have tasks and is not blocked; else up to its
// cap (Concurrency, when set), or the pool's size.
func (r *runner) room() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.loop == nil || r.loop.ctx.Err() != nil || !r.more || r.blocked {
		return 0
	}
	if c := r.opts.Concurrency; c > 0 {
		return c - r.busy
	}
	return r.pool.size
}

// ask marks the runtime's free slots as asked for by the dequeue about to
// be sent, and returns how many they are and the count of work events:
// none while the queue is not marked as maybe holding tasks. A wake-up
// can come from a slot that freed while the queue was so marked, and
// find it cleared since by a dequeue that came back short (which parked
// the runtime): dequeuing again would only park it again.
func (r *runner) ask() (n int, gen uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.more {
		return 0, r.gen
	}
	n = slotsFree(r.opts.Concurrency, r.busy, r.settling)
	r.asking += max(n, 0)
	return n, r.gen
}

// took records what a dequeue that asked for asked slots got: got
// handlers about to start (launch), which hold slots from now on.
func (r *runner) took(asked, got int) {
	r.mu.Lock()
	r.asking -= asked
	r.busy += got
	r.mu.Unlock()
	if r.pool != nil {
		r.pool.took(asked, got)
	}
}

// full reports whether a pool member could not start a handler now for
// want of a slot: the pool's are all taken, or its cap is reached.
func (r *runner) full() bool {
	if r.pool == nil {
		return false
	}
	if r.pool.free() <= 0 {
		return true
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.opts.Concurrency > 0 && r.busy >= r.opts.Concurrency
}

// claim takes a slot for a process an enqueue handed the runtime, if it
// takes work and has one free that no dequeue in flight asked for: a
// hand-off never runs more handlers than Concurrency (or the pool's size)
// allows. It returns where to launch the handler.
func (r *runner) claim() (idle chan job, stop context.Context, ok bool) {
	pl := r.pool
	if pl != nil && !pl.tryAcquire() {
		return nil, nil, false
	}
	r.mu.Lock()
	lc := r.loop
	ok = lc != nil && lc.ctx.Err() == nil
	switch c := r.opts.Concurrency; {
	case ok && pl == nil:
		ok = slotsFree(c, r.busy+r.asking, r.settling) > 0
	case ok && c > 0:
		ok = r.busy+r.asking < c // a pool member's cap
	}
	if ok {
		// Under mu: stopTaking takes mu after stopping the loop, so a
		// handler counted here is waited for, and none starts after.
		r.busy++
	}
	r.mu.Unlock()
	switch {
	case !ok && pl != nil:
		pl.unacquire()
		return nil, nil, false
	case !ok:
		return nil, nil, false
	case pl != nil:
		return pl.idle, pl.ctx, true
	}
	return lc.idle, lc.ctx, true
}

// unclaim gives back the slot claim took, for a process not adopted.
func (r *runner) unclaim() {
	r.mu.Lock()
	r.busy--
	more := r.more
	drained := r.takeDrainLocked()
	r.mu.Unlock()
	if drained != nil {
		close(drained)
	}
	if r.pool != nil {
		r.pool.unacquire()
	} else if more {
		r.poke()
	}
}
