package engine

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/worqr/worqr/internal/lifecycle"
)

// A serving session holds its own processes only; a fenced one holds
// none, takes in no dequeue's processes and has no lease to renew until
// it rejoins.
func TestSessionHoldsAndAdopts(t *testing.T) {
	t.Parallel()
	var s Session
	s.Init(nil, "q", Events{}, time.Time{}, nil)
	p, other := &Proc{ID: "1"}, &Proc{ID: "1"}
	require.True(t, s.AdoptAll([]*Proc{p}))
	assert.True(t, s.Holds(nil))
	assert.True(t, s.Holds(p))
	assert.False(t, s.Holds(other), "a record of the same id passed for the one held")
	leased, gen := s.Lease()
	assert.True(t, leased)
	assert.Equal(t, uint64(0), gen)

	s.Lost()
	assert.True(t, s.IsFenced())
	assert.False(t, s.Holds(nil), "a fenced session holds its lease")
	assert.False(t, s.AdoptAll([]*Proc{{ID: "2"}}), "a fenced session took in a dequeue's processes")
	assert.NotContains(t, s.Procs, "2")
	leased, gen = s.Lease()
	assert.False(t, leased, "a fenced session has a lease to renew")
	assert.Equal(t, uint64(1), gen)
}

// A reconciliation keeps what the session holds, none once it has left,
// and counts its pass.
func TestSessionKeepAndReconciled(t *testing.T) {
	t.Parallel()
	var s Session
	s.Init(nil, "q", Events{}, time.Time{}, nil)
	s.Procs["1"] = &Proc{ID: "1"}
	s.MarkUnsure(2, false)
	keep, ok := s.Keep()
	assert.True(t, ok)
	assert.Equal(t, []string{"1"}, keep)
	s.Reconciled(9)
	assert.Equal(t, 1, s.Unsure)
	assert.Equal(t, uint64(9), s.ReleasedUpTo)
	s.Reconciled(3)
	assert.Equal(t, uint64(9), s.ReleasedUpTo, "a later pass forgot what was given back")

	s.Leaving()
	assert.Equal(t, lifecycle.SessionLeaving, s.State)
	s.Left(false)
	assert.Equal(t, lifecycle.SessionServing, s.State, "a failed leave left the session leaving")
	s.Leaving()
	s.Left(true)
	_, ok = s.Keep()
	assert.False(t, ok, "a session that left keeps processes for a reconciliation")
}

// Interrupting every handler ends the context of each process held; only
// a closing worker's interrupt also gives up their outcome writes.
func TestSessionInterruptAll(t *testing.T) {
	t.Parallel()
	for _, giveUp := range []bool{false, true} {
		var s Session
		s.Init(nil, "q", Events{}, time.Time{}, nil)
		a, b := &Proc{ID: "1"}, &Proc{ID: "2"}
		s.Procs[a.ID], s.Procs[b.ID] = a, b
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

// A handed process is adopted once, and not by a fenced session or one
// that gave its task back already.
func TestSessionAdoptHanded(t *testing.T) {
	t.Parallel()
	var s Session
	s.Init(nil, "q", Events{}, time.Time{}, nil)
	s.Reconciled(5)
	assert.False(t, s.Adopt(&Proc{ID: "5", Seq: 5}), "a process given back was adopted")
	p := &Proc{ID: "6", Seq: 6}
	require.True(t, s.Adopt(p))
	assert.Same(t, p, s.Procs["6"])
	assert.False(t, s.Adopt(&Proc{ID: "6", Seq: 6}), "a process held was adopted again")
	assert.Same(t, p, s.Procs["6"])
	s.Lost()
	assert.False(t, s.Adopt(&Proc{ID: "7", Seq: 7}), "a fenced session adopted a process")
}
