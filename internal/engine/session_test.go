package engine

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A session's books: a stale record of the same id does not drop the one
// held; taking them all leaves no reconciliation to run; unsure passes are
// raised to at least, or reset to, what is asked.
func TestSessionBooks(t *testing.T) {
	t.Parallel()
	var s Session
	s.Init("q", time.Time{}, nil)
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
	s.Init("q", time.Time{}, nil)
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
