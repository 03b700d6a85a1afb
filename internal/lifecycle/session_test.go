package lifecycle

import (
	"testing"

	"github.com/stretchr/testify/assert"
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
