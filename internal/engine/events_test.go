package engine

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/worqr/worqr/internal/errs"
	"github.com/worqr/worqr/internal/store"
)

// told records the application's callbacks.
type told struct{ work, cancel, delete []string }

func (t *told) events() Events {
	return Events{
		Work:   func(q string, n int64) { t.work = append(t.work, q) },
		Cancel: func(q, id string) { t.cancel = append(t.cancel, id) },
		Delete: func(q string) { t.delete = append(t.delete, q) },
	}
}

// A cancel event ends (unsettled) the processes of the tasks it names,
// none for the ids tasks without one share, and tells every id; a delete
// event ends those up to the queue's last id then, and tells once.
func TestSessionCancelAndDeleteEvents(t *testing.T) {
	t.Parallel()
	var s Session
	var got told
	s.Init(nil, nil, "q", got.events(), nil, time.Time{}, nil)
	a, none, later := &Proc{ID: "1", Seq: 1, TaskID: "a"}, &Proc{ID: "2", Seq: 2, TaskID: "0"}, &Proc{ID: "3", Seq: 3, TaskID: "c"}
	s.Books.procs[a.ID], s.Books.procs[none.ID], s.Books.procs[later.ID] = a, none, later
	ctx := t.Context()

	s.Cancelled(ctx, []string{"a", "0", ""})
	assert.ErrorIs(t, a.St.Err(), errs.ErrTaskCancelled)
	assert.False(t, a.St.IsSettled())
	assert.NoError(t, none.St.Err(), "a cancel of id 0 ended a task of no id")
	assert.Equal(t, []string{"a", "0", ""}, got.cancel)

	s.Deleted(ctx, 2)
	assert.ErrorIs(t, none.St.Err(), errs.ErrQueueDeleted)
	assert.NoError(t, later.St.Err(), "a delete ended a process dequeued after it")
	assert.Equal(t, []string{"q"}, got.delete)

	s.Worked(ctx, 2)
	assert.Equal(t, []string{"q"}, got.work)
}

// States read after a missed notification end the processes they name:
// a lost one leaves the books, and the events not told yet are told.
func TestSessionApplyStates(t *testing.T) {
	t.Parallel()
	var s Session
	var got told
	s.Init(nil, nil, "q", got.events(), nil, time.Time{}, nil)
	h := &fakeHost{}
	live := &Proc{ID: "1", TaskID: "a", Host: h}
	lost := &Proc{ID: "2", TaskID: "b", Host: h}
	c1, c2 := &Proc{ID: "3", TaskID: "c", Host: h}, &Proc{ID: "4", TaskID: "e", Host: h}
	c2.End(errs.ErrTaskCancelled, false) // the cancel's message was heard
	del := &Proc{ID: "5", TaskID: "d", Host: h}
	procs := []*Proc{live, lost, c1, c2, del}
	require.True(t, s.AdoptAll(procs))
	s.ApplyStates(t.Context(), procs, []store.State{store.Active, store.Lost, store.Cancelled, store.Cancelled, store.Deleted})

	assert.NoError(t, live.St.Err())
	assert.ErrorIs(t, lost.St.Err(), errs.ErrProcessLost)
	assert.ElementsMatch(t, []*Proc{live, c1, c2, del}, s.Books.Processes(), "the lost process stayed in the books, or another left them")
	assert.Equal(t, []Outcome{Lost}, h.observed)
	assert.ErrorIs(t, c1.St.Err(), errs.ErrTaskCancelled)
	assert.ErrorIs(t, del.St.Err(), errs.ErrQueueDeleted)
	assert.Equal(t, []string{"c"}, got.cancel, "a cancel the message told was told again")
	assert.Equal(t, []string{"q"}, got.delete)
}
