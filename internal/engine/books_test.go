package engine

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The books: a stale record of the same id does not drop the one
// held; taking them all leaves no reconciliation to run; unsure passes are
// raised to at least, or reset to, what is asked.
func TestBooks(t *testing.T) {
	t.Parallel()
	var s Books
	s.procs = make(map[string]*Proc)
	held, stale := &Proc{ID: "1"}, &Proc{ID: "1"}
	s.procs[held.ID] = held
	s.Drop(stale)
	assert.Same(t, held, s.procs["1"], "a stale record of the same id dropped the one held")
	s.Drop(held)
	assert.Empty(t, s.procs)

	s.MarkUnsure(3, false)
	s.MarkUnsure(1, true)
	assert.Equal(t, 3, s.unsure, "at least 1 lowered the passes left")
	s.MarkUnsure(1, false)
	assert.Equal(t, 1, s.unsure, "a reset did not set the passes")
	assert.True(t, s.IsUnsure())

	s.procs["2"] = &Proc{ID: "2"}
	lost := s.TakeAll()
	require.Len(t, lost, 1)
	assert.Empty(t, s.procs)
	assert.False(t, s.IsUnsure(), "taking every process left a reconciliation to run")
}

// Ending the matching processes leaves them settleable; ending them all
// settles them and empties the books.
func TestBooksEnd(t *testing.T) {
	t.Parallel()
	var s Books
	s.procs = make(map[string]*Proc)
	a, b := &Proc{ID: "1", TaskID: "a"}, &Proc{ID: "2", TaskID: "b"}
	s.procs[a.ID], s.procs[b.ID] = a, b
	cancelled := errors.New("cancelled")
	s.EndMatching(func(p *Proc) bool { return p.TaskID == "a" }, cancelled)
	assert.ErrorIs(t, a.St.Err(), cancelled)
	assert.False(t, a.St.IsSettled(), "an ended match was settled: Finish would not work")
	assert.NoError(t, b.St.Err(), "a process that did not match ended")
	assert.Len(t, s.procs, 2, "ending a match took it out of the books")

	gone := errors.New("gone")
	s.EndAll(gone)
	assert.Empty(t, s.procs)
	assert.ErrorIs(t, b.St.Err(), gone)
	assert.True(t, a.St.IsSettled() && b.St.IsSettled(), "ending them all left one unsettled")
}

// Interrupting every handler ends the context of each process held; only
// a closing worker's interrupt also gives up their outcome writes.
func TestBooksInterruptAll(t *testing.T) {
	t.Parallel()
	for _, giveUp := range []bool{false, true} {
		var s Books
		s.procs = make(map[string]*Proc)
		a, b := &Proc{ID: "1"}, &Proc{ID: "2"}
		s.procs[a.ID], s.procs[b.ID] = a, b
		var got []error
		a.St.OnEnd(func(err error) { got = append(got, err) })
		b.St.OnEnd(func(err error) { got = append(got, err) })
		cause := errors.New("shutdown")
		s.InterruptAll(cause, giveUp)
		assert.Len(t, got, 2)
		for _, err := range got {
			assert.ErrorIs(t, err, cause)
		}
		for _, p := range []*Proc{a, b} {
			select {
			case <-p.St.Stopped():
				assert.True(t, giveUp, "an interrupt that gives nothing up stopped process %s's writes", p.ID)
			default:
				assert.False(t, giveUp, "a closing interrupt left process %s's writes going", p.ID)
			}
		}
	}
}
