package worqr

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"golang.org/x/sync/errgroup"

	"github.com/worqr/worqr/internal/testsignal"
	"github.com/worqr/worqr/internal/wiring"
)

func enqueueNumbered(t *testing.T, c *Client, queue string, n int) []string {
	t.Helper()
	tasks := make([][]byte, n)
	names := make([]string, n)
	for i := range tasks {
		names[i] = fmt.Sprintf("t%04d", i)
		tasks[i] = []byte(names[i])
	}
	require.NoError(t, second(c.EnqueueBatch(context.Background(), queue, tasks)))
	return names
}

func dequeueAll(t *testing.T, w *Worker, queue string, n int) []*Process {
	t.Helper()
	ps, err := w.DequeueN(context.Background(), queue, n)
	require.NoError(t, err)
	require.Len(t, ps, n)
	return ps
}

func waiting(t *testing.T, c *Client, queue string) []string {
	t.Helper()
	all, err := c.Range(context.Background(), queue, 0, -1)
	require.NoError(t, err)
	out := make([]string, len(all))
	for i, b := range all {
		out[i] = string(b)
	}
	return out
}

func tasksOf(ps []*Process) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = string(p.Task())
	}
	return out
}

// Semantics 1: N workers with several goroutines each take M tasks, and
// every task is delivered exactly once.
func TestNoDoubleDeliveryAmongLiveWorkers(t *testing.T) {
	t.Parallel()
	b, c, ctx := setup(t)
	const tasks, workers, goroutines = 2000, 4, 8
	enqueueNumbered(t, c, "q", tasks)

	var mu sync.Mutex
	seen := make(map[string]int)
	g, gctx := errgroup.WithContext(ctx)
	for range workers {
		w := newWorker(t, b.client(), WorkerOptions{})
		require.NoError(t, w.StartWork(ctx, "q", Events{}))
		for range goroutines {
			g.Go(func() error {
				for {
					ps, err := w.DequeueN(gctx, "q", 3)
					if errors.Is(err, ErrNoTask) {
						return nil
					}
					if err != nil {
						return err
					}
					for _, p := range ps {
						mu.Lock()
						seen[string(p.Task())]++
						mu.Unlock()
						if err := p.Finish(gctx); err != nil {
							return err
						}
					}
				}
			})
		}
	}
	require.NoError(t, g.Wait())
	require.Len(t, seen, tasks)
	for task, n := range seen {
		require.Equal(t, 1, n, "task %s delivered %d times", task, n)
	}
}

// Semantics 2: finish and stop are owner-checked, and one Finish wins.
func TestExactlyOneFinishSucceeds(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	w := newWorker(t, c, WorkerOptions{})
	require.NoError(t, w.StartWork(ctx, "q", Events{}))
	enqueueNumbered(t, c, "q", 2)
	ps := dequeueAll(t, w, "q", 2)

	var ok, lost atomic.Int32
	var g errgroup.Group
	for range 8 {
		g.Go(func() error {
			switch err := ps[0].Finish(ctx); {
			case err == nil:
				ok.Add(1)
			case errors.Is(err, ErrProcessLost):
				lost.Add(1)
			default:
				return err
			}
			return nil
		})
	}
	require.NoError(t, g.Wait())
	assert.EqualValues(t, 1, ok.Load())
	assert.EqualValues(t, 7, lost.Load())

	require.NoError(t, ps[1].Requeue(ctx))
	assert.ErrorIs(t, ps[1].Finish(ctx), ErrProcessLost)
	assert.ErrorIs(t, ps[1].Requeue(ctx), ErrProcessLost)
	assert.Equal(t, []string{"t0001"}, waiting(t, c, "q"), "the stopped task is queued once")
	<-ps[0].Done()
	<-ps[1].Done()
}

// Semantics 2: a zombie, whose lease ran out and whose work a peer took,
// can neither finish nor stop what it held.
func TestZombieCannotFinishOrStop(t *testing.T) {
	t.Parallel()
	k := setupTimed(t, nil)
	c, ctx := k.c, k.ctx
	zombie := newWorker(t, c, fast)
	require.NoError(t, zombie.StartWork(ctx, "q", Events{}))
	enqueueNumbered(t, c, "q", 1)
	held := dequeueAll(t, zombie, "q", 1)[0]
	freeze(zombie)

	// Alone, its lease expires but nobody has reclaimed it yet: it still
	// may not finish, and the process stays for a reclaimer.
	k.idle(fast.TTL + time.Millisecond)
	require.True(t, leasesExpired(t, c, zombie.ID(), "q"), "zombie leases expire")
	assert.ErrorIs(t, held.Finish(ctx), ErrProcessLost)
	procs, err := c.Processes(ctx, "q")
	require.NoError(t, err)
	require.Len(t, procs, 1)
	assert.Equal(t, zombie.ID(), procs[0].Owner)

	// A peer's first look, as it joins, finds the expired lease.
	pc := k.client()
	pc.core.Signals.Looked.Init(t)
	peer := newWorker(t, pc, fast)
	reclaimed(t, 1, pc)
	require.NoError(t, peer.StartWork(ctx, "q", Events{}))
	taken, err := peer.Dequeue(ctx, "q")
	require.NoError(t, err, "peer takes the reclaimed task")
	assert.Equal(t, "t0000", string(taken.Task()))
	assert.ErrorIs(t, held.Requeue(ctx), ErrProcessLost)
	assert.ErrorIs(t, held.Finish(ctx), ErrProcessLost)
	assert.Empty(t, waiting(t, c, "q"), "the zombie's stop requeued nothing")
	require.NoError(t, taken.Finish(ctx))
}

// Semantics 3: a worker whose lease expired cannot dequeue, and the task
// stays queued.
func TestExpiredWorkerCannotDequeue(t *testing.T) {
	t.Parallel()
	k := setupTimed(t, nil)
	c, ctx := k.c, k.ctx
	w := newWorker(t, c, WorkerOptions{TTL: time.Second, RenewInterval: 250 * time.Millisecond, StayFenced: true})
	require.NoError(t, w.StartWork(ctx, "q", Events{}))
	freeze(w)
	k.idle(time.Second + time.Millisecond)
	require.True(t, leasesExpired(t, c, w.ID(), "q"), "leases expire")
	enqueueNumbered(t, c, "q", 1)

	_, err := w.Dequeue(ctx, "q")
	assert.ErrorIs(t, err, ErrWorkerFenced, "refused by the script in Redis")
	_, err = w.Dequeue(ctx, "q")
	assert.ErrorIs(t, err, ErrWorkerFenced, "and by the worker itself from then on")
	assert.Equal(t, []string{"t0000"}, waiting(t, c, "q"))
	procs, err := c.Processes(ctx, "q")
	require.NoError(t, err)
	assert.Empty(t, procs)
}

// Semantics 4: peers reclaim only the dead worker's processes, to the front
// of the queue in their original order, wake the queue, and deregister it.
func TestReclaimReturnsOnlyTheDeadWorkersTasksToTheFront(t *testing.T) {
	t.Parallel()
	k := setupTimed(t, nil)
	b, c, ctx := k.b, k.c, k.ctx
	dead := newWorker(t, c, fast)
	lc, live := k.reclaimingPeer()
	require.NoError(t, dead.StartWork(ctx, "q", Events{}))
	require.NoError(t, dead.StartWork(ctx, "other", Events{}))
	require.NoError(t, live.StartWork(ctx, "q", Events{}))
	enqueueNumbered(t, c, "q", 6)
	require.NoError(t, second(c.Enqueue(ctx, "other", []byte("o"))))

	deadHeld := dequeueAll(t, dead, "q", 3) // t0000..t0002
	liveHeld := dequeueAll(t, live, "q", 1) // t0003
	dequeueAll(t, dead, "other", 1)
	assert.Equal(t, []string{"t0000", "t0001", "t0002"}, tasksOf(deadHeld))
	deadID := dead.ID()
	events := b.listen(c.core.Store.Keys().Queue("q").Channel)

	crash(dead)
	// The live worker's reclaimer wakes at the dead one's expiry; the
	// reclaim is one script per queue: wait for both.
	k.run(fast.TTL + fast.RenewInterval)
	reclaimed(t, 4, lc)
	assert.Equal(t, []string{"t0000", "t0001", "t0002", "t0004", "t0005"}, waiting(t, c, "q"))
	assert.Equal(t, []string{"o"}, waiting(t, c, "other"), "queues nobody live serves are reclaimed too")
	procs, err := c.Processes(ctx, "q")
	require.NoError(t, err)
	require.Len(t, procs, 1, "the live worker's process is untouched")
	assert.Equal(t, live.ID(), procs[0].Owner)
	assert.Equal(t, liveHeld[0].ID(), procs[0].ID)
	require.NoError(t, liveHeld[0].Finish(ctx))

	expectMessage(t, events, "w3") // the reclaim woke the queue
	qs, err := c.WorkerQueues(ctx, deadID)
	require.NoError(t, err)
	assert.Empty(t, qs, "dead worker deregistered by the look")
	ws, err := c.Workers(ctx)
	require.NoError(t, err)
	require.Len(t, ws, 1)
	assert.Equal(t, live.ID(), ws[0].ID)
	next, err := live.Dequeue(ctx, "q")
	require.NoError(t, err)
	assert.Equal(t, "t0000", string(next.Task()), "reclaimed tasks are dequeued next")
}

// Semantics 4: reclaimers racing over one dead worker move each task once.
func TestRacingReclaimersMoveEachTaskOnce(t *testing.T) {
	t.Parallel()
	k := setupTimed(t, nil)
	c, ctx := k.c, k.ctx
	dead := newWorker(t, c, fast)
	require.NoError(t, dead.StartWork(ctx, "q", Events{}))
	names := enqueueNumbered(t, c, "q", 50)
	dequeueAll(t, dead, "q", 50)
	id := dead.ID()
	crash(dead)
	k.idle(fast.TTL + time.Millisecond)
	require.True(t, leasesExpired(t, c, id, "q"), "leases expire")

	var moved atomic.Int64
	var g errgroup.Group
	for range 8 {
		rc := k.client()
		g.Go(func() error {
			r, err := rc.core.Reclaimers.Worker(ctx, rc.core.Log, id, 2*DefaultTTL, false)
			moved.Add(r.Requeued)
			return err
		})
	}
	require.NoError(t, g.Wait())
	assert.EqualValues(t, 50, moved.Load())
	assert.Equal(t, names, waiting(t, c, "q"))
}

// Semantics 5: a worker that cannot renew fences itself before Redis could
// expire its lease, loses its processes, then registers again by itself.
func TestWorkerFencesItselfBeforeItsLeaseExpires(t *testing.T) {
	t.Parallel()
	k := setupTimed(t, nil)
	direct, ctx := k.c, k.ctx
	px := newProxy(t)
	c := k.clientVia(px)
	k.beatsOf(c)
	c.core.Signals.Looked.Init(t)

	type fencing struct {
		at time.Time
		ev FenceEvent
	}
	fenced := make(chan fencing, 1)
	opts := fast
	opts.OnFenced = func(ev FenceEvent) { fenced <- fencing{c.core.Clock.Now(), ev} }
	c.core.Signals.Registered.Init(t)
	w := newWorker(t, c, opts)
	require.NoError(t, w.StartWork(ctx, "q", Events{}))
	enqueueNumbered(t, direct, "q", 1)
	held := dequeueAll(t, w, "q", 1)[0]
	oldID := w.ID()

	px.cut()
	k.run(opts.TTL) // the lease's deadline passes with no renewal
	f := recv(t, fenced, testsignal.Wait, "fence event")
	expiry, err := direct.core.Redis.Do(ctx, direct.core.Redis.B().Zscore().Key(direct.core.Store.Keys().Workers()).Member(oldID).Build()).AsFloat64()
	require.NoError(t, err)
	// The worker's own deadline for the lease is what must come first;
	// when its timer fires, and the event after it, a loaded machine may
	// delay by more than the margin, so they are held to a looser bound.
	w.core.Lock()
	deadline, fencedAt := w.core.Lease.At(), w.core.Worker().FencedAt()
	w.core.Unlock()
	assert.Less(t, deadline.UnixMilli(), int64(expiry)-opts.TTL.Milliseconds()/20, "the worker's deadline is a margin before Redis's expiry")
	assert.False(t, fencedAt.Before(deadline), "fenced at its deadline, not before")
	assert.Less(t, f.at.UnixMilli(), int64(expiry)+opts.TTL.Milliseconds(), "fenced about when Redis would expire the lease")
	assert.Equal(t, oldID, f.ev.WorkerID)
	assert.ErrorIs(t, f.ev.Cause, ErrWorkerFenced)
	require.Len(t, f.ev.Lost, 1)
	assert.Same(t, held, f.ev.Lost[0])
	<-held.Done()
	assert.ErrorIs(t, held.Err(), ErrProcessLost)
	_, err = w.Dequeue(ctx, "q")
	assert.ErrorIs(t, err, ErrWorkerFenced)

	px.restore()
	// The retry's backoff (at most a RenewInterval) ends; the clock stays
	// while the registration is in flight, as time would not run ahead of it.
	k.run(opts.RenewInterval)
	newID := recv(t, c.core.Signals.Registered.C(), testsignal.Wait, "registered again")
	assert.NotEqual(t, oldID, newID, "registered again under a new id")
	assert.Equal(t, newID, w.ID())
	assert.True(t, leaseLive(t, direct, newID), "the new id's lease")
	k.run(opts.TTL + opts.RenewInterval) // the old id's lease runs out
	reclaimed(t, 1, c)
	again, err := w.Dequeue(ctx, "q")
	require.NoError(t, err, "the old id's task is reclaimed and taken again")
	assert.Equal(t, "t0000", string(again.Task()))
	assert.Equal(t, w.ID(), again.Owner())
	assert.ErrorIs(t, held.Finish(ctx), ErrProcessLost)
	require.NoError(t, afterOutage(t, func() error { return again.Finish(ctx) }))
}

// Semantics 5: a renewal that finds the lease gone fences the worker too,
// and the fencing deadline follows the new id: after registering again, a
// worker that stops renewing fences itself again on its own clock.
func TestRenewalFindingLeaseGoneFences(t *testing.T) {
	t.Parallel()
	k := setupTimed(t, nil)
	c, ctx := k.c, k.ctx
	fenced := make(chan FenceEvent, 10)
	opts := fast
	opts.OnFenced = func(ev FenceEvent) { fenced <- ev }
	c.core.Signals.Registered.Init(t)
	w := newWorker(t, c, opts)
	require.NoError(t, w.StartWork(ctx, "q", Events{}))
	oldID := w.ID()

	// As if a peer had judged it dead and removed it.
	require.NoError(t, c.core.Redis.Do(ctx, c.core.Redis.B().Zrem().Key(c.core.Store.Keys().Workers()).Member(oldID).Build()).Error())
	k.idle(fast.RenewInterval) // the next renewal
	ev := recv(t, fenced, testsignal.Wait, "fence event")
	assert.Equal(t, oldID, ev.WorkerID)
	assert.ErrorContains(t, ev.Cause, "lease gone")
	newID := c.core.Signals.Registered.WaitOrTimeout()
	assert.NotEqual(t, oldID, newID, "registered again under a new id")
	assert.Equal(t, newID, w.ID())
	assert.True(t, leaseLive(t, c, newID), "the new id's lease")
	wq, err := c.WorkerQueues(ctx, w.ID())
	require.NoError(t, err)
	assert.Equal(t, []string{"q"}, wq)

	enqueueNumbered(t, c, "q", 1)
	p := dequeueAll(t, w, "q", 1)[0]
	w.core.Closer.Halt() // renewals stop, as if Redis were unreachable; nothing else does
	k.idle(opts.TTL)
	ev = recv(t, fenced, testsignal.Wait, "second fence, on the worker's own clock")
	assert.NotEqual(t, oldID, ev.WorkerID)
	<-p.Done()
	assert.ErrorIs(t, p.Err(), ErrProcessLost)
}

// Semantics 6: stop puts the task at the back and wakes the queue.
func TestRequeueGoesToTheBack(t *testing.T) {
	t.Parallel()
	b, c, ctx := setup(t)
	w := newWorker(t, c, WorkerOptions{})
	require.NoError(t, w.StartWork(ctx, "q", Events{}))
	enqueueNumbered(t, c, "q", 2)
	events := b.listen(c.core.Store.Keys().Queue("q").Channel)
	p := dequeueAll(t, w, "q", 1)[0]
	require.NoError(t, p.Requeue(ctx))
	expectMessage(t, events, "w1")
	assert.Equal(t, []string{"t0001", "t0000"}, waiting(t, c, "q"))
	<-p.Done()
	assert.ErrorIs(t, p.Err(), ErrProcessEnded)
}

// Close gives every task back at once and deregisters, without a TTL wait.
func TestCloseReturnsEverythingAtOnce(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	w := newWorker(t, c, WorkerOptions{TTL: time.Minute})
	require.NoError(t, w.StartWork(ctx, "a", Events{}))
	require.NoError(t, w.StartWork(ctx, "b", Events{}))
	enqueueNumbered(t, c, "a", 4)
	enqueueNumbered(t, c, "b", 1)
	held := dequeueAll(t, w, "a", 3)
	dequeueAll(t, w, "b", 1)
	id := w.ID()

	require.NoError(t, w.Close(ctx))
	assert.Equal(t, []string{"t0000", "t0001", "t0002", "t0003"}, waiting(t, c, "a"))
	assert.Equal(t, []string{"t0000"}, waiting(t, c, "b"))
	assert.False(t, leaseLive(t, c, id))
	qs, err := c.WorkerQueues(ctx, id)
	require.NoError(t, err)
	assert.Empty(t, qs)
	for _, p := range held {
		<-p.Done()
		assert.ErrorIs(t, p.Err(), ErrProcessLost)
		assert.ErrorIs(t, p.Finish(ctx), ErrProcessLost)
	}
}

func TestStopWorkGivesTasksBack(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	w := newWorker(t, c, WorkerOptions{})
	require.NoError(t, w.StartWork(ctx, "q", Events{}))
	require.NoError(t, w.StartWork(ctx, "keep", Events{}))
	enqueueNumbered(t, c, "q", 2)
	held := dequeueAll(t, w, "q", 2)

	require.NoError(t, w.StopWork(ctx, "q"))
	assert.Equal(t, []string{"t0000", "t0001"}, waiting(t, c, "q"))
	assert.ErrorIs(t, held[0].Finish(ctx), ErrProcessLost)
	_, err := w.Dequeue(ctx, "q")
	assert.ErrorIs(t, err, ErrNotServing)
	assert.ErrorIs(t, w.StopWork(ctx, "q"), ErrNotServing)
	wq, err := c.WorkerQueues(ctx, w.ID())
	require.NoError(t, err)
	assert.Equal(t, []string{"keep"}, wq)
	require.NoError(t, w.StartWork(ctx, "q", Events{}), "and can serve it again")
	p, err := w.Dequeue(ctx, "q")
	require.NoError(t, err)
	assert.Equal(t, "t0000", string(p.Task()))
}

// A dequeue whose reply is lost leaves a process in Redis that the worker
// does not know of; the worker gives it back on its next renewal.
func TestLostDequeueReplyIsGivenBack(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	w := newWorker(t, c, lasting)
	require.NoError(t, w.StartWork(ctx, "q", Events{}))
	enqueueNumbered(t, c, "q", 3)
	known := dequeueAll(t, w, "q", 1)[0]

	// Run the dequeue script as the worker, dropping the reply.
	_, _, _, err := c.core.Store.Dequeue(ctx, "q", w.ID(), 1, false) // the reply is dropped: the worker never learns
	require.NoError(t, err)
	sessionOf(w, "q").Books.MarkUnsure(wiring.UnsurePasses, false)

	eventually(t, 5*time.Second, "orphan given back", func() bool {
		return len(waiting(t, c, "q")) == 2
	})
	assert.Equal(t, []string{"t0001", "t0002"}, waiting(t, c, "q"), "to the front")
	procs, err := c.Processes(ctx, "q")
	require.NoError(t, err)
	require.Len(t, procs, 1)
	assert.Equal(t, known.ID(), procs[0].ID, "the known process is kept")
	require.NoError(t, known.Finish(ctx))
}

// A callback may stop work on its own queue, or close the worker.
func TestCallbacksMayStopWorkAndClose(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	w := newWorker(t, c, WorkerOptions{})
	stopped := make(chan error, 1)
	require.NoError(t, w.StartWork(ctx, "q", Events{Delete: func(q string) { stopped <- w.StopWork(context.Background(), q) }}))
	closed := make(chan error, 1)
	require.NoError(t, w.StartWork(ctx, "last", Events{Work: func(string, int64) { closed <- w.Close(context.Background()) }}))

	_, err := c.DeleteQueue(ctx, "q")
	require.NoError(t, err)
	require.NoError(t, recv(t, stopped, 5*time.Second, "StopWork from a Delete callback"))
	assert.Equal(t, []string{"last"}, w.Queues())
	require.NoError(t, second(c.Enqueue(ctx, "last", []byte("x"))))
	require.NoError(t, recv(t, closed, 5*time.Second, "Close from a Work callback"))
	assert.False(t, leaseLive(t, c, w.ID()))
}

// A StopWork that cannot reach Redis changes nothing: the worker still
// serves the queue, holds its process and renews its lease; once Redis
// answers, StopWork gives the task back.
func TestFailedStopWorkKeepsServing(t *testing.T) {
	t.Parallel()
	px, c, direct, ctx := setupBehindProxy(t)
	w := newWorker(t, c, WorkerOptions{})
	require.NoError(t, w.StartWork(ctx, "q", Events{}))
	enqueueNumbered(t, direct, "q", 1)
	p := dequeueAll(t, w, "q", 1)[0]

	px.cut()
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	require.Error(t, w.StopWork(short, "q"))
	assert.Equal(t, []string{"q"}, w.Queues())
	assert.NoError(t, p.Err(), "the process was not given up")
	px.restore()
	require.NoError(t, afterOutage(t, func() error { return w.StopWork(ctx, "q") }))
	assert.Equal(t, []string{"t0000"}, waiting(t, direct, "q"))
	assert.ErrorIs(t, p.Err(), ErrProcessLost)
}

// Dequeues, finishes and renewals racing StopWork on one queue must not
// fence the worker: leaving drops the lease, which is no sign of death.
func TestStopWorkRacingDequeuesDoesNotFence(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	var fences atomic.Int32
	opts := WorkerOptions{OnFenced: func(FenceEvent) { fences.Add(1) }}
	w := newWorker(t, c, opts)
	require.NoError(t, w.StartWork(ctx, "keep", Events{}))
	enqueueNumbered(t, c, "keep", 1)
	keep := dequeueAll(t, w, "keep", 1)[0]
	enqueueNumbered(t, c, "q", 500)
	for range 40 {
		require.NoError(t, w.StartWork(ctx, "q", Events{}))
		var g errgroup.Group
		for range 4 {
			g.Go(func() error {
				for {
					p, err := w.Dequeue(ctx, "q")
					switch {
					case errors.Is(err, ErrNotServing), errors.Is(err, ErrNoTask):
						return nil
					case err != nil:
						return err
					}
					if err := p.Requeue(ctx); err != nil && !errors.Is(err, ErrProcessLost) {
						return err
					}
				}
			})
		}
		require.NoError(t, w.StopWork(ctx, "q"))
		require.NoError(t, g.Wait())
	}
	assert.Zero(t, fences.Load())
	assert.NoError(t, keep.Err())
	assert.Len(t, waiting(t, c, "q"), 500, "every task is back")
}

// Client.Close racing NewWorker leaves no worker running.
func TestNewWorkerRacingClientClose(t *testing.T) {
	t.Parallel()
	b := newBackend(t)
	rdb := b.redis()
	for i := range 50 {
		c, err := New(Options{Redis: rdb, Prefix: b.prefix, Logger: testLogger(t)})
		require.NoError(t, err)
		made := make(chan *Worker, 1)
		go func() {
			w, err := c.NewWorker(context.Background(), fast)
			if err != nil {
				require.ErrorIs(t, err, ErrClientClosed)
			}
			made <- w
		}()
		time.Sleep(time.Duration(i%10) * 100 * time.Microsecond)
		require.NoError(t, c.Close(context.Background()))
		if w := <-made; w != nil {
			require.NoError(t, w.Close(context.Background()))
		}
	}
	eventually(t, 5*time.Second, "no live workers", func() bool {
		ws, err := b.client().Workers(context.Background())
		require.NoError(t, err)
		return len(ws) == 0
	})
}
