package engine

// The dequeue on its own: what it refuses before any call, what it
// makes of the processes Redis gives it, and what a runtime member makes
// of a dequeue that failed.

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/worqr/worqr/internal/errs"
	"github.com/worqr/worqr/internal/pacer"
	"github.com/worqr/worqr/internal/slotpolicy"
	"github.com/worqr/worqr/internal/store"
)

// joined registers the test worker in Redis, joins it to queue, and
// enqueues payloads there.
func joined(t *testing.T, w *fakeWorker, queue string, payloads ...string) {
	t.Helper()
	ctx := t.Context()
	st := w.env.Store
	require.NoError(t, st.RegisterWorker(ctx, testID, time.Minute))
	_, err := st.JoinQueue(ctx, queue, testID)
	require.NoError(t, err)
	for _, p := range payloads {
		_, err := st.Enqueue(ctx, queue, [][]byte{[]byte(p)}, store.EnqueueArgs{})
		require.NoError(t, err)
	}
}

// A dequeue is refused, without a call, for a bad count, a queue not
// served, one a runtime serves (unless the runtime asks), and a fenced
// session or worker; a closed worker says so first.
func TestDequeueRefusals(t *testing.T) {
	t.Parallel()
	w := newTestWorker(t)
	ctx := t.Context()
	_, _, err := Dequeue(ctx, w, "q", 0, false)
	assert.ErrorIs(t, err, errs.ErrInvalidOptions)
	_, _, err = Dequeue(ctx, w, "q", 1, false)
	assert.ErrorIs(t, err, errs.ErrNotServing)

	s := NewScheduler(w, 1, true, false)
	r := s.Add("h", nil, MemberOptions{}, 0, 1)
	w.handle("h", r)
	_, _, err = Dequeue(ctx, w, "h", 1, false)
	assert.ErrorIs(t, err, errs.ErrHandledQueue)

	sess := w.handle("q", nil)
	sess.Lease.fence(&sess.Books)
	_, _, err = Dequeue(ctx, w, "q", 1, false)
	assert.ErrorIs(t, err, errs.ErrWorkerFenced, "a fenced session")

	w.handle("q", nil)
	w.mu.Lock()
	w.state.ToFenced(testID, w.clk.Now())
	w.mu.Unlock()
	_, _, err = Dequeue(ctx, w, "q", 1, false)
	assert.ErrorIs(t, err, errs.ErrWorkerFenced, "a fenced worker")
	w.mu.Lock()
	w.state.ToClosed()
	w.mu.Unlock()
	_, _, err = Dequeue(ctx, w, "q", 1, false)
	assert.ErrorIs(t, err, errs.ErrWorkerClosed)
}

// A dequeue's processes are in the session's books and were told to the
// observer, in queue order; an empty queue says so.
func TestDequeueAdoptsWhatItTook(t *testing.T) {
	t.Parallel()
	w := newTestWorker(t)
	s := w.handle("q", nil)
	joined(t, w, "q", "a", "b")
	ps, until, err := Dequeue(t.Context(), w, "q", 5, false)
	require.NoError(t, err)
	assert.Zero(t, until)
	require.Len(t, ps, 2)
	assert.Less(t, ps[0].Seq, ps[1].Seq, "in the order Redis started them")
	for _, p := range ps {
		assert.Same(t, p, s.Books.procs[p.ID], "in the books")
		assert.Equal(t, p.ID, w.started.WaitOrTimeout(), "told to the observer")
	}
	_, _, err = Dequeue(t.Context(), w, "q", 1, false)
	assert.ErrorIs(t, err, errs.ErrNoTask)
}

// What the policy does to a member: an empty queue clears its work flag,
// a fenced one blocks it until a work event, and a Redis failure blocks it
// until its backoff, timed on the client's clock, ends; stopping the
// member stops that timer.
func TestDequeueFailureAppliedToAMember(t *testing.T) {
	t.Parallel()
	s := schedulerOf(t, true, 2, []int{1}, []int{0})
	w := s.host.(*fakeWorker)
	fake := w.clk
	r := s.members[0]
	flags := func() string {
		s.mu.Lock()
		defer s.mu.Unlock()
		return fmt.Sprintf("more:%v blocked:%v room:%d", r.more, r.blocked, r.roomLocked())
	}
	fail := func(err error) {
		s.mu.Lock()
		gen := r.gen
		s.mu.Unlock()
		r.afterDequeue(slotpolicy.Decide(err), w.out.Begin(), gen, err)
	}

	fail(errs.ErrNoTask)
	assert.Equal(t, "more:false blocked:false room:0", flags())
	r.WorkArrived()
	fail(errs.ErrWorkerFenced)
	assert.Equal(t, "more:true blocked:true room:0", flags())
	r.WorkArrived() // a rejoin's
	assert.Equal(t, "more:true blocked:false room:2", flags())

	fail(fmt.Errorf("%w: connection reset (test)", errs.ErrUnavailable))
	assert.Equal(t, "more:true blocked:true room:0", flags())
	assert.Equal(t, 1, fake.Timers(), "the backoff's timer")
	select {
	case <-s.wake: // the work events' above
	default:
	}
	fake.Advance(pacer.RetryMin)
	recv(t, s.wake, "the loop woken after the backoff")
	assert.Equal(t, "more:true blocked:false room:2", flags(), "looks again after the backoff")

	fail(fmt.Errorf("%w: connection reset (test)", errs.ErrUnavailable))
	fake.Advance(pacer.RetryMin)
	assert.Equal(t, "more:true blocked:true room:0", flags(), "the backoff doubled")
	r.StopTaking()
	assert.Zero(t, fake.Timers(), "stopping the member stops its timer")
}
