package observe_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/worqr/worqr"
	"github.com/worqr/worqr/internal/observe"
	"github.com/worqr/worqr/worqrtype"
)

// The root's observer interfaces are these: a value of one is a value of
// the other.
var (
	_ observe.EnqueueObserver = worqr.EnqueueObserver(nil)
	_ observe.StartObserver   = worqr.StartObserver(nil)
	_ observe.FinishObserver  = worqr.FinishObserver(nil)
	_ observe.ReclaimObserver = worqr.ReclaimObserver(nil)
)

// enqueuesAndReclaims observes enqueues and reclaims only.
type enqueuesAndReclaims struct {
	enqueued  []worqrtype.EnqueueEvent
	reclaimed []worqrtype.ReclaimEvent
}

func (o *enqueuesAndReclaims) ObserveEnqueue(_ context.Context, e worqrtype.EnqueueEvent) {
	o.enqueued = append(o.enqueued, e)
}

func (o *enqueuesAndReclaims) ObserveReclaim(_ context.Context, e worqrtype.ReclaimEvent) {
	o.reclaimed = append(o.reclaimed, e)
}

// An observer is told through the interfaces it implements, and only
// those; a value that implements none, nil included, is told nothing.
func TestASetTellsTheInterfacesItsObserverImplements(t *testing.T) {
	ctx := context.Background()
	o := &enqueuesAndReclaims{}
	s := observe.New(o)
	assert.Nil(t, s.Start)
	assert.Nil(t, s.Finish)
	s.Enqueued(ctx, worqrtype.EnqueueEvent{Queue: "q", TaskIDs: []string{"1"}})
	s.Started(ctx, worqrtype.StartEvent{Queue: "q"})
	s.Reclaimed(ctx, worqrtype.ReclaimEvent{DeadWorker: "w", Tasks: 2})
	assert.Equal(t, []worqrtype.EnqueueEvent{{Queue: "q", TaskIDs: []string{"1"}}}, o.enqueued)
	assert.Equal(t, []worqrtype.ReclaimEvent{{DeadWorker: "w", Tasks: 2}}, o.reclaimed)

	for _, none := range []any{nil, struct{}{}} {
		s := observe.New(none)
		assert.Equal(t, observe.Set{}, s)
		s.Enqueued(ctx, worqrtype.EnqueueEvent{})
		s.Started(ctx, worqrtype.StartEvent{})
		s.Reclaimed(ctx, worqrtype.ReclaimEvent{})
	}
}
