package engine

// The closer on its own, over the test's worker as its host: a drain
// stops the runtimes and waits for their handlers; a close stops the
// worker's components, detaches its sessions, gives their tasks back and
// deregisters, and stops short when Redis is down or its context ends.

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/worqr/worqr/internal/errs"
	"github.com/worqr/worqr/internal/lifecycle"
	"github.com/worqr/worqr/internal/store"
	"github.com/worqr/worqr/internal/testsignal"
)

// closerHost is the test's worker as its closer takes it: each call the
// closer makes of it is signalled by name.
type closerHost struct {
	*fakeWorker
	told  testsignal.Signal[string]
	mu    sync.Mutex
	pools []*Scheduler
}

func (h *closerHost) TakePools() []*Scheduler {
	h.mu.Lock()
	defer h.mu.Unlock()
	ps := h.pools
	h.pools = nil
	return ps
}
func (h *closerHost) Services() []func()    { return []func(){func() { h.told.Signal("service") }} }
func (h *closerHost) StopTicks()            { h.told.Signal("ticks") }
func (h *closerHost) Left()                 { h.told.Signal("left") }
func (h *closerHost) Flush(context.Context) { h.told.Signal("flush") }

// closing is a worker serving queue q, holding two of its tasks (one in
// its books), with its closer; life is the life the closer ends.
func closing(t *testing.T) (h *closerHost, k *Closer, life context.Context, s *Session, p *Proc, held []store.Proc) {
	t.Helper()
	h = &closerHost{fakeWorker: newFakeWorker(t, testID)}
	h.told.Init(t)
	s = h.subscribed(t, "q", nil)
	_, err := h.env.Store.JoinQueue(h.life, "q", testID)
	require.NoError(t, err)
	held = h.hold(t, "q", testID, 2)
	p = adopt(t, s, held[0])
	life, end := context.WithCancel(context.Background())
	t.Cleanup(end)
	k = &Closer{}
	k.Init(h, &h.env, end)
	return h, k, life, s, p, held
}

// recordOps makes the worker's store record the ops it is asked to send,
// and fail each with fail (nil: none fails); the function it returns
// lists those asked for so far.
func (h *closerHost) recordOps(fail error) func() []store.Op {
	var mu sync.Mutex
	var ops []store.Op
	h.env.Store.SetFault(func(_ context.Context, op store.Op, _ string) error {
		mu.Lock()
		defer mu.Unlock()
		ops = append(ops, op)
		return fail
	})
	return func() []store.Op {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(ops)
	}
}

// toldOf collects n calls of the host, in any order.
func (h *closerHost) toldOf(n int) []string {
	var got []string
	for range n {
		got = append(got, h.told.WaitOrTimeout())
	}
	return got
}

// A close ends the worker's life, stops its services, detaches its
// sessions (their processes lost), gives its tasks back to the front of
// the queue and deregisters; a second close fails.
func TestCloserClose(t *testing.T) {
	t.Parallel()
	h, k, life, s, p, held := closing(t)
	var deregistered int
	h.env.Store.SetFault(func(_ context.Context, op store.Op, _ string) error {
		if op == store.OpDeregister {
			deregistered++
		}
		return nil
	})

	require.NoError(t, k.Close(context.Background(), "close"))
	assert.ElementsMatch(t, []string{"service", "left", "flush"}, h.toldOf(3))
	assert.Error(t, life.Err(), "the worker's life did not end")
	h.mu.Lock()
	assert.Empty(t, h.sessions, "a session was left attached")
	assert.True(t, h.state.IsClosed())
	h.mu.Unlock()
	assert.Equal(t, lifecycle.SessionLeft, s.Lease.state)
	assert.ErrorIs(t, p.St.Err(), errs.ErrProcessLost)
	assert.Empty(t, h.held(t, "q", testID, held), "the tasks were not given back")
	n, err := h.env.Store.QueueLen(h.life, "q")
	require.NoError(t, err)
	assert.Equal(t, int64(2), n)
	assert.Equal(t, 1, deregistered)

	require.ErrorIs(t, k.Close(context.Background(), "close"), errs.ErrWorkerClosed)
	h.told.RequireEmpty()
}

// With Redis down the close gives nothing back and does not deregister,
// failing; with its context ended it does not try.
func TestCloserCloseFails(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		down bool
		want error
	}{{"redis down", true, errs.ErrUnavailable}, {"context ended", false, context.Canceled}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h, k, _, _, p, held := closing(t)
			var fail error
			if tc.down {
				fail = errs.ErrUnavailable
			}
			ops := h.recordOps(fail)
			ctx, cancel := context.WithCancel(context.Background())
			if !tc.down {
				cancel()
			}
			defer cancel()
			require.ErrorIs(t, k.Close(ctx, "close"), tc.want)
			assert.ErrorIs(t, p.St.Err(), errs.ErrProcessLost)
			h.env.Store.SetFault(nil)
			assert.Len(t, h.held(t, "q", testID, held), 2, "tasks were given back")
			sent := ops()
			assert.NotContains(t, sent, store.OpDeregister, "a failed close deregistered")
			if !tc.down {
				assert.NotContains(t, sent, store.OpRelease, "a close whose context ended released")
			}
		})
	}
}

// A drain stops the runtimes taking work and the periodic schedules,
// and marks the worker draining.
func TestCloserDrain(t *testing.T) {
	t.Parallel()
	h, k, _, _, _, _ := closing(t)
	r := member(h.fakeWorker, "r", 1)
	h.handle("r", r)
	r.StartLoop()
	require.NoError(t, k.Drain(context.Background()))
	assert.Equal(t, "ticks", h.told.WaitOrTimeout())
	assert.False(t, r.Taking(), "a drained runtime takes work")
	h.mu.Lock()
	assert.Equal(t, lifecycle.Draining, h.state.Phase())
	h.mu.Unlock()
}

// A handler that outlasts the grace period has its context cancelled
// and is waited for the env's CancelWait more, even though the grace
// period's context has ended; then the drain gives up, saying so.
func TestCloserDrainOutlasted(t *testing.T) {
	t.Parallel()
	h, k, _, _, _, _ := closing(t)
	h.env.CancelWait = time.Second
	r := member(h.fakeWorker, "r", 1)
	h.handle("r", r)
	r.StartLoop()
	r.sched.mu.Lock() // a handler runs
	r.busy++
	r.sched.busy++
	r.sched.mu.Unlock()

	timers := h.clk.Timers()
	done := make(chan error, 1)
	go func() { done <- k.Drain(Expired(context.Background())) }()
	ctx, cancel := context.WithTimeout(context.Background(), testsignal.Wait)
	defer cancel()
	require.NoError(t, h.clk.WaitTimers(ctx, timers+1), "the drain did not wait for the cancelled handlers")
	select {
	case err := <-done:
		t.Fatalf("the drain ended before its CancelWait: %v", err)
	default:
	}
	h.clk.Advance(time.Second)
	require.ErrorIs(t, recv(t, done, "drain"), context.Canceled)
	assert.Contains(t, h.logs.String(), "handlers still running after their contexts ended")
}
