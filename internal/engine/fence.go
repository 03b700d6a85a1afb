package engine

// The fence of one session: the worker's lease on its queue alone ran
// out (its node could not be reached in time) while its other leases are
// fine. The fence of the whole worker is its lease keeper's.

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/worqr/worqr/internal/errs"
)

// Fence makes the worker treat its lease on this queue as lost, when it
// could not renew that lease in time while the rest of its leases are
// fine. It takes no work here and ends the processes it held here, like a
// fence of the whole worker, but keeps its id and its other queues;
// Rejoin gives the queue's tasks back and takes a new lease once the node
// answers. It does nothing unless id is the worker's current id and the
// session is serving and still the worker's.
func (s *Session) Fence(id string, cause error) {
	h := s.host
	h.Lock()
	if !h.Worker().IsCurrent(id) || h.Session(s.Name) != s {
		h.Unlock()
		return
	}
	// A rejoin gives back everything under id in this queue: the fence
	// leaves nothing to reconcile.
	lost, deadline, ok := s.Lease.fence(&s.Books)
	if !ok {
		h.Unlock()
		return
	}
	// The lease in Redis may be live until TTL after the last renewal
	// that reached it was sent: give the tasks back no earlier than a peer
	// could have taken them, so handlers have the same time to stop.
	expiresBy := deadline.Add(h.Deadline().Margin())
	h.Go(func(life context.Context) { s.Rejoin(life, id, expiresBy) })
	h.Unlock()

	EndLost(lost)
	log := s.env.logger()
	log.Warn("worqr: lease on a queue not renewed in time: its handlers there stop, and their tasks go back to the queue to run again",
		"queue", s.Name, "cause", cause, "processes", len(lost), "next", "taking the lease again")
	LogDropped(log, lost)
	h.Fenced(id, s.Name, cause, lost)
}

// EndLost ends the processes a fence took: their tasks belong to the
// peers now, or go back to the queue with the rejoin.
func EndLost(lost []*Proc) {
	reason := fmt.Errorf("%w: %w", errs.ErrProcessLost, errs.ErrWorkerFenced)
	for _, p := range lost {
		p.End(reason, true)
	}
}

// LogDropped says, in one line, how many of the processes a fence ended
// had an outcome still to write: their handlers had returned, but the
// writes failed on the connection and were being tried again (see
// proc.Persist). The fence drops them; their tasks go back with the rest,
// so they may run again.
func LogDropped(log *slog.Logger, lost []*Proc) {
	n := 0
	for _, p := range lost {
		if p.St.IsUnwritten() {
			n++
		}
	}
	if n > 0 {
		log.Warn("worqr: outcomes not yet written when the worker fenced itself are dropped; their tasks may run again", "outcomes", n)
	}
}
