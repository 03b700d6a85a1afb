package engine

// The worker's served sessions on their own: adding, removing and listing
// them, their runtimes' slots and schedulers, and a session leaving its
// queue, with Redis up and down.

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/worqr/worqr/internal/delayed"
	"github.com/worqr/worqr/internal/errs"
	"github.com/worqr/worqr/internal/lifecycle"
	"github.com/worqr/worqr/internal/store"
	"github.com/worqr/worqr/internal/subscription"
)

// withTimer gives s a timer of delayed tasks on the worker's store and
// clock, as the worker's NewSession does.
func (w *fakeWorker) withTimer(s *Session) *Session {
	s.Sched = delayed.New(&delayed.Env{
		Clock: w.clk, Redis: &w.redis, Store: w.env.Store, Outage: w.out,
		Fail: w.env.Fail, Log: w.env.logger, TTL: w.env.TTL,
	}, w.life, s.Name)
	return s
}

// subscribed is the worker's session of queue, served by r (nil: by
// the application), with a timer of delayed tasks and a subscription
// whose events the test ignores, ready.
func (w *fakeWorker) subscribed(t *testing.T, queue string, r *Runtime) *Session {
	t.Helper()
	s := w.handle(queue, r)
	w.withTimer(s)
	s.Sub = subscription.New(w.life, w.env.Store, queue, func(context.Context, subscription.Event) {}, s.InCallback)
	recv(t, s.Sub.Ready(), "subscribed")
	return s
}

// member is a runtime of queue in a scheduler of size slots that is not
// ready, so that no loop runs: StartLoop changes only the member.
func member(w *fakeWorker, queue string, size int) *Runtime {
	return NewScheduler(w, size, true, false).Add(queue, func(context.Context, *Proc) error { return nil }, MemberOptions{}, 0, 1)
}

// A served session is listed and found; a runtime's loop starts with it
// only while the worker serves; a session that was replaced is not
// removed in its successor's place.
func TestSessionsAddAndRemove(t *testing.T) {
	t.Parallel()
	w := newFakeWorker(t, testID)
	ss := Sessions{}
	plain := &Session{Name: "plain"}
	ss.Add(plain, true)
	drained := &Session{Name: "drained", Runtime: member(w, "drained", 1)}
	ss.Add(drained, false)
	served := &Session{Name: "served", Runtime: member(w, "served", 1)}
	ss.Add(served, true)

	assert.True(t, ss.Serves("plain") && ss.Serves("drained") && ss.Serves("served"))
	assert.False(t, ss.Serves("other"))
	// By name: a runtime's printing reaches the whole worker.
	var listed, runtimes []string
	for _, s := range ss.List() {
		listed = append(listed, s.Name)
	}
	for _, r := range ss.Runtimes() {
		runtimes = append(runtimes, r.Queue())
	}
	assert.ElementsMatch(t, []string{"plain", "drained", "served"}, listed)
	assert.ElementsMatch(t, []string{"drained", "served"}, runtimes, "a session without a runtime listed among the runtimes")
	assert.True(t, served.Runtime.Taking(), "a runtime added while serving does not take work")
	assert.False(t, drained.Runtime.Taking(), "a runtime added while draining takes work")

	successor := &Session{Name: "plain"}
	ss.Add(successor, true)
	assert.False(t, ss.Remove(plain), "a replaced session removed its successor")
	assert.Same(t, successor, ss["plain"])
	assert.True(t, ss.Remove(successor))
	assert.False(t, ss.Serves("plain"))
	assert.False(t, ss.Remove(successor), "a session removed twice")
}

// The registry's record of slots lists the runtimes' queues, sorted, with
// their scheduler's size; Pools lists each scheduler once, the pools'
// first.
func TestSessionsSlotsAndPools(t *testing.T) {
	t.Parallel()
	w := newFakeWorker(t, testID)
	pool := NewScheduler(w, 4, true, false)
	a := pool.Add("a", func(context.Context, *Proc) error { return nil }, MemberOptions{}, 0, 1)
	b := pool.Add("b", func(context.Context, *Proc) error { return nil }, MemberOptions{}, 0, 1)
	c := member(w, "c", 2)
	ss := Sessions{}
	for _, s := range []*Session{{Name: "c", Runtime: c}, {Name: "b", Runtime: b}, {Name: "plain"}, {Name: "a", Runtime: a}} {
		ss.Add(s, false)
	}
	assert.Equal(t, []store.QueueSlots{{Queue: "a", Slots: 4}, {Queue: "b", Slots: 4}, {Queue: "c", Slots: 2}}, ss.Slots())
	other := NewScheduler(w, 1, true, false)
	// By name: a scheduler's printing reaches the whole worker.
	named := map[*Scheduler]string{pool: "pool", c.Sched(): "c", other: "other"}
	names := func(ps []*Scheduler) []string {
		out := make([]string, len(ps))
		for i, p := range ps {
			out[i] = named[p]
		}
		return out
	}
	assert.Equal(t, []string{"other", "pool", "c"}, names(ss.Pools([]*Scheduler{other})))
	assert.Equal(t, []string{"pool", "c"}, names(ss.Pools([]*Scheduler{pool})), "a pool listed twice")
	assert.Empty(t, Sessions{}.Slots())
}

// Leaving gives the worker's tasks back and stops serving the queue; with
// Redis down nothing is left: the queue stays served, its tasks held, and
// a stopped runtime takes work again.
func TestSessionLeave(t *testing.T) {
	t.Parallel()
	w := newFakeWorker(t, testID)
	r := member(w, "q", 1)
	s := w.subscribed(t, "q", r)
	r.StartLoop()
	_, err := w.env.Store.JoinQueue(w.life, "q", testID)
	require.NoError(t, err)
	held := w.hold(t, "q", testID, 2)
	p := adopt(t, s, held[0])

	w.env.Store.SetFault(func(_ context.Context, op store.Op, _ string) error {
		if op == store.OpRelease {
			return errs.ErrUnavailable
		}
		return nil
	})
	err = s.Stop(context.Background(), testID)
	require.ErrorIs(t, err, errs.ErrUnavailable)
	w.mu.Lock()
	assert.Same(t, s, w.sessions["q"], "a failed leave stopped serving the queue")
	w.mu.Unlock()
	assert.Equal(t, lifecycle.SessionServing, s.Lease.state)
	assert.True(t, r.Taking(), "a failed stop left the runtime stopped")
	assert.Len(t, w.held(t, "q", testID, held), 2)
	assert.NoError(t, p.St.Err(), "a failed leave ended a process")

	w.env.Store.SetFault(nil)
	require.NoError(t, s.Stop(context.Background(), testID))
	w.mu.Lock()
	assert.NotContains(t, w.sessions, "q")
	w.mu.Unlock()
	assert.False(t, r.Taking())
	assert.Empty(t, w.held(t, "q", testID, held), "the tasks were not given back")
	assert.ErrorIs(t, p.St.Err(), errs.ErrProcessLost)
	n, err := w.env.Store.QueueLen(w.life, "q")
	require.NoError(t, err)
	assert.Equal(t, int64(2), n)
}

// A failed leave starts again only a runtime that was taking work: one a
// refused pool left stopped, with no loop behind it, stays stopped, so
// no hand-off starts a handler that nothing would follow with dequeues.
func TestSessionLeaveFailedKeepsAStoppedRuntimeStopped(t *testing.T) {
	t.Parallel()
	w := newFakeWorker(t, testID)
	r := member(w, "q", 1)
	s := w.subscribed(t, "q", r)
	_, err := w.env.Store.JoinQueue(w.life, "q", testID)
	require.NoError(t, err)
	w.env.Store.SetFault(func(_ context.Context, op store.Op, _ string) error {
		if op == store.OpRelease {
			return errs.ErrUnavailable
		}
		return nil
	})
	require.ErrorIs(t, s.Stop(context.Background(), testID), errs.ErrUnavailable)
	assert.False(t, r.Taking(), "a failed leave made a stopped runtime take work")
}

// Stopping runtimes waits out their grace; it reports whether the
// handlers ended within it, and an idle runtime ends at once even with
// no grace.
func TestRuntimesStopIdle(t *testing.T) {
	t.Parallel()
	w := newFakeWorker(t, testID)
	r := member(w, "q", 1)
	r.StartLoop()
	assert.True(t, Runtimes{r}.Stop(Expired(context.Background()), context.Background(), &w.env))
	assert.False(t, r.Taking())
}
