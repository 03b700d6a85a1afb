package engine

// The lease deadline: when the worker's leases may have run out by its own
// clock, and the timer that fences the worker, or one of its sessions,
// then. The renewals that move the deadline are the lease keeper's
// (Keeper, renew.go); the fence of a session is its own (fence.go), that of the
// whole worker the keeper's.

import (
	"errors"
	"fmt"
	"time"

	"github.com/worqr/worqr/internal/clock"
)

// A worker judges its own liveness on its own monotonic clock: the leases
// Redis holds were set when Redis ran the renewal, which is after the
// worker sent it, so a worker that counts TTL from the send time of its
// last successful renewal always believes itself dead no later than Redis
// does. The margin adds room for the timer firing late and for clocks
// that run at slightly different rates. Send times are read from the
// client's clock, whose real form keeps Go's monotonic reading, so a wall
// clock step does not move the deadline.

// DeadlineHost is the worker whose leases a Deadline watches.
type DeadlineHost interface {
	// Locked: the worker's mu guards the deadline.
	Locked
	// Sessions appends the sessions of the queues served to dst. The
	// caller holds the worker's mu.
	Sessions(dst []*Session) []*Session
}

// Deadline is the worker's fencing deadline: that of its registry lease,
// and the timer set to the earliest of it and its sessions' (each
// session's own is its Lease's). The registry lease's is guarded by the
// worker's mu.
type Deadline struct {
	host  DeadlineHost
	clock clock.Clock
	ttl   time.Duration
	// fence fences the whole worker under id, for cause (the keeper's
	// Fence).
	fence func(id string, cause error)
	// timer fires at the earliest deadline (Arm).
	timer clock.Timer
	// at is when the registry lease may expire, by the worker's clock,
	// less the margin. Guarded by the worker's mu.
	at time.Time
	// sessions is Arm's list of the sessions, kept from one call to the
	// next so that arming the timer allocates nothing once it has grown
	// to the queues served. Guarded by the worker's mu.
	sessions []*Session
}

// Init sets up the deadline of host's leases, each ttl long, on clk,
// which fence fences the worker at; its timer is not armed until Extend
// or Arm.
func (d *Deadline) Init(host DeadlineHost, clk clock.Clock, ttl time.Duration, fence func(id string, cause error)) {
	d.host, d.clock, d.ttl, d.fence = host, clk, ttl, fence
	d.timer = clk.AfterFunc(time.Hour, d.onDeadline)
}

// Margin is how long before the lease's earliest expiry a worker fences
// itself.
func (d *Deadline) Margin() time.Duration { return d.ttl / 10 }

// At is the registry lease's deadline. Callers hold the worker's mu.
func (d *Deadline) At() time.Time { return d.at }

// Of is when a lease renewed at sent may expire, by the worker's clock,
// less the margin.
func (d *Deadline) Of(sent time.Time) time.Time {
	return sent.Add(d.ttl - d.Margin())
}

// Extend moves the registry lease's deadline to TTL minus the margin
// after sent, the time a registry renewal that succeeded was sent, and
// arms the timer. Callers hold the worker's mu.
func (d *Deadline) Extend(sent time.Time) {
	d.at = d.Of(sent)
	d.Arm()
}

// Arm sets the timer to the earliest deadline: the registry lease's, or
// that of one of the session leases still held. Callers hold the
// worker's mu.
func (d *Deadline) Arm() {
	earliest := d.at
	d.sessions = d.host.Sessions(d.sessions[:0])
	for i, s := range d.sessions {
		if at, ok := s.Lease.Deadline(); ok && at.Before(earliest) {
			earliest = at
		}
		d.sessions[i] = nil // no session is kept past the call
	}
	d.timer.Reset(d.clock.Until(earliest))
}

// Disarm stops the timer: nothing under the worker's id is left to
// fence.
func (d *Deadline) Disarm() { d.timer.Stop() }

// onDeadline fences the worker under its current id when its registry
// lease may have expired, or just the sessions whose lease may have (their
// node could not be reached: on a cluster, a shard failing over), unless
// renewals have moved the deadlines since the timer was set.
func (d *Deadline) onDeadline() {
	h := d.host
	h.Lock()
	if w := h.Worker(); w.IsClosed() || w.IsFenced() {
		h.Unlock()
		return
	}
	id, now := h.Worker().ID(), d.clock.Now()
	if !now.Before(d.at) {
		h.Unlock()
		d.fence(id, errors.New("lease not renewed in time"))
		return
	}
	var due []*Session
	for _, s := range h.Sessions(nil) {
		if s.Lease.Due(now) {
			due = append(due, s)
		}
	}
	h.Unlock()
	for _, s := range due {
		s.Fence(id, fmt.Errorf("lease on %q not renewed in time", s.Name))
	}
	h.Lock()
	if !h.Worker().IsClosed() {
		d.Arm()
	}
	h.Unlock()
}
