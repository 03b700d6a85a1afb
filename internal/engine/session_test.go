package engine

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/worqr/worqr/internal/errs"
	"github.com/worqr/worqr/internal/lifecycle"
	"github.com/worqr/worqr/internal/store"
)

// A session's books: a stale record of the same id does not drop the one
// held; taking them all leaves no reconciliation to run; unsure passes are
// raised to at least, or reset to, what is asked.
func TestSessionBooks(t *testing.T) {
	t.Parallel()
	var s Session
	s.Init(nil, "q", Events{}, time.Time{}, nil)
	held, stale := &Proc{ID: "1"}, &Proc{ID: "1"}
	s.Procs[held.ID] = held
	s.Drop(stale)
	assert.Same(t, held, s.Procs["1"], "a stale record of the same id dropped the one held")
	s.Drop(held)
	assert.Empty(t, s.Procs)

	s.MarkUnsure(3, false)
	s.MarkUnsure(1, true)
	assert.Equal(t, 3, s.Unsure, "at least 1 lowered the passes left")
	s.MarkUnsure(1, false)
	assert.Equal(t, 1, s.Unsure, "a reset did not set the passes")
	assert.True(t, s.IsUnsure())

	s.Procs["2"] = &Proc{ID: "2"}
	lost := s.TakeAll()
	require.Len(t, lost, 1)
	assert.Empty(t, s.Procs)
	assert.False(t, s.IsUnsure(), "taking every process left a reconciliation to run")
}

// Ending the matching processes leaves them settleable; ending them all
// settles them and empties the books.
func TestSessionEnds(t *testing.T) {
	t.Parallel()
	var s Session
	s.Init(nil, "q", Events{}, time.Time{}, nil)
	a, b := &Proc{ID: "1", TaskID: "a"}, &Proc{ID: "2", TaskID: "b"}
	s.Procs[a.ID], s.Procs[b.ID] = a, b
	cancelled := errors.New("cancelled")
	s.EndMatching(func(p *Proc) bool { return p.TaskID == "a" }, cancelled)
	assert.ErrorIs(t, a.St.Err(), cancelled)
	assert.False(t, a.St.IsSettled(), "an ended match was settled: Finish would not work")
	assert.NoError(t, b.St.Err(), "a process that did not match ended")
	assert.Len(t, s.Procs, 2, "ending a match took it out of the books")

	gone := errors.New("gone")
	s.EndAll(gone)
	assert.Empty(t, s.Procs)
	assert.ErrorIs(t, b.St.Err(), gone)
	assert.True(t, a.St.IsSettled() && b.St.IsSettled(), "ending them all left one unsettled")
}

// fakeHost is a process's worker side that records what the record asks.
type fakeHost struct {
	dropped  int
	observed []Outcome
}

func (h *fakeHost) Env() *Env       { return nil }
func (h *fakeHost) Drop()           { h.dropped++ }
func (h *fakeHost) LeaseLost(error) {}
func (h *fakeHost) Observe(outcome Outcome, _ string, _ error) {
	h.observed = append(h.observed, outcome)
}

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
	s.Init(nil, "q", got.events(), time.Time{}, nil)
	a, none, later := &Proc{ID: "1", Seq: 1, TaskID: "a"}, &Proc{ID: "2", Seq: 2, TaskID: "0"}, &Proc{ID: "3", Seq: 3, TaskID: "c"}
	s.Procs[a.ID], s.Procs[none.ID], s.Procs[later.ID] = a, none, later
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
	s.Init(nil, "q", got.events(), time.Time{}, nil)
	h := &fakeHost{}
	live := &Proc{ID: "1", TaskID: "a", Host: h}
	lost := &Proc{ID: "2", TaskID: "b", Host: h}
	c1, c2 := &Proc{ID: "3", TaskID: "c", Host: h}, &Proc{ID: "4", TaskID: "e", Host: h}
	c2.End(errs.ErrTaskCancelled, false) // the cancel's message was heard
	del := &Proc{ID: "5", TaskID: "d", Host: h}
	procs := []*Proc{live, lost, c1, c2, del}
	s.ApplyStates(t.Context(), procs, []store.State{store.Active, store.Lost, store.Cancelled, store.Cancelled, store.Deleted})

	assert.NoError(t, live.St.Err())
	assert.ErrorIs(t, lost.St.Err(), errs.ErrProcessLost)
	assert.Equal(t, 1, h.dropped, "the lost process stayed in the books")
	assert.Equal(t, []Outcome{Lost}, h.observed)
	assert.ErrorIs(t, c1.St.Err(), errs.ErrTaskCancelled)
	assert.ErrorIs(t, del.St.Err(), errs.ErrQueueDeleted)
	assert.Equal(t, []string{"c"}, got.cancel, "a cancel the message told was told again")
	assert.Equal(t, []string{"q"}, got.delete)
}

// A fence of a serving session takes its books, leaves nothing to
// reconcile and counts the lease given up; one of a fenced session does
// nothing.
func TestSessionFence(t *testing.T) {
	t.Parallel()
	var s Session
	deadline := time.Unix(100, 0)
	s.Init(nil, "q", Events{}, deadline, nil)
	h := &fakeHost{}
	p := &Proc{ID: "1", Host: h}
	s.Procs[p.ID] = p
	s.MarkUnsure(3, false)

	lost, at, ok := s.fenceBooks()
	require.True(t, ok)
	assert.Equal(t, []*Proc{p}, lost)
	assert.Equal(t, deadline, at)
	assert.Empty(t, s.Procs)
	assert.False(t, s.IsUnsure(), "a fence left a reconciliation to run")
	assert.Equal(t, uint64(1), s.LeaseGen)
	assert.Equal(t, lifecycle.SessionFenced, s.State)

	_, _, ok = s.fenceBooks()
	assert.False(t, ok, "a fenced session fenced again")
	assert.Equal(t, uint64(1), s.LeaseGen)

	EndLost(lost)
	assert.ErrorIs(t, p.St.Err(), errs.ErrWorkerFenced)
	assert.ErrorIs(t, p.St.Err(), errs.ErrProcessLost)
	assert.True(t, p.St.IsSettled())
	assert.Equal(t, []Outcome{Lost}, h.observed)
}
