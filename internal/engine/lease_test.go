package engine

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/worqr/worqr/internal/lifecycle"
)

// A renewal's answer moves the deadline only later, and says nothing
// about a lease given up (another generation, a fence, a departure) or
// held under an id no longer current.
func TestSessionRenewed(t *testing.T) {
	t.Parallel()
	var s Session
	t0 := time.Unix(100, 0)
	s.Init(nil, "q", Events{}, t0, nil)

	ok, gone := s.Renewed(true, 0, false, t0.Add(time.Second))
	assert.True(t, ok && !gone)
	assert.Equal(t, t0.Add(time.Second), s.DeadlineAt)
	ok, _ = s.Renewed(true, 0, false, t0)
	assert.True(t, ok)
	assert.Equal(t, t0.Add(time.Second), s.DeadlineAt, "a late answer moved the deadline back")

	_, gone = s.Renewed(true, 0, true, t0)
	assert.True(t, gone, "a lease found gone was not told")
	ok, gone = s.Renewed(false, 0, true, t0)
	assert.False(t, ok || gone, "an answer under an id no longer current was taken in")
	ok, gone = s.Renewed(true, 1, true, t0)
	assert.False(t, ok || gone, "an answer about another generation's lease was taken in")

	s.Lost()
	assert.Equal(t, lifecycle.SessionFenced, s.State)
	ok, gone = s.Renewed(true, 1, true, t0)
	assert.False(t, ok || gone, "an answer for a fenced session was taken in")
	s.State.Left()
	ok, gone = s.Renewed(true, 1, true, t0)
	assert.False(t, ok || gone, "an answer for a session that left was taken in")
}

// The deadline fences only a serving session; rejoining serves again
// under the new deadline, and keeps ignoring hand-offs of the processes
// given back.
func TestSessionDeadlineAndRejoin(t *testing.T) {
	t.Parallel()
	var s Session
	t0 := time.Unix(100, 0)
	s.Init(nil, "q", Events{}, t0, nil)
	assert.False(t, s.Due(t0.Add(-time.Nanosecond)))
	assert.True(t, s.Due(t0))

	s.Lost()
	assert.Equal(t, uint64(1), s.LeaseGen, "a lease lost kept its generation")
	_, ok := s.Deadline()
	assert.False(t, ok, "a fenced session has a deadline to fence it by")
	assert.False(t, s.Due(t0.Add(time.Hour)))

	s.Rejoined(7, t0.Add(time.Minute))
	at, ok := s.Deadline()
	assert.True(t, ok)
	assert.Equal(t, t0.Add(time.Minute), at)
	assert.Equal(t, uint64(7), s.ReleasedUpTo)
	s.Rejoined(0, t0.Add(time.Minute))
	assert.Equal(t, uint64(7), s.ReleasedUpTo, "a rejoin that gave back nothing forgot what was given back")
}
