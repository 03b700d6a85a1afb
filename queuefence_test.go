package worqr

// Per-queue fencing (engine.Session: Fence, Rejoin) under faults
// injected command by command through the hooked client.

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/worqr/worqr/internal/testsignal"
)

// onQueue reports whether a command touches queue q's slot.
func onQueue(cmd rueidis.Completed, q string) bool {
	tag := "{q:" + q + "}"
	return slices.ContainsFunc(cmd.Commands(), func(s string) bool { return strings.Contains(s, tag) })
}

// queueLeaseExpired reports whether worker id's lease on queue q has run
// out in Redis (or is gone), by c's clock (see leasesExpired).
func queueLeaseExpired(t *testing.T, c *Client, id, q string) bool {
	t.Helper()
	score, err := c.core.Redis.Do(context.Background(), c.core.Redis.B().Zscore().Key(c.core.Store.Keys().Queue(q).Leases).Member(id).Build()).AsFloat64()
	if rueidis.IsRedisNil(err) {
		return true
	}
	require.NoError(t, err)
	return int64(score) <= c.core.Clock.Now().UnixMilli()
}

// A call on a queue that was sent before the worker fenced that queue,
// and that reaches Redis only after the old lease there ran out, finds the
// lease gone. That is no news: the worker already gave the lease up. It
// must not fence the whole worker (a new id, every process on every other
// queue lost), which is what per-queue fencing exists to avoid. The same
// holds for a renewal or a Finish in flight at that moment.
func TestLateLeaseGoneOnAFencedQueueFencesOnlyThatQueue(t *testing.T) {
	t.Parallel()
	k := setupTimed(t, nil)
	admin, ctx := k.c, k.ctx
	c, h := k.hooked()
	k.c = c // the clock runs beat by beat on the worker's client
	k.beats()
	c.core.Signals.QueueRenewed.Init(t)
	c.core.Store.RenewApart() // as on a Cluster, where each queue's node fails on its own
	var mu sync.Mutex
	down := false
	held := make(chan struct{})    // the dequeue on a has been sent
	proceed := make(chan struct{}) // let it reach Redis
	var once sync.Once
	errUnreachable := fmt.Errorf("node of queue a unreachable (test): %w", io.ErrUnexpectedEOF)
	isDown := func() bool { mu.Lock(); defer mu.Unlock(); return down }
	dequeueSHA := c.core.Store.Scripts().Dequeue.SHA1()
	h.set(func(h *hooked) {
		h.do = func(ctx context.Context, cmd rueidis.Completed, next func() rueidis.RedisResult) rueidis.RedisResult {
			if isDown() && onQueue(cmd, "a") {
				if scriptOf(cmd) == dequeueSHA {
					once.Do(func() { close(held) })
					<-proceed // the node answers late: the script runs now
					return next()
				}
				return rueidis.NewErrorResult(errUnreachable)
			}
			return next()
		}
		h.doMulti = func(ctx context.Context, cmds []rueidis.Completed, _ func() []rueidis.RedisResult) []rueidis.RedisResult {
			return h.divertMulti(ctx, cmds, func(cmd rueidis.Completed) bool { return isDown() && onQueue(cmd, "a") },
				func() rueidis.RedisResult { return rueidis.NewErrorResult(errUnreachable) })
		}
	})
	w, fences := fencingWorker(t, c)
	id := w.ID()
	require.NoError(t, w.StartWork(ctx, "a", Events{}))
	require.NoError(t, w.StartWork(ctx, "b", Events{}))
	require.NoError(t, second(admin.Enqueue(ctx, "a", []byte("ta"))))
	require.NoError(t, second(admin.Enqueue(ctx, "b", []byte("tb"))))
	pb, err := w.Dequeue(ctx, "b")
	require.NoError(t, err)

	mu.Lock()
	down = true
	mu.Unlock()
	dequeued := make(chan error, 1)
	go func() { _, err := w.Dequeue(ctx, "a"); dequeued <- err }()
	recv(t, held, testsignal.Wait, "dequeue on a sent")
	k.runRenewed(fast.TTL, c, "b") // a's deadline, 0.9 TTL after its last renewal, passes
	ev := recv(t, fences, testsignal.Wait, "queue a fenced")
	require.Equal(t, "a", ev.Queue)
	for beats := 0; !queueLeaseExpired(t, admin, id, "a"); beats++ {
		require.Less(t, beats, 4, "old lease on a expired in Redis")
		k.runRenewed(fast.RenewInterval, c, "b")
	}
	close(proceed)
	err = recv(t, dequeued, testsignal.Wait, "dequeue on a returned")
	assert.ErrorIs(t, err, ErrWorkerFenced)

	// The worker as a whole is unharmed: same id, not fenced, and its
	// process on b is still running.
	_, err = currentID(w)
	assert.NoError(t, err, "the whole worker fenced itself")
	assert.Equal(t, id, w.ID())
	assert.NoError(t, pb.Err(), "the process on b was ended")
	select {
	case ev := <-fences:
		t.Errorf("another fence: queue %q, cause %v", ev.Queue, ev.Cause)
	default:
	}
	require.NoError(t, pb.Finish(ctx))
}

// hangQueue makes every command on queue q hang while the returned
// function's argument is true: the node neither answers nor closes the
// connection (a paused master, a network partition), until the caller's
// context ends, the node comes back, or rueidis would give up on the
// connection (ConnWriteTimeout, 10 s by default; 3 s here), and then the
// command fails. DoMulti waits for every node's replies, as rueidis's
// cluster client does.
func hangQueue(h *hooked, q string) (setDown func(bool)) {
	return hangQueueFor(h, q, 3*time.Second, nil)
}

// hangQueueFor is hangQueue with rueidis giving up after giveUp, and
// onHang (if set) called with each command that hangs.
func hangQueueFor(h *hooked, q string, giveUp time.Duration, onHang func(rueidis.Completed)) (setDown func(bool)) {
	var mu sync.Mutex
	up := make(chan struct{})
	down := false
	state := func() (bool, chan struct{}) { mu.Lock(); defer mu.Unlock(); return down, up }
	hang := func(ctx context.Context, back chan struct{}) rueidis.RedisResult {
		select {
		case <-ctx.Done():
			return rueidis.NewErrorResult(ctx.Err())
		case <-time.After(giveUp):
			return rueidis.NewErrorResult(fmt.Errorf("node of queue %s: no reply, connection closed (test): %w", q, io.ErrUnexpectedEOF))
		case <-back:
			return rueidis.NewErrorResult(fmt.Errorf("node of queue %s: connection reset (test): %w", q, io.ErrUnexpectedEOF))
		}
	}
	h.set(func(h *hooked) {
		h.do = func(ctx context.Context, cmd rueidis.Completed, next func() rueidis.RedisResult) rueidis.RedisResult {
			if d, back := state(); d && onQueue(cmd, q) {
				if onHang != nil {
					onHang(cmd)
				}
				return hang(ctx, back)
			}
			return next()
		}
		h.doMulti = func(ctx context.Context, cmds []rueidis.Completed, _ func() []rueidis.RedisResult) []rueidis.RedisResult {
			d, back := state()
			return h.divertMulti(ctx, cmds, func(cmd rueidis.Completed) bool { return d && onQueue(cmd, q) },
				func() rueidis.RedisResult { return hang(ctx, back) })
		}
	})
	return func(d bool) {
		mu.Lock()
		defer mu.Unlock()
		if down && !d {
			close(up)
			up = make(chan struct{})
		}
		down = d
	}
}

// A queue whose node hangs (rather than refusing connections) must cost
// the worker that queue only, as one whose node refuses does
// (TestUnreachableQueueFencesOnlyThatQueue): docs/cluster.md promises it for a
// shard failing over. The renewal of every lease is one DoMulti, which
// returns when the slowest node answers, so the registry lease's renewal,
// though it succeeded at once, counted only after TTL, too late.
func TestHungQueueNodeFencesOnlyThatQueue(t *testing.T) {
	t.Parallel()
	k := setupClocked(t)
	admin, ctx := k.c, k.ctx
	c, h := k.hooked()
	k.c = c // the clock runs beat by beat on the worker's client
	k.beats()
	c.core.Signals.QueueRenewed.Init(t)
	c.core.Store.RenewApart() // as on a Cluster, where each queue's node fails on its own
	setDown := hangQueue(h, "a")
	w, fences := fencingWorker(t, c)
	t.Cleanup(func() { setDown(false) }) // before the worker's Close
	id := w.ID()
	require.NoError(t, w.StartWork(ctx, "a", Events{}))
	require.NoError(t, w.StartWork(ctx, "b", Events{}))
	require.NoError(t, second(admin.Enqueue(ctx, "b", []byte("tb"))))
	pb, err := w.Dequeue(ctx, "b")
	require.NoError(t, err)

	run := func(d time.Duration) { k.runRenewed(d, c, "b") }
	setDown(true)
	run(fast.TTL) // a's deadline, 0.9 TTL after its last renewal, passes
	ev := recv(t, fences, testsignal.Wait, "a fence")
	assert.Equal(t, "a", ev.Queue, "the whole worker fenced itself: %v", ev.Cause)
	// Two more TTLs with a still hung: the rest of the worker is unharmed.
	run(2 * fast.TTL)
	noFence(t, fences)
	now := k.clk.Now()
	assert.True(t, registryDeadline(w).After(now), "the registry lease's deadline passed")
	var deadlineB time.Time
	b := sessionOf(w, "b")
	deadlineB = b.Lease.View().Deadline
	assert.True(t, deadlineB.After(now), "b's deadline passed")
	assert.Equal(t, id, w.ID())
	require.NoError(t, pb.Finish(ctx), "the process on b is still this worker's")
}

// runRenewed runs k's clock beat by beat, each beat once the renewal of
// c's lease on queue q (a goroutine of its own under RenewApart, which a
// hung queue's renewal does not hold up) has been answered: c's
// queueRenewed signal, turned on before its worker joined.
func (k *clocked) runRenewed(d time.Duration, c *Client, q string) {
	k.t.Helper()
	for range d / fast.RenewInterval {
		k.run(fast.RenewInterval)
		for c.core.Signals.QueueRenewed.WaitOrTimeout() != q { // a hung queue's, when its node gives up
		}
	}
}

// While the rejoin of a fenced queue waits on a node that hangs, the rest
// of the worker must not: RejoinOnce holds the worker's membership lock
// (and the queue's gate) for its Redis calls, and made them on the
// worker's lifetime context, with no deadline. StopWork and StartWork of
// any queue, Handle, and the re-registration of a fenced worker all
// waited until rueidis gave up on the connection (ConnWriteTimeout, 10 s
// by default), and StopWork ignored its own context meanwhile.
func TestHungRejoinDoesNotHoldUpTheWorker(t *testing.T) {
	t.Parallel()
	k := setupTimed(t, nil)
	admin, ctx := k.c, k.ctx
	c, h := k.hooked()
	k.c = c // the clock runs beat by beat on the worker's client
	k.beats()
	c.core.Signals.QueueRenewed.Init(t)
	c.core.Store.RenewApart() // as on a Cluster, where each queue's node fails on its own
	releaseSHA := c.core.Store.Scripts().Release.SHA1()
	rejoining := make(chan struct{}, 100)
	setDown := hangQueueFor(h, "a", 10*time.Second, func(cmd rueidis.Completed) {
		if scriptOf(cmd) == releaseSHA {
			rejoining <- struct{}{}
		}
	})
	w, fences := fencingWorker(t, c)
	t.Cleanup(func() { setDown(false) }) // before the worker's Close
	require.NoError(t, w.StartWork(ctx, "a", Events{}))
	require.NoError(t, w.StartWork(ctx, "b", Events{}))
	require.NoError(t, second(admin.Enqueue(ctx, "b", []byte("tb"))))

	setDown(true)
	k.runRenewed(fast.TTL, c, "b") // a's deadline, 0.9 TTL after its last renewal, passes
	ev := recv(t, fences, testsignal.Wait, "queue a fenced")
	require.Equal(t, "a", ev.Queue)
	k.runRenewed(fast.TTL, c, "b") // a's old lease surely ran out: the rejoin starts
	recv(t, rejoining, testsignal.Wait, "the rejoin of a sent its release")

	start := time.Now()
	sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	require.NoError(t, w.StopWork(sctx, "b"))
	assert.Less(t, time.Since(start), 2*fast.TTL, "StopWork of b waited for the rejoin of a")
	assert.Equal(t, []string{"tb"}, waiting(t, admin, "b"))
}

// refuseQueue makes every command on queue q fail at once while the
// returned function's argument is true: its node refuses connections.
// refused counts the single commands (Do) it failed.
func refuseQueue(h *hooked, q string) (setDown func(bool), refused *atomic.Int32) {
	var down atomic.Bool
	refused = new(atomic.Int32)
	errRefused := fmt.Errorf("node of queue %s: connection refused (test): %w", q, io.ErrUnexpectedEOF)
	onDown := func(cmd rueidis.Completed) bool { return down.Load() && onQueue(cmd, q) }
	h.set(func(h *hooked) {
		h.do = func(ctx context.Context, cmd rueidis.Completed, next func() rueidis.RedisResult) rueidis.RedisResult {
			if onDown(cmd) {
				refused.Add(1)
				return rueidis.NewErrorResult(errRefused)
			}
			return next()
		}
		h.doMulti = func(ctx context.Context, cmds []rueidis.Completed, _ func() []rueidis.RedisResult) []rueidis.RedisResult {
			return h.divertMulti(ctx, cmds, onDown, func() rueidis.RedisResult { return rueidis.NewErrorResult(errRefused) })
		}
	})
	return down.Store, refused
}

// A worker fenced as a whole registers again by joining every queue it
// serves; one queue whose node cannot be reached (a shard failing over)
// failed the whole re-registration, again and again, so the worker served
// none of its queues until that node was back. With per-queue fencing it
// can join the others and rejoin that one later, as it does when only
// that queue's lease is lost.
func TestReregistrationDoesNotWaitForAnUnreachableQueue(t *testing.T) {
	t.Parallel()
	b, admin, ctx := setup(t)
	c, h := hookedClient(t, b)
	c.core.Store.RenewApart() // as on a Cluster, where each queue's node fails on its own
	setDown, _ := refuseQueue(h, "a")
	w := newWorker(t, c, fast)
	require.NoError(t, w.StartWork(ctx, "a", Events{}))
	require.NoError(t, w.StartWork(ctx, "b", Events{}))
	require.NoError(t, second(admin.Enqueue(ctx, "a", []byte("ta"))))
	oldID := w.ID()

	setDown(true)
	// As if a peer had judged the worker dead: the next renewal finds its
	// registry lease gone, and it fences itself as a whole.
	require.NoError(t, admin.core.Redis.Do(ctx, admin.core.Redis.B().Zrem().Key(admin.core.Store.Keys().Workers()).Member(oldID).Build()).Error())
	require.NoError(t, second(admin.Enqueue(ctx, "b", []byte("tb"))))
	eventually(t, 3*time.Second, "registered again while a is unreachable", func() bool { return w.ID() != oldID })
	var p *Process
	eventually(t, 3*time.Second, "b served again", func() bool {
		var err error
		p, err = w.Dequeue(ctx, "b")
		return err == nil
	})
	assert.Equal(t, "tb", string(p.Task()))
	require.NoError(t, p.Finish(ctx))

	setDown(false)
	eventually(t, 5*time.Second, "a served again once its node is back", func() bool {
		var err error
		p, err = w.Dequeue(ctx, "a")
		return err == nil
	})
	assert.Equal(t, "ta", string(p.Task()))
	require.NoError(t, p.Finish(ctx))
}
