package lifecycle

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/worqr/worqr/internal/errs"
)

// Every transition from every state: where it goes, and whether a fence
// was taken.
func TestSessionTransitions(t *testing.T) {
	all := []Session{SessionServing, SessionFenced, SessionLeaving, SessionLeavingFenced, SessionLeft}
	type move struct {
		name string
		do   func(*Session)
		to   map[Session]Session // from -> to; absent: unchanged
	}
	moves := []move{
		{"fence", func(st *Session) { st.Fence() }, map[Session]Session{SessionServing: SessionFenced}},
		{"lose", (*Session).Lose, map[Session]Session{SessionServing: SessionFenced, SessionLeaving: SessionLeavingFenced}},
		{"rejoin", (*Session).Rejoin, map[Session]Session{SessionFenced: SessionServing, SessionLeavingFenced: SessionLeaving}},
		{"leave", (*Session).Leave, map[Session]Session{SessionServing: SessionLeaving, SessionFenced: SessionLeavingFenced}},
		{"stay", (*Session).Stay, map[Session]Session{SessionLeaving: SessionServing, SessionLeavingFenced: SessionFenced}},
		{"left", (*Session).Left, map[Session]Session{SessionServing: SessionLeft, SessionFenced: SessionLeft, SessionLeaving: SessionLeft, SessionLeavingFenced: SessionLeft, SessionLeft: SessionLeft}},
	}
	for _, m := range moves {
		for _, from := range all {
			want, ok := m.to[from]
			if !ok {
				want = from
			}
			st := from
			m.do(&st)
			assert.Equal(t, want, st, "%s from %s", m.name, from)
		}
	}
	for _, from := range all {
		st := from
		assert.Equal(t, from == SessionServing, st.Fence(), "fence from %s reports whether it fenced", from)
	}
	// What the worker reads off a state.
	leased := map[Session]bool{SessionServing: true, SessionLeaving: true}
	fenced := map[Session]bool{SessionFenced: true, SessionLeavingFenced: true}
	for _, st := range all {
		assert.Equal(t, leased[st], st.Leased(), "%s leased", st)
		assert.Equal(t, fenced[st], st.IsFenced(), "%s fenced", st)
	}
}

// A worker's identity, phase and fence: a fence is taken only under the
// current id, a registration ends it under a new one, and the phases only
// move forward; what the worker may do follows from them.
func TestWorkerTransitions(t *testing.T) {
	var w Worker
	now := time.Unix(1_700_000_000, 0)
	require.True(t, w.ToRegistered("a"))
	assert.True(t, w.IsCurrent("a"))
	assert.False(t, w.IsCurrent("b"))
	assert.NoError(t, w.TakesWork())
	assert.Equal(t, 24*time.Hour, w.FencedSince(now), "never fenced")

	assert.False(t, w.ToFenced("b", now), "not the current id")
	require.True(t, w.ToFenced("a", now))
	assert.False(t, w.ToFenced("a", now), "fenced already")
	assert.True(t, w.IsFenced())
	assert.False(t, w.IsCurrent("a"))
	assert.ErrorIs(t, w.TakesWork(), errs.ErrWorkerFenced)
	_, err := w.Current("dequeue")
	assert.ErrorIs(t, err, errs.ErrWorkerFenced)
	assert.Equal(t, time.Second, w.FencedSince(now.Add(time.Second)))

	require.True(t, w.ToRegistered("b"))
	assert.Equal(t, "b", w.ID())
	assert.True(t, w.IsCurrent("b"))
	assert.Equal(t, now, w.FencedAt(), "the last fence is remembered")

	w.ToDraining()
	assert.Equal(t, Draining, w.Phase())
	assert.ErrorIs(t, w.TakesWork(), errs.ErrWorkerClosed)
	assert.True(t, w.IsCurrent("b"), "a draining worker still holds its lease")
	id, err := w.Current("finish")
	assert.NoError(t, err)
	assert.Equal(t, "b", id)

	require.True(t, w.ToClosed())
	assert.False(t, w.ToClosed(), "closed already")
	w.ToDraining()
	assert.Equal(t, Closed, w.Phase(), "phases only move forward")
	assert.True(t, w.IsClosed())
	assert.False(t, w.IsCurrent("b"))
	assert.False(t, w.ToRegistered("c"), "a closed worker registers no more")
	_, err = w.Current("finish")
	assert.ErrorIs(t, err, errs.ErrWorkerClosed)
}
