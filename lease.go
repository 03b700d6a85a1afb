package worqr

// The lease deadline: when the worker's leases may have run out by its own
// clock, and the timer that fences the worker, or one of its queues, then.
// The renewals that move the deadline are keepalive.go's; the fences
// themselves are fence.go's.

import (
	"errors"
	"fmt"
	"time"
)

// A worker judges its own liveness on its own monotonic clock: the leases
// Redis holds were set when Redis ran the renewal, which is after the
// worker sent it, so a worker that counts TTL from the send time of its
// last successful renewal always believes itself dead no later than Redis
// does. The margin adds room for the timer firing late and for clocks
// that run at slightly different rates. Send times are read from the
// client's clock, whose real form keeps Go's monotonic reading, so a wall
// clock step does not move the deadline.

// margin is how long before the lease's earliest expiry a worker fences
// itself.
func (k *leaseKeeper) margin() time.Duration { return k.w.opts.TTL / 10 }

// extend moves the registry lease's deadline to TTL minus the margin after
// sent, the time a registry renewal that succeeded was sent, and arms the
// timer. Callers hold w.mu.
func (k *leaseKeeper) extend(sent time.Time) {
	k.at = k.deadline(sent)
	k.arm()
}

// deadline is when a lease renewed at sent may expire, by the worker's
// clock, less the margin.
func (k *leaseKeeper) deadline(sent time.Time) time.Time {
	return sent.Add(k.w.opts.TTL - k.margin())
}

// arm sets the timer to the earliest deadline: the registry lease's, or
// that of one of the queue leases still held. Callers hold w.mu.
func (k *leaseKeeper) arm() {
	earliest := k.at
	for _, s := range k.w.sessions {
		if at, ok := s.Deadline(); ok && at.Before(earliest) {
			earliest = at
		}
	}
	k.timer.Reset(k.w.c.clock.Until(earliest))
}

// onDeadline fences the worker under its current id when its registry
// lease may have expired, or just the queues whose lease may have (their
// node could not be reached: on a cluster, a shard failing over), unless
// renewals have moved the deadlines since the timer was set.
func (k *leaseKeeper) onDeadline() {
	w := k.w
	w.mu.Lock()
	if w.state.IsClosed() || w.state.IsFenced() {
		w.mu.Unlock()
		return
	}
	id, now := w.state.ID(), w.c.clock.Now()
	if !now.Before(k.at) {
		w.mu.Unlock()
		k.fence(id, errors.New("lease not renewed in time"))
		return
	}
	var due []*session
	for _, s := range w.sessions {
		if s.Due(now) {
			due = append(due, s)
		}
	}
	w.mu.Unlock()
	for _, s := range due {
		s.Fence(id, fmt.Errorf("lease on %q not renewed in time", s.Name))
	}
	w.mu.Lock()
	if !w.state.IsClosed() {
		k.arm()
	}
	w.mu.Unlock()
}
