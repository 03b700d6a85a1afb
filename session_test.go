package worqr

// A session on its own (session.go): its state's transitions, its fence,
// its answers to renewals and its reconciliation, driven by a Fake clock
// and the components' test signals.

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/worqr/worqr/internal/engine"
	"github.com/worqr/worqr/internal/lifecycle"
	"github.com/worqr/worqr/internal/store"
	"github.com/worqr/worqr/internal/testsignal"
	"github.com/worqr/worqr/internal/wiring"
)

// servedSession is a worker of fast options on k's client, serving q, with
// its session and the channel its fences arrive on.
func servedSession(t *testing.T, k *clocked) (*Worker, *engine.Session, <-chan FenceEvent) {
	t.Helper()
	w, fences := fencingWorker(t, k.c)
	require.NoError(t, w.StartWork(k.ctx, "q", Events{}))
	s := sessionOf(w, "q")
	require.NotNil(t, s)
	return w, s, fences
}

// A session's fence ends its processes with ErrProcessLost, refuses
// dequeues on its queue while the worker stays live, is told once, and
// ends when the rejoin has given the tasks back and taken a new lease, no
// earlier than the old lease could have run out.
func TestSessionFenceEndsItsProcessesAndRefusesDequeues(t *testing.T) {
	t.Parallel()
	k := setupClocked(t)
	k.beats()
	k.c.core.Signals.Rejoined.Init(t)
	w, s, fences := servedSession(t, k)
	enqueueNumbered(t, k.c, "q", 2)
	p := dequeueAll(t, w, "q", 1)[0]
	id := w.ID()
	gen := s.Lease.View().Gen

	s.Fence(id, errors.New("queue lease lost (test)"))
	ev := recv(t, fences, testsignal.Wait, "the session's fence told")
	assert.Equal(t, "q", ev.Queue)
	assert.Equal(t, id, ev.WorkerID)
	assert.ErrorIs(t, ev.Cause, ErrWorkerFenced)
	require.Len(t, ev.Lost, 1)
	assert.Same(t, p, ev.Lost[0])
	recv(t, p.Done(), testsignal.Wait, "the process ended")
	assert.ErrorIs(t, p.Err(), ErrProcessLost)
	assert.ErrorIs(t, p.Err(), ErrWorkerFenced)

	var state lifecycle.Session
	var procs int
	state, procs = s.Lease.View().State, s.Books.View().Procs
	assert.Equal(t, lifecycle.SessionFenced, state)
	assert.Zero(t, procs, "the session still holds processes")
	assert.Equal(t, gen+1, s.Lease.View().Gen, "the lease generation did not move")
	_, err := w.Dequeue(k.ctx, "q")
	assert.ErrorIs(t, err, ErrWorkerFenced)
	_, err = currentID(w)
	require.NoError(t, err, "the whole worker fenced itself")

	s.Fence(id, errors.New("again (test)")) // a fenced session is not fenced twice
	noFence(t, fences)

	// The rejoin waits for the old lease, renewed last at the start, to run
	// out (0.9 TTL + the margin), while the worker's beat renews the rest.
	k.run(fast.TTL - time.Millisecond)
	select {
	case q := <-k.c.core.Signals.Rejoined.C():
		t.Fatalf("%s rejoined before its old lease ran out", q)
	default:
	}
	k.run(time.Millisecond)
	require.Equal(t, "q", k.c.core.Signals.Rejoined.WaitOrTimeout())
	state = s.Lease.View().State
	assert.Equal(t, lifecycle.SessionServing, state)
	assert.Equal(t, []string{"t0000", "t0001"}, waiting(t, k.c, "q"), "the fenced process's task back at the front")
	again := dequeueAll(t, w, "q", 1)[0]
	assert.Equal(t, p.TaskID(), again.TaskID())
	assert.Equal(t, id, w.ID())
	noFence(t, fences)
}

// An answer to a renewal sent under an earlier lease generation of the
// session (before a fence) says nothing about the lease it holds now:
// not that it is gone, nor when it expires.
func TestSessionIgnoresARenewalOfAnEarlierLease(t *testing.T) {
	t.Parallel()
	k := setupClocked(t)
	k.beats()
	k.c.core.Signals.Rejoined.Init(t)
	w, s, fences := servedSession(t, k)
	id := w.ID()
	old := s.Lease.View().Gen
	s.Fence(id, errors.New("queue lease lost (test)"))
	recv(t, fences, testsignal.Wait, "the session's fence told")
	k.run(fast.TTL)
	require.Equal(t, "q", k.c.core.Signals.Rejoined.WaitOrTimeout())
	v := s.Lease.View()
	deadline, gen := v.Deadline, v.Gen
	require.Equal(t, old+1, gen)

	later := k.clk.Now().Add(time.Hour) // sent after every renewal so far
	renewed := w.core.Lease.QueuesRenewed(id, later, []engine.QueueRenewal{{S: s, Gen: old, Gone: true}})
	assert.Empty(t, renewed)
	noFence(t, fences)
	_, err := currentID(w)
	require.NoError(t, err, "an earlier lease found gone fenced the worker")
	renewed = w.core.Lease.QueuesRenewed(id, later, []engine.QueueRenewal{{S: s, Gen: old}})
	assert.Empty(t, renewed)
	now, state := s.Lease.View().Deadline, s.Lease.View().State
	assert.Equal(t, deadline, now, "an earlier lease's renewal moved the deadline")
	assert.Equal(t, lifecycle.SessionServing, state)

	// The same answer about the lease it holds is taken in.
	renewed = w.core.Lease.QueuesRenewed(id, later, []engine.QueueRenewal{{S: s, Gen: gen}})
	assert.Equal(t, []*engine.Session{s}, renewed)
	now = s.Lease.View().Deadline
	assert.Equal(t, w.core.Lease.Of(later), now)
}

// A reconciliation gives back what Redis says the worker holds in the
// queue and the session does not know of (a dequeue whose reply was lost),
// keeps what it knows, and ignores a hand-off event that comes later for
// a process it gave back.
func TestSessionReconcileGivesBackUnknownProcesses(t *testing.T) {
	t.Parallel()
	k := setupClocked(t)
	w, s, _ := servedSession(t, k)
	c, ctx := k.c, k.ctx
	enqueueNumbered(t, c, "q", 3)
	known := dequeueAll(t, w, "q", 1)[0]
	_, _, _, err := c.core.Store.Dequeue(ctx, "q", w.ID(), 1, false) // the reply is dropped: the worker never learns
	require.NoError(t, err)
	procs, err := c.Processes(ctx, "q")
	require.NoError(t, err)
	require.Len(t, procs, 2)
	orphan := procs[0].ID
	if orphan == known.ID() {
		orphan = procs[1].ID
	}

	ss := []*engine.Session{s}
	require.False(t, engine.AnyUnsure(ss))
	w.core.Lease.Reconcile(ctx, w.ID(), ss) // nothing to look for: a no-op
	assert.Equal(t, []string{"t0002"}, waiting(t, c, "q"))

	s.Books.MarkUnsure(1, false)
	require.True(t, engine.AnyUnsure(ss))
	w.core.Lease.Reconcile(ctx, w.ID(), ss)
	assert.Equal(t, []string{"t0001", "t0002"}, waiting(t, c, "q"), "the orphan back at the front")
	procs, err = c.Processes(ctx, "q")
	require.NoError(t, err)
	require.Len(t, procs, 1)
	assert.Equal(t, known.ID(), procs[0].ID, "the known process is kept")
	assert.False(t, engine.AnyUnsure(ss), "one pass done")
	upTo := s.Books.View().ReleasedUpTo
	assert.GreaterOrEqual(t, upTo, store.PIDSeq(orphan))

	// A hand-off event for the orphan that comes only now is not adopted.
	assert.False(t, s.Adopt(&engine.Proc{ID: orphan, Seq: store.PIDSeq(orphan)}))
	require.NoError(t, known.Finish(ctx))
}

// A session the worker has left (StopWork) reconciles nothing, even when
// a renewal sent before it left comes back unsure: the worker may serve
// the queue again by then, under a new session whose processes the old
// one does not know of, and giving those back would let a peer run them
// while their holder still does. Its renewal's answer is not counted.
func TestALeftSessionNeitherReconcilesNorRenews(t *testing.T) {
	t.Parallel()
	k := setupClocked(t)
	w, old, _ := servedSession(t, k)
	c, ctx := k.c, k.ctx
	old.Books.MarkUnsure(wiring.UnsurePasses, false)
	gen := old.Lease.View().Gen
	require.NoError(t, w.StopWork(ctx, "q"))
	require.NoError(t, w.StartWork(ctx, "q", Events{}))
	fresh := sessionOf(w, "q")
	require.NotSame(t, old, fresh)
	enqueueNumbered(t, c, "q", 1)
	held := dequeueAll(t, w, "q", 1)[0]

	ok, gone := old.Lease.Renewed(true, gen, false, k.clk.Now().Add(time.Hour))
	assert.False(t, ok || gone, "an answer for a session that left")
	w.core.Lease.Reconcile(ctx, w.ID(), []*engine.Session{old})
	procs, err := c.Processes(ctx, "q")
	require.NoError(t, err)
	require.Len(t, procs, 1, "the new session's process is still held")
	assert.Equal(t, held.ID(), procs[0].ID)
	assert.Empty(t, waiting(t, c, "q"))
	require.NoError(t, held.Finish(ctx))
}
