package engine

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/worqr/worqr/internal/errs"
	"github.com/worqr/worqr/internal/lifecycle"
)

// A serving session holds its own processes only; a fenced one holds
// none, takes in no dequeue's processes and has no lease to renew until
// it rejoins.
func TestSessionHoldsAndAdopts(t *testing.T) {
	t.Parallel()
	var s Session
	s.Init(nil, nil, "q", Events{}, nil, time.Time{}, nil)
	p, other := &Proc{ID: "1"}, &Proc{ID: "1"}
	require.True(t, s.AdoptAll([]*Proc{p}))
	assert.True(t, s.Holds(nil))
	assert.True(t, s.Holds(p))
	assert.False(t, s.Holds(other), "a record of the same id passed for the one held")
	leased, gen := s.Lease.Leased()
	assert.True(t, leased)
	assert.Equal(t, uint64(0), gen)

	s.Lease.Lost()
	assert.True(t, s.Lease.IsFenced())
	assert.False(t, s.Holds(nil), "a fenced session holds its lease")
	assert.False(t, s.AdoptAll([]*Proc{{ID: "2"}}), "a fenced session took in a dequeue's processes")
	assert.NotContains(t, s.Books.procs, "2")
	leased, gen = s.Lease.Leased()
	assert.False(t, leased, "a fenced session has a lease to renew")
	assert.Equal(t, uint64(1), gen)
}

// A reconciliation keeps what the session holds, none once it has left,
// and counts its pass.
func TestSessionKeepAndReconciled(t *testing.T) {
	t.Parallel()
	var s Session
	s.Init(nil, nil, "q", Events{}, nil, time.Time{}, nil)
	s.Books.procs["1"] = &Proc{ID: "1"}
	s.Books.MarkUnsure(2, false)
	keep, ok := s.Keep()
	assert.True(t, ok)
	assert.Equal(t, []string{"1"}, keep)
	s.Books.Reconciled(9)
	assert.Equal(t, 1, s.Books.unsure)
	assert.Equal(t, uint64(9), s.Books.releasedUpTo)
	s.Books.Reconciled(3)
	assert.Equal(t, uint64(9), s.Books.releasedUpTo, "a later pass forgot what was given back")

	s.Lease.Leaving()
	assert.Equal(t, lifecycle.SessionLeaving, s.Lease.state)
	s.Lease.Left(false)
	assert.Equal(t, lifecycle.SessionServing, s.Lease.state, "a failed leave left the session leaving")
	s.Lease.Leaving()
	s.Lease.Left(true)
	_, ok = s.Keep()
	assert.False(t, ok, "a session that left keeps processes for a reconciliation")
}

// A handed process is adopted once, and not by a fenced session or one
// that gave its task back already.
func TestSessionAdoptHanded(t *testing.T) {
	t.Parallel()
	var s Session
	s.Init(nil, nil, "q", Events{}, nil, time.Time{}, nil)
	s.Books.Reconciled(5)
	assert.False(t, s.Adopt(&Proc{ID: "5", Seq: 5}), "a process given back was adopted")
	p := &Proc{ID: "6", Seq: 6}
	require.True(t, s.Adopt(p))
	assert.Same(t, p, s.Books.procs["6"])
	assert.False(t, s.Adopt(&Proc{ID: "6", Seq: 6}), "a process held was adopted again")
	assert.Same(t, p, s.Books.procs["6"])
	s.Lease.Lost()
	assert.False(t, s.Adopt(&Proc{ID: "7", Seq: 7}), "a fenced session adopted a process")
}

// The deadline fences only a serving session; rejoining serves again
// under the new deadline, and keeps ignoring hand-offs of the processes
// given back.
func TestSessionDeadlineAndRejoin(t *testing.T) {
	t.Parallel()
	var s Session
	t0 := time.Unix(100, 0)
	s.Init(nil, nil, "q", Events{}, nil, t0, nil)
	assert.False(t, s.Lease.Due(t0.Add(-time.Nanosecond)))
	assert.True(t, s.Lease.Due(t0))

	s.Lease.Lost()
	assert.Equal(t, uint64(1), s.Lease.gen, "a lease lost kept its generation")
	_, ok := s.Lease.Deadline()
	assert.False(t, ok, "a fenced session has a deadline to fence it by")
	assert.False(t, s.Lease.Due(t0.Add(time.Hour)))

	s.Rejoined(7, t0.Add(time.Minute))
	at, ok := s.Lease.Deadline()
	assert.True(t, ok)
	assert.Equal(t, t0.Add(time.Minute), at)
	assert.Equal(t, uint64(7), s.Books.releasedUpTo)
	s.Rejoined(0, t0.Add(time.Minute))
	assert.Equal(t, uint64(7), s.Books.releasedUpTo, "a rejoin that gave back nothing forgot what was given back")
}

// A fence of a serving session takes its books, leaves nothing to
// reconcile and counts the lease given up; one of a fenced session does
// nothing.
func TestSessionFence(t *testing.T) {
	t.Parallel()
	var s Session
	deadline := time.Unix(100, 0)
	s.Init(nil, nil, "q", Events{}, nil, deadline, nil)
	h := &fakeHost{}
	p := &Proc{ID: "1", Host: h}
	s.Books.procs[p.ID] = p
	s.Books.MarkUnsure(3, false)

	lost, at, ok := s.Lease.fence(&s.Books)
	require.True(t, ok)
	assert.Equal(t, []*Proc{p}, lost)
	assert.Equal(t, deadline, at)
	assert.Empty(t, s.Books.procs)
	assert.False(t, s.Books.IsUnsure(), "a fence left a reconciliation to run")
	assert.Equal(t, uint64(1), s.Lease.gen)
	assert.Equal(t, lifecycle.SessionFenced, s.Lease.state)

	_, _, ok = s.Lease.fence(&s.Books)
	assert.False(t, ok, "a fenced session fenced again")
	assert.Equal(t, uint64(1), s.Lease.gen)

	EndLost(lost)
	assert.ErrorIs(t, p.St.Err(), errs.ErrWorkerFenced)
	assert.ErrorIs(t, p.St.Err(), errs.ErrProcessLost)
	assert.True(t, p.St.IsSettled())
	assert.Equal(t, []Outcome{Lost}, h.observed)
}

// fakeHost is a process's worker side that records what the record asks.
type fakeHost struct {
	observed []Outcome
}

func (h *fakeHost) Env() *Env       { return nil }
func (h *fakeHost) LeaseLost(error) {}
func (h *fakeHost) Observe(outcome Outcome, _ string, _ error) {
	h.observed = append(h.observed, outcome)
}
