package worqr

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/worqr/worqr/internal/lifecycle"
	"github.com/worqr/worqr/internal/testsignal"
)

// startLog records the order in which handlers start, as "queue/task".
type startLog struct {
	mu    sync.Mutex
	order []string
}

func (l *startLog) add(p *Process) {
	l.mu.Lock()
	l.order = append(l.order, p.Queue()+"/"+string(p.Task()))
	l.mu.Unlock()
}

func (l *startLog) get() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.order...)
}

// queuesOf is the queue of each entry of a start log.
func queuesOf(order []string) []string {
	out := make([]string, len(order))
	for i, s := range order {
		out[i], _, _ = strings.Cut(s, "/")
	}
	return out
}

// peak tracks how many of something run at once, and the most ever.
type peak struct{ now, max atomic.Int32 }

func (p *peak) enter() {
	n := p.now.Add(1)
	for {
		m := p.max.Load()
		if n <= m || p.max.CompareAndSwap(m, n) {
			return
		}
	}
}

func (p *peak) leave() { p.now.Add(-1) }

// With one slot and strict order, the first queue is drained before the
// second gets a start, whatever order the tasks came in; and a task that
// arrives on the first queue while the second is being served is the next
// to start.
func TestPoolStrictOrder(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	enqueueNumbered(t, c, "low", 10)
	enqueueNumbered(t, c, "high", 10)
	var log startLog
	armed := atomic.Bool{}
	heard := make(chan struct{}, 1)
	handler := func(_ context.Context, p *Process) error {
		log.add(p)
		if p.Queue() == "low" && string(p.Task()) == "t0003" {
			// The pool is parked on the drained high queue: this enqueue
			// wakes it, and the work flag is set before Work is called.
			armed.Store(true)
			if err := second(c.Enqueue(ctx, "high", []byte("late"))); err != nil {
				return err
			}
			select {
			case <-heard:
			case <-time.After(5 * time.Second):
				return Permanent(fmt.Errorf("the work event of the enqueue never came"))
			}
		}
		return nil
	}
	work := func(string, int64) {
		if armed.CompareAndSwap(true, false) {
			heard <- struct{}{}
		}
	}
	w := newWorker(t, c, WorkerOptions{})
	require.NoError(t, w.HandleQueues(ctx, []QueueSpec{
		{Queue: "high", Handler: handler, Options: HandleOptions{Events: Events{Work: work}}},
		{Queue: "low", Handler: handler},
	}, PoolOptions{Concurrency: 1}))
	settledQueue(t, c, "high")
	settledQueue(t, c, "low")
	eventually(t, 5*time.Second, "all started", func() bool { return len(log.get()) == 21 })

	order := log.get()
	want := make([]string, 0, 21)
	for i := range 10 {
		want = append(want, fmt.Sprintf("high/t%04d", i))
	}
	for i := range 4 {
		want = append(want, fmt.Sprintf("low/t%04d", i))
	}
	want = append(want, "high/late")
	for i := 4; i < 10; i++ {
		want = append(want, fmt.Sprintf("low/t%04d", i))
	}
	assert.Equal(t, want, order)
}

// With shares 3:1 and both queues backed up, three starts in four go to
// the heavier queue; once it is empty the other gets every slot.
func TestPoolSharedOrder(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	const n = 200
	enqueueNumbered(t, c, "a", n)
	enqueueNumbered(t, c, "b", n)
	var log startLog
	var handled atomic.Int32
	handler := func(_ context.Context, p *Process) error {
		log.add(p)
		handled.Add(1)
		return nil
	}
	w := newWorker(t, c, WorkerOptions{})
	require.NoError(t, w.HandleQueues(ctx, []QueueSpec{
		{Queue: "a", Handler: handler, Share: 3},
		{Queue: "b", Handler: handler, Share: 1},
	}, PoolOptions{Concurrency: 4, Order: OrderShared}))
	eventually(t, 20*time.Second, "all handled", func() bool { return handled.Load() == 2*n })
	settledQueue(t, c, "a")
	settledQueue(t, c, "b")

	// The first 200 starts, while both queues hold tasks (a gives up 150
	// of its 200).
	first := queuesOf(log.get()[:n])
	var fromA int
	for _, q := range first {
		if q == "a" {
			fromA++
		}
	}
	share := float64(fromA) / float64(len(first))
	assert.InDelta(t, 0.75, share, 0.05, "share of starts from the share-3 queue: %d of %d", fromA, len(first))
}

// The slots are shared: across three queues, never more handlers run at
// once than the pool's concurrency, and a queue's cap holds within it.
func TestPoolNeverExceedsItsConcurrency(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	var all, capped peak
	var handled atomic.Int32
	run := func(mine *peak) Handler {
		return func(context.Context, *Process) error {
			all.enter()
			if mine != nil {
				mine.enter()
				defer mine.leave()
			}
			defer all.leave()
			time.Sleep(2 * time.Millisecond) // let handlers overlap
			handled.Add(1)
			return nil
		}
	}
	for _, order := range []Order{OrderStrict, OrderShared} {
		suffix := order.String()
		w := newWorker(t, c, WorkerOptions{})
		require.NoError(t, w.HandleQueues(ctx, []QueueSpec{
			{Queue: "x-" + suffix, Handler: run(nil), Share: 2},
			{Queue: "y-" + suffix, Handler: run(nil)},
			{Queue: "z-" + suffix, Handler: run(&capped), MaxSlots: 1},
		}, PoolOptions{Concurrency: 3, Order: order}))
		handled.Store(0)
		for _, q := range []string{"x-", "y-", "z-"} {
			enqueueNumbered(t, c, q+suffix, 30)
		}
		eventually(t, 20*time.Second, "all handled", func() bool { return handled.Load() == 90 })
		require.NoError(t, w.Shutdown(ctx))
	}
	assert.LessOrEqual(t, all.max.Load(), int32(3), "handlers at once across the pool")
	assert.Equal(t, int32(3), all.max.Load(), "the pool's slots were all used at some point")
	assert.Equal(t, int32(1), capped.max.Load(), "a queue's cap within the pool")
}

// A pool that found every queue empty is parked in each queue's idle set
// and costs nothing; an enqueue on any of them wakes it.
func TestPoolIdleIsWokenByAnyQueue(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	got := make(chan string, 10)
	handler := func(_ context.Context, p *Process) error {
		got <- p.Queue() + "/" + string(p.Task())
		return nil
	}
	w := newWorker(t, c, WorkerOptions{})
	queues := []string{"q1", "q2", "q3"}
	var specs []QueueSpec
	for _, q := range queues {
		specs = append(specs, QueueSpec{Queue: q, Handler: handler})
	}
	require.NoError(t, w.HandleQueues(ctx, specs, PoolOptions{Concurrency: 2, Order: OrderShared}))
	for _, q := range queues {
		assert.Equal(t, []string{w.ID()}, settledParking(t, c, q, 1), "parked on %s", q)
	}
	for _, q := range []string{"q3", "q1", "q2"} {
		require.NoError(t, second(c.Enqueue(ctx, q, []byte("t"))))
		assert.Equal(t, q+"/t", recv(t, got, 5*time.Second, "woken by an enqueue on "+q))
		eventually(t, 5*time.Second, "parked again on "+q, func() bool { return len(parked(t, c, q)) == 1 })
	}
}

// Shutdown stops the pool taking tasks and waits for the running handlers
// of every queue, which finish their tasks.
func TestPoolShutdownDrainsInFlightHandlers(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	started := make(chan string, 10)
	release := make(chan struct{})
	var finished atomic.Int32
	handler := func(_ context.Context, p *Process) error {
		started <- p.Queue()
		<-release
		finished.Add(1)
		return nil
	}
	w := newWorker(t, c, WorkerOptions{})
	require.NoError(t, w.HandleQueues(ctx, []QueueSpec{
		{Queue: "a", Handler: handler},
		{Queue: "b", Handler: handler},
	}, PoolOptions{Concurrency: 2, Order: OrderShared}))
	// One task at a time, each seen started before the next is enqueued:
	// enqueued together, the pool may take both of b's before a's event
	// arrives, as it is free to.
	require.NoError(t, second(c.Enqueue(ctx, "a", []byte("1"))))
	assert.Equal(t, "a", recv(t, started, 5*time.Second, "a's task"))
	require.NoError(t, second(c.Enqueue(ctx, "b", []byte("1"))))
	assert.Equal(t, "b", recv(t, started, 5*time.Second, "b's first task"))
	require.NoError(t, second(c.Enqueue(ctx, "b", []byte("2")))) // waits: no slot

	done := make(chan error, 1)
	go func() { done <- w.Shutdown(ctx) }()
	eventually(t, 5*time.Second, "draining", func() bool {
		w.core.Lock()
		defer w.core.Unlock()
		return w.core.Worker().Phase() != lifecycle.Serving
	})
	close(release)
	require.NoError(t, recv(t, done, 10*time.Second, "shutdown"))
	assert.EqualValues(t, 2, finished.Load(), "both in-flight handlers finished")
	settledQueue(t, c, "a")
	n, err := c.QueueLen(ctx, "b")
	require.NoError(t, err)
	assert.EqualValues(t, 1, n, "the task that had no slot still waits")
}

// A pool's worker killed with tasks in flight on several queues has them
// all reclaimed, and a peer's pool runs them again.
func TestPoolCrashedWorkerIsReclaimedOnEveryQueue(t *testing.T) {
	t.Parallel()
	k := setupTimed(t, nil)
	c, ctx := k.c, k.ctx
	k.beats()
	c.core.Signals.Looked.Init(t)
	var a attempts
	running := make(chan string, 10)
	again := make(chan string, 10)
	handler := func(hctx context.Context, p *Process) error {
		if a.add(p.Queue()) == 1 {
			running <- p.Queue()
			<-hctx.Done() // the first run is the crashed worker's
			return hctx.Err()
		}
		again <- p.Queue()
		return nil
	}
	queues := []string{"a", "b", "c"}
	specs := func() []QueueSpec {
		var out []QueueSpec
		for _, q := range queues {
			out = append(out, QueueSpec{Queue: q, Handler: handler})
		}
		return out
	}
	dead := newWorker(t, c, fast)
	require.NoError(t, dead.HandleQueues(ctx, specs(), PoolOptions{Concurrency: 3}))
	for _, q := range queues {
		require.NoError(t, second(c.Enqueue(ctx, q, []byte("held"))))
	}
	var held []string
	for range queues {
		held = append(held, recv(t, running, 5*time.Second, "handler running"))
	}
	assert.ElementsMatch(t, queues, held)
	crash(dead)

	peer := newWorker(t, c, fast)
	require.NoError(t, peer.HandleQueues(ctx, specs(), PoolOptions{Concurrency: 1, Order: OrderShared}))
	k.run(fast.TTL + fast.RenewInterval)
	reclaimed(t, 3, c)
	var rerun []string
	for range queues {
		rerun = append(rerun, recv(t, again, testsignal.Wait, "run again after the reclaim"))
	}
	assert.ElementsMatch(t, queues, rerun)
	for _, q := range queues {
		settledQueue(t, c, q)
		assert.Equal(t, 2, a.get(q), "runs on %s", q)
	}
}

// Per-queue behaviour stays the queue's own in a pool: retries and dead
// letters by its options, a manual Dequeue refused, StopWork of one
// queue leaving the others served.
func TestPoolQueuesKeepTheirOwnBehaviour(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	var a attempts
	handler := func(_ context.Context, p *Process) error {
		if a.add(p.Queue()+"/"+string(p.Task())) == 1 {
			return fmt.Errorf("first attempt fails")
		}
		return nil
	}
	now := RetryPolicy{Backoff: func(int, error) time.Duration { return 0 }}
	w := newWorker(t, c, WorkerOptions{})
	require.NoError(t, w.HandleQueues(ctx, []QueueSpec{
		{Queue: "retried", Handler: handler, Options: HandleOptions{Retry: now}},
		{Queue: "once", Handler: handler, Options: HandleOptions{Retry: RetryPolicy{MaxAttempts: 1}}},
	}, PoolOptions{}))
	require.NoError(t, second(c.Enqueue(ctx, "retried", []byte("t"))))
	require.NoError(t, second(c.Enqueue(ctx, "once", []byte("t"))))
	settledQueue(t, c, "retried")
	settledQueue(t, c, "once")
	assert.Equal(t, 2, a.get("retried/t"), "retried under its own policy")
	assert.Equal(t, 1, a.get("once/t"))
	assert.Equal(t, []string{"t"}, deadPayloads(t, c, "once"))

	_, err := w.Dequeue(ctx, "once")
	require.ErrorIs(t, err, ErrHandledQueue)
	require.NoError(t, w.StopWork(ctx, "once"))
	require.NoError(t, second(c.Enqueue(ctx, "retried", []byte("u"))))
	settledQueue(t, c, "retried")
	assert.Equal(t, 2, a.get("retried/u"), "the other queue is still served")
	assert.ElementsMatch(t, []string{"retried"}, w.Queues())
}

func TestPoolOptionsAreChecked(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	w := newWorker(t, c, WorkerOptions{})
	h := func(context.Context, *Process) error { return nil }
	for name, tc := range map[string]struct {
		specs []QueueSpec
		opts  PoolOptions
	}{
		"no queue":             {nil, PoolOptions{}},
		"nil handler":          {[]QueueSpec{{Queue: "a"}}, PoolOptions{}},
		"twice":                {[]QueueSpec{{Queue: "a", Handler: h}, {Queue: "a", Handler: h}}, PoolOptions{}},
		"negative share":       {[]QueueSpec{{Queue: "a", Handler: h, Share: -1}}, PoolOptions{}},
		"negative cap":         {[]QueueSpec{{Queue: "a", Handler: h, MaxSlots: -1}}, PoolOptions{}},
		"queue's concurrency":  {[]QueueSpec{{Queue: "a", Handler: h, Options: HandleOptions{Concurrency: 2}}}, PoolOptions{}},
		"negative concurrency": {[]QueueSpec{{Queue: "a", Handler: h}}, PoolOptions{Concurrency: -1}},
		"unknown order":        {[]QueueSpec{{Queue: "a", Handler: h}}, PoolOptions{Order: 7}},
	} {
		assert.ErrorIs(t, w.HandleQueues(ctx, tc.specs, tc.opts), ErrInvalidOptions, name)
	}
	// A queue that cannot be served undoes the pool: the others are left.
	require.NoError(t, w.Handle(ctx, "taken", h, HandleOptions{}))
	err := w.HandleQueues(ctx, []QueueSpec{{Queue: "first", Handler: h}, {Queue: "taken", Handler: h}}, PoolOptions{})
	require.ErrorIs(t, err, ErrAlreadyServing)
	assert.ElementsMatch(t, []string{"taken"}, w.Queues())
	require.NoError(t, w.HandleQueues(ctx, []QueueSpec{{Queue: "first", Handler: h}}, PoolOptions{}), "served again")
}

// A pool is parked on every queue it found empty, also while other
// queues' tasks take all its slots: named by an enqueue then, it passes
// the event on to every runtime of the queue (an idle one takes the task),
// and takes the task itself when a slot frees if nobody has. Handed a
// task by its enqueue, it gives the task back to the queue instead, which
// wakes every runtime the same way.
func TestPoolNamedWhileFullPassesTheEventOn(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, task, first string }{
		{"named", tooBig("t"), "w1:"},
		{"handed", "t", "h"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b, c, ctx := setup(t)
			started := make(chan string, 10)
			release := make(chan struct{})
			handler := func(_ context.Context, p *Process) error {
				started <- p.Queue() + "/" + string(p.Task())
				if p.Queue() == "busy" {
					<-release
				}
				return nil
			}
			w := newWorker(t, c, WorkerOptions{})
			require.NoError(t, w.HandleQueues(ctx, []QueueSpec{
				{Queue: "busy", Handler: handler},
				{Queue: "quiet", Handler: handler},
			}, PoolOptions{Concurrency: 1}))
			assert.Equal(t, []string{w.ID()}, settledParking(t, c, "quiet", 1))
			require.NoError(t, second(c.Enqueue(ctx, "busy", []byte("long"))))
			assert.Equal(t, "busy/long", recv(t, started, 5*time.Second, "the slot taken"))

			events := b.listen(c.core.Store.Keys().Queue("quiet").Channel)
			require.NoError(t, second(c.Enqueue(ctx, "quiet", []byte(tc.task))))
			assert.True(t, strings.HasPrefix(expectPrefix(t, events, tc.first), tc.first+w.ID()), "the pool is named")
			expectMessage(t, events, "w1") // passed on to all
			close(release)
			assert.Equal(t, "quiet/"+tc.task, recv(t, started, 5*time.Second, "taken once the slot freed"))
			settledQueue(t, c, "quiet")
		})
	}
}

// A paused queue holds no slot, even first in strict order: the others
// are served, and it is served again once resumed. The worker's middleware
// wraps every queue's handler, a queue's own only its own.
func TestPoolControlsAndMiddleware(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	var log startLog
	handler := func(_ context.Context, p *Process) error {
		log.add(p)
		return nil
	}
	var outer, inner atomic.Int32
	count := func(n *atomic.Int32) Middleware {
		return func(next Handler) Handler {
			return func(ctx context.Context, p *Process) error {
				n.Add(1)
				return next(ctx, p)
			}
		}
	}
	w := newWorker(t, c, WorkerOptions{Middleware: []Middleware{count(&outer)}})
	require.NoError(t, c.Pause(ctx, "high", CreateQueue()))
	require.NoError(t, w.HandleQueues(ctx, []QueueSpec{
		{Queue: "high", Handler: handler, Options: HandleOptions{Middleware: []Middleware{count(&inner)}}},
		{Queue: "low", Handler: handler},
	}, PoolOptions{Concurrency: 1}))
	enqueueNumbered(t, c, "high", 3)
	enqueueNumbered(t, c, "low", 3)
	settledQueue(t, c, "low")
	n, err := c.QueueLen(ctx, "high")
	require.NoError(t, err)
	assert.EqualValues(t, 3, n, "a paused queue hands out nothing")

	require.NoError(t, c.Resume(ctx, "high"))
	settledQueue(t, c, "high")
	eventually(t, 5*time.Second, "all started", func() bool { return len(log.get()) == 6 })
	assert.Equal(t, []string{"low", "low", "low", "high", "high", "high"}, queuesOf(log.get()))
	assert.EqualValues(t, 6, outer.Load(), "the worker's middleware")
	assert.EqualValues(t, 3, inner.Load(), "the queue's own middleware")
}

// A pool's worker that fences itself ends the handlers of every queue
// with ErrWorkerFenced, writes nothing for them, and once it has
// registered again serves all its queues again: the reclaimed tasks, and
// new ones, with its slots recorded under its new id.
func TestPoolRidesOutAFence(t *testing.T) {
	t.Parallel()
	k := setupTimed(t, nil)
	direct, ctx := k.c, k.ctx
	px := newProxy(t)
	c := k.clientVia(px)
	k.beatsOf(c)
	c.core.Signals.Looked.Init(t)
	c.core.Signals.Registered.Init(t)
	var a attempts
	causes := make(chan error, 10)
	ran := make(chan string, 10)
	handler := func(hctx context.Context, p *Process) error {
		name := p.Queue() + "/" + string(p.Task())
		n := a.add(name)
		ran <- name
		if n > 1 || string(p.Task()) != "held" {
			return nil
		}
		<-hctx.Done()
		causes <- context.Cause(hctx)
		return nil // would finish it, were the worker not fenced
	}
	w := newWorker(t, c, fast)
	require.NoError(t, w.HandleQueues(ctx, []QueueSpec{
		{Queue: "a", Handler: handler},
		{Queue: "b", Handler: handler},
	}, PoolOptions{Concurrency: 2, Order: OrderShared}))
	for _, q := range []string{"a", "b"} {
		require.NoError(t, second(direct.Enqueue(ctx, q, []byte("held"))))
	}
	started := []string{recv(t, ran, testsignal.Wait, "a handler started"), recv(t, ran, testsignal.Wait, "a handler started")}
	assert.ElementsMatch(t, []string{"a/held", "b/held"}, started)
	oldID := w.ID()

	px.cut()
	k.run(fast.TTL) // the lease's deadline passes with no renewal
	for range 2 {
		cause := recv(t, causes, testsignal.Wait, "fenced")
		assert.ErrorIs(t, cause, ErrWorkerFenced)
	}
	px.restore()
	// The retry's backoff (at most a RenewInterval) ends; the clock stays
	// while the registration and its joins are in flight.
	k.run(fast.RenewInterval)
	newID := recv(t, c.core.Signals.Registered.C(), testsignal.Wait, "registered again")
	assert.NotEqual(t, oldID, newID, "registered again under a new id")
	ws, err := direct.Workers(ctx)
	require.NoError(t, err)
	slots := map[string][]QueueSlots{}
	for _, wi := range ws {
		slots[wi.ID] = wi.Slots
	}
	assert.Equal(t, []QueueSlots{{Queue: "a", Slots: 2}, {Queue: "b", Slots: 2}}, slots[newID], "the slots recorded again under the new id")

	k.run(fast.TTL + fast.RenewInterval) // the old id's lease runs out
	reclaimed(t, 2, c)
	again := []string{recv(t, ran, testsignal.Wait, "run again"), recv(t, ran, testsignal.Wait, "run again")}
	assert.ElementsMatch(t, []string{"a/held", "b/held"}, again, "the held tasks run again after the reclaim")
	for _, q := range []string{"a", "b"} {
		require.NoError(t, second(direct.Enqueue(ctx, q, []byte("new"))))
	}
	fresh := []string{recv(t, ran, testsignal.Wait, "new task"), recv(t, ran, testsignal.Wait, "new task")}
	assert.ElementsMatch(t, []string{"a/new", "b/new"}, fresh)
	ws, err = direct.Workers(ctx)
	require.NoError(t, err)
	require.Len(t, ws, 1)
	assert.Equal(t, newID, ws[0].ID)
	assert.Equal(t, w.ID(), ws[0].ID)
	assert.Equal(t, []QueueSlots{{Queue: "a", Slots: 2}, {Queue: "b", Slots: 2}}, ws[0].Slots, "the slots recorded again under the new id")
	settledQueue(t, direct, "a")
	settledQueue(t, direct, "b")
}

// A queue whose dequeues fail is retried after a backoff while the pool
// serves its other queues, even after it in strict order; it is served
// again once it works.
func TestPoolServesOtherQueuesWhileOneFails(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	// A string where the list of waiting tasks belongs: every dequeue on
	// the queue fails (WRONGTYPE).
	waiting := c.core.Store.Keys().Queue("broken").Waiting
	require.NoError(t, c.core.Redis.Do(ctx, c.core.Redis.B().Set().Key(waiting).Value("x").Build()).Error())
	got := make(chan string, 10)
	handler := func(_ context.Context, p *Process) error {
		got <- p.Queue() + "/" + string(p.Task())
		return nil
	}
	w := newWorker(t, c, WorkerOptions{})
	require.NoError(t, w.HandleQueues(ctx, []QueueSpec{
		{Queue: "broken", Handler: handler},
		{Queue: "fine", Handler: handler},
	}, PoolOptions{Concurrency: 1}))
	require.NoError(t, second(c.Enqueue(ctx, "fine", []byte("t"))))
	assert.Equal(t, "fine/t", recv(t, got, 5*time.Second, "the working queue served"))

	require.NoError(t, c.core.Redis.Do(ctx, c.core.Redis.B().Del().Key(waiting).Build()).Error())
	require.NoError(t, second(c.Enqueue(ctx, "broken", []byte("t"))))
	assert.Equal(t, "broken/t", recv(t, got, 5*time.Second, "the mended queue served"))
}
