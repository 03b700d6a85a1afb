// Package observe fans a client's events out to Options.Observer: the
// observer interfaces it implements, found once, each told only if it
// is one. The interfaces are the root's (EnqueueObserver,
// StartObserver, FinishObserver, ReclaimObserver) by their methods; the
// root tells FenceObserver itself, since its event holds public
// processes.
package observe

import (
	"context"

	"github.com/worqr/worqr/worqrtype"
)

// The observer interfaces, by their methods: the root's of the same
// names are the same interfaces.
type (
	EnqueueObserver interface {
		ObserveEnqueue(ctx context.Context, e worqrtype.EnqueueEvent)
	}
	StartObserver interface {
		ObserveStart(ctx context.Context, e worqrtype.StartEvent)
	}
	FinishObserver interface {
		ObserveFinish(ctx context.Context, e worqrtype.FinishEvent)
	}
	ReclaimObserver interface {
		ObserveReclaim(ctx context.Context, e worqrtype.ReclaimEvent)
	}
)

// Set is the observer interfaces a value implements; each is nil if it
// does not.
type Set struct {
	Enqueue EnqueueObserver
	Start   StartObserver
	Finish  FinishObserver
	Reclaim ReclaimObserver
}

// New finds the observer interfaces o implements.
func New(o any) Set {
	var s Set
	s.Enqueue, _ = o.(EnqueueObserver)
	s.Start, _ = o.(StartObserver)
	s.Finish, _ = o.(FinishObserver)
	s.Reclaim, _ = o.(ReclaimObserver)
	return s
}

// Enqueued tells of an enqueue call.
func (s Set) Enqueued(ctx context.Context, e worqrtype.EnqueueEvent) {
	if s.Enqueue != nil {
		s.Enqueue.ObserveEnqueue(ctx, e)
	}
}

// Started tells of a process that started.
func (s Set) Started(ctx context.Context, e worqrtype.StartEvent) {
	if s.Start != nil {
		s.Start.ObserveStart(ctx, e)
	}
}

// Reclaimed tells of the reclaim of a dead worker.
func (s Set) Reclaimed(ctx context.Context, e worqrtype.ReclaimEvent) {
	if s.Reclaim != nil {
		s.Reclaim.ObserveReclaim(ctx, e)
	}
}
