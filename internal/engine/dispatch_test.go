package engine

// The dispatcher on its own: a queue's events applied to its session, the
// hand-on of a work event its runtime cannot take, and the catch-up after
// a subscription, with Redis up and down.

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/worqr/worqr/internal/errs"
	"github.com/worqr/worqr/internal/store"
	"github.com/worqr/worqr/internal/subscription"
	"github.com/worqr/worqr/internal/testsignal"
)

// heard is the application's callbacks of a session, each signalled.
type heard struct {
	work    testsignal.Signal[int64]
	cancel  testsignal.Signal[string]
	deleted testsignal.Signal[string]
}

func listen(t *testing.T, s *Session) *heard {
	h := &heard{}
	h.work.Init(t)
	h.cancel.Init(t)
	h.deleted.Init(t)
	s.Events = Events{
		Work:   func(_ string, n int64) { h.work.Signal(n) },
		Cancel: func(_, id string) { h.cancel.Signal(id) },
		Delete: func(q string) { h.deleted.Signal(q) },
	}
	return h
}

// publishes counts the store's publishes on the worker's queues, failing
// them while down is set.
type publishes struct {
	mu   sync.Mutex
	n    int
	down bool
}

func (p *publishes) fault(_ context.Context, op store.Op, _ string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if op != store.OpPublish {
		return nil
	}
	p.n++
	if p.down {
		return errs.ErrUnavailable
	}
	return nil
}

func (p *publishes) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.n
}

// A work event tells the application of its tasks (none of an empty
// one); a cancel ends the process of the task and tells the application;
// a delete ends every process up to its mark.
func TestDispatchAppliesEvents(t *testing.T) {
	t.Parallel()
	w := newFakeWorker(t, testID)
	s := w.handle("q", nil)
	h := listen(t, s)
	ctx := context.Background()

	s.Dispatch(ctx, subscription.Event{Event: store.Event{Kind: store.EventWork, Count: 0}})
	s.Dispatch(ctx, subscription.Event{Event: store.Event{Kind: store.EventWork, Count: 3}})
	assert.Equal(t, int64(3), h.work.WaitOrTimeout(), "an empty work event was told")

	p := &Proc{ID: "1", Seq: 1, TaskID: "t1", Host: &fakeHost{}}
	kept := &Proc{ID: "2", Seq: 2, TaskID: "t2", Host: &fakeHost{}}
	require.True(t, s.AdoptAll([]*Proc{p, kept}))
	s.Dispatch(ctx, subscription.Event{Event: store.Event{Kind: store.EventCancel, TaskIDs: []string{"t1"}}})
	assert.Equal(t, "t1", h.cancel.WaitOrTimeout())
	assert.ErrorIs(t, p.St.Err(), errs.ErrTaskCancelled)
	assert.NoError(t, kept.St.Err(), "a cancel ended another task's process")

	s.Dispatch(ctx, subscription.Event{Event: store.Event{Kind: store.EventDelete, UpTo: 2}})
	assert.Equal(t, "q", h.deleted.WaitOrTimeout())
	assert.ErrorIs(t, kept.St.Err(), errs.ErrQueueDeleted)
}

// A work event naming the worker while its runtime takes no work (it is
// stopping) is passed on to the queue's other runtimes; one naming
// nobody, or met by a runtime that takes work, is not. A pass-on that
// fails is logged and dropped.
func TestDispatchPassesWorkOn(t *testing.T) {
	t.Parallel()
	w := newFakeWorker(t, testID)
	r := member(w, "q", 2)
	s := w.handle("q", r)
	h := listen(t, s)
	var pub publishes
	w.env.Store.SetFault(pub.fault)
	ctx := context.Background()
	named := subscription.Event{Event: store.Event{Kind: store.EventWork, Count: 2, To: testID}}

	s.Dispatch(ctx, subscription.Event{Event: store.Event{Kind: store.EventWork, Count: 2}})
	h.work.WaitOrTimeout()
	assert.Zero(t, pub.count(), "an event naming nobody was passed on")

	s.Dispatch(ctx, named)
	h.work.WaitOrTimeout()
	assert.Equal(t, 1, pub.count(), "an event named while stopping was not passed on")

	r.StartLoop()
	s.Dispatch(ctx, named)
	h.work.WaitOrTimeout()
	assert.Equal(t, 1, pub.count(), "an event a runtime with room could take was passed on")
	r.StopTaking()

	pub.mu.Lock()
	pub.down = true
	pub.mu.Unlock()
	s.Dispatch(ctx, named)
	assert.Equal(t, int64(2), h.work.WaitOrTimeout(), "a failed pass-on kept the application from its event")
	assert.Equal(t, 2, pub.count())
	assert.Contains(t, w.logs.String(), "could not pass a work event on")
}

// After a (re)subscription the dispatcher raises what a missed event
// would have: the tasks waiting, and a cancel marked on a process held.
// A check that fails (Redis down) is tried again on the backoff's
// timer until it succeeds; a missed hand-off marks the books unsure.
func TestDispatchCatchesUp(t *testing.T) {
	t.Parallel()
	w := newFakeWorker(t, testID)
	s := w.withTimer(w.handle("q", nil))
	h := listen(t, s)
	_, err := w.env.Store.Enqueue(w.life, "q", [][]byte{[]byte("a"), []byte("b")}, store.EnqueueArgs{})
	require.NoError(t, err)

	var mu sync.Mutex
	fails := 1
	w.env.Store.SetFault(func(_ context.Context, op store.Op, _ string) error {
		mu.Lock()
		defer mu.Unlock()
		if op == store.OpRead && fails > 0 {
			fails--
			return errs.ErrUnavailable
		}
		return nil
	})
	timers := w.clk.Timers()
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.Dispatch(context.Background(), subscription.Event{Subscribed: true, Again: true})
	}()
	ctx, cancel := context.WithTimeout(context.Background(), testsignal.Wait)
	defer cancel()
	require.NoError(t, w.clk.WaitTimers(ctx, timers+1), "a failed check was not tried again")
	w.clk.Advance(testTTL)
	assert.Equal(t, int64(2), h.work.WaitOrTimeout(), "the waiting tasks were not told")
	recv(t, done, "dispatch")
	assert.Equal(t, 1, s.Books.unsure, "a missed hand-off left the books sure")

	// A stopped dispatcher stops retrying.
	w.env.Store.SetFault(func(context.Context, store.Op, string) error { return errs.ErrUnavailable })
	stopped, stop := context.WithCancel(context.Background())
	stop()
	s.Dispatch(stopped, subscription.Event{Subscribed: true})
	h.work.RequireEmpty()
}
