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
func TestLeaseRenewed(t *testing.T) {
	t.Parallel()
	t0 := time.Unix(100, 0)
	s := Lease{deadline: t0}

	ok, gone := s.Renewed(true, 0, false, t0.Add(time.Second))
	assert.True(t, ok && !gone)
	assert.Equal(t, t0.Add(time.Second), s.deadline)
	ok, _ = s.Renewed(true, 0, false, t0)
	assert.True(t, ok)
	assert.Equal(t, t0.Add(time.Second), s.deadline, "a late answer moved the deadline back")

	_, gone = s.Renewed(true, 0, true, t0)
	assert.True(t, gone, "a lease found gone was not told")
	ok, gone = s.Renewed(false, 0, true, t0)
	assert.False(t, ok || gone, "an answer under an id no longer current was taken in")
	ok, gone = s.Renewed(true, 1, true, t0)
	assert.False(t, ok || gone, "an answer about another generation's lease was taken in")

	s.Lost()
	assert.Equal(t, lifecycle.SessionFenced, s.state)
	ok, gone = s.Renewed(true, 1, true, t0)
	assert.False(t, ok || gone, "an answer for a fenced session was taken in")
	s.state.Left()
	ok, gone = s.Renewed(true, 1, true, t0)
	assert.False(t, ok || gone, "an answer for a session that left was taken in")
}
