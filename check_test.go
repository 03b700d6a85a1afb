package worqr

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/worqr/worqr/internal/reclaim"
	"github.com/worqr/worqr/internal/store"
	"github.com/worqr/worqr/internal/testsignal"
)

// The inconsistencies in these tests are made the way they happen: a
// worker crashed before its peers reclaimed it, a registry entry lost (as
// a peer judging a worker dead, a FLUSH of one slot, or an operator's DEL
// would lose it), a registration interrupted. Then Check must find them,
// and its repair must leave a system the next Check finds clean.

func check(t *testing.T, c *Client, repair bool) CheckReport {
	t.Helper()
	rep, err := c.Check(context.Background(), CheckOptions{Repair: repair})
	require.NoError(t, err)
	t.Logf("check (repair %v): %v", repair, rep)
	return rep
}

// requireClean runs a check that must find nothing.
func requireClean(t *testing.T, c *Client) {
	t.Helper()
	rep := check(t, c, false)
	require.Zero(t, rep.Problems(), "%+v", rep)
}

func do(t *testing.T, c *Client, cmd rueidis.Completed) rueidis.RedisResult {
	t.Helper()
	res := c.core.Redis.Do(context.Background(), cmd)
	require.NoError(t, res.Error())
	return res
}

func TestCheckFindsNothingWrongInAHealthySystem(t *testing.T) {
	t.Parallel()
	b, c, ctx := setup(t)
	w := newWorker(t, b.client(), WorkerOptions{})
	require.NoError(t, w.StartWork(ctx, "q", Events{}))
	require.NoError(t, w.StartWork(ctx, "idle", Events{}))
	enqueueNumbered(t, c, "q", 5)
	require.NoError(t, second(c.Enqueue(ctx, "{odd}%7B name", []byte("x"))))
	held := dequeueAll(t, w, "q", 2)
	_, err := c.Cancel(ctx, "q", []byte("t0000")) // a cancelled process
	require.NoError(t, err)
	require.NoError(t, second(c.Enqueue(ctx, "gone", []byte("x"))))
	_, err = c.DeleteQueue(ctx, "gone")
	require.NoError(t, err)

	rep := check(t, c, true)
	assert.Zero(t, rep.Problems(), "%+v", rep)
	assert.Equal(t, CheckRepairs{}, rep.Repaired, "a repair of a healthy system changes nothing")
	assert.Equal(t, len(c.core.Redis.Nodes()), rep.NodesScanned)
	assert.Equal(t, 3, rep.QueuesChecked)
	assert.Equal(t, []string{"t0002", "t0003", "t0004"}, waiting(t, c, "q"))
	procs, err := c.Processes(ctx, "q")
	require.NoError(t, err)
	assert.Len(t, procs, 2)
	require.NoError(t, held[1].Finish(ctx), "the live worker's process is still its own")
}

// A crashed worker, before any peer reclaims it: its processes are
// orphaned and its registry entry dead. Check reports both and changes
// nothing; the repair returns the tasks to the front, in order, and
// deregisters the worker, as a peer would have.
func TestCheckRepairsACrashedWorkerNoPeerReclaimed(t *testing.T) {
	t.Parallel()
	k := setupTimed(t, nil)
	c, ctx := k.c, k.ctx
	dead := newWorker(t, c, fast)
	require.NoError(t, dead.StartWork(ctx, "q", Events{}))
	require.NoError(t, dead.StartWork(ctx, "other", Events{}))
	enqueueNumbered(t, c, "q", 4)
	require.NoError(t, second(c.Enqueue(ctx, "other", []byte("x"))))
	dequeueAll(t, dead, "q", 2)
	dequeueAll(t, dead, "other", 1)
	_, err := c.Cancel(ctx, "other", []byte("x"))
	require.NoError(t, err)
	id := dead.ID()
	crash(dead)
	k.idle(fast.TTL + time.Millisecond)
	require.True(t, leasesExpired(t, c, id, "q", "other"), "the dead worker's leases expire")

	rep := check(t, c, false)
	require.Len(t, rep.OrphanedProcesses, 3)
	orphans := rep.OrphanedProcesses
	assert.Equal(t, []string{"other", "q", "q"}, []string{orphans[0].Queue, orphans[1].Queue, orphans[2].Queue})
	assert.Equal(t, StateCancelled, orphans[0].State)
	assert.Equal(t, "t0000", string(orphans[1].Task))
	assert.Equal(t, "t0001", string(orphans[2].Task))
	for _, p := range orphans {
		assert.Equal(t, id, p.Owner)
	}
	assert.Equal(t, []string{id}, rep.DeadWorkers)
	assert.Equal(t, 4, rep.Problems())
	assert.Equal(t, []string{"t0002", "t0003"}, waiting(t, c, "q"), "a check without repair changes nothing")

	rep = check(t, c, true)
	assert.EqualValues(t, 2, rep.Repaired.Requeued)
	assert.EqualValues(t, 1, rep.Repaired.Dropped, "the cancelled process is dropped, not requeued")
	assert.EqualValues(t, 2, rep.Repaired.LeasesRemoved)
	assert.Equal(t, []string{id}, rep.Repaired.ReclaimedWorkers)
	assert.Equal(t, []string{"t0000", "t0001", "t0002", "t0003"}, waiting(t, c, "q"))
	assert.Empty(t, waiting(t, c, "other"))
	requireClean(t, c)
	wq, err := c.WorkerQueues(ctx, id)
	require.NoError(t, err)
	assert.Empty(t, wq, "the dead worker's queue set is gone")
}

// A worker whose registry entry is lost fences itself and registers again
// under a new id; its old id's processes are left where no reclaim will
// ever look. Check finds them and gives them back.
func TestCheckRepairsAWorkerMissingFromTheRegistry(t *testing.T) {
	t.Parallel()
	k := setupTimed(t, nil)
	c, ctx := k.c, k.ctx
	opts := fast
	opts.StayFenced = true
	fenced := make(chan FenceEvent, 1)
	opts.OnFenced = func(ev FenceEvent) { fenced <- ev }
	w := newWorker(t, k.client(), opts)
	require.NoError(t, w.StartWork(ctx, "q", Events{}))
	enqueueNumbered(t, c, "q", 3)
	dequeueAll(t, w, "q", 2)
	id := w.ID()
	do(t, c, c.core.Redis.B().Zrem().Key(c.core.Store.Keys().Workers()).Member(id).Build())
	k.idle(fast.RenewInterval) // its next renewal finds it gone
	recv(t, fenced, testsignal.Wait, "the worker fences itself")
	k.idle(fast.TTL)
	require.True(t, leasesExpired(t, c, id, "q"), "its lease on the queue expired")
	// A reclaim pass, as the peer runs every interval, cannot find it.
	pass, err := c.core.Reclaimers.Dead(ctx, testLogger(t), reclaim.Pass{Window: 2 * DefaultTTL})
	require.NoError(t, err)
	require.Zero(t, pass.Tasks)
	procs, err := c.Processes(ctx, "q")
	require.NoError(t, err)
	require.Len(t, procs, 2, "the lost worker's processes stay orphaned")

	rep := check(t, c, false)
	assert.Len(t, rep.OrphanedProcesses, 2)
	assert.Equal(t, []string{id}, rep.UnregisteredWorkers)
	assert.Empty(t, rep.DeadWorkers)

	rep = check(t, c, true)
	assert.EqualValues(t, 2, rep.Repaired.Requeued)
	assert.Equal(t, []string{id}, rep.Repaired.AdoptedWorkers)
	assert.Equal(t, []string{id}, rep.Repaired.ReclaimedWorkers)
	assert.Equal(t, []string{"t0000", "t0001", "t0002"}, waiting(t, c, "q"))
	requireClean(t, c)
}

// Checked while the lost worker's lease is still live, its work cannot be
// moved yet: the repair enters it in the registry as dead instead, and the
// peers' ordinary reclaim returns its work once the lease expires.
func TestCheckHandsAnUnregisteredWorkerToTheReclaimers(t *testing.T) {
	t.Parallel()
	k := setupTimed(t, nil)
	c, ctx := k.c, k.ctx
	opts := WorkerOptions{TTL: 3 * time.Second, RenewInterval: fast.RenewInterval, StayFenced: true}
	fenced := make(chan FenceEvent, 1)
	opts.OnFenced = func(ev FenceEvent) { fenced <- ev }
	w := newWorker(t, k.client(), opts)
	require.NoError(t, w.StartWork(ctx, "q", Events{}))
	enqueueNumbered(t, c, "q", 2)
	dequeueAll(t, w, "q", 1)
	id := w.ID()
	pc, peer := k.reclaimingPeer()
	require.NoError(t, peer.StartWork(ctx, "q", Events{}))

	do(t, c, c.core.Redis.B().Zrem().Key(c.core.Store.Keys().Workers()).Member(id).Build())
	k.run(fast.RenewInterval) // the worker's next renewal finds its entry gone
	recv(t, fenced, testsignal.Wait, "the worker fences itself")
	rep := check(t, c, true)
	require.False(t, leasesExpired(t, c, id, "q"), "the test needs the lease live during the check")
	assert.Equal(t, []string{id}, rep.UnregisteredWorkers)
	assert.Empty(t, rep.OrphanedProcesses, "a live lease's process is not orphaned")
	assert.Equal(t, []string{id}, rep.Repaired.AdoptedWorkers)
	assert.Equal(t, []string{id}, rep.Repaired.PendingWorkers)
	assert.Zero(t, rep.Repaired.Requeued, "nothing is moved while the lease is live")
	assert.Equal(t, []string{"t0001"}, waiting(t, c, "q"))

	k.run(opts.TTL + fast.RenewInterval)
	reclaimed(t, 1, pc) // the peer reclaims the adopted worker
	assert.Equal(t, []string{"t0000", "t0001"}, waiting(t, c, "q"))
	assert.Zero(t, check(t, c, false).Problems(), "and deregisters it")
}

func TestCheckRepairsTheQueueRegistry(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	// Registry entries with nothing behind them, one no queue can have.
	do(t, c, c.core.Redis.B().Sadd().Key(c.core.Store.Keys().Queues()).Member("ghost", "").Build())
	// A queue missing from the registry, its registration unconfirmed (a
	// crash between the enqueue and the registration).
	require.NoError(t, second(c.Enqueue(ctx, "lost", []byte("a"))))
	do(t, c, c.core.Redis.B().Srem().Key(c.core.Store.Keys().Queues()).Member("lost").Build())
	do(t, c, c.core.Redis.B().Hdel().Key(c.core.Store.Keys().Queue("lost").Meta).Field("registered").Build())
	// A queue holding tasks whose record was lost, with a name only its
	// keys can tell.
	odd := "odd {name} %7B: *"
	require.NoError(t, second(c.Enqueue(ctx, odd, []byte("b"))))
	do(t, c, c.core.Redis.B().Del().Key(c.core.Store.Keys().Queue(odd).Meta).Build())
	// Keys that are not worqr's, and one of a queue's keys of a type
	// worqr never writes there.
	prefix := c.core.Store.Keys().Prefix()
	foreign := []string{prefix + ":junk", prefix + ":{q:x}:other", prefix + ":{r}:wq:"}
	for _, k := range append(foreign, c.core.Store.Keys().Queue("typo").Waiting) {
		do(t, c, c.core.Redis.B().Set().Key(k).Value("x").Build())
	}
	qs, err := c.Queues(ctx)
	require.NoError(t, err)
	assert.Empty(t, qs)

	rep := check(t, c, false)
	assert.Equal(t, []string{"", "ghost"}, rep.StaleQueues)
	assert.Equal(t, []string{"lost", odd}, rep.UnregisteredQueues)
	assert.ElementsMatch(t, foreign, rep.UnknownKeys)
	assert.Equal(t, []string{"typo"}, rep.BrokenQueues)
	assert.Equal(t, 8, rep.Problems())

	rep = check(t, c, true)
	assert.Equal(t, []string{"", "ghost"}, rep.Repaired.RemovedQueues)
	assert.Equal(t, []string{"lost", odd}, rep.Repaired.RegisteredQueues)
	qs, err = c.Queues(ctx)
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{"lost", odd}, qs)
	assert.Equal(t, []string{"b"}, waiting(t, c, odd))
	rep = check(t, c, false)
	assert.ElementsMatch(t, foreign, rep.UnknownKeys, "keys that are not worqr's are left alone")
	assert.Equal(t, []string{"typo"}, rep.BrokenQueues, "and so are broken queues")
	assert.Equal(t, len(foreign)+1, rep.Problems())
}

// A live worker's queue set that does not list a queue where it holds work
// would hide that work from the reclaimers if it died.
func TestCheckRepairsAnUnlistedQueue(t *testing.T) {
	t.Parallel()
	k := setupTimed(t, nil)
	c, ctx := k.c, k.ctx
	w := newWorker(t, k.client(), fast)
	require.NoError(t, w.StartWork(ctx, "q", Events{}))
	enqueueNumbered(t, c, "q", 1)
	dequeueAll(t, w, "q", 1)
	id := w.ID()
	do(t, c, c.core.Redis.B().Srem().Key(c.core.Store.Keys().WorkerQueues(id)).Member("q").Build())

	rep := check(t, c, true)
	want := []WorkerQueue{{Worker: id, Queue: "q"}}
	assert.Equal(t, want, rep.UnlistedQueues)
	assert.Equal(t, want, rep.Repaired.ListedQueues)
	assert.Empty(t, rep.Repaired.AdoptedWorkers, "a registered worker stays as it is")
	wq, err := c.WorkerQueues(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, []string{"q"}, wq)

	// So its work is found when it dies.
	crash(w)
	pc, peer := k.reclaimingPeer()
	require.NoError(t, peer.StartWork(ctx, "q", Events{}))
	k.run(fast.TTL + fast.RenewInterval)
	reclaimed(t, 1, pc)
	assert.Equal(t, []string{"t0000"}, waiting(t, c, "q"))
}

// The repair judges owners when it runs, not from what the check saw: a
// process a live worker dequeues between the look and the repair is not
// touched, and one a peer reclaimed in between is not moved twice.
func TestCheckRepairJudgesAgainWhenItRuns(t *testing.T) {
	t.Parallel()
	k := setupTimed(t, nil)
	b, admin, ctx := k.b, k.c, k.ctx
	dead := newWorker(t, admin, fast)
	require.NoError(t, dead.StartWork(ctx, "q", Events{}))
	require.NoError(t, dead.StartWork(ctx, "r", Events{}))
	enqueueNumbered(t, admin, "q", 2)
	enqueueNumbered(t, admin, "r", 1)
	dequeueAll(t, dead, "q", 1)
	dequeueAll(t, dead, "r", 1)
	id := dead.ID()
	crash(dead)
	live := newWorker(t, notReclaiming(t, b), WorkerOptions{})
	require.NoError(t, live.StartWork(ctx, "q", Events{}))
	k.idle(fast.TTL)
	require.True(t, leasesExpired(t, admin, id, "q", "r"), "the dead worker's leases expired")

	c, h := hookedClient(t, b)
	repairSHA := c.core.Store.CheckScripts().Repair.SHA1()
	var taken *Process
	h.set(func(h *hooked) {
		h.doMulti = func(ctx context.Context, cmds []rueidis.Completed, next func() []rueidis.RedisResult) []rueidis.RedisResult {
			if len(cmds) > 0 && scriptOf(cmds[0]) == repairSHA && taken == nil {
				// Between the check's look and its repair: a live worker
				// takes the task at the front of q, and a reclaim (as a
				// peer's) returns the dead worker's work in r.
				_, err := admin.core.Reclaimers.Worker(ctx, admin.core.Log, id, 2*DefaultTTL, false)
				require.NoError(t, err)
				taken, err = live.Dequeue(ctx, "q")
				require.NoError(t, err)
			}
			return next()
		}
	})
	rep, err := c.Check(ctx, CheckOptions{Repair: true})
	require.NoError(t, err)
	require.NotNil(t, taken, "the hook ran")
	assert.Len(t, rep.OrphanedProcesses, 2, "what the look found")
	assert.Zero(t, rep.Repaired.Requeued, "the reclaim got there first; the live worker's process is not touched")
	assert.Equal(t, "t0000", string(taken.Task()), "the live worker dequeued the reclaimed task")
	assert.Equal(t, []string{"t0001"}, waiting(t, admin, "q"))
	assert.Equal(t, []string{"t0000"}, waiting(t, admin, "r"), "moved once")
	require.NoError(t, taken.Finish(ctx), "the live worker still owns its process")
	requireClean(t, admin)
}

// notReclaiming is a client whose workers never find a dead peer, so that
// a test decides when a reclaim happens.
func notReclaiming(t *testing.T, b *backend) *Client {
	c, h := hookedClient(t, b)
	expiredSHA := c.core.Store.Scripts().Expired.SHA1()
	h.set(func(h *hooked) {
		h.do = func(ctx context.Context, cmd rueidis.Completed, next func() rueidis.RedisResult) rueidis.RedisResult {
			if scriptOf(cmd) == expiredSHA {
				return h.Client.Do(ctx, h.Client.B().Lrange().Key(b.prefix+":nothing").Start(0).Stop(-1).Build())
			}
			return next()
		}
	})
	return c
}

// Repairs run over and over while workers handle tasks and one crashes:
// no live worker's task is ever run twice, nothing is lost, and the last
// check finds nothing.
func TestCheckRepairNeverTouchesLiveWork(t *testing.T) {
	t.Parallel()
	b, c, ctx := setup(t)
	queues := []string{"a", "b", "c"}
	var mu sync.Mutex
	runs := make(map[string][]string) // task -> workers that finished it
	var fences atomic.Int32
	handler := func(ctx context.Context, p *Process) error {
		select {
		case <-time.After(time.Duration(len(p.Task())%7) * time.Millisecond):
		case <-ctx.Done():
			return ctx.Err()
		}
		mu.Lock()
		runs[string(p.Task())] = append(runs[string(p.Task())], p.Owner())
		mu.Unlock()
		return nil
	}
	victimStarted := make(chan struct{})
	var once sync.Once
	victim := newWorker(t, b.client(), fast)
	for _, q := range queues {
		require.NoError(t, victim.Handle(ctx, q, func(ctx context.Context, p *Process) error {
			once.Do(func() { close(victimStarted) })
			<-ctx.Done() // holds its tasks until it crashes
			return ctx.Err()
		}, HandleOptions{Concurrency: 3}))
	}
	var workers []*Worker
	// Live workers on the default TTL, so a busy machine does not make
	// them fence themselves (which would rightly run tasks twice).
	opts := WorkerOptions{OnFenced: func(FenceEvent) { fences.Add(1) }}
	for range 3 {
		w := newWorker(t, b.client(), opts)
		for _, q := range queues {
			require.NoError(t, w.Handle(ctx, q, handler, HandleOptions{Concurrency: 4}))
		}
		workers = append(workers, w)
	}
	// Two checkers, on clients of their own, repair at the same time. They
	// stop before the test ends, however it ends: a checker's t.Errorf
	// after that would panic the whole package.
	stop := make(chan struct{})
	var checkers sync.WaitGroup
	counts := make([]int, 2)
	for i, checker := range []*Client{c, b.client()} {
		checkers.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := checker.Check(ctx, CheckOptions{Repair: true}); err != nil {
					t.Errorf("check: %v", err)
					return
				}
				counts[i]++
			}
		})
	}
	var halted sync.Once
	halt := func() { halted.Do(func() { close(stop); checkers.Wait() }) }
	t.Cleanup(halt)
	const perQueue = 100
	want := make(map[string]bool)
	for _, q := range queues {
		tasks := make([][]byte, perQueue)
		for i := range tasks {
			tasks[i] = fmt.Appendf(nil, "%s-%03d", q, i)
			want[string(tasks[i])] = true
		}
		require.NoError(t, second(c.EnqueueBatch(ctx, q, tasks)))
	}
	recv(t, victimStarted, 5*time.Second, "the victim holds tasks")
	crash(victim)
	eventually(t, 20*time.Second, "every task finished", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(runs) == len(want)
	})
	halt()
	t.Logf("%d and %d checks ran", counts[0], counts[1])
	mu.Lock()
	defer mu.Unlock()
	for task := range want {
		if fences.Load() > 0 {
			assert.NotEmpty(t, runs[task], task)
		} else {
			assert.Len(t, runs[task], 1, "task %s finished by live workers %v", task, runs[task])
		}
	}
	for _, w := range workers {
		require.NoError(t, w.Close(ctx))
	}
	eventually(t, 5*time.Second, "the victim is reclaimed", func() bool { return check(t, c, false).Problems() == 0 })
}

func TestCheckOnAClosedClientOrCancelledContext(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	_, err := c.Check(cancelled, CheckOptions{Repair: true})
	assert.ErrorIs(t, err, context.Canceled)
	require.NoError(t, c.Close(ctx))
	_, err = c.Check(ctx, CheckOptions{})
	assert.ErrorIs(t, err, ErrClientClosed)
}

// A prefix holding SCAN's pattern characters matches only itself.
func TestCheckPrefixIsNotAPattern(t *testing.T) {
	t.Parallel()
	b := newBackend(t)
	ctx := ctxT(t)
	clientAt := func(prefix string) *Client {
		other := *b
		other.prefix = prefix
		return other.client()
	}
	star := clientAt(b.prefix + "*[a]?\\")
	other := clientAt(b.prefix + "xa!\\")
	for _, c := range []*Client{star, other} {
		require.NoError(t, second(c.Enqueue(ctx, "q", []byte("x"))))
		require.NoError(t, c.core.Store.FlushStats(ctx, "q")) // the enqueue's count: the stats hash exists
		t.Cleanup(func() {                                    // deleteKeys would read these prefixes as patterns
			ctx := context.Background()
			k := c.core.Store.Keys().Queue("q")
			for _, key := range []string{k.Waiting, k.Meta, k.Stats, c.core.Store.Keys().Queues()} { // two slots
				_ = c.core.Redis.Do(ctx, c.core.Redis.B().Del().Key(key).Build()).Error()
			}
		})
	}
	rep := check(t, star, false)
	assert.Zero(t, rep.Problems(), "%+v", rep)
	copies := 1
	if b.cluster { // each master's replica returns the keys again (.ci/cluster: one each)
		copies = 2
	}
	assert.Equal(t, 4*copies, rep.KeysScanned, "its waiting list, its record, its stats and the registry")
	assert.Equal(t, 1, rep.QueuesChecked)
}

// On a cluster the keys of one prefix spread over every master, so a scan
// of one node would miss most of them.
func TestCheckOnRedisCluster(t *testing.T) {
	t.Parallel()
	b := clusterBackend(t)
	rdb := b.redis()
	c := b.clientOn(rdb)
	ctx := ctxT(t)

	const n = 24
	names := make([]string, n)
	dead := newWorker(t, c, fast)
	for i := range names {
		names[i] = fmt.Sprintf("queue-%d", i)
		require.NoError(t, second(c.Enqueue(ctx, names[i], []byte("task of "+names[i]))))
		require.NoError(t, dead.StartWork(ctx, names[i], Events{}))
		dequeueAll(t, dead, names[i], 1)
	}
	id := dead.ID()
	crash(dead)
	do(t, c, c.core.Redis.B().Zrem().Key(c.core.Store.Keys().Workers()).Member(id).Build()) // and its registry entry is lost
	do(t, c, c.core.Redis.B().Sadd().Key(c.core.Store.Keys().Queues()).Member("ghost").Build())
	eventually(t, 5*time.Second, "the dead worker's leases expire", func() bool { return leasesExpired(t, c, id, names...) })

	rep := check(t, c, false)
	assert.Equal(t, len(rdb.Nodes()), rep.NodesScanned, "every node is scanned")
	assert.Len(t, rep.OrphanedProcesses, n, "orphans on every master are found")
	assert.Equal(t, []string{id}, rep.UnregisteredWorkers)
	assert.Equal(t, []string{"ghost"}, rep.StaleQueues)
	assert.Empty(t, rep.UnknownKeys)

	rep = check(t, c, true)
	assert.EqualValues(t, n, rep.Repaired.Requeued)
	assert.Equal(t, []string{id}, rep.Repaired.ReclaimedWorkers)
	for _, name := range names {
		assert.Equal(t, []string{"task of " + name}, waiting(t, c, name))
	}
	requireClean(t, c)
}

// A queue is created before it is registered: a check that looks while an
// enqueue is between the two does not report it.
func TestCheckIgnoresARegistrationUnderWay(t *testing.T) {
	t.Parallel()
	b, admin, ctx := setup(t)
	producer, hp := hookedClient(t, b)
	blocked, release := make(chan struct{}), make(chan struct{})
	hp.set(func(h *hooked) {
		h.do = func(ctx context.Context, cmd rueidis.Completed, next func() rueidis.RedisResult) rueidis.RedisResult {
			if c := cmd.Commands(); c[0] == "SADD" && c[1] == admin.core.Store.Keys().Queues() {
				close(blocked)
				<-release
			}
			return next()
		}
	})
	enqueued := make(chan error, 1)
	go func() { enqueued <- second(producer.Enqueue(ctx, "new", []byte("x"))) }()
	recv(t, blocked, 5*time.Second, "the enqueue is between creating and registering the queue")

	c, hc := hookedClient(t, b)
	hc.set(func(h *hooked) {
		h.doMulti = func(ctx context.Context, cmds []rueidis.Completed, next func() []rueidis.RedisResult) []rueidis.RedisResult {
			if cmds[0].Commands()[0] == "SISMEMBER" { // the check asks the registry again
				close(release)
				require.NoError(t, recv(t, enqueued, 5*time.Second, "the enqueue ends"))
			}
			return next()
		}
	})
	rep := check(t, c, false)
	assert.Zero(t, rep.Problems(), "%v", rep)
	qs, err := admin.Queues(ctx)
	require.NoError(t, err)
	assert.Equal(t, []string{"new"}, qs)
}

// A stored control the scripts cannot read (here as an older worqr stored
// a limit of 2^63 - 1, and as someone might write one by hand) is not
// enforced, reads as unset, never as a negative number, and Check reports
// it.
func TestCheckReportsUnreadableControls(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	require.NoError(t, second(c.Enqueue(ctx, "q", []byte("x"))))
	require.NoError(t, second(c.Enqueue(ctx, "fine", []byte("x"))))
	require.NoError(t, c.SetConcurrency(ctx, "fine", 2))
	meta := c.core.Store.Keys().Queue("q").Meta
	do(t, c, c.core.Redis.B().Hset().Key(meta).FieldValue().FieldValue("limit", "9.2233720368547758e+18").FieldValue("rate", "ten").FieldValue("per", "1000").
		FieldValue("glimit", "-1").FieldValue("gturns", "2").FieldValue("gsize", "eight").Build())

	info, err := c.QueueInfo(ctx, "q")
	require.NoError(t, err)
	assert.Zero(t, info.Concurrency)
	assert.Zero(t, info.Rate)
	w := newWorker(t, c, WorkerOptions{})
	require.NoError(t, w.StartWork(ctx, "q", Events{}))
	require.NoError(t, second(w.Dequeue(ctx, "q")), "an unreadable limit is not enforced")

	rep, err := c.Check(ctx, CheckOptions{Repair: true})
	require.NoError(t, err)
	assert.Equal(t, []QueueControl{
		{Queue: "q", Control: "limit", Value: "9.2233720368547758e+18"}, {Queue: "q", Control: "rate", Value: "ten"},
		{Queue: "q", Control: "glimit", Value: "-1"}, {Queue: "q", Control: "gsize", Value: "eight"},
	}, rep.UnreadableControls)
	assert.Equal(t, 4, rep.Problems())
	assert.Contains(t, rep.String(), "unreadable controls 4")
	// Reported, never touched; setting the control again mends it.
	v, err := c.core.Redis.Do(ctx, c.core.Redis.B().Hget().Key(meta).Field("limit").Build()).ToString()
	require.NoError(t, err)
	assert.Equal(t, "9.2233720368547758e+18", v)
	require.NoError(t, c.SetConcurrency(ctx, "q", 4))
	require.NoError(t, c.SetRateLimit(ctx, "q", 0, 0))
	require.NoError(t, c.SetGroupConcurrency(ctx, "q", "", 0))
	require.NoError(t, c.SetGroupTurnSize(ctx, "q", 1))
	rep, err = c.Check(ctx, CheckOptions{})
	require.NoError(t, err)
	assert.Empty(t, rep.UnreadableControls)
	assert.Zero(t, rep.Problems())
}

// A workflow whose creator stopped after writing it, before enqueuing its
// first step, never runs: Check finds the step stalled, and its repair
// enqueues it as EnqueueWorkflow would (a second repair adds nothing),
// after which the workflow runs to its end. A workflow that runs, and one
// that ended, are no finding; one whose flow hash was lost leaves keys
// that a repair deletes.
func TestCheckFindsAndRepairsAStalledWorkflow(t *testing.T) {
	t.Parallel()
	b, c, ctx := setup(t)
	steps := []Step{{Name: "a", Queue: "wq", Task: []byte("x")}, {Name: "b", Queue: "wq", Task: []byte("y"), After: []string{"a"}}}
	_, err := c.EnqueueWorkflow(ctx, steps, WorkflowOptions{ID: "healthy"})
	require.NoError(t, err)
	_, err = c.EnqueueWorkflow(ctx, steps, WorkflowOptions{ID: "ended"})
	require.NoError(t, err)
	_, err = c.CancelWorkflow(ctx, "ended")
	require.NoError(t, err)
	_, err = c.EnqueueWorkflow(ctx, steps, WorkflowOptions{ID: "lost"})
	require.NoError(t, err)
	requireClean(t, c)

	// The creator's crash: the workflow written, its first step not
	// enqueued.
	plan, err := c.planWorkflow(steps, time.Hour, false)
	require.NoError(t, err)
	_, _, err = c.core.Store.CreateWorkflow(ctx, "stuck", "sum", time.Hour, plan)
	require.NoError(t, err)
	do(t, c, c.core.Redis.B().Del().Key(c.core.Store.Keys().Workflow("lost").Flow).Build())

	rep := check(t, c, false)
	assert.Equal(t, []WorkflowStep{{Workflow: "stuck", Step: "a"}}, rep.StalledSteps)
	assert.Equal(t, []string{"lost"}, rep.LeftoverWorkflows)
	assert.Empty(t, rep.UnknownKeys)
	assert.Equal(t, 2, rep.Problems(), "%+v", rep)
	assert.Equal(t, 4, rep.WorkflowsChecked)

	rep = check(t, c, true)
	assert.Equal(t, []WorkflowStep{{Workflow: "stuck", Step: "a"}}, rep.Repaired.EnqueuedSteps)
	assert.Equal(t, []string{"lost"}, rep.Repaired.DeletedWorkflows)
	info, err := c.Workflow(ctx, "stuck")
	require.NoError(t, err)
	require.Equal(t, StepQueued, info.Steps[0].State)
	task := info.Steps[0].TaskID
	require.NotEmpty(t, task)
	requireClean(t, c)

	// Run again as a replay would be: the step's unique key holds, so
	// nothing is added.
	require.NoError(t, c.core.EnqueueSteps(ctx, "stuck", []store.ReadyStep{{Name: "a", Spec: plan[0].Spec}}))
	qi, err := c.QueueInfo(ctx, "wq")
	require.NoError(t, err)
	assert.Equal(t, int64(3), qi.Waiting, "healthy's, lost's and stuck's first steps, once each")

	w := newWorker(t, b.client(), WorkerOptions{})
	require.NoError(t, w.Handle(ctx, "wq", func(context.Context, *Process) error { return nil }, HandleOptions{}))
	info, err = c.WaitWorkflow(ctx, "stuck")
	require.NoError(t, err)
	assert.Equal(t, WorkflowSucceeded, info.State)
	assert.Equal(t, task, info.Steps[0].TaskID)
	_, err = c.WaitWorkflow(ctx, "healthy")
	require.NoError(t, err)
	requireClean(t, c)
}

// A queued step whose task was removed by hand never ends, nor does its
// workflow: Check finds the step vanished, and its repair enqueues it
// anew (a second repair adds nothing), after which the workflow runs to
// its end on the new task.
func TestCheckFindsAndRequeuesAVanishedStep(t *testing.T) {
	t.Parallel()
	b, c, ctx := setup(t)
	steps := []Step{{Name: "a", Queue: "vq", Task: []byte("x")}, {Name: "b", Queue: "vq", Task: []byte("y"), After: []string{"a"}}}
	_, err := c.EnqueueWorkflow(ctx, steps, WorkflowOptions{ID: "vanished"})
	require.NoError(t, err)
	info, err := c.Workflow(ctx, "vanished")
	require.NoError(t, err)
	old := info.Steps[0].TaskID
	require.NotEmpty(t, old)
	requireClean(t, c)

	// The task removed by hand: in no queue, not ended.
	do(t, c, c.core.Redis.B().Del().Key(c.core.Store.Keys().Queue("vq").Waiting).Build())
	rep := check(t, c, false)
	assert.Equal(t, []WorkflowStep{{Workflow: "vanished", Step: "a", Task: old}}, rep.VanishedSteps)
	assert.Equal(t, 1, rep.Problems(), "%+v", rep)

	rep = check(t, c, true)
	require.Len(t, rep.Repaired.RequeuedSteps, 1)
	task := rep.Repaired.RequeuedSteps[0].Task
	assert.NotEqual(t, old, task)
	assert.Equal(t, []WorkflowStep{{Workflow: "vanished", Step: "a", Task: task}}, rep.Repaired.RequeuedSteps)
	info, err = c.Workflow(ctx, "vanished")
	require.NoError(t, err)
	assert.Equal(t, task, info.Steps[0].TaskID, "the workflow follows the new task")
	requireClean(t, c)
	rep = check(t, c, true)
	assert.Empty(t, rep.Repaired.RequeuedSteps, "a second repair")
	qi, err := c.QueueInfo(ctx, "vq")
	require.NoError(t, err)
	assert.Equal(t, int64(1), qi.Waiting, "the step's task, once")

	w := newWorker(t, b.client(), WorkerOptions{})
	require.NoError(t, w.Handle(ctx, "vq", func(context.Context, *Process) error { return nil }, HandleOptions{}))
	info, err = c.WaitWorkflow(ctx, "vanished")
	require.NoError(t, err)
	assert.Equal(t, WorkflowSucceeded, info.State)
	assert.Equal(t, task, info.Steps[0].TaskID)
	requireClean(t, c)
}

// Check judges a step by where its task is: one running on a live
// worker, and one delayed, are no finding, and a repair leaves both
// alone.
func TestCheckLeavesRunningAndDelayedStepsAlone(t *testing.T) {
	t.Parallel()
	b, c, ctx := setup(t)
	_, err := c.EnqueueWorkflow(ctx, []Step{{Name: "a", Queue: "rq", Task: []byte("x")}}, WorkflowOptions{ID: "running"})
	require.NoError(t, err)
	_, err = c.EnqueueWorkflow(ctx, []Step{{Name: "a", Queue: "dq", Task: []byte("x"), Options: []EnqueueOption{In(time.Hour)}}}, WorkflowOptions{ID: "delayed"})
	require.NoError(t, err)
	started, release := make(chan struct{}), make(chan struct{})
	w := newWorker(t, b.client(), WorkerOptions{})
	require.NoError(t, w.Handle(ctx, "rq", func(context.Context, *Process) error {
		close(started)
		<-release
		return nil
	}, HandleOptions{}))
	select {
	case <-started:
	case <-ctx.Done():
		t.Fatal("the step's task never started")
	}
	running, err := c.Workflow(ctx, "running")
	require.NoError(t, err)
	delayed, err := c.Workflow(ctx, "delayed")
	require.NoError(t, err)

	rep := check(t, c, false)
	assert.Empty(t, rep.VanishedSteps)
	assert.Zero(t, rep.Problems(), "%+v", rep)
	rep = check(t, c, true)
	assert.Empty(t, rep.Repaired.RequeuedSteps)
	procs, err := c.Processes(ctx, "rq")
	require.NoError(t, err)
	require.Len(t, procs, 1)
	assert.Equal(t, running.Steps[0].TaskID, procs[0].TaskID)
	qi, err := c.QueueInfo(ctx, "dq")
	require.NoError(t, err)
	assert.Equal(t, int64(1), qi.Delayed)
	assert.Zero(t, qi.Waiting)
	after, err := c.Workflow(ctx, "delayed")
	require.NoError(t, err)
	assert.Equal(t, delayed.Steps[0].TaskID, after.Steps[0].TaskID)

	close(release)
	info, err := c.WaitWorkflow(ctx, "running")
	require.NoError(t, err)
	assert.Equal(t, WorkflowSucceeded, info.State)
}
