package worqr

// The rejoin (engine.Session.Rejoin) in the worker: one attempt (RejoinOnce) called
// directly after a session's fence, with the clock held, so the rejoin the
// fence started waits.

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/worqr/worqr/internal/lifecycle"
	"github.com/worqr/worqr/internal/testsignal"
)

// A rejoin gives back the tasks Redis still says the worker holds in the
// queue, at the front, and takes the queue's lease again; one under an id
// no longer current, or for a session that is not fenced, does nothing.
func TestRejoinGivesBackAndServesAgain(t *testing.T) {
	t.Parallel()
	k := setupClocked(t)
	c, ctx := k.c, k.ctx
	c.core.Signals.Rejoined.Init(t)
	w := newWorker(t, c, WorkerOptions{StayFenced: true})
	require.NoError(t, w.StartWork(ctx, "q", Events{}))
	enqueueNumbered(t, c, "q", 2)
	p := dequeueAll(t, w, "q", 1)[0]
	s, id := sessionOf(w, "q"), w.ID()

	done, err := s.RejoinOnce(ctx, id)
	require.NoError(t, err)
	assert.True(t, done, "serving: nothing to rejoin")
	assert.Equal(t, []string{"t0001"}, waiting(t, c, "q"))

	s.Fence(id, errTestLease)
	require.ErrorIs(t, p.Err(), ErrProcessLost)
	done, err = s.RejoinOnce(ctx, "stale-id")
	require.NoError(t, err)
	assert.True(t, done, "a stale id gives up")
	assert.Equal(t, []string{"t0001"}, waiting(t, c, "q"), "nothing given back under a stale id")
	c.core.Signals.Rejoined.RequireEmpty()

	done, err = s.RejoinOnce(ctx, id)
	require.NoError(t, err)
	assert.True(t, done)
	assert.Equal(t, "q", c.core.Signals.Rejoined.WaitOrTimeout())
	assert.Equal(t, []string{"t0000", "t0001"}, waiting(t, c, "q"), "the lost process's task back at the front")
	assert.Equal(t, lifecycle.SessionServing, s.Lease.View().State)
	again := dequeueAll(t, w, "q", 1)[0]
	assert.Equal(t, "t0000", string(again.Task()), "served again under the same id")
	assert.Equal(t, id, again.Owner())
}

// A re-registration may take longer than a TTL (a slow or stalled
// connection): the new id's lease is gone before its handler slots are
// recorded, though it was registered and its queues joined. The worker
// must then fence that id too and register again, and the tasks the first
// id held must still come back and run again: the id in between held
// nothing, and its reclaim sends back none.
func TestRegistrationOutlivingItsLeaseLosesNoTask(t *testing.T) {
	t.Parallel()
	k := setupClocked(t)
	direct, ctx := k.c, k.ctx
	c, h := k.hooked()
	k.beatsOf(c)
	c.core.Signals.Looked.Init(t)
	c.core.Signals.Registered.Init(t)
	var a attempts
	ran := make(chan string, 10)
	handler := func(hctx context.Context, p *Process) error {
		name := p.Queue() + "/" + string(p.Task())
		n := a.add(name)
		ran <- name
		if n == 1 {
			<-hctx.Done()
		}
		return nil
	}
	w := newWorker(t, c, fast)
	require.NoError(t, w.HandleQueues(ctx, []QueueSpec{
		{Queue: "a", Handler: handler},
		{Queue: "b", Handler: handler},
	}, PoolOptions{Concurrency: 2, Order: OrderShared}))
	for _, q := range []string{"a", "b"} {
		require.NoError(t, second(direct.Enqueue(ctx, q, []byte("held"))))
	}
	held := []string{recv(t, ran, testsignal.Wait, "a handler started"), recv(t, ran, testsignal.Wait, "a handler started")}
	require.ElementsMatch(t, []string{"a/held", "b/held"}, held)
	oldID := w.ID()

	var down, stall atomic.Bool
	slotsSHA := c.core.Store.Scripts().WorkerSlots.SHA1()
	recording, resume := make(chan struct{}), make(chan struct{})
	refused := rueidis.NewErrorResult(errors.New("redis down (test)"))
	h.set(func(h *hooked) {
		h.do = func(_ context.Context, cmd rueidis.Completed, next func() rueidis.RedisResult) rueidis.RedisResult {
			if down.Load() {
				return refused
			}
			if scriptOf(cmd) == slotsSHA && stall.CompareAndSwap(true, false) {
				recording <- struct{}{}
				<-resume
			}
			return next()
		}
		h.doMulti = func(_ context.Context, cmds []rueidis.Completed, next func() []rueidis.RedisResult) []rueidis.RedisResult {
			if !down.Load() {
				return next()
			}
			out := make([]rueidis.RedisResult, len(cmds))
			for i := range out {
				out[i] = refused
			}
			return out
		}
	})
	down.Store(true)
	k.run(fast.TTL) // no renewal reaches Redis: the worker fences itself
	down.Store(false)
	stall.Store(true)
	k.run(fast.RenewInterval) // the registration's backoff ends
	recv(t, recording, testsignal.Wait, "the new id's slots being recorded")
	k.advance(2 * fast.TTL) // while the registration is in flight, its lease runs out
	close(resume)
	stale := recv(t, c.core.Signals.Registered.C(), testsignal.Wait, "registered again")
	newID := recv(t, c.core.Signals.Registered.C(), testsignal.Wait, "registered again, after the new id's fence")
	assert.NotEqual(t, oldID, stale)
	assert.NotEqual(t, stale, newID)

	k.run(fast.TTL + fast.RenewInterval) // the reclaimers look
	reclaimed(t, 2, c)
	again := []string{recv(t, ran, testsignal.Wait, "run again"), recv(t, ran, testsignal.Wait, "run again")}
	assert.ElementsMatch(t, []string{"a/held", "b/held"}, again, "the held tasks run again")
	var ws []WorkerInfo
	untilLooked(t, c, "the stale id reclaimed", func() bool {
		var err error
		ws, err = direct.Workers(ctx)
		require.NoError(t, err)
		return len(ws) == 1
	})
	assert.Equal(t, newID, ws[0].ID)
	assert.Equal(t, []QueueSlots{{Queue: "a", Slots: 2}, {Queue: "b", Slots: 2}}, ws[0].Slots, "the slots recorded under the id that lives")
	settledQueue(t, direct, "a")
	settledQueue(t, direct, "b")
}
