package worqr

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/worqr/worqr/internal/testsignal"
)

// A renewal that was on its way while the worker left a queue and started
// work on it again finds the old lease gone: that is no evidence that the
// worker is dead, and it must not fence itself. (Found by FuzzRoundTrip,
// which starts and stops work on queues all the time.)
func TestRenewalRacingStopAndStartWorkDoesNotFence(t *testing.T) {
	t.Parallel()
	k := setupClocked(t)
	ctx := k.ctx
	c, h := k.hooked()
	k.c = c
	k.beats()
	w, fenced := fencingWorker(t, c)
	require.NoError(t, w.StartWork(ctx, "q", Events{}))
	id := w.ID()

	leases := c.core.Store.Keys().Queue("q").Leases
	raced := make(chan error, 1)
	h.set(func(h *hooked) {
		h.do = func(ctx context.Context, cmd rueidis.Completed, next func() rueidis.RedisResult) rueidis.RedisResult {
			if !renewsLeaseOn(c, cmd, leases) || len(raced) > 0 {
				return next()
			}
			// The renewal of q's lease is sent just after the worker left
			// q; its answer comes back after it served q again.
			err := w.StopWork(context.Background(), "q")
			res := next()
			raced <- errors.Join(err, w.StartWork(context.Background(), "q", Events{}))
			return res
		}
	})
	k.run(fast.RenewInterval) // the first renewal races
	require.NoError(t, recv(t, raced, testsignal.Wait, "the race"))
	k.run(3 * fast.RenewInterval)
	_, err := currentID(w)
	require.NoError(t, err, "fenced")
	noFence(t, fenced)
	assert.True(t, registryDeadline(w).After(k.clk.Now()), "the deadline passed")
	assert.Equal(t, id, w.ID())
	require.NoError(t, second(c.Enqueue(ctx, "q", []byte("x"))))
	p, err := w.Dequeue(ctx, "q")
	require.NoError(t, err)
	require.NoError(t, p.Finish(ctx))
}

// The same race for a Finish on its way while the worker left the queue
// (which gave the task back) and started work on it again.
func TestFinishRacingStopAndStartWorkDoesNotFence(t *testing.T) {
	t.Parallel()
	b, admin, ctx := setup(t)
	c, h := hookedClient(t, b)
	fenced := make(chan FenceEvent, 1)
	opts := WorkerOptions{OnFenced: func(ev FenceEvent) { fenced <- ev }}
	w := newWorker(t, c, opts)
	require.NoError(t, w.StartWork(ctx, "q", Events{}))
	require.NoError(t, second(admin.EnqueueBatch(ctx, "q", [][]byte{[]byte("first"), []byte("x")})))
	ps := dequeueAll(t, w, "q", 2)
	require.NoError(t, ps[0].Finish(ctx)) // Redis knows the script now: EVALSHA runs it
	p := ps[1]
	id := w.ID()

	finishSHA := c.core.Store.Scripts().Finish.SHA1()
	h.set(func(h *hooked) {
		h.do = func(ctx context.Context, cmd rueidis.Completed, next func() rueidis.RedisResult) rueidis.RedisResult {
			if scriptOf(cmd) != finishSHA {
				return next()
			}
			require.NoError(t, w.StopWork(context.Background(), "q"))
			res := next()
			require.NoError(t, w.StartWork(context.Background(), "q", Events{}))
			return res
		}
	})
	assert.ErrorIs(t, p.Finish(ctx), ErrProcessLost, "the task was given back before the finish ran")
	select {
	case ev := <-fenced:
		t.Fatalf("fenced: %v", ev.Cause)
	case <-time.After(200 * time.Millisecond):
	}
	assert.Equal(t, id, w.ID())
	assert.Equal(t, []string{"x"}, waiting(t, admin, "q"))
}

// A worker whose every scheduled renewal races a StopWork (a worker that
// starts and stops work on queues all the time) renews again at once and
// keeps its deadline: it must not fence itself for want of a renewal that
// covered every lease.
func TestRenewalsRacingStopWorkEveryTimeKeepTheDeadline(t *testing.T) {
	t.Parallel()
	k := setupClocked(t)
	ctx := k.ctx
	c, h := k.hooked()
	k.c = c
	k.beats()
	w, fenced := fencingWorker(t, c)
	require.NoError(t, w.StartWork(ctx, "q", Events{}))
	id := w.ID()

	leases := c.core.Store.Keys().Queue("q").Leases
	var last time.Time
	races := make(chan error, 100)
	h.set(func(h *hooked) {
		h.do = func(ctx context.Context, cmd rueidis.Completed, next func() rueidis.RedisResult) rueidis.RedisResult {
			// Every scheduled renewal races; one sent at once after it
			// does not (nothing else is leaving then).
			if !renewsLeaseOn(c, cmd, leases) || k.clk.Since(last) < fast.RenewInterval/2 {
				return next()
			}
			last = k.clk.Now()
			err := w.StopWork(context.Background(), "q")
			res := next()
			races <- errors.Join(err, w.StartWork(context.Background(), "q", Events{}))
			return res
		}
	})
	k.run(3 * fast.TTL)
	n := 0
	for done := false; !done; {
		select {
		case err := <-races:
			require.NoError(t, err)
			n++
		default:
			done = true
		}
	}
	_, err := currentID(w)
	require.NoError(t, err, "fenced after %d races", n)
	noFence(t, fenced)
	require.Greater(t, n, 5, "renewals raced")
	assert.True(t, registryDeadline(w).After(k.clk.Now()), "the deadline passed")
	assert.Equal(t, id, w.ID())
}

// renewsLeaseOn tells whether cmd, sent by c, renews a lease in the zset
// leases: alone, or with the registry lease (store.JointRenewals).
func renewsLeaseOn(c *Client, cmd rueidis.Completed, leases string) bool {
	sha := scriptOf(cmd)
	renews := sha == c.core.Store.Scripts().Renew.SHA1() || sha == c.core.Store.Scripts().Keepalive.SHA1()
	return renews && slices.Contains(cmd.Commands(), leases)
}
