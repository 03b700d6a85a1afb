package worqr

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/worqr/worqr/internal/lifecycle"
	"github.com/worqr/worqr/internal/store"
	"github.com/worqr/worqr/internal/subscription"
	"github.com/worqr/worqr/internal/testsignal"
)

// idleFirst makes w's runtime the longest idle in the queue's idle set, so
// the next enqueue hands its task to w.
func idleFirst(t *testing.T, c *Client, queue string, w *Worker) {
	t.Helper()
	k := c.core.Store.Keys().Queue(queue)
	require.NoError(t, c.core.Redis.Do(context.Background(), c.core.Redis.B().Zadd().Key(k.Idle).ScoreMember().ScoreMember(1, w.ID()).Build()).Error())
}

// An enqueue that finds a runtime parked hands it the task in the event:
// the handler starts while every dequeue of the worker is held back, and
// its process is what a dequeue would have made.
func TestHandOffStartsTheTaskWithoutADequeue(t *testing.T) {
	t.Parallel()
	b, c, ctx := setup(t)
	producer := b.client()
	started := make(chan *Process, 1)
	w := newWorker(t, c, WorkerOptions{})
	require.NoError(t, w.Handle(ctx, "q", func(_ context.Context, p *Process) error {
		started <- p
		return nil
	}, HandleOptions{}))
	settledParking(t, c, "q", 1)
	held := make(chan struct{})
	var dequeues atomic.Int32
	c.core.Store.SetFault(func(ctx context.Context, op store.Op, queue string) error {
		if op == store.OpDequeue && queue == "q" {
			dequeues.Add(1)
			select {
			case <-held:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	})
	events := b.listen(c.core.Store.Keys().Queue("q").Channel)
	before := time.Now()
	id, err := producer.Enqueue(ctx, "q", []byte("t"))
	require.NoError(t, err)
	m := expectPrefix(t, events, "h")
	assert.True(t, strings.HasPrefix(m, "h"+w.ID()+","), "the event names the worker: %q", m)
	assert.True(t, strings.HasSuffix(m, ":t"), "the event carries the task: %q", m)

	p := recv(t, started, 5*time.Second, "the handler started with every dequeue held back")
	assert.Equal(t, id, p.TaskID())
	assert.Equal(t, "t", string(p.Task()))
	assert.Equal(t, 1, p.Attempt())
	assert.Empty(t, p.LastError())
	assert.Equal(t, w.ID(), p.Owner())
	assert.WithinDuration(t, before, p.EnqueuedAt(), 5*time.Second)
	t.Logf("dequeues sent meanwhile (held back): %d", dequeues.Load())
	close(held)
	settledQueue(t, producer, "q")
	// It parks again, for the next enqueue.
	settledParking(t, c, "q", 1)
	require.NoError(t, second(producer.Enqueue(ctx, "q", []byte("u"))))
	assert.Equal(t, "u", string(recv(t, started, 5*time.Second, "the next task").Task()))
	settledQueue(t, producer, "q")

	// The stats count the handed starts and their waits, as a dequeue's
	// (the worker's client writes its counts first when it reads them).
	eventually(t, 5*time.Second, "both starts counted", func() bool {
		st, err := c.Stats(ctx, "q", StatsOptions{})
		require.NoError(t, err)
		tot := st.Total()
		return tot.Counts.Started == 2 && tot.Wait.Count() == 2 && tot.Counts.Finished == 2
	})
}

// Large tasks are not handed over (the event goes to every subscriber):
// they wait in the queue for the named runtimes' dequeue.
func TestLargeTasksAreNotHandedOver(t *testing.T) {
	t.Parallel()
	b, c, ctx := setup(t)
	h := newHandledBy()
	w := newWorker(t, c, WorkerOptions{})
	require.NoError(t, w.Handle(ctx, "q", h.handler(w.ID()), HandleOptions{}))
	events := b.listen(c.core.Store.Keys().Queue("q").Channel)
	for _, size := range []int{store.MaxHandOffPayload, store.MaxHandOffPayload + 1} {
		settledParking(t, c, "q", 1)
		task := strings.Repeat("x", size)
		require.NoError(t, second(c.Enqueue(ctx, "q", []byte(task))))
		want := "h" + w.ID() + ","
		if size > store.MaxHandOffPayload {
			want = "w1:" + w.ID()
		}
		assert.True(t, strings.HasPrefix(recv(t, events, 5*time.Second, "the work event"), want), "size %d", size)
		assert.Len(t, recv(t, h.got, 5*time.Second, "handled"), size)
	}
	settledQueue(t, c, "q")
}

// A task on a paused queue is not handed over (the controls are the
// dequeue's to apply): it waits, and its event names the two longest-idle
// runtimes, as any enqueue's does, until the queue is resumed.
func TestNoHandOffOnAPausedQueue(t *testing.T) {
	t.Parallel()
	b, c, ctx := setup(t)
	h := newHandledBy()
	for range 3 {
		w := newWorker(t, c, WorkerOptions{})
		require.NoError(t, w.Handle(ctx, "q", h.handler(w.ID()), HandleOptions{}))
	}
	require.NoError(t, c.Pause(ctx, "q"))
	ids := settledParking(t, c, "q", 3)
	events := b.listen(c.core.Store.Keys().Queue("q").Channel)
	require.NoError(t, second(c.Enqueue(ctx, "q", []byte("x"))))
	assert.Equal(t, "w1:"+ids[0]+","+ids[1], expectPrefix(t, events, "w1"))
	assert.Equal(t, []string{"x"}, waiting(t, c, "q"))
	require.NoError(t, c.Resume(ctx, "q"))
	assert.Equal(t, "x", recv(t, h.got, 5*time.Second, "x run once resumed"))
	settledQueue(t, c, "q")
	h.mu.Lock()
	defer h.mu.Unlock()
	assert.Len(t, h.by["x"], 1)
}

// A runtime handed a task while it has no free slot (its own dequeue took
// the slot first) gives the task back to the front of the queue: it runs
// next, before a task enqueued after it, and as a first attempt.
func TestHandOffToAFullRuntimeGoesBackToTheFront(t *testing.T) {
	t.Parallel()
	b, c, ctx := setup(t)
	var mu sync.Mutex
	var order []string
	attempts := map[string]int{}
	release := make(chan struct{})
	w := newWorker(t, c, WorkerOptions{})
	require.NoError(t, w.Handle(ctx, "q", func(_ context.Context, p *Process) error {
		mu.Lock()
		order = append(order, string(p.Task()))
		attempts[string(p.Task())] = p.Attempt()
		mu.Unlock()
		if string(p.Task()) == "hold" {
			<-release
		}
		return nil
	}, HandleOptions{Concurrency: 1}))
	settledParking(t, c, "q", 1)
	require.NoError(t, second(c.Enqueue(ctx, "q", []byte("hold"))))
	eventually(t, 5*time.Second, "the slot taken", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(order) == 1
	})
	// The runtime, full, is in the idle set all the same, as when its
	// dequeue and the enqueue crossed.
	idleFirst(t, c, "q", w)
	givingBack := make(chan struct{})
	allow := make(chan struct{})
	var once sync.Once
	c.core.Store.SetFault(func(ctx context.Context, op store.Op, queue string) error {
		if op == store.OpRequeue && queue == "q" {
			once.Do(func() { close(givingBack) })
			select {
			case <-allow:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	})
	producer := b.client()
	require.NoError(t, second(producer.Enqueue(ctx, "q", []byte("x"))))
	recv(t, givingBack, 5*time.Second, "the handed task given back")
	require.NoError(t, second(producer.Enqueue(ctx, "q", []byte("y"))))
	close(allow)
	eventually(t, 5*time.Second, "x back in the queue, at the front", func() bool {
		got := waiting(t, producer, "q")
		return len(got) == 2 && got[0] == "x" && got[1] == "y"
	})
	close(release)
	settledQueue(t, producer, "q")
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, []string{"hold", "x", "y"}, order)
	assert.Equal(t, 1, attempts["x"], "a task given back unstarted is not counted as a start")
}

// raceRuntime is a runtime of one slot on a hooked client, for the race
// of a hand-off with the runtime's own dequeue: its handlers report their
// task (started) and hold their slot until release is closed; handed gets
// a value each time the dispatcher is done with an event of count 1 (a
// hand-off's), and most is the most handlers that ran at once.
type raceRuntime struct {
	w        *Worker
	hc       *Client
	h        *hooked
	started  chan string
	attempts sync.Map // task -> attempt
	handed   chan struct{}
	release  chan struct{}
	most     atomic.Int32
}

func newRaceRuntime(t *testing.T, b *backend, c *Client, ctx context.Context) *raceRuntime {
	t.Helper()
	hc, h := hookedClient(t, b)
	rr := &raceRuntime{hc: hc, h: h, started: make(chan string, 10), handed: make(chan struct{}, 10), release: make(chan struct{})}
	t.Cleanup(func() {
		select {
		case <-rr.release:
		default:
			close(rr.release)
		}
	})
	var running atomic.Int32
	rr.w = newWorker(t, hc, WorkerOptions{})
	require.NoError(t, rr.w.Handle(ctx, "q", func(hctx context.Context, p *Process) error {
		n := running.Add(1)
		defer running.Add(-1)
		for m := rr.most.Load(); n > m && !rr.most.CompareAndSwap(m, n); m = rr.most.Load() {
		}
		rr.attempts.Store(string(p.Task()), p.Attempt())
		rr.started <- string(p.Task())
		select {
		case <-rr.release:
		case <-hctx.Done():
		}
		return nil
	}, HandleOptions{Concurrency: 1, Events: Events{Work: func(_ string, n int64) {
		if n == 1 {
			rr.handed <- struct{}{}
		}
	}}}))
	settledParking(t, c, "q", 1)
	return rr
}

// holdDequeue holds the runtime's next dequeue: it signals entered and
// waits for allowScript before its script runs, then signals ran and
// waits for allowReply before the runtime has the reply.
func (rr *raceRuntime) holdDequeue() (entered, ran chan struct{}, allowScript, allowReply chan struct{}) {
	sha := rr.hc.core.Store.Scripts().Dequeue.SHA1()
	entered, ran = make(chan struct{}, 1), make(chan struct{}, 1)
	allowScript, allowReply = make(chan struct{}), make(chan struct{})
	var armed atomic.Bool
	armed.Store(true)
	rr.h.set(func(h *hooked) {
		h.do = func(ctx context.Context, cmd rueidis.Completed, next func() rueidis.RedisResult) rueidis.RedisResult {
			if scriptOf(cmd) != sha || !armed.CompareAndSwap(true, false) {
				return next()
			}
			entered <- struct{}{}
			select {
			case <-allowScript:
			case <-ctx.Done():
			}
			res := next()
			ran <- struct{}{}
			select {
			case <-allowReply:
			case <-ctx.Done():
			}
			return res
		}
	})
	return entered, ran, allowScript, allowReply
}

// The race of a hand-off with the runtime's own dequeue, for the last
// slot: the dequeue is on its way when an enqueue hands task x to the
// (still parked) runtime; y is enqueued next and the dequeue takes it.
// x was enqueued first and runs first: it waits for the dequeue's reply
// (one round trip; it is not given back meanwhile), then takes the slot,
// and y goes back to the front, unstarted, and runs next. No handler runs
// beyond the slot.
func TestHandOffDuringADequeueRunsBeforeTheTaskTheDequeueTook(t *testing.T) {
	t.Parallel()
	b, c, ctx := setup(t)
	rr := newRaceRuntime(t, b, c, ctx)
	entered, ran, allowScript, allowReply := rr.holdDequeue()
	givingBack, allowGive := make(chan struct{}, 10), make(chan struct{})
	var gaveBack atomic.Int32
	rr.hc.core.Store.SetFault(func(ctx context.Context, op store.Op, queue string) error {
		if op == store.OpRequeue && queue == "q" {
			gaveBack.Add(1)
			givingBack <- struct{}{}
			select {
			case <-allowGive:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	})
	// A work event (forged: the queue is empty; count 7, not a hand-off's)
	// sends the runtime's dequeue, which waits on its way; the runtime is
	// still parked.
	require.NoError(t, c.core.Store.Publish(ctx, "q", "w7"))
	recv(t, entered, 5*time.Second, "the dequeue on its way")
	events := b.listen(c.core.Store.Keys().Queue("q").Channel)
	require.NoError(t, second(c.Enqueue(ctx, "q", []byte("x"))))
	assert.True(t, strings.HasPrefix(expectPrefix(t, events, "h"), "h"+rr.w.ID()+","), "handed to the runtime")
	// The dispatcher is done with the hand-off, or (the race lost) it is
	// giving x back while the dequeue waits.
	select {
	case <-rr.handed:
	case <-givingBack:
	case <-time.After(5 * time.Second):
		t.Fatal("the hand-off not taken in")
	}
	require.NoError(t, second(c.Enqueue(ctx, "q", []byte("y"))))
	close(allowScript)
	recv(t, ran, 5*time.Second, "the dequeue's script ran")
	assert.Empty(t, waiting(t, c, "q"), "the dequeue took y")
	close(allowReply)
	close(allowGive)
	assert.Equal(t, "x", recv(t, rr.started, 5*time.Second, "a task started"), "the task enqueued first runs first")
	eventually(t, 5*time.Second, "y back at the front", func() bool {
		got := waiting(t, c, "q")
		return len(got) == 1 && got[0] == "y"
	})
	close(rr.release)
	assert.Equal(t, "y", recv(t, rr.started, 5*time.Second, "y started"))
	settledQueue(t, c, "q")
	assert.EqualValues(t, 1, rr.most.Load(), "one slot, one handler at a time")
	assert.EqualValues(t, 1, gaveBack.Load(), "one give-back: y's")
	for _, task := range []string{"x", "y"} {
		a, _ := rr.attempts.Load(task)
		assert.Equal(t, 1, a, "%s: a task given back unstarted is not counted as a start", task)
	}
}

// A task handed to a runtime whose dequeue, on its way, asked for the last
// slot waits for that dequeue's reply: when the dequeue found the queue
// empty, the slot is free and the task starts there, with no give-back
// and no second dequeue.
func TestHandOffHeldForADequeueThatFoundNothingStarts(t *testing.T) {
	t.Parallel()
	b, c, ctx := setup(t)
	rr := newRaceRuntime(t, b, c, ctx)
	entered, ran, allowScript, allowReply := rr.holdDequeue()
	var gaveBack atomic.Int32
	rr.hc.core.Store.SetFault(func(ctx context.Context, op store.Op, queue string) error {
		if op == store.OpRequeue && queue == "q" {
			gaveBack.Add(1)
		}
		return nil
	})
	require.NoError(t, c.core.Store.Publish(ctx, "q", "w7"))
	recv(t, entered, 5*time.Second, "the dequeue on its way")
	close(allowScript)
	recv(t, ran, 5*time.Second, "the dequeue found the queue empty (and parked the runtime)")
	events := b.listen(c.core.Store.Keys().Queue("q").Channel)
	require.NoError(t, second(c.Enqueue(ctx, "q", []byte("x"))))
	assert.True(t, strings.HasPrefix(expectPrefix(t, events, "h"), "h"+rr.w.ID()+","), "handed to the runtime")
	recv(t, rr.handed, 5*time.Second, "the dispatcher done with the hand-off")
	close(allowReply)
	assert.Equal(t, "x", recv(t, rr.started, 5*time.Second, "x started"))
	close(rr.release)
	settledQueue(t, c, "q")
	assert.Zero(t, gaveBack.Load(), "x was not given back")
	a, _ := rr.attempts.Load("x")
	assert.Equal(t, 1, a)
}

// A worker that stopped taking work (Shutdown's grace period, here with a
// handler still running) gives a task handed to it back; a parked peer
// runs it, once.
func TestHandOffToAStoppingWorkerGoesBack(t *testing.T) {
	t.Parallel()
	b, c, ctx := setup(t)
	h := newHandledBy()
	release := make(chan struct{})
	handler := func(name string) Handler {
		inner := h.handler(name)
		return func(ctx context.Context, p *Process) error {
			if string(p.Task()) == "slow" {
				<-release
			}
			return inner(ctx, p)
		}
	}
	stopping := newWorker(t, c, WorkerOptions{})
	require.NoError(t, stopping.Handle(ctx, "q", handler("stopping"), HandleOptions{Concurrency: 2}))
	settledParking(t, c, "q", 1)
	require.NoError(t, second(c.Enqueue(ctx, "q", []byte("slow"))))
	settledParking(t, c, "q", 1) // one slot still free: parked again
	peer := newWorker(t, b.client(), WorkerOptions{})
	require.NoError(t, peer.Handle(ctx, "q", handler("peer"), HandleOptions{}))
	settledParking(t, c, "q", 2)

	done := make(chan error, 1)
	go func() { done <- stopping.Shutdown(context.Background()) }()
	eventually(t, 5*time.Second, "draining", func() bool {
		stopping.core.Lock()
		defer stopping.core.Unlock()
		return stopping.core.Worker().Phase() == lifecycle.Draining
	})
	idleFirst(t, c, "q", stopping)
	events := b.listen(c.core.Store.Keys().Queue("q").Channel)
	require.NoError(t, second(c.Enqueue(ctx, "q", []byte("x"))))
	assert.True(t, strings.HasPrefix(expectPrefix(t, events, "h"), "h"+stopping.ID()+","), "handed to the stopping worker")
	assert.Equal(t, "x", recv(t, h.got, 5*time.Second, "x run"))
	close(release)
	assert.Equal(t, "slow", recv(t, h.got, 5*time.Second, "slow finished"))
	require.NoError(t, recv(t, done, 10*time.Second, "shut down"))
	settledQueue(t, c, "q")
	h.mu.Lock()
	defer h.mu.Unlock()
	assert.Equal(t, []string{"peer"}, h.by["x"])
	assert.Equal(t, []string{"stopping"}, h.by["slow"])
}

// A worker that dies after the enqueue handed it a task, before it heard
// of it: its lease covers the process, and a peer runs the task once it is
// reclaimed, once.
func TestHandOffToAWorkerThatDiedIsReclaimed(t *testing.T) {
	t.Parallel()
	k := setupTimed(t, nil)
	b, c, ctx := k.b, k.c, k.ctx
	h := newHandledBy()
	doomed := newWorker(t, c, fast)
	require.NoError(t, doomed.Handle(ctx, "q", h.handler("doomed"), HandleOptions{}))
	pc, peer := k.reclaimingPeer()
	require.NoError(t, peer.Handle(ctx, "q", h.handler("peer"), HandleOptions{}))
	settledParking(t, c, "q", 2)
	idleFirst(t, c, "q", doomed)
	id := doomed.ID()
	crash(doomed)
	events := b.listen(c.core.Store.Keys().Queue("q").Channel)
	require.NoError(t, second(c.Enqueue(ctx, "q", []byte("x"))))
	assert.True(t, strings.HasPrefix(expectPrefix(t, events, "h"), "h"+id+","), "handed to the dead worker")
	procs, err := c.Processes(ctx, "q")
	require.NoError(t, err)
	require.Len(t, procs, 1)
	assert.Equal(t, id, procs[0].Owner)
	k.run(fast.TTL + fast.RenewInterval)
	reclaimed(t, 1, pc)
	assert.Equal(t, "x", recv(t, h.got, testsignal.Wait, "x run after the reclaim"))
	settledQueue(t, c, "q")
	h.mu.Lock()
	defer h.mu.Unlock()
	assert.Equal(t, []string{"peer"}, h.by["x"])
}

// A hand-off event missed while the subscription was away leaves a process
// the worker does not know of: once subscribed again, the worker
// reconciles the queue, which gives the task back, and it runs once. The
// event, should it come after all, is ignored: the task does not run
// twice.
func TestMissedHandOffIsReconciled(t *testing.T) {
	t.Parallel()
	b, c, ctx := setup(t)
	producer := b.client()
	h := newHandledBy()
	w := newWorker(t, c, WorkerOptions{})
	require.NoError(t, w.Handle(ctx, "q", h.handler("w"), HandleOptions{}))
	settledParking(t, c, "q", 1)

	// The server drops the subscription; subscribing again waits.
	resubscribe := make(chan struct{})
	c.core.Store.SetFault(func(ctx context.Context, op store.Op, queue string) error {
		if op == store.OpSubscribe && queue == "q" {
			select {
			case <-resubscribe:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	})
	channel := c.core.Store.Keys().Queue("q").Channel
	unsubscribe := c.core.Redis.B().Unsubscribe().Channel(channel).Build()
	numsub := producer.core.Redis.B().PubsubNumsub().Channel(channel).Build().Pin()
	if b.cluster {
		unsubscribe = c.core.Redis.B().Sunsubscribe().Channel(channel).Build()
		numsub = producer.core.Redis.B().PubsubShardnumsub().Channel(channel).Build().Pin()
	}
	require.NoError(t, c.core.Redis.Do(ctx, unsubscribe).Error())
	eventually(t, 5*time.Second, "unsubscribed", func() bool {
		n, err := producer.core.Redis.Do(ctx, numsub).AsIntMap()
		require.NoError(t, err)
		return n[channel] == 0
	})
	events := b.listen(channel)
	require.NoError(t, second(producer.Enqueue(ctx, "q", []byte("x"))))
	m := expectPrefix(t, events, "h")
	assert.True(t, strings.HasPrefix(m, "h"+w.ID()+","), "handed to the deaf worker")
	procs, err := producer.Processes(ctx, "q")
	require.NoError(t, err)
	require.Len(t, procs, 1, "the process is the worker's in Redis")
	select {
	case task := <-h.got:
		t.Fatalf("%q ran although its event was missed", task)
	default:
	}

	close(resubscribe)
	assert.Equal(t, "x", recv(t, h.got, 10*time.Second, "x run after the reconciliation"))
	settledQueue(t, producer, "q")

	// The missed event arrives late; then a later task's, which the
	// dispatcher handles after it.
	e, ok := store.ParseEvent(m)
	require.True(t, ok)
	w.core.Lock()
	s := w.core.Served()["q"]
	w.core.Unlock()
	s.Sub.Push(subscription.Event{Event: e})
	settledParking(t, c, "q", 1)
	require.NoError(t, second(producer.Enqueue(ctx, "q", []byte("y"))))
	assert.Equal(t, "y", recv(t, h.got, 5*time.Second, "y run"))
	settledQueue(t, producer, "q")
	h.mu.Lock()
	defer h.mu.Unlock()
	assert.Len(t, h.by["x"], 1, "x ran once")
}

// Many single tasks enqueued at once to several idle workers (plain
// runtimes and pool members, with few slots, so some hand-offs find no
// slot and go back): every task runs exactly once, as a first attempt.
func TestHandOffsRunEveryTaskOnce(t *testing.T) {
	t.Parallel()
	b, c, ctx := setup(t)
	const producers, each = 8, 50
	var mu sync.Mutex
	runs := map[string]int{}
	running := map[string]int{} // handlers running, per worker and per worker/queue
	var retried, over atomic.Int32
	// handler runs a task for worker i, whose slots are capped (caps:
	// per worker, and per worker/queue).
	handler := func(i int, caps map[string]int) Handler {
		return func(_ context.Context, p *Process) error {
			keys := []string{fmt.Sprint(i), fmt.Sprint(i, "/", p.Queue())}
			mu.Lock()
			runs[string(p.Task())]++
			for _, k := range keys {
				if running[k]++; caps[k] > 0 && running[k] > caps[k] {
					over.Add(1)
				}
			}
			mu.Unlock()
			if p.Attempt() != 1 {
				retried.Add(1)
			}
			time.Sleep(time.Duration(len(p.Task())%3) * time.Millisecond)
			mu.Lock()
			for _, k := range keys {
				running[k]--
			}
			mu.Unlock()
			return nil
		}
	}
	for i := range 4 {
		w := newWorker(t, b.client(), WorkerOptions{})
		if i%2 == 0 {
			h := handler(i, map[string]int{fmt.Sprint(i): 2})
			require.NoError(t, w.Handle(ctx, "q", h, HandleOptions{Concurrency: 2}))
		} else {
			h := handler(i, map[string]int{fmt.Sprint(i): 2, fmt.Sprint(i, "/q"): 1})
			require.NoError(t, w.HandleQueues(ctx, []QueueSpec{
				{Queue: "other", Handler: h},
				{Queue: "q", Handler: h, MaxSlots: 1},
			}, PoolOptions{Concurrency: 2}))
		}
	}
	settledParking(t, c, "q", 4)
	events := b.listen(c.core.Store.Keys().Queue("q").Channel)
	var wg sync.WaitGroup
	for g := range producers {
		wg.Go(func() {
			for i := range each {
				q := "q"
				if i%10 == 9 {
					q = "other" // pool members busy with another queue
				}
				_, err := c.Enqueue(ctx, q, []byte(fmt.Sprintf("%s-%d-%d", q, g, i)))
				assert.NoError(t, err)
			}
		})
	}
	wg.Wait()
	eventually(t, 20*time.Second, "every task run", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(runs) == producers*each
	})
	settledQueue(t, c, "q")
	settledQueue(t, c, "other")
	handed := 0
	for len(events) > 0 {
		if strings.HasPrefix(<-events, "h") {
			handed++
		}
	}
	t.Logf("%d of %d tasks of q handed over", handed, producers*each*9/10)
	assert.Positive(t, handed)
	mu.Lock()
	defer mu.Unlock()
	for task, n := range runs {
		assert.Equal(t, 1, n, "task %s", task)
	}
	assert.Zero(t, retried.Load(), "no task started more than once")
	assert.Zero(t, over.Load(), "no worker ran more handlers than its slots")
}

// A hand-off that fills a runtime's last free slot takes it out of the
// idle set, and its own dequeue then finds no slot to ask for: once the
// handler returns the runtime must look again, and park, or later
// enqueues, finding nobody parked, would hand to nobody and the runtime
// would wait for a work event that a hand-off elsewhere never sends.
func TestARuntimeHandedItsLastSlotParksAgainOnceSlotsFree(t *testing.T) {
	t.Parallel()
	b, c, ctx := setup(t)
	producer := b.client()
	release := make(chan struct{})
	started := make(chan string, 4)
	handle := func(_ context.Context, p *Process) error {
		started <- string(p.Task())
		<-release
		return nil
	}
	for range 2 {
		w := newWorker(t, c, WorkerOptions{})
		require.NoError(t, w.Handle(ctx, "q", handle, HandleOptions{Concurrency: 1}))
	}
	settledParking(t, c, "q", 2)
	events := b.listen(c.core.Store.Keys().Queue("q").Channel)
	for _, task := range []string{"a", "b"} {
		require.NoError(t, second(producer.Enqueue(ctx, "q", []byte(task))))
		expectPrefix(t, events, "h") // handed over, not dequeued
		recv(t, started, 5*time.Second, "the handed task started")
	}
	// Both runtimes are full, and out of the idle set.
	settledParking(t, c, "q", 0)
	close(release)
	settledQueue(t, producer, "q")
	// Their slots free: both park again, for the next enqueues.
	settledParking(t, c, "q", 2)
	for _, task := range []string{"c", "d"} {
		require.NoError(t, second(producer.Enqueue(ctx, "q", []byte(task))))
		expectPrefix(t, events, "h")
		recv(t, started, 5*time.Second, "the next handed task started")
	}
	settledQueue(t, producer, "q")
}

// A handed task costs its runtime one dequeue, the one that parks it
// again (the fan-out trickle's three scripts a task: enqueue, dequeue,
// finish). The first dequeue after each hand-off is held until the
// handler has returned and its finish is on the way, so the handler's
// return always finds the queue marked as maybe holding tasks and wakes
// the loop: a wake-up that the short dequeue has answered since must not
// cost a second one. The loop dequeues one call at a time, so when the
// next round's dequeue comes, every one of this round's has been counted.
func TestAHandedTaskCostsOneDequeue(t *testing.T) {
	t.Parallel()
	b, c, ctx := setup(t)
	producer := b.client()
	started := make(chan string, 8)
	w := newWorker(t, c, WorkerOptions{})
	require.NoError(t, w.Handle(ctx, "q", func(_ context.Context, p *Process) error {
		started <- string(p.Task())
		return nil
	}, HandleOptions{Concurrency: 2}))
	settledParking(t, c, "q", 1)
	var dequeues atomic.Int64
	var hold atomic.Bool
	held := make(chan int64, 16)
	finished := make(chan struct{}, 16)
	over := make(chan struct{})
	t.Cleanup(func() { close(over) }) // before the worker closes
	c.core.Store.SetFault(func(_ context.Context, op store.Op, _ string) error {
		switch op {
		case store.OpFinish:
			finished <- struct{}{}
		case store.OpDequeue:
			n := dequeues.Add(1)
			if !hold.CompareAndSwap(true, false) {
				return nil
			}
			held <- n
			select {
			case <-finished:
			case <-over:
			}
		}
		return nil
	})
	events := b.listen(c.core.Store.Keys().Queue("q").Channel)
	const rounds = 5
	for i := range rounds {
		hold.Store(true)
		require.NoError(t, second(producer.Enqueue(ctx, "q", []byte(fmt.Sprint(i)))))
		expectPrefix(t, events, "h") // handed over: the runtime was parked
		recv(t, started, 5*time.Second, "the handed task started")
		n := recv(t, held, 5*time.Second, "the dequeue that parks the runtime again")
		require.Equal(t, int64(i+1), n, "dequeues by the start of round %d's", i+1)
		settledParking(t, c, "q", 1)
	}
}
