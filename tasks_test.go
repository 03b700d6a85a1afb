package worqr

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/worqr/worqr/internal/store"
	"github.com/worqr/worqr/internal/testsignal"
)

// Every task gets an id when enqueued; ids count up in enqueue order and
// are never reused, even when the queue is deleted and made again.
func TestTaskIDs(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	first, err := c.Enqueue(ctx, "q", []byte("a"))
	require.NoError(t, err)
	batch, err := c.EnqueueBatch(ctx, "q", [][]byte{[]byte("b"), []byte("c"), []byte("d")})
	require.NoError(t, err)
	ids := append([]string{first}, batch...)
	for i := 1; i < len(ids); i++ {
		assert.Greater(t, hexID(t, ids[i]), hexID(t, ids[i-1]), "ids count up")
	}
	empty, err := c.EnqueueBatch(ctx, "q", nil)
	require.NoError(t, err)
	assert.Empty(t, empty)

	// Overlapping Enqueue calls are joined into one script call and still
	// get one id each.
	var wg sync.WaitGroup
	got := make([]string, 20)
	for i := range got {
		wg.Go(func() {
			id, err := c.Enqueue(ctx, "joined", []byte(strconv.Itoa(i)))
			assert.NoError(t, err)
			got[i] = id
		})
	}
	wg.Wait()
	tasks, err := c.Tasks(ctx, "joined", 0, -1)
	require.NoError(t, err)
	byPayload := make(map[string]string)
	for _, task := range tasks {
		byPayload[string(task.Payload)] = task.ID
	}
	for i, id := range got {
		assert.Equal(t, byPayload[strconv.Itoa(i)], id, "Enqueue %d returned its own task's id", i)
	}

	_, err = c.DeleteQueue(ctx, "q")
	require.NoError(t, err)
	again, err := c.Enqueue(ctx, "q", []byte("a"))
	require.NoError(t, err)
	assert.Greater(t, hexID(t, again), hexID(t, ids[len(ids)-1]), "a queue made again never reuses an id")
}

func hexID(t *testing.T, id string) uint64 {
	t.Helper()
	n, err := strconv.ParseUint(id, 16, 64)
	require.NoError(t, err, id)
	return n
}

// Every start of a task counts an attempt, carried across requeues and
// the reclaim of a dead worker; the id stays the task's.
func TestAttemptsAreCarriedAcrossRequeueAndReclaim(t *testing.T) {
	t.Parallel()
	k := setupTimed(t, nil)
	c, ctx := k.c, k.ctx
	id, err := c.Enqueue(ctx, "q", []byte("x"))
	require.NoError(t, err)
	dead := newWorker(t, c, fast)
	require.NoError(t, dead.StartWork(ctx, "q", Events{}))

	p := dequeueAll(t, dead, "q", 1)[0]
	assert.Equal(t, id, p.TaskID())
	assert.Equal(t, 1, p.Attempt())
	assert.WithinDuration(t, time.Now(), p.EnqueuedAt(), time.Minute)
	require.NoError(t, p.Requeue(ctx))
	tasks, err := c.Tasks(ctx, "q", 0, -1)
	require.NoError(t, err)
	require.Len(t, tasks, 1)
	assert.Equal(t, id, tasks[0].ID)
	assert.Equal(t, 1, tasks[0].Attempts, "a waiting task shows the starts so far")

	p = dequeueAll(t, dead, "q", 1)[0]
	assert.Equal(t, 2, p.Attempt())
	crash(dead)
	pc, peer := k.reclaimingPeer()
	require.NoError(t, peer.StartWork(ctx, "q", Events{}))
	k.run(fast.TTL + fast.RenewInterval)
	reclaimed(t, 1, pc)
	require.Len(t, waiting(t, c, "q"), 1)
	p = dequeueAll(t, peer, "q", 1)[0]
	assert.Equal(t, id, p.TaskID())
	assert.Equal(t, 3, p.Attempt(), "the run the dead worker started counts")
	assert.Equal(t, "x", string(p.Task()), "the payload comes back byte-exact")
	require.NoError(t, p.Finish(ctx))
}

func TestAtFront(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	require.NoError(t, second(c.EnqueueBatch(ctx, "q", [][]byte{[]byte("a"), []byte("b")})))
	require.NoError(t, second(c.EnqueueBatch(ctx, "q", [][]byte{[]byte("x"), []byte("y")}, AtFront())))
	require.NoError(t, second(c.Enqueue(ctx, "q", []byte("first"), AtFront(), nil)))
	require.NoError(t, second(c.Enqueue(ctx, "q", []byte("last"))))
	assert.Equal(t, []string{"first", "x", "y", "a", "b", "last"}, waiting(t, c, "q"))

	// A batch larger than one script call's 1,000 keeps its order too.
	big := make([][]byte, 1500)
	for i := range big {
		big[i] = []byte(strconv.Itoa(i))
	}
	ids, err := c.EnqueueBatch(ctx, "big", big, AtFront())
	require.NoError(t, err)
	got := waiting(t, c, "big")
	require.Len(t, got, 1500)
	for i := range got {
		require.Equal(t, strconv.Itoa(i), got[i])
	}
	for i := 1; i < len(ids); i++ {
		require.Greater(t, hexID(t, ids[i]), hexID(t, ids[i-1]))
	}
}

// Ids are never reused, even when a queue is deleted and made again while
// its counter runs ahead of the clock (a batch takes many ids at once).
func TestTaskIDsNotReusedAfterDelete(t *testing.T) {
	t.Parallel()
	b, c, ctx := setup(t)
	if b.mini != nil {
		// A clock that stands still: the counter runs ahead by the batch.
		b.mini.SetTime(time.Now())
	}
	tasks := make([][]byte, 5000)
	for i := range tasks {
		tasks[i] = []byte("x")
	}
	ids, err := c.EnqueueBatch(ctx, "q", tasks)
	require.NoError(t, err)
	_, err = c.DeleteQueue(ctx, "q")
	require.NoError(t, err)
	id, err := c.Enqueue(ctx, "q", []byte("new"))
	require.NoError(t, err)
	assert.Greater(t, hexID(t, id), hexID(t, ids[len(ids)-1]), "a deleted queue's ids are not given out again")
	w := newWorker(t, c, WorkerOptions{})
	require.NoError(t, w.StartWork(ctx, "q", Events{}))
	p := dequeueAll(t, w, "q", 1)[0]
	require.NoError(t, p.Finish(ctx))
}

// Cancel by payload removes every match and keeps the rest in order, with
// few matches and with many.
func TestCancelByPayloadKeepsOrder(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	for _, n := range []int{3, 40} {
		q := "q" + strconv.Itoa(n)
		var tasks [][]byte
		var want []string
		for i := range n {
			tasks = append(tasks, []byte("x"), []byte("y"+strconv.Itoa(i)))
			want = append(want, "y"+strconv.Itoa(i))
		}
		require.NoError(t, second(c.EnqueueBatch(ctx, q, tasks)))
		res, err := c.Cancel(ctx, q, []byte("x"))
		require.NoError(t, err)
		assert.Equal(t, CancelResult{Removed: int64(n)}, res, q)
		assert.Equal(t, want, waiting(t, c, q), q)
	}
}

// A Retry or a DeadLetter of a task dropped in Redis (cancelled, or its
// queue deleted) says so, as Requeue does, whether or not the worker has
// heard of the drop: the application learns its task will not run again,
// and its queue holds no copy of it.
func TestRetryAndDeadLetterOfADroppedTask(t *testing.T) {
	t.Parallel()
	b, c, ctx := setup(t)
	w := newWorker(t, b.client(), WorkerOptions{})
	ends := map[string]func(*Process) error{
		"retry":       func(p *Process) error { return p.Retry(ctx, 0, errors.New("again")) },
		"dead-letter": func(p *Process) error { return p.DeadLetter(ctx, errors.New("broken")) },
	}
	drops := map[string]struct {
		drop func(queue, id string) error
		want error
	}{
		"cancelled": {func(q, id string) error { return second(c.CancelTask(ctx, q, id)) }, ErrTaskCancelled},
		"deleted":   {func(q, _ string) error { return second(c.DeleteQueue(ctx, q)) }, ErrQueueDeleted},
	}
	for op, end := range ends {
		for how, d := range drops {
			q := op + "-" + how
			id, err := c.Enqueue(ctx, q, []byte("x"))
			require.NoError(t, err)
			require.NoError(t, w.StartWork(ctx, q, Events{}))
			p := dequeueAll(t, w, q, 1)[0]
			require.Equal(t, id, p.TaskID())
			require.NoError(t, d.drop(q, id))
			assert.ErrorIs(t, end(p), d.want, "%s of a task %s", op, how)
			info, err := c.QueueInfo(ctx, q)
			require.NoError(t, err)
			assert.Zero(t, info.Waiting+info.Delayed+info.InFlight+info.Dead, "%s of a task %s: the queue holds it (%+v)", op, how, info)
		}
	}
}

func TestCancelTask(t *testing.T) {
	t.Parallel()
	b, c, ctx := setup(t)
	ids, err := c.EnqueueBatch(ctx, "q", [][]byte{[]byte("same"), []byte("same"), []byte("same")})
	require.NoError(t, err)
	rec := newRecorder()
	w := newWorker(t, b.client(), WorkerOptions{})
	require.NoError(t, w.StartWork(ctx, "q", rec.events()))
	ps := dequeueAll(t, w, "q", 2)

	// A waiting task: removed, nobody told.
	res, err := c.CancelTask(ctx, "q", ids[2])
	require.NoError(t, err)
	assert.Equal(t, CancelResult{Removed: 1}, res)
	assert.Empty(t, waiting(t, c, "q"))

	// An in-flight task: marked, its holder told; its twin untouched.
	res, err = c.CancelTask(ctx, "q", ids[1])
	require.NoError(t, err)
	assert.Equal(t, CancelResult{Marked: 1}, res)
	assert.Equal(t, ids[1], recv(t, rec.cancel, 5*time.Second, "cancel event"))
	recv(t, ps[1].Done(), 5*time.Second, "holder's process ended")
	assert.ErrorIs(t, ps[1].Err(), ErrTaskCancelled)
	assert.NoError(t, ps[0].Status(ctx), "a task with the same payload is not touched")
	assert.ErrorIs(t, ps[1].Requeue(ctx), ErrTaskCancelled, "dropped, not requeued")

	// Again, or an id that never was: nothing to do.
	for _, id := range []string{ids[1], ids[2], "ffffffffffffff", "not hex"} {
		res, err = c.CancelTask(ctx, "q", id)
		require.NoError(t, err, id)
		assert.Zero(t, res, id)
	}
	_, err = c.CancelTask(ctx, "q", "")
	assert.ErrorIs(t, err, ErrInvalidOptions)
	require.NoError(t, ps[0].Finish(ctx))
	assert.Empty(t, waiting(t, c, "q"))
}

// Middleware wraps handlers: the worker's outermost, then the queue's.
func TestMiddleware(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	var mu sync.Mutex
	var calls []string
	record := func(s string) {
		mu.Lock()
		calls = append(calls, s)
		mu.Unlock()
	}
	tag := func(name string) Middleware {
		return func(next Handler) Handler {
			return func(ctx context.Context, p *Process) error {
				record(name + ">" + string(p.Task()))
				err := next(ctx, p)
				record(name + "<")
				return err
			}
		}
	}
	skip := func(next Handler) Handler {
		return func(ctx context.Context, p *Process) error {
			if string(p.Task()) == "skip" {
				return nil // finished without running the handler
			}
			return next(ctx, p)
		}
	}
	opts := WorkerOptions{Middleware: []Middleware{tag("w1"), tag("w2")}}
	w := newWorker(t, c, opts)
	done := make(chan string, 2)
	require.NoError(t, w.Handle(ctx, "q", func(_ context.Context, p *Process) error {
		record("handler")
		done <- string(p.Task())
		return nil
	}, HandleOptions{Concurrency: 1, Middleware: []Middleware{skip, tag("q")}}))
	require.NoError(t, second(c.Enqueue(ctx, "q", []byte("skip"))))
	require.NoError(t, second(c.Enqueue(ctx, "q", []byte("run"))))
	assert.Equal(t, "run", recv(t, done, 5*time.Second, "handler ran"))
	eventually(t, 5*time.Second, "all finished", func() bool {
		procs, err := c.Processes(ctx, "q")
		return err == nil && len(procs) == 0 && len(waiting(t, c, "q")) == 0
	})
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, []string{"w1>skip", "w2>skip", "w2<", "w1<", "w1>run", "w2>run", "q>run", "handler", "q<", "w2<", "w1<"}, calls)
}

// observer records what it is told.
type observer struct {
	mu       sync.Mutex
	enqueued []EnqueueEvent
	started  []StartEvent
	finished []FinishEvent
	reclaims []ReclaimEvent
	fences   []FenceEvent
	// told is closed, and forgotten, when an event is recorded: await
	// makes it.
	told chan struct{}
}

// record appends e to a list of the observer's, under its lock.
func record[E any](o *observer, list *[]E, e E) {
	o.mu.Lock()
	defer o.mu.Unlock()
	*list = append(*list, e)
	if o.told != nil {
		close(o.told)
		o.told = nil
	}
}

// await waits until cond (which may take o.mu) holds, looking again each
// time an event is recorded, and fails the test after within.
func (o *observer) await(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.After(within)
	for {
		o.mu.Lock()
		if o.told == nil {
			o.told = make(chan struct{})
		}
		told := o.told // taken before cond looks: an event after it closes told
		o.mu.Unlock()
		if cond() {
			return
		}
		select {
		case <-told:
		case <-deadline:
			t.Fatalf("not within %v: %s", within, what)
		}
	}
}

func (o *observer) ObserveEnqueue(_ context.Context, e EnqueueEvent) { record(o, &o.enqueued, e) }
func (o *observer) ObserveStart(_ context.Context, e StartEvent)     { record(o, &o.started, e) }
func (o *observer) ObserveFinish(_ context.Context, e FinishEvent)   { record(o, &o.finished, e) }
func (o *observer) ObserveReclaim(_ context.Context, e ReclaimEvent) { record(o, &o.reclaims, e) }
func (o *observer) ObserveFence(e FenceEvent)                        { record(o, &o.fences, e) }

// observed is setup with a client whose observer records what it is told.
func observed(t *testing.T) (*backend, *Client, *observer, context.Context) {
	t.Helper()
	b := newBackend(t)
	obs := &observer{}
	c, err := New(Options{Redis: b.redis(), Prefix: b.prefix, Logger: testLogger(t), Observer: obs})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	return b, c, obs, ctxT(t)
}

// outcomes are the outcomes of the finished events, by task id.
func (o *observer) outcomes() map[string][]Outcome {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := make(map[string][]Outcome)
	for _, e := range o.finished {
		out[e.TaskID] = append(out[e.TaskID], e.Outcome)
	}
	return out
}

func TestObserverSeesEveryOutcome(t *testing.T) {
	t.Parallel()
	obs := &observer{}
	k := setupTimed(t, func(o *Options) { o.Observer = obs })
	c, ctx := k.c, k.ctx
	k.beats()
	c.core.Signals.Looked.Init(t)
	// Time passes while a process runs, on the worker's clock, which times
	// it: a handler moves a Fake clock on a little, one at a time.
	var clockMu sync.Mutex
	passes := func(d time.Duration) {
		clockMu.Lock()
		defer clockMu.Unlock()
		if k.clk != nil {
			k.advance(time.Millisecond)
		}
		k.run(d)
	}

	errBoom := errors.New("boom")
	w := newWorker(t, c, fast)
	blocked := make(chan struct{})
	require.NoError(t, w.Handle(ctx, "q", func(ctx context.Context, p *Process) error {
		passes(0)
		switch string(p.Task()) {
		case "ok":
			return nil
		case "fail":
			return Permanent(errBoom)
		case "retry":
			if p.Attempt() == 1 {
				return errBoom
			}
			return nil
		case "cancel":
			blocked <- struct{}{}
			<-ctx.Done()
			return ctx.Err()
		}
		return nil
	}, HandleOptions{}))
	ids := make(map[string]string)
	for _, task := range []string{"ok", "fail", "retry", "cancel"} {
		id, err := c.Enqueue(ctx, "q", []byte(task))
		require.NoError(t, err)
		ids[task] = id
	}
	recv(t, blocked, 5*time.Second, "cancel's handler running")
	require.NoError(t, second(c.CancelTask(ctx, "q", ids["cancel"])))
	want := map[string][]Outcome{
		ids["ok"]:     {OutcomeSucceeded},
		ids["fail"]:   {OutcomeDead},
		ids["retry"]:  {OutcomeRetried, OutcomeSucceeded},
		ids["cancel"]: {OutcomeCancelled},
	}
	obs.await(t, 5*time.Second, "an outcome of each task", func() bool { return len(obs.outcomes()) == 4 })
	passes(DefaultBackoffBase) // the retry is due
	obs.await(t, 5*time.Second, "every outcome observed", func() bool { return len(obs.outcomes()[ids["retry"]]) == 2 })
	assert.Equal(t, want, obs.outcomes())

	// A dead worker's process: lost on its side, a reclaim on the peer's.
	dead := newWorker(t, c, fast)
	require.NoError(t, dead.StartWork(ctx, "m", Events{}))
	lostID, err := c.Enqueue(ctx, "m", []byte("lost"))
	require.NoError(t, err)
	p := dequeueAll(t, dead, "m", 1)[0]
	deadID := dead.ID()
	passes(0)
	crash(dead)
	assert.Equal(t, []Outcome{OutcomeLost}, obs.outcomes()[lostID])
	passes(fast.TTL + fast.RenewInterval)
	reclaimed(t, 1, c)
	obs.await(t, 5*time.Second, "the dead worker reclaimed", func() bool {
		obs.mu.Lock()
		defer obs.mu.Unlock()
		return len(obs.reclaims) > 0
	})

	obs.mu.Lock()
	defer obs.mu.Unlock()
	assert.Equal(t, ReclaimEvent{DeadWorker: deadID, Tasks: 1}, obs.reclaims[0])
	assert.Len(t, obs.enqueued, 5)
	for _, e := range obs.enqueued {
		assert.NoError(t, e.Err)
		assert.Len(t, e.TaskIDs, 1)
	}
	var starts []string
	for _, e := range obs.started {
		starts = append(starts, e.TaskID)
		if e.TaskID == lostID {
			assert.Equal(t, p.ID(), e.ProcessID)
			assert.Equal(t, deadID, e.WorkerID)
			assert.Equal(t, "m", e.Queue)
			assert.Equal(t, 1, e.Attempt)
		}
	}
	assert.ElementsMatch(t, []string{ids["ok"], ids["fail"], ids["retry"], ids["retry"], ids["cancel"], lostID}, starts)
	for _, e := range obs.finished {
		assert.Positive(t, e.Duration)
		if e.Outcome == OutcomeDead || e.Outcome == OutcomeRetried {
			assert.ErrorIs(t, e.Err, errBoom)
		}
	}
	assert.Empty(t, obs.fences)
}

// A dead outcome carries the dead letter's reason, the built-in ones and
// an application's own; every other outcome carries none.
func TestObserverSeesTheReasonOfADeadOutcome(t *testing.T) {
	t.Parallel()
	_, c, obs, ctx := observed(t)
	errBoom := errors.New("boom")
	w := newWorker(t, c, lasting)
	require.NoError(t, w.Handle(ctx, "q", func(ctx context.Context, p *Process) error {
		switch string(p.Task()) {
		case "permanent":
			return Permanent(errBoom)
		case "exhausted":
			return errBoom
		case "own":
			return WithReason("smtp-5xx", Permanent(errBoom))
		case "manual":
			return p.DeadLetter(ctx, errBoom)
		case "timeout":
			<-ctx.Done()
			return context.Cause(ctx)
		}
		return nil
	}, HandleOptions{Retry: RetryPolicy{MaxAttempts: 1}}))
	want := map[string]string{}
	for task, reason := range map[string]string{
		"ok": "", "permanent": ReasonPermanent, "exhausted": ReasonExhausted,
		"own": "smtp-5xx", "manual": ReasonManual, "timeout": ReasonTimeout,
	} {
		var opts []EnqueueOption
		if task == "timeout" {
			opts = append(opts, Timeout(time.Millisecond))
		}
		id, err := c.Enqueue(ctx, "q", []byte(task), opts...)
		require.NoError(t, err)
		want[id] = reason
	}
	obs.await(t, 5*time.Second, "every outcome observed", func() bool { return len(obs.outcomes()) == len(want) })
	obs.mu.Lock()
	defer obs.mu.Unlock()
	got := map[string]string{}
	for _, e := range obs.finished {
		got[e.TaskID] = e.Reason
		assert.Equal(t, want[e.TaskID] != "", e.Outcome == OutcomeDead, "task %s: outcome %s", e.TaskID, e.Outcome)
	}
	assert.Equal(t, want, got)
}

// A process ended by a cancel event and lost later (Close) is reported
// once, as lost.
func TestObserverSeesACancelledProcessLost(t *testing.T) {
	t.Parallel()
	_, c, obs, ctx := observed(t)
	w := newWorker(t, c, lasting)
	require.NoError(t, w.StartWork(ctx, "q", Events{}))
	id, err := c.Enqueue(ctx, "q", []byte("t"))
	require.NoError(t, err)
	p := dequeueAll(t, w, "q", 1)[0]
	require.NoError(t, second(c.CancelTask(ctx, "q", id)))
	recv(t, p.Done(), 5*time.Second, "the cancel ended the process")
	assert.Empty(t, obs.outcomes()[id], "ended, not yet settled")
	require.NoError(t, w.Close(ctx))
	assert.Equal(t, []Outcome{OutcomeLost}, obs.outcomes()[id])
}

// fenceCloser closes the worker when it hears it fenced.
type fenceCloser struct {
	w      chan *Worker
	closed chan error
}

func (o *fenceCloser) ObserveFence(FenceEvent) { o.closed <- (<-o.w).Close(context.Background()) }

// An observer may close the worker when it fences: it is called off the
// lease keeper's goroutine and its locks.
func TestObserveFenceMayCloseTheWorker(t *testing.T) {
	t.Parallel()
	b := newBackend(t)
	obs := &fenceCloser{w: make(chan *Worker, 1), closed: make(chan error, 1)}
	c, err := New(Options{Redis: b.redis(), Prefix: b.prefix, Logger: testLogger(t), Observer: obs})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	ctx := ctxT(t)
	w := newWorker(t, c, fast)
	obs.w <- w
	// The registry lease vanishes: the next renewal finds it gone.
	rdb := c.core.Store.Redis()
	require.NoError(t, rdb.Do(ctx, rdb.B().Zrem().Key(c.core.Store.Keys().Workers()).Member(w.ID()).Build()).Error())
	require.NoError(t, recv(t, obs.closed, 5*time.Second, "Close from ObserveFence returned"))
}

// The observer hears of fencing too, as OnFenced does.
func TestObserverSeesFencing(t *testing.T) {
	t.Parallel()
	obs := fenceTold{observer: &observer{}, told: make(chan FenceEvent, 10)}
	k := setupTimed(t, func(o *Options) { o.Observer = obs })
	c, ctx := k.c, k.ctx
	w := newWorker(t, c, fast)
	require.NoError(t, w.StartWork(ctx, "q", Events{}))
	id := w.ID()
	freeze(w) // no renewals: the lease runs out, and the next call finds it gone
	k.idle(fast.TTL + time.Millisecond)
	require.False(t, leaseLive(t, c, id), "lease expired")
	_, err := w.Dequeue(ctx, "q")
	require.ErrorIs(t, err, ErrWorkerFenced)
	ev := recv(t, obs.told, testsignal.Wait, "told")
	assert.Equal(t, id, ev.WorkerID)
	assert.ErrorIs(t, ev.Cause, ErrWorkerFenced)
	obs.mu.Lock()
	defer obs.mu.Unlock()
	assert.Len(t, obs.fences, 1)
}

// fenceTold is an observer that also sends each fence it hears of on
// told: the observer is told on a goroutine of its own.
type fenceTold struct {
	*observer
	told chan FenceEvent
}

func (o fenceTold) ObserveFence(e FenceEvent) {
	o.observer.ObserveFence(e)
	o.told <- e
}

// A process tells when its task became due for its start, by the Redis
// clock: its enqueue, its delay's due time, a retry's backoff's end, or
// when it went back to wait (a requeue, a dead letter requeued). Each is
// checked against the Redis clock's readings the process ids carry.
func TestProcessDueAt(t *testing.T) {
	t.Parallel()
	b, c, ctx := setup(t)
	w := newWorker(t, b.client(), WorkerOptions{})
	require.NoError(t, w.StartWork(ctx, "q", Events{}))
	take := func() *Process {
		t.Helper()
		var p *Process
		eventually(t, 10*time.Second, "a task due", func() bool {
			var err error
			p, err = w.Dequeue(ctx, "q")
			if errors.Is(err, ErrNoTask) {
				return false
			}
			require.NoError(t, err)
			return true
		})
		return p
	}
	started := func(p *Process) time.Time { return time.UnixMicro(int64(store.PIDSeq(p.ID()))) }

	_, err := c.Enqueue(ctx, "q", []byte("now"))
	require.NoError(t, err)
	p := take()
	assert.Equal(t, p.EnqueuedAt(), p.DueAt(), "due at its enqueue")
	require.NoError(t, p.Finish(ctx))

	_, err = c.Enqueue(ctx, "q", []byte("later"), In(200*time.Millisecond))
	require.NoError(t, err)
	p = take()
	assert.Equal(t, p.EnqueuedAt().Add(200*time.Millisecond), p.DueAt(), "due when its delay ends")

	require.NoError(t, p.Retry(ctx, 150*time.Millisecond, errors.New("again")))
	retried := take()
	assert.False(t, retried.DueAt().Before(started(p).Add(150*time.Millisecond)), "due when the backoff ends")
	assert.False(t, retried.DueAt().After(started(retried)))

	require.NoError(t, retried.Requeue(ctx))
	requeued := take()
	assert.True(t, requeued.DueAt().After(started(retried)), "due when it was requeued")
	assert.False(t, requeued.DueAt().After(started(requeued)))

	require.NoError(t, requeued.DeadLetter(ctx, errors.New("broken")))
	ok, err := c.RequeueDeadLetter(ctx, "q", requeued.TaskID())
	require.NoError(t, err)
	require.True(t, ok)
	revived := take()
	assert.True(t, revived.DueAt().After(started(requeued)), "due when its dead letter was requeued")
	assert.False(t, revived.DueAt().After(started(revived)))
	assert.Equal(t, p.EnqueuedAt(), revived.EnqueuedAt())
}

// CancelResult.Removed counts the tasks removed before they started,
// delayed ones with the waiting ones, as its doc says; Marked the
// in-flight ones.
func TestCancelRemovedCountsWaitingAndDelayed(t *testing.T) {
	t.Parallel()
	b, c, ctx := setup(t)
	delayed, err := c.Enqueue(ctx, "q", []byte("x"), In(time.Hour))
	require.NoError(t, err)
	res, err := c.CancelTask(ctx, "q", delayed)
	require.NoError(t, err)
	assert.Equal(t, CancelResult{Removed: 1}, res)

	require.NoError(t, second(c.EnqueueBatch(ctx, "q", [][]byte{[]byte("x"), []byte("x")})))
	require.NoError(t, second(c.Enqueue(ctx, "q", []byte("x"), In(time.Hour))))
	w := newWorker(t, b.client(), WorkerOptions{})
	require.NoError(t, w.StartWork(ctx, "q", Events{}))
	dequeueAll(t, w, "q", 1)
	res, err = c.Cancel(ctx, "q", []byte("x"))
	require.NoError(t, err)
	assert.Equal(t, CancelResult{Removed: 2, Marked: 1}, res, "one waiting and one delayed removed, one in flight marked")
}

// Start and finish events carry the task's kind, "" for a task without one.
func TestObserverSeesTheKind(t *testing.T) {
	t.Parallel()
	_, c, obs, ctx := observed(t)
	w := newWorker(t, c, lasting)
	require.NoError(t, w.Handle(ctx, "q", func(context.Context, *Process) error { return nil }, HandleOptions{}))
	kinded, err := c.Enqueue(ctx, "q", []byte("a"), Kind("email.welcome"))
	require.NoError(t, err)
	plain, err := c.Enqueue(ctx, "q", []byte("b"))
	require.NoError(t, err)
	obs.await(t, 5*time.Second, "both finished", func() bool { return len(obs.outcomes()) == 2 })

	want := map[string]string{kinded: "email.welcome", plain: ""}
	obs.mu.Lock()
	defer obs.mu.Unlock()
	require.Len(t, obs.started, 2)
	for _, e := range obs.started {
		assert.Equal(t, want[e.TaskID], e.Kind, "start of %s", e.TaskID)
	}
	require.Len(t, obs.finished, 2)
	for _, e := range obs.finished {
		assert.Equal(t, want[e.TaskID], e.Kind, "finish of %s", e.TaskID)
	}
}

// CancelWaiting removes waiting tasks in bulk, by id, by kind or all,
// leaving delayed ones; a removed task's unique key is free again and a
// retained one is no longer waited for; bad selections are refused.
func TestCancelWaiting(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	mail, err := c.EnqueueBatch(ctx, "q", [][]byte{[]byte("m1"), []byte("m2")}, Kind("mail"))
	require.NoError(t, err)
	kept, err := c.Enqueue(ctx, "q", []byte("sms"), Kind("sms"))
	require.NoError(t, err)
	plain, err := c.Enqueue(ctx, "q", []byte("plain"), Unique("only-one"), Retain(time.Minute))
	require.NoError(t, err)
	_, err = c.Enqueue(ctx, "q", []byte("later"), Kind("mail"), In(time.Hour))
	require.NoError(t, err)

	removed, more, err := c.CancelWaiting(ctx, "q", WaitingSelection{Kind: "mail"})
	require.NoError(t, err)
	assert.Equal(t, int64(2), removed)
	assert.False(t, more)
	ts, err := c.Tasks(ctx, "q", 0, -1)
	require.NoError(t, err)
	require.Len(t, ts, 2)
	assert.Equal(t, []string{kept, plain}, []string{ts[0].ID, ts[1].ID})
	n, err := c.DelayedLen(ctx, "q")
	require.NoError(t, err)
	assert.Equal(t, int64(1), n, "the delayed task of that kind stays")

	removed, _, err = c.CancelWaiting(ctx, "q", WaitingSelection{IDs: []string{plain, mail[0]}})
	require.NoError(t, err)
	assert.Equal(t, int64(1), removed, "the one still waiting")
	// No outcome will come: a Wait ends at once (a retained task still
	// listed would make it wait).
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, err = c.Wait(wctx, "q", plain)
	require.ErrorIs(t, err, ErrNoTask)
	_, err = c.Enqueue(ctx, "q", []byte("plain"), Unique("only-one"))
	require.NoError(t, err, "the unique key is free")

	removed, _, err = c.CancelWaiting(ctx, "q", WaitingSelection{})
	require.NoError(t, err)
	assert.Equal(t, int64(2), removed)
	l, err := c.QueueLen(ctx, "q")
	require.NoError(t, err)
	assert.Zero(t, l)

	for _, sel := range []WaitingSelection{{IDs: []string{""}}, {IDs: make([]string, MaxCancelIDs+1)}, {Kind: "a,b"}} {
		_, _, err := c.CancelWaiting(ctx, "q", sel)
		require.ErrorIs(t, err, ErrInvalidOptions)
	}
}

// RunNow moves a delayed task to the back of its queue at once, and a
// worker takes it; an id not delayed (unknown, or waiting already) is
// false; an empty id is refused.
func TestRunNow(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	first, err := c.Enqueue(ctx, "q", []byte("first"))
	require.NoError(t, err)
	later, err := c.Enqueue(ctx, "q", []byte("later"), In(time.Hour))
	require.NoError(t, err)
	for _, id := range []string{"unknown", first} {
		ok, err := c.RunNow(ctx, "q", id)
		require.NoError(t, err)
		assert.False(t, ok, id)
	}
	ok, err := c.RunNow(ctx, "q", later)
	require.NoError(t, err)
	assert.True(t, ok)
	n, err := c.DelayedLen(ctx, "q")
	require.NoError(t, err)
	assert.Zero(t, n)
	ts, err := c.Tasks(ctx, "q", 0, -1)
	require.NoError(t, err)
	require.Len(t, ts, 2)
	assert.Equal(t, []string{first, later}, []string{ts[0].ID, ts[1].ID}, "at the back")
	_, err = c.RunNow(ctx, "q", "")
	require.ErrorIs(t, err, ErrInvalidOptions)
}

// Outcomes lists the kept outcomes, latest to expire first, cut as asked;
// tasks not retained, or not ended, are not listed.
func TestOutcomesListed(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	w, err := c.NewWorker(ctx, WorkerOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = w.Close(context.Background()) })
	require.NoError(t, w.StartWork(ctx, "q", Events{}))
	short, err := c.Enqueue(ctx, "q", []byte("a"), Retain(time.Minute))
	require.NoError(t, err)
	long, err := c.Enqueue(ctx, "q", []byte("b"), Retain(time.Hour))
	require.NoError(t, err)
	_, err = c.Enqueue(ctx, "q", []byte("c")) // not retained
	require.NoError(t, err)
	pending, err := c.Enqueue(ctx, "q", []byte("d"), Retain(time.Hour))
	require.NoError(t, err)
	for range 3 {
		p, err := w.Dequeue(ctx, "q")
		require.NoError(t, err)
		if p.TaskID() == long {
			require.NoError(t, p.DeadLetter(ctx, errors.New("a long error text")))
			continue
		}
		p.SetResult([]byte("the whole result"))
		require.NoError(t, p.Finish(ctx))
	}
	os, err := c.Outcomes(ctx, "q", 0, 10, PayloadPrefix(4))
	require.NoError(t, err)
	require.Len(t, os, 2)
	assert.Equal(t, long, os[0].ID)
	assert.Equal(t, OutcomeDead, os[0].Status)
	assert.Equal(t, "a lo", os[0].Error)
	assert.Equal(t, len("a long error text"), os[0].Size)
	assert.Equal(t, short, os[1].ID)
	assert.Equal(t, OutcomeSucceeded, os[1].Status)
	assert.Equal(t, "the ", string(os[1].Result))
	assert.NotEqual(t, pending, os[1].ID)
	os, err = c.Outcomes(ctx, "q", 1, 1)
	require.NoError(t, err)
	require.Len(t, os, 1)
	assert.Equal(t, "the whole result", string(os[0].Result))
	for _, bad := range [][2]int{{-1, 1}, {0, 0}, {0, 1001}} {
		_, err := c.Outcomes(ctx, "q", bad[0], bad[1])
		require.ErrorIs(t, err, ErrInvalidOptions)
	}
}
