package engine

// The starter on its own (Starter): a hand-off taken, the hand-off's
// claims, the choice between handed and dequeued tasks with their
// give-back, and a handler's run up to its outcome.

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/worqr/worqr/internal/errs"
	"github.com/worqr/worqr/internal/store"
)

// A hand-off that finds no free slot waits for the reply of its member's
// own dequeue when that dequeue asked for the last slots, and takes a
// slot the reply leaves free; one whose slots another member's dequeue
// asked for, or a member that stops taking, goes back at once.
func TestHandOffHeldForTheMembersDequeue(t *testing.T) {
	t.Parallel()
	s := schedulerOf(t, true, 1, []int{1, 1}, []int{0, 0})
	a, b := s.members[0], s.members[1]
	e := store.Event{Kind: store.EventHandOff, PID: "1"}

	s.mu.Lock()
	s.asking, a.asking = 1, 1 // a's dequeue asked for the slot
	s.mu.Unlock()
	_, room := b.starter.claimOrHold(e)
	assert.Equal(t, 0, room, "b's slot went to a's dequeue: b gives it back")
	_, room = a.starter.claimOrHold(e)
	assert.Equal(t, -1, room, "held for a's dequeue")

	s.mu.Lock()
	s.asking, a.asking = 0, 0 // the reply came back empty
	held, room := a.starter.takeHeldLocked()
	s.mu.Unlock()
	assert.Equal(t, []store.Event{e}, held)
	assert.Equal(t, 1, room, "the slot the reply left free")

	s.mu.Lock()
	s.asking, a.asking = 1, 1 // and a full one takes the slot
	s.mu.Unlock()
	_, room = a.starter.claimOrHold(e)
	require.Equal(t, -1, room)
	s.mu.Lock()
	s.asking, a.asking = 0, 0
	a.busy++
	s.busy++
	held, room = a.starter.takeHeldLocked()
	s.mu.Unlock()
	assert.Len(t, held, 1)
	assert.Zero(t, room, "no slot beyond the dequeue's: start chooses between them")
	assert.Nil(t, a.starter.held)

	a.StopTaking()
	s.mu.Lock()
	a.asking = 1
	s.mu.Unlock()
	_, room = a.starter.claimOrHold(e)
	assert.Equal(t, 0, room, "a member that stopped taking gives it back")
}

// HandedOff on its own: a handed process that finds a free slot is
// adopted, told to the observer and run, and its start marks the queue as
// maybe holding more, so that the member dequeues again (and parks); one
// that finds the last slot asked for by the member's own dequeue waits for
// that dequeue's reply; and one handed to a member that stopped taking
// goes back to the front of the queue.
func TestHandedOffStartsHoldsOrGivesBack(t *testing.T) {
	t.Parallel()
	w := newTestWorker(t)
	ran := make(chan string, 2)
	s := NewScheduler(w, 1, true, false)
	r := s.Add("q", func(_ context.Context, p *Proc) error { ran <- p.ID; return nil }, MemberOptions{}, 0, 1)
	st := r.Starter()
	sess := w.handle("q", r)
	joined(t, w, "q")
	w.mu.Lock()
	w.refuse = errRefused // no Finish: the test's Env has no coalescer
	w.mu.Unlock()
	handed := func(pid string) store.Event {
		return store.Event{Kind: store.EventHandOff, To: testID, PID: pid, Entry: "x"}
	}
	more := func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return r.more
	}

	s.mu.Lock()
	r.takes = true // taking work, the queue looked empty
	s.mu.Unlock()
	st.HandedOff(t.Context(), sess, handed("1"))
	assert.Equal(t, "1", recv(t, ran, "the handed task ran"))
	assert.Equal(t, "1", w.started.WaitOrTimeout(), "told to the observer")
	recv(t, r.Drained(), "its outcome settled")
	assert.Contains(t, sess.Books.procs, "1", "adopted into the books")
	assert.True(t, more(), "its start marks that the queue may hold more")

	s.mu.Lock()
	s.asking, r.asking = 1, 1 // the member's dequeue asked for the only slot
	s.mu.Unlock()
	st.HandedOff(t.Context(), sess, handed("2"))
	s.mu.Lock()
	held := st.held
	s.asking, r.asking, st.held = 0, 0, nil
	s.mu.Unlock()
	assert.Equal(t, []store.Event{handed("2")}, held, "held for the dequeue's reply")
	select {
	case id := <-ran:
		t.Fatalf("%s ran without a slot", id)
	default:
	}

	ps := w.hold(t, "q", testID, 1) // the worker's in Redis, as a hand-off makes it
	r.StopTaking()
	st.HandedOff(t.Context(), sess, handed(ps[0].PID))
	n, err := w.env.Store.QueueLen(t.Context(), "q")
	require.NoError(t, err)
	assert.EqualValues(t, 1, n, "given back to the queue: %s", w.logs)
	assert.Empty(t, w.held(t, "q", testID, ps), "no longer the worker's")
	assert.NotContains(t, sess.Books.procs, ps[0].PID, "never adopted")
}

// A start with more tasks than room runs those Redis started first: a
// task handed over before a dequeue's runs (adopted into the books and
// told to the observer), and the dequeued one goes back to the front of
// the queue, lost to the observer.
func TestStartRunsTheEarliestAndGivesBackTheRest(t *testing.T) {
	t.Parallel()
	w := newTestWorker(t)
	ran := make(chan string, 2)
	s := NewScheduler(w, 1, true, false)
	r := s.Add("q", func(_ context.Context, p *Proc) error { ran <- p.ID; return nil }, MemberOptions{}, 0, 1)
	r.takes = true
	sess := w.handle("q", r)
	joined(t, w, "q", "a")
	ps, _, err := Dequeue(t.Context(), w, "q", 1, true)
	require.NoError(t, err)
	w.started.WaitOrTimeout()
	w.mu.Lock()
	w.refuse = errRefused // no Finish: the test's Env has no coalescer
	w.mu.Unlock()

	handed := store.Event{Kind: store.EventHandOff, To: testID, PID: "1", Entry: "x"}
	quit, ok := r.starter.claim() // the handed task's slot; the dequeued one has none
	require.True(t, ok)
	r.starter.start(t.Context(), quit, sess, ps, []store.Event{handed}, 1)

	assert.Equal(t, "1", recv(t, ran, "the handed task, started first by Redis"))
	assert.Equal(t, "1", w.started.WaitOrTimeout(), "the handed task told to the observer")
	assert.Equal(t, Lost, w.ended.WaitOrTimeout(), "the dequeued task, lost to the observer")
	assert.ErrorIs(t, ps[0].St.Err(), errs.ErrProcessLost)
	n, err := w.env.Store.QueueLen(t.Context(), "q")
	require.NoError(t, err)
	assert.EqualValues(t, 1, n, "given back to the queue: %s", w.logs)
	recv(t, r.Drained(), "the handed task's outcome settled")
	assert.Len(t, sess.Books.procs, 1, "the handed task adopted, the dequeued one out of the books")
	select {
	case id := <-ran:
		t.Fatalf("%s ran without a slot", id)
	default:
	}
}

// A handler's run: its panic is an error of reason panic (a Permanent one
// under PanicIsPermanent, dead-lettered), and a handler that ran out of
// its time fails with ErrTaskTimeout, reason timeout; its slot is handed
// on and its outcome settled.
func TestRunJobOutcomes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		opts   MemberOptions
		h      Call
		reason string
		retry  bool
	}{
		{"panic", MemberOptions{}, func(context.Context, *Proc) error { panic("boom") }, ReasonPanic, true},
		{"panic is permanent", MemberOptions{PanicIsPermanent: true}, func(context.Context, *Proc) error { panic("boom") }, ReasonPanic, false},
		{"timeout", MemberOptions{Timeout: time.Nanosecond}, func(ctx context.Context, _ *Proc) error { <-ctx.Done(); return ctx.Err() }, ReasonTimeout, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w := newTestWorker(t)
			w.refuse = errRefused // the outcome is looked at, not written
			failed := make(chan error, 1)
			tc.opts.Delay = func(_ int, err error) time.Duration { failed <- err; return 0 }
			s := NewScheduler(w, 1, true, false)
			r := s.Add("q", tc.h, tc.opts, 0, 1)
			r.takes = true
			w.handle("q", r)
			quit, ok := r.starter.claim()
			require.True(t, ok)
			p := w.NewProc("q", store.Proc{PID: "1", Owner: testID, Task: store.Task{ID: "t"}}, w.clk.Now())
			r.starter.launch(quit, p, false)
			recv(t, r.Drained(), "settled")
			if !tc.retry {
				assert.Empty(t, failed, "retried")
				assert.Contains(t, w.logs.String(), "reason="+tc.reason, "dead-lettered with its reason")
				return
			}
			err := recv(t, failed, "retried")
			assert.Equal(t, tc.reason, Reason(err, ""))
			if tc.reason == ReasonTimeout {
				assert.ErrorIs(t, err, errs.ErrTaskTimeout)
			} else {
				assert.ErrorIs(t, err, errs.ErrHandlerPanicked)
				assert.False(t, errors.Is(err, errs.ErrTaskTimeout))
			}
		})
	}
}

// A handed process is adopted only by the session serving its queue now,
// for the worker's current id, and only past the processes a
// reconciliation or a rejoin gave back (Books.releasedUpTo): an event
// that comes after that release, names another id, or reaches a session
// that left is ignored, its process left to the release or to that id's
// lease. One adopted is in the books, started by the worker's clock.
func TestAdoptHandedRefuses(t *testing.T) {
	t.Parallel()
	w := newTestWorker(t)
	r := NewScheduler(w, 1, true, false).Add("q", nil, MemberOptions{}, 0, 1)
	sess := w.handle("q", r)
	handed := func(pid, to string) store.Event {
		return store.Event{Kind: store.EventHandOff, To: to, PID: pid, Entry: "x"}
	}

	assert.Nil(t, r.starter.adoptHanded(nil, handed("a", testID)), "no session: left to the release that leaving made")
	assert.Nil(t, r.starter.adoptHanded(sess, handed("a", "00000000-0000-4000-8000-000000000002")), "another worker's id")

	sess.Books.releasedUpTo = store.PIDSeq("a")
	assert.Nil(t, r.starter.adoptHanded(sess, handed("a", testID)), "given back by a reconciliation before its event came")
	assert.Empty(t, sess.Books.procs)

	p := r.starter.adoptHanded(sess, handed("b", testID))
	require.NotNil(t, p, "past the release")
	assert.Same(t, p, sess.Books.procs["b"], "in the books")
	assert.Equal(t, w.clk.Now(), p.Started)
	assert.Nil(t, r.starter.adoptHanded(sess, handed("b", testID)), "adopted once")

	w.handle("q", r) // the queue left and served again: a session of its own
	assert.Nil(t, r.starter.adoptHanded(sess, handed("c", testID)), "a session that left")
	assert.Nil(t, sess.Books.procs["c"])
}
