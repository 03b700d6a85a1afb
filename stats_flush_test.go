package worqr

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/worqr/worqr/internal/store"
	"github.com/worqr/worqr/internal/testsignal"
)

// The hot path's stats (started, finished, retried, waits and runs) are
// counted by the client and written about once a second per queue: riding
// on the queue's own calls while it is busy, by a call of their own once
// it is idle, and by Close and Shutdown.

// countOps counts the calls of one kind a client makes to Redis.
func countOps(c *Client, op store.Op) *atomic.Int64 {
	var n atomic.Int64
	c.core.Store.SetFault(func(_ context.Context, o store.Op, _ string) error {
		if o == op {
			n.Add(1)
		}
		return nil
	})
	return &n
}

// Many handlers finishing and retrying at once, with the counts carried
// off every few ms as they are counted: every start, finish, retry, wait
// and run is written exactly once.
func TestStatsExactWithConcurrentHandlers(t *testing.T) {
	t.Parallel()
	b, c, ctx := setup(t)
	c.core.Store.SetStatsTiming(2*time.Millisecond, 0)
	reader := b.client()
	const n = 400 // every fourth fails its first attempt
	w := newWorker(t, c, WorkerOptions{})
	require.NoError(t, w.Handle(ctx, "q", func(_ context.Context, p *Process) error {
		i, err := strconv.Atoi(strings.TrimPrefix(string(p.Task()), "t"))
		assert.NoError(t, err)
		if i%4 == 0 && p.Attempt() == 1 {
			return RetryAfter(0, errors.New("again"))
		}
		return nil
	}, HandleOptions{Concurrency: 16}))
	enqueueNumbered(t, c, "q", n)
	settledQueue(t, reader, "q")

	want := StatsCounts{Enqueued: n, Started: n + n/4, Finished: n, Retried: n / 4}
	var tot StatsBucket
	eventually(t, 10*time.Second, "every count written", func() bool {
		tot = statsTotal(t, reader, "q", time.Minute)
		return tot.Counts.Finished == n && tot.Counts.Started == n+n/4 && tot.Counts.Retried == n/4
	})
	require.NoError(t, w.Close(ctx)) // writes anything left (nothing should be)
	tot = statsTotal(t, reader, "q", time.Minute)
	assert.Equal(t, want, tot.Counts)
	assert.EqualValues(t, n+n/4, tot.Wait.Count(), "a wait per start")
	assert.EqualValues(t, n+n/4, tot.Run.Count(), "a run per finish and retry")
	assert.Equal(t, tot.Counts, statsTotal(t, reader, "q", time.Hour).Counts, "the hour agrees")
}

// A busy queue's counts ride on its own calls: written by the first call
// a second (StatsFlushEvery) after they were counted, with no call of
// their own. On a Fake clock, so that the second is exact.
func TestStatsRideOnABusyQueuesCalls(t *testing.T) {
	t.Parallel()
	k := setupClocked(t)
	c, ctx := k.c, k.ctx
	reader := k.client()
	own := countOps(c, store.OpStats)
	w := newWorker(t, c, WorkerOptions{})
	require.NoError(t, w.StartWork(ctx, "q", Events{}))
	through := func() { // one task through: an enqueue, a dequeue, a finish
		t.Helper()
		require.NoError(t, second(c.Enqueue(ctx, "q", []byte("x"))))
		p, err := w.Dequeue(ctx, "q")
		require.NoError(t, err)
		require.NoError(t, p.Finish(ctx))
	}
	through()
	k.advance(store.StatsFlushEvery - time.Millisecond)
	through()
	assert.Zero(t, statsTotal(t, reader, "q", time.Minute).Counts.Finished, "held for a second first")
	k.advance(time.Millisecond)
	through() // its enqueue carries the first two; its own are held
	tot := statsTotal(t, reader, "q", time.Minute)
	assert.Equal(t, StatsCounts{Enqueued: 2, Started: 2, Finished: 2}, tot.Counts)
	assert.Zero(t, own.Load(), "no call of their own")
	assert.Equal(t, tot.Counts.Started, tot.Wait.Count())
	assert.Equal(t, tot.Counts.Finished, tot.Run.Count())
}

// A producer's enqueue counts are its client's too: held, then carried by
// one of its own enqueues (the enqueue script counts nothing itself), and
// written by Close.
func TestEnqueueCountsRideOnEnqueues(t *testing.T) {
	t.Parallel()
	b, c, ctx := setup(t)
	reader := b.client()
	own := countOps(c, store.OpStats)
	c.core.Store.SetStatsTiming(20*time.Millisecond, time.Hour) // never idle
	require.NoError(t, second(c.Enqueue(ctx, "q", []byte("x"))))
	assert.Zero(t, statsTotal(t, reader, "q", time.Minute).Counts.Enqueued, "held by the client")
	sent := 1
	eventually(t, 10*time.Second, "carried by an enqueue", func() bool {
		require.NoError(t, second(c.Enqueue(ctx, "q", []byte("x"))))
		sent++
		return statsTotal(t, reader, "q", time.Minute).Counts.Enqueued > 0
	})
	assert.Zero(t, own.Load(), "no call of their own")
	_, err := c.EnqueueBatch(ctx, "q", [][]byte{[]byte("y"), []byte("z")})
	require.NoError(t, err)
	require.NoError(t, second(c.Enqueue(ctx, "q", []byte("u"), Unique("k"))))
	require.ErrorIs(t, second(c.Enqueue(ctx, "q", []byte("u"), Unique("k"))), ErrDuplicate) // not counted
	require.NoError(t, c.Close(ctx))
	assert.EqualValues(t, sent+3, statsTotal(t, reader, "q", time.Minute).Counts.Enqueued)
}

// An enqueue refused as a duplicate still writes the counts it carries:
// the client takes them as written once the script ran. (It dropped them:
// TestEnqueueCountsRideOnEnqueues lost its last enqueues' counts when, on
// a loaded machine, they were due by the duplicate enqueue.)
func TestDuplicateEnqueueWritesTheCountsItCarries(t *testing.T) {
	t.Parallel()
	b, c, ctx := setup(t)
	reader := b.client()
	c.core.Store.SetStatsTiming(0, time.Hour) // every call carries what is held
	require.NoError(t, second(c.Enqueue(ctx, "q", []byte("u"), Unique("k"))))
	require.ErrorIs(t, second(c.Enqueue(ctx, "q", []byte("u"), Unique("k"))), ErrDuplicate)
	assert.EqualValues(t, 1, statsTotal(t, reader, "q", time.Minute).Counts.Enqueued, "carried by the duplicate")
	require.NoError(t, c.Close(ctx))
	assert.EqualValues(t, 1, statsTotal(t, reader, "q", time.Minute).Counts.Enqueued)
}

// An idle queue's counts are written by a call of their own, a second
// (StatsFlushEvery) after they were counted. On a Fake clock: the
// flusher's run ends once it wrote them, nothing being pending.
func TestStatsOfAnIdleQueueAreWrittenAlone(t *testing.T) {
	t.Parallel()
	k := setupClocked(t)
	c, ctx := k.c, k.ctx
	reader := k.client()
	own := countOps(c, store.OpStats)
	w := newWorker(t, c, WorkerOptions{})
	require.NoError(t, w.StartWork(ctx, "q", Events{}))
	enqueueNumbered(t, c, "q", 3)
	for _, p := range dequeueAll(t, w, "q", 3) {
		require.NoError(t, p.Finish(ctx))
	}
	assert.Equal(t, k.clk.Now().Add(store.StatsFlushEvery), c.core.Store.StatsNextIdle(), "held for a second first")
	stopped := c.core.StatsFlusher.Stopped()
	k.advance(store.StatsFlushEvery)
	recv(t, stopped, testsignal.Wait, "the flusher wrote the counts and stopped")
	assert.Positive(t, own.Load(), "by a call of their own")
	tot := statsTotal(t, reader, "q", time.Minute)
	assert.Equal(t, StatsCounts{Enqueued: 3, Started: 3, Finished: 3}, tot.Counts)
	assert.EqualValues(t, 3, tot.Wait.Count())
	assert.EqualValues(t, 3, tot.Run.Count())
}

// Shutdown and Close write what the client holds, however fresh.
func TestStatsWrittenOnShutdownAndClose(t *testing.T) {
	t.Parallel()
	b, _, ctx := setup(t)
	reader := b.client()
	for _, how := range []string{"shutdown", "close"} {
		t.Run(how, func(t *testing.T) {
			c := b.client()
			c.core.Store.SetStatsTiming(time.Hour, 0) // never by themselves
			queue := "q-" + how
			w := newWorker(t, c, WorkerOptions{})
			require.NoError(t, w.Handle(ctx, queue, func(context.Context, *Process) error { return nil }, HandleOptions{Concurrency: 4}))
			enqueueNumbered(t, c, queue, 20)
			settledQueue(t, reader, queue)
			assert.Zero(t, statsTotal(t, reader, queue, time.Minute).Counts.Started, "held")
			if how == "shutdown" {
				require.NoError(t, w.Shutdown(ctx))
				recv(t, c.core.StatsFlusher.Stopped(), 5*time.Second, "the client's flusher stopped, nothing being pending")
			} else {
				require.NoError(t, c.Close(ctx))
			}
			tot := statsTotal(t, reader, queue, time.Minute)
			assert.Equal(t, StatsCounts{Enqueued: 20, Started: 20, Finished: 20}, tot.Counts)
			assert.EqualValues(t, 20, tot.Run.Count())
		})
	}
}

// A process killed with counts not yet written loses those, and nothing
// else: a peer reclaims its work (counted by the peer's script), and the
// peer's own counts are written.
func TestStatsOfAKilledClientAreLostAlone(t *testing.T) {
	t.Parallel()
	k := setupTimed(t, nil)
	b, ctx := k.b, k.ctx
	rdb := b.redis()
	killed, err := New(k.options(rdb))
	require.NoError(t, err)
	t.Cleanup(func() { _ = killed.Close(context.Background()) })
	killed.core.Store.SetStatsTiming(time.Hour, 0) // all it counts is pending
	dead := newWorker(t, killed, fast)
	require.NoError(t, dead.StartWork(ctx, "q", Events{}))
	// The tasks come from a client that lives on and closes: its enqueue
	// counts are written. (The killed client's own would be lost too.)
	producer := b.client()
	enqueueNumbered(t, producer, "q", 7)
	require.NoError(t, producer.Close(ctx))
	for _, p := range dequeueAll(t, dead, "q", 5) {
		require.NoError(t, p.Finish(ctx))
	}
	dequeueAll(t, dead, "q", 2) // held as it dies
	crash(dead)
	// Its connection gone: Close can write nothing. (Closing rdb is not
	// enough: a cluster client closes its connections in the background,
	// and Close's writes could still get through.)
	killed.core.Store.SetFault(func(context.Context, store.Op, string) error { return errors.New("cut off") })
	_ = killed.Close(ctx)
	rdb.Close()

	peerClient, peer := k.reclaimingPeer()
	require.NoError(t, peer.Handle(ctx, "q", func(context.Context, *Process) error { return nil }, HandleOptions{}))
	k.run(fast.TTL + fast.RenewInterval)
	reclaimed(t, 2, peerClient)
	settledQueue(t, peerClient, "q")
	eventually(t, 10*time.Second, "the reclaimed tasks finished", func() bool {
		return statsTotal(t, peerClient, "q", time.Minute).Counts.Finished == 2
	})
	tot := statsTotal(t, peerClient, "q", time.Minute)
	assert.Equal(t, StatsCounts{Enqueued: 7, Started: 2, Finished: 2, Reclaimed: 2}, tot.Counts,
		"the killed client's 7 starts and 5 finishes are lost; the rest is counted")
	assert.EqualValues(t, 2, tot.Wait.Count())
	assert.EqualValues(t, 2, tot.Run.Count())
}

// A client with stats off counts nothing in Go either, and writes nothing
// on Close.
func TestStatsOffCountsNothing(t *testing.T) {
	t.Parallel()
	b, _, ctx := setup(t)
	off, err := New(Options{Redis: b.redis(), Prefix: b.prefix, Logger: testLogger(t), NoStats: true})
	require.NoError(t, err)
	t.Cleanup(func() { _ = off.Close(context.Background()) })
	own := countOps(off, store.OpStats)
	w := newWorker(t, off, WorkerOptions{})
	require.NoError(t, w.StartWork(ctx, "q", Events{}))
	enqueueNumbered(t, off, "q", 3)
	ps := dequeueAll(t, w, "q", 3)
	require.NoError(t, ps[0].Finish(ctx))
	require.NoError(t, ps[1].Retry(ctx, 0, errors.New("again")))
	require.NoError(t, ps[2].DeadLetter(ctx, errors.New("dead")))
	assert.True(t, off.core.Store.StatsNextIdle().IsZero(), "nothing pending")
	require.NoError(t, off.Close(ctx))
	assert.Zero(t, own.Load(), "no stats call")
	reader := b.client()
	n, err := reader.core.Redis.Do(ctx, reader.core.Redis.B().Exists().Key(reader.core.Store.Keys().Queue("q").Stats).Build()).AsInt64()
	require.NoError(t, err)
	assert.Zero(t, n, "no stats written")
}

// Counts held across the deletion of their queue are dropped: the
// queue's stats are gone with it, and no hash is made again.
func TestStatsOfADeletedQueueAreDropped(t *testing.T) {
	t.Parallel()
	b, c, ctx := setup(t)
	c.core.Store.SetStatsTiming(time.Hour, 0)
	w := newWorker(t, c, WorkerOptions{})
	require.NoError(t, w.StartWork(ctx, "q", Events{}))
	enqueueNumbered(t, c, "q", 2)
	for _, p := range dequeueAll(t, w, "q", 2) {
		require.NoError(t, p.Finish(ctx))
	}
	require.NoError(t, second(c.DeleteQueue(ctx, "q")))
	require.NoError(t, c.Close(ctx)) // writes what it holds
	reader := b.client()
	n, err := reader.core.Redis.Do(ctx, reader.core.Redis.B().Exists().Key(reader.core.Store.Keys().Queue("q").Stats).Build()).AsInt64()
	require.NoError(t, err)
	assert.Zero(t, n, "no stats hash for the deleted queue")
}

// The flusher is a service whose run lasts while counts are pending: the
// first count starts it, it stops by itself once it wrote them, the next
// count starts another, and Close stops the one going.
func TestStatsFlusherRunsWhileCountsArePending(t *testing.T) {
	t.Parallel()
	b, _, ctx := setup(t)
	reader := b.client()
	c := b.client()
	f := c.core.StatsFlusher
	c.core.Store.SetStatsTiming(10*time.Millisecond, 10*time.Millisecond)

	require.NoError(t, second(c.Enqueue(ctx, "q", []byte("1")))) // counts: a run starts
	recv(t, f.Started(), 5*time.Second, "a run started")
	recv(t, f.Stopped(), 5*time.Second, "the run stopped by itself, the counts written")
	assert.EqualValues(t, 1, statsTotal(t, reader, "q", time.Minute).Counts.Enqueued)

	require.NoError(t, second(c.Enqueue(ctx, "q", []byte("2"))))
	stopped := f.Stopped() // the new run's, begun as the count was made
	recv(t, stopped, 5*time.Second, "the next run stopped by itself")
	assert.EqualValues(t, 2, statsTotal(t, reader, "q", time.Minute).Counts.Enqueued)

	c.core.Store.SetStatsTiming(time.Hour, 0) // a run that would wait an hour
	require.NoError(t, second(c.Enqueue(ctx, "q", []byte("3"))))
	stopped = f.Stopped()
	recv(t, f.Started(), 5*time.Second, "a third run started")
	require.NoError(t, c.Close(ctx))
	recv(t, stopped, time.Second, "Close stopped the run")
	assert.EqualValues(t, 3, statsTotal(t, reader, "q", time.Minute).Counts.Enqueued, "Close wrote the counts")
}

// Tasks with kinds, finished, retried and dead on one client's worker,
// are counted by kind in the queue's stats, which another client reads;
// tasks without a kind count in the totals only.
func TestStatsKindsReadByAnotherClient(t *testing.T) {
	t.Parallel()
	b, c, ctx := setup(t)
	c.core.Store.SetStatsTiming(2*time.Millisecond, 0)
	reader := b.client()
	w := newWorker(t, c, WorkerOptions{})
	require.NoError(t, w.Handle(ctx, "q", func(_ context.Context, p *Process) error {
		switch {
		case string(p.Task()) == "die":
			return Permanent(errors.New("no"))
		case string(p.Task()) == "flaky" && p.Attempt() == 1:
			return RetryAfter(0, errors.New("again"))
		}
		return nil
	}, HandleOptions{Concurrency: 4}))
	for _, task := range []struct{ payload, kind string }{
		{"ok", "email.welcome"}, {"ok", "email.welcome"}, {"flaky", "email.welcome"},
		{"die", "report/pdf"}, {"ok", "report/pdf"},
		{"ok", ""}, {"flaky", ""}, {"die", ""},
	} {
		var opts []EnqueueOption
		if task.kind != "" {
			opts = append(opts, Kind(task.kind))
		}
		_, err := c.Enqueue(ctx, "q", []byte(task.payload), opts...)
		require.NoError(t, err)
	}
	settledQueue(t, reader, "q")

	want := map[string]KindCounts{
		"email.welcome": {Finished: 3, Retried: 1},
		"report/pdf":    {Finished: 1, Dead: 1},
	}
	var tot StatsBucket
	eventually(t, 10*time.Second, "the kinds' counts written", func() bool {
		tot = statsTotal(t, reader, "q", time.Minute)
		return tot.Counts.Finished == 6 && tot.Counts.Retried == 2 && tot.Counts.Dead == 2
	})
	assert.Equal(t, want, tot.Kinds)
	assert.Equal(t, want, statsTotal(t, reader, "q", time.Hour).Kinds, "the hour agrees")
	// A read of the last minutes only (HMGET) sees them too.
	recent, err := reader.Stats(ctx, "q", StatsOptions{Since: time.Now().Add(-2 * time.Minute)})
	require.NoError(t, err)
	assert.Equal(t, want, recent.Total().Kinds)
}
