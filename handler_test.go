package worqr

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/worqr/worqr/internal/clock"
	"github.com/worqr/worqr/internal/store"
	"github.com/worqr/worqr/internal/testsignal"
)

// attempts counts handler runs per task.
type attempts struct {
	mu sync.Mutex
	n  map[string]int
}

func (a *attempts) add(task string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.n == nil {
		a.n = make(map[string]int)
	}
	a.n[task]++
	return a.n[task]
}

func (a *attempts) get(task string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.n[task]
}

// settledQueue waits until a queue has nothing waiting or in flight. Both
// are read in one script: read one after the other, a task moving from
// waiting to in flight in between would be missed.
func settledQueue(t *testing.T, c *Client, queue string) {
	t.Helper()
	eventually(t, 10*time.Second, "queue "+queue+" settled", func() bool { return queueHolds(t, c, queue) == 0 })
}

// queueHolds is how many tasks a queue has waiting, in flight or delayed,
// read in one script.
func queueHolds(t *testing.T, c *Client, queue string) int64 {
	t.Helper()
	k := c.core.Store.Keys().Queue(queue)
	count := `return redis.call('LLEN', KEYS[1]) + redis.call('HLEN', KEYS[2]) + redis.call('ZCARD', KEYS[3])`
	n, err := c.core.Redis.Do(context.Background(), c.core.Redis.B().Eval().Script(count).Numkeys(3).Key(k.Waiting, k.Procs, k.Delayed).Build()).AsInt64()
	require.NoError(t, err)
	return n
}

func TestHandlerOutcomes(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	var a attempts
	errFlaky := errors.New("flaky")
	handler := func(_ context.Context, p *Process) error {
		task := string(p.Task())
		switch n := a.add(task); task {
		case "ok":
			return nil
		case "retry":
			if n == 1 {
				return errFlaky
			}
			return nil
		case "permanent":
			return Permanent(errFlaky)
		case "panic", "panic-permanent":
			if n == 1 {
				panic("boom")
			}
			return nil
		}
		return fmt.Errorf("unexpected task %q", task)
	}
	w := newWorker(t, c, WorkerOptions{})
	// Retried at once: the backoff is tested on its own.
	now := RetryPolicy{Backoff: func(int, error) time.Duration { return 0 }}
	require.NoError(t, w.Handle(ctx, "q", handler, HandleOptions{Retry: now}))
	require.NoError(t, w.Handle(ctx, "strict", handler, HandleOptions{PanicIsPermanent: true, Retry: now}))
	require.NoError(t, second(c.EnqueueBatch(ctx, "q", [][]byte{[]byte("ok"), []byte("retry"), []byte("permanent"), []byte("panic")})))
	require.NoError(t, second(c.Enqueue(ctx, "strict", []byte("panic-permanent"))))

	settledQueue(t, c, "q")
	settledQueue(t, c, "strict")
	assert.Equal(t, 1, a.get("ok"))
	assert.Equal(t, 2, a.get("retry"), "an error retries")
	assert.Equal(t, 1, a.get("permanent"), "a permanent error is not retried")
	assert.Equal(t, 2, a.get("panic"), "a panic is recovered and retried")
	assert.Equal(t, 1, a.get("panic-permanent"), "or dead-lettered, with PanicIsPermanent")
	assert.Equal(t, []string{"permanent"}, deadPayloads(t, c, "q"))
	assert.Equal(t, []string{"panic-permanent"}, deadPayloads(t, c, "strict"))
	assert.True(t, IsPermanent(Permanent(errFlaky)))
	assert.ErrorIs(t, Permanent(errFlaky), errFlaky)
	assert.Nil(t, Permanent(nil))
}

func TestConcurrencyLimitIsNeverExceeded(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	var now, peak atomic.Int32
	var done atomic.Int32
	w := newWorker(t, c, WorkerOptions{})
	require.NoError(t, w.Handle(ctx, "q", func(context.Context, *Process) error {
		n := now.Add(1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		time.Sleep(5 * time.Millisecond)
		now.Add(-1)
		done.Add(1)
		return nil
	}, HandleOptions{Concurrency: 3}))
	enqueueNumbered(t, c, "q", 60)
	eventually(t, 10*time.Second, "all handled", func() bool { return done.Load() == 60 })
	settledQueue(t, c, "q")
	assert.LessOrEqual(t, peak.Load(), int32(3))
	assert.Positive(t, peak.Load())
}

// holdUntilDone is a handler that holds its task until its context ends,
// reporting the cause.
func holdUntilDone(started chan<- string, causes chan<- error) Handler {
	return func(ctx context.Context, p *Process) error {
		started <- string(p.Task())
		<-ctx.Done()
		causes <- context.Cause(ctx)
		return ctx.Err()
	}
}

func TestCancelReachesAnInFlightHandlerAndIsNotRequeued(t *testing.T) {
	t.Parallel()
	b, c, ctx := setup(t)
	started, causes := make(chan string, 10), make(chan error, 10)
	w := newWorker(t, b.client(), WorkerOptions{})
	require.NoError(t, w.Handle(ctx, "q", holdUntilDone(started, causes), HandleOptions{}))
	require.NoError(t, second(c.Enqueue(ctx, "q", []byte("conn-1"))))
	recv(t, started, 5*time.Second, "handler started")

	_, err := c.Cancel(ctx, "q", []byte("conn-1"))
	require.NoError(t, err)
	assert.ErrorIs(t, recv(t, causes, 5*time.Second, "handler cancelled"), ErrTaskCancelled)
	settledQueue(t, c, "q")
}

func TestDeleteCancelsHandlersAndNothingComesBack(t *testing.T) {
	t.Parallel()
	b, c, ctx := setup(t)
	started, causes := make(chan string, 10), make(chan error, 10)
	w := newWorker(t, b.client(), WorkerOptions{})
	require.NoError(t, w.Handle(ctx, "q", holdUntilDone(started, causes), HandleOptions{Concurrency: 2}))
	require.NoError(t, second(c.EnqueueBatch(ctx, "q", [][]byte{[]byte("a"), []byte("b")})))
	recv(t, started, 5*time.Second, "first handler")
	recv(t, started, 5*time.Second, "second handler")

	_, err := c.DeleteQueue(ctx, "q")
	require.NoError(t, err)
	assert.ErrorIs(t, recv(t, causes, 5*time.Second, "first cancelled"), ErrQueueDeleted)
	assert.ErrorIs(t, recv(t, causes, 5*time.Second, "second cancelled"), ErrQueueDeleted)
	settledQueue(t, c, "q")
	qs, err := c.Queues(ctx)
	require.NoError(t, err)
	assert.NotContains(t, qs, "q")
}

// Shutdown stops taking at once, lets handlers finish within the grace
// period, then cancels the rest and returns their tasks to the front.
func TestShutdownDrainsThenCancelsThenRequeuesToTheFront(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	started, causes := make(chan string, 10), make(chan error, 10)
	finishing := make(chan struct{})
	var finished atomic.Bool
	w := newWorker(t, c, WorkerOptions{})
	require.NoError(t, w.Handle(ctx, "q", func(hctx context.Context, p *Process) error {
		if string(p.Task()) == "quick" {
			started <- "quick"
			<-finishing
			finished.Store(true)
			return nil
		}
		return holdUntilDone(started, causes)(hctx, p)
	}, HandleOptions{Concurrency: 3}))
	require.NoError(t, second(c.EnqueueBatch(ctx, "q", [][]byte{[]byte("s1"), []byte("quick"), []byte("s2"), []byte("never1"), []byte("never2")})))
	for range 3 {
		recv(t, started, 5*time.Second, "three handlers running")
	}
	id := w.ID()

	grace, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	go func() { time.Sleep(50 * time.Millisecond); close(finishing) }()
	err := w.Shutdown(grace)
	assert.ErrorIs(t, err, context.DeadlineExceeded, "the stubborn handlers outlasted the grace period")
	assert.True(t, finished.Load(), "the quick handler finished within it")
	assert.ErrorIs(t, recv(t, causes, time.Second, "s1 cancelled"), ErrShutdown)
	assert.ErrorIs(t, recv(t, causes, time.Second, "s2 cancelled"), ErrShutdown)
	assert.Equal(t, []string{"s1", "s2", "never1", "never2"}, waiting(t, c, "q"), "unfinished first, in order")
	procs, err := c.Processes(ctx, "q")
	require.NoError(t, err)
	assert.Empty(t, procs)
	assert.False(t, leaseLive(t, c, id), "deregistered")
	assert.NoError(t, w.Shutdown(ctx), "a second call")
	assert.NoError(t, w.Close(ctx), "and Close after it")
}

func TestShutdownWithinGraceReturnsNil(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	var started, handled atomic.Int32
	w := newWorker(t, c, WorkerOptions{})
	require.NoError(t, w.Handle(ctx, "q", func(context.Context, *Process) error {
		started.Add(1)
		time.Sleep(20 * time.Millisecond)
		handled.Add(1)
		return nil
	}, HandleOptions{Concurrency: 2}))
	enqueueNumbered(t, c, "q", 2)
	// Wait for the handlers themselves: a task dequeued whose handler has
	// not started yet goes back to the queue when Shutdown stops taking.
	eventually(t, 5*time.Second, "handlers started", func() bool { return started.Load() == 2 })
	require.NoError(t, w.Shutdown(ctx))
	assert.EqualValues(t, 2, handled.Load())
	settledQueue(t, c, "q")
}

// After fencing, a handler's context ends with ErrWorkerFenced and nothing
// is written for its process, not even tried (the handler's nil would
// finish it, and its old lease may still be live in Redis): the task
// comes back through the reclaim.
func TestFencedHandlerWritesNothing(t *testing.T) {
	t.Parallel()
	k := setupTimed(t, nil)
	direct, ctx := k.c, k.ctx
	px := newProxy(t)
	c := k.clientVia(px)
	k.beatsOf(c)
	c.core.Signals.Looked.Init(t)
	c.core.Signals.Registered.Init(t)
	var a attempts
	ran := make(chan int, 10)
	causes := make(chan error, 10)
	w := newWorker(t, c, fast)
	require.NoError(t, w.Handle(ctx, "q", func(hctx context.Context, p *Process) error {
		n := a.add(string(p.Task()))
		ran <- n
		if n > 1 {
			return nil // the second run, after the reclaim
		}
		<-hctx.Done()
		causes <- context.Cause(hctx)
		return nil // would finish it, were the worker not fenced
	}, HandleOptions{}))
	require.NoError(t, second(direct.Enqueue(ctx, "q", []byte("held"))))
	require.Equal(t, 1, recv(t, ran, testsignal.Wait, "handler running"))
	oldID := w.ID()
	finishes := countCalls(c, store.OpFinish)

	px.cut()
	k.run(fast.TTL) // the lease's deadline passes with no renewal
	cause := recv(t, causes, testsignal.Wait, "fenced")
	assert.ErrorIs(t, cause, ErrWorkerFenced)
	assert.ErrorIs(t, cause, ErrProcessLost)
	px.restore()
	// The retry's backoff (at most a RenewInterval) ends; the clock stays
	// while the registration is in flight.
	k.run(fast.RenewInterval)
	assert.NotEqual(t, oldID, recv(t, c.core.Signals.Registered.C(), testsignal.Wait, "registered again"))
	k.run(fast.TTL + fast.RenewInterval) // the old id's lease runs out
	reclaimed(t, 1, c)
	require.Equal(t, 2, recv(t, ran, testsignal.Wait, "run again after the reclaim"))
	settledQueue(t, direct, "q")
	assert.EqualValues(t, 1, finishes.Load(), "Finish calls: the second run's alone")
}

func TestHandledQueuesRefuseManualDequeue(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	work := make(chan int64, 10)
	w := newWorker(t, c, WorkerOptions{})
	require.NoError(t, w.Handle(ctx, "q", func(context.Context, *Process) error { return nil },
		HandleOptions{Events: Events{Work: func(_ string, n int64) { work <- n }}}))
	_, err := w.Dequeue(ctx, "q")
	assert.ErrorIs(t, err, ErrHandledQueue)
	assert.ErrorIs(t, w.StartWork(ctx, "q", Events{}), ErrAlreadyServing)
	assert.ErrorIs(t, w.Handle(ctx, "q", func(context.Context, *Process) error { return nil }, HandleOptions{}), ErrAlreadyServing)
	assert.ErrorIs(t, w.Handle(ctx, "x", nil, HandleOptions{}), ErrInvalidOptions)
	require.NoError(t, second(c.Enqueue(ctx, "q", []byte("t"))))
	assert.EqualValues(t, 1, recv(t, work, 5*time.Second, "the application's own callback still runs"))
	settledQueue(t, c, "q")
}

// hold is one interval during which a handler held a persistent task:
// by the system clock, which orders the handlers of every worker, and by
// the workers' clock (a Fake one's, when the test moves it), which leases
// run out by.
type hold struct {
	worker           string
	start, end       time.Time
	leased, unleased time.Time // start and end by the workers' clock
}

// ledger records hold intervals per persistent task.
type ledger struct {
	mu    sync.Mutex
	holds map[string][]hold
	open  map[string]int // running handlers per task
	// clock is the workers' clock; nil is the system's.
	clock clock.Clock
	// changed is closed, and replaced, whenever a hold starts or ends (or
	// poke is called), for await.
	changed chan struct{}
}

func (l *ledger) handler(name string) Handler {
	clk := clock.Or(l.clock)
	return func(ctx context.Context, p *Process) error {
		task := string(p.Task())
		l.mu.Lock()
		l.open[task]++
		i := len(l.holds[task])
		l.holds[task] = append(l.holds[task], hold{worker: name, start: time.Now(), leased: clk.Now()})
		l.notify()
		l.mu.Unlock()
		<-ctx.Done()
		l.mu.Lock()
		l.holds[task][i].end, l.holds[task][i].unleased = time.Now(), clk.Now()
		l.open[task]--
		l.notify()
		l.mu.Unlock()
		return ctx.Err()
	}
}

// notify wakes await. Callers hold l.mu.
func (l *ledger) notify() {
	if l.changed != nil {
		close(l.changed)
	}
	l.changed = make(chan struct{})
}

// poke wakes await for a change the ledger does not record.
func (l *ledger) poke() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.notify()
}

// await waits for cond to hold, looking again whenever a hold starts or
// ends (or poke is called).
func (l *ledger) await(t *testing.T, what string, cond func() bool) {
	t.Helper()
	timeout := time.After(testsignal.Wait)
	for {
		l.mu.Lock()
		if l.changed == nil {
			l.changed = make(chan struct{})
		}
		changed := l.changed // taken before cond looks: a change after it closes changed
		l.mu.Unlock()
		if cond() {
			return
		}
		select {
		case <-changed:
		case <-timeout:
			t.Fatalf("not within %v: %s", testsignal.Wait, what)
		}
	}
}

// lastHolder is the worker whose handler took a task last ("" if none).
func (l *ledger) lastHolder(task string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	hs := l.holds[task]
	if len(hs) == 0 {
		return ""
	}
	last := hs[0]
	for _, h := range hs[1:] {
		if h.start.After(last.start) {
			last = h
		}
	}
	return last.worker
}

// heldBy counts the tasks a worker's handlers hold.
func (l *ledger) heldBy(worker string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, hs := range l.holds {
		for _, h := range hs {
			if h.worker == worker && h.end.IsZero() {
				n++
			}
		}
	}
	return n
}

// holding reports whether a worker's handlers hold any task.
func (l *ledger) holding(worker string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, hs := range l.holds {
		for _, h := range hs {
			if h.worker == worker && h.end.IsZero() {
				return true
			}
		}
	}
	return false
}

// heldNow reports whether every task has a running handler.
func (l *ledger) heldNow(tasks []string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, task := range tasks {
		if l.open[task] != 1 {
			return false
		}
	}
	return true
}

// Persistent tasks: killing and fencing workers over and over, no task is
// ever held by two handlers at once, and every task is held again within
// TTL + one check interval (plus scheduling slack). Each worker holds two
// of the six tasks, and a fresh worker joins before each victim goes.
//
// Every hand-over is accounted for: the victims' tasks, and those of a
// worker that fenced itself unasked. With a 1 s TTL a loaded machine (the
// -race suites on two cores) can delay a survivor's renewals past its
// deadline; it then fences itself, as it must, and its tasks move too.
// On miniredis the workers run on a Fake clock that the test moves beat by
// beat, so none is late there.
func TestPersistentTasksAreNeverHeldTwice(t *testing.T) {
	t.Parallel()
	k := setupTimed(t, nil)
	admin, ctx := k.c, k.ctx
	l := &ledger{holds: make(map[string][]hold), open: make(map[string]int), clock: admin.core.Clock}
	tasks := make([][]byte, 6)
	names := make([]string, len(tasks))
	for i := range tasks {
		names[i] = fmt.Sprintf("conn-%d", i)
		tasks[i] = []byte(names[i])
	}

	type member struct {
		name string
		c    *Client
		w    *Worker
		px   *proxy
	}
	var fences sync.Mutex
	victims := make(map[string]bool) // guarded by fences
	unplanned := 0                   // tasks lost by fences of non-victims; guarded by fences
	var why []string                 // those fences; guarded by fences
	seq := 0
	join := func() member {
		seq++
		name := fmt.Sprint("w", seq)
		px := newProxy(t)
		opts := fast
		opts.OnFenced = func(ev FenceEvent) {
			defer l.poke()
			fences.Lock()
			defer fences.Unlock()
			if victims[name] {
				return
			}
			// The processes whose handler had started: one whose handler
			// had not yet started makes no hand-over.
			lost := 0
			for _, p := range ev.Lost {
				if l.lastHolder(string(p.Task())) == name {
					lost++
				}
			}
			unplanned += lost
			why = append(why, fmt.Sprintf("%s fenced itself unasked (%v), losing %d tasks", name, ev.Cause, lost))
		}
		c := k.clientVia(px)
		k.beatsOf(c)
		w := newWorker(t, c, opts)
		require.NoError(t, w.Handle(ctx, "conns", l.handler(name), HandleOptions{Concurrency: 2}))
		return member{name, c, w, px}
	}
	members := []member{join(), join(), join()}
	require.NoError(t, second(admin.EnqueueBatch(ctx, "conns", tasks)))
	l.await(t, "all held", func() bool { return l.heldNow(names) })

	planned := 0 // tasks the victims held when they went
	for round := range 6 {
		victim := members[0]
		members = append(members[1:], join())
		fences.Lock()
		victims[victim.name] = true
		fences.Unlock()
		planned += l.heldBy(victim.name)
		k.stopBeats(victim.c)
		if round%2 == 0 {
			crash(victim.w) // killed: no cleanup at all
		} else {
			victim.px.cut() // cut off: it fences itself, then is closed
			t.Cleanup(func() {
				victim.px.restore() // so that Close does not wait out the outage
				_ = victim.w.Close(context.Background())
			})
			// Its deadline, TTL less the margin after its last renewal
			// (the last beat): its handlers end before its lease runs out.
			k.run(fast.TTL - fast.TTL/10)
			l.await(t, "victim's handlers ended by fencing", func() bool { return !l.holding(victim.name) })
			k.run(fast.TTL / 10) // back on the beats' grid, where the next to join starts beating
		}
		k.run(fast.TTL + fast.RenewInterval)
		l.await(t, fmt.Sprint("round ", round, ": all held again"), func() bool { return l.heldNow(names) })
	}

	// A fence's callback runs on a goroutine of its own: it may come
	// after the tasks it lost were held again.
	reheld := func() int {
		l.mu.Lock()
		defer l.mu.Unlock()
		n := 0
		for _, hs := range l.holds {
			n += len(hs) - 1
		}
		return n
	}
	l.await(t, "every hand-over accounted for", func() bool {
		fences.Lock()
		defer fences.Unlock()
		return reheld() == planned+unplanned
	})
	fences.Lock()
	for _, w := range why {
		t.Log(w)
	}
	if unplanned == 0 {
		assert.Equal(t, 6*2, planned, "each round moves the victim's two tasks")
	}
	fences.Unlock()

	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for task, hs := range l.holds {
		sort.Slice(hs, func(i, j int) bool { return hs[i].start.Before(hs[j].start) })
		for i := 1; i < len(hs); i++ {
			prev := hs[i-1]
			require.False(t, prev.end.IsZero(), "%s: hold by %s never ended before %s took it", task, prev.worker, hs[i].worker)
			require.False(t, hs[i].start.Before(prev.end), "%s held by %s and %s at once", task, prev.worker, hs[i].worker)
			gap := hs[i].leased.Sub(prev.unleased)
			assert.Less(t, gap, fast.TTL+fast.RenewInterval+time.Second, "%s held again after %v", task, gap)
			n++
		}
	}
	t.Logf("%d hand-overs across %d tasks", n, len(l.holds))
}

// deadPayloads are the payloads of a queue's dead letters, oldest first.
func deadPayloads(t *testing.T, c *Client, queue string) []string {
	t.Helper()
	vals, err := c.core.Redis.Do(context.Background(), c.core.Redis.B().Zrange().Key(c.core.Store.Keys().Queue(queue).Dead).Min("0").Max("-1").Build()).AsStrSlice()
	require.NoError(t, err)
	out := make([]string, 0, len(vals))
	for _, v := range vals {
		task, ok := store.ParseTask(v)
		require.True(t, ok, v)
		out = append(out, task.Payload)
	}
	return out
}
