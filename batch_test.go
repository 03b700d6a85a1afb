package worqr

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/worqr/worqr/internal/clock"
	"github.com/worqr/worqr/internal/engine"
	"github.com/worqr/worqr/internal/store"
	"github.com/worqr/worqr/internal/testsignal"
)

// batchSeen is a batch handler's record of what it was given: each batch
// as its tasks' payloads, sent on a channel.
type batchSeen chan []string

func (s batchSeen) add(batch []*Process) {
	tasks := tasksOf(batch)
	slices.Sort(tasks) // the batch's order is the order its tasks' handlers joined it
	s <- tasks
}

// retryNow retries at once: the backoff is tested on its own.
var retryNow = RetryPolicy{Backoff: func(int, error) time.Duration { return 0 }}

// A batch starts as soon as it holds Size tasks, and holds no more: with
// a MaxWait no test waits out, that is the only way it starts.
func TestBatchFillsToSize(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	seen := make(batchSeen, 10)
	w := newWorker(t, c, WorkerOptions{})
	require.NoError(t, w.HandleBatch(ctx, "q", func(_ context.Context, batch []*Process) error {
		seen.add(batch)
		return nil
	}, BatchOptions{Size: 4, MaxWait: time.Hour}))
	enqueueNumbered(t, c, "q", 8)
	first := recv(t, seen, 5*time.Second, "the first batch")
	second := recv(t, seen, 5*time.Second, "the second batch")
	assert.Equal(t, []string{"t0000", "t0001", "t0002", "t0003"}, first)
	assert.Equal(t, []string{"t0004", "t0005", "t0006", "t0007"}, second)
	settledQueue(t, c, "q")
	assert.Empty(t, deadPayloads(t, c, "q"))
}

// A batch that is not full starts MaxWait after its first task came, not
// before, with what it holds; the worker holds no task in hand longer.
// The batch's timer runs on a Fake clock of its own, the only timer on
// it: Advance takes a timer due off the clock before it fires.
func TestBatchPartialStartsAfterMaxWait(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	c.core.Signals.Joined.Init(t)
	seen := make(batchSeen, 10)
	w := newWorker(t, c, WorkerOptions{})
	b, err := newBatcher(w, "q", func(_ context.Context, batch []*Process) error {
		seen.add(batch)
		return nil
	}, BatchOptions{Size: 5, MaxWait: 100 * time.Millisecond})
	require.NoError(t, err)
	fake := clock.NewFake(time.Now())
	b.clock = fake
	require.NoError(t, b.handle(ctx))
	enqueueNumbered(t, c, "q", 3)
	waitJoined(t, c, b.queue, 3) // three tasks in the batch
	require.Equal(t, 1, fake.Timers(), "the batch's timer")

	fake.Advance(99 * time.Millisecond)
	assert.Equal(t, 1, fake.Timers(), "the batch's timer fired before its MaxWait")
	assert.Equal(t, 3, b.pending())
	fake.Advance(time.Millisecond)
	assert.Zero(t, fake.Timers())
	assert.Equal(t, []string{"t0000", "t0001", "t0002"}, recv(t, seen, 5*time.Second, "the partial batch"))
	settledQueue(t, c, "q")
	assert.Zero(t, b.pending())
}

// A handler fails tasks of a batch through BatchErrors: a task that
// failed is retried alone (in a later batch), one that failed permanently
// alone is dead-lettered, and the others are finished.
func TestBatchFailsOneTaskAndFinishesTheOthers(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	c.core.Signals.Joined.Init(t)
	var a attempts
	seen := make(batchSeen, 10)
	errFlaky := errors.New("flaky")
	w := newWorker(t, c, WorkerOptions{})
	b, err := newBatcher(w, "q", func(_ context.Context, batch []*Process) error {
		seen.add(batch)
		errs := BatchErrors{}
		for _, p := range batch {
			switch task := string(p.Task()); {
			case a.add(task) == 1 && task == "flaky":
				errs[p] = errFlaky
			case task == "bad":
				errs[p] = Permanent(errFlaky)
			}
		}
		return errs
	}, BatchOptions{Size: 4, MaxWait: time.Hour, Retry: retryNow})
	require.NoError(t, err)
	fake := clock.NewFake(time.Now())
	b.clock = fake // the retry's batch starts when the test says
	require.NoError(t, b.handle(ctx))
	require.NoError(t, second(c.EnqueueBatch(ctx, "q", [][]byte{[]byte("ok1"), []byte("flaky"), []byte("bad"), []byte("ok2")})))
	assert.Equal(t, []string{"bad", "flaky", "ok1", "ok2"}, recv(t, seen, 5*time.Second, "the batch"))
	waitJoined(t, c, "q", 4) // the first batch's joins
	waitJoined(t, c, "q", 1) // the retry, alone in the next
	fake.Advance(time.Hour)
	assert.Equal(t, []string{"flaky"}, recv(t, seen, 5*time.Second, "the retry's batch"))
	settledQueue(t, c, "q")
	assert.Equal(t, []string{"bad"}, deadPayloads(t, c, "q"), "only the permanent failure is dead")
	for task, n := range map[string]int{"ok1": 1, "ok2": 1, "bad": 1, "flaky": 2} {
		assert.Equal(t, n, a.get(task), task)
	}
	select {
	case got := <-seen:
		t.Fatalf("a third batch %v", got)
	default:
	}
}

// A batch handler that panics fails every task of its batch with
// ErrHandlerPanicked: retried, or dead-lettered with PanicIsPermanent.
func TestBatchHandlerPanics(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	var a attempts
	lastErrs := make(chan string, 10)
	handler := func(_ context.Context, batch []*Process) error {
		if a.add(batch[0].Queue()) == 1 {
			panic("boom")
		}
		for _, p := range batch {
			lastErrs <- p.LastError()
		}
		return nil
	}
	w := newWorker(t, c, WorkerOptions{})
	require.NoError(t, w.HandleBatch(ctx, "q", handler, BatchOptions{Size: 2, MaxWait: time.Hour, Retry: retryNow}))
	require.NoError(t, w.HandleBatch(ctx, "strict", handler, BatchOptions{Size: 2, MaxWait: time.Hour, PanicIsPermanent: true}))
	require.NoError(t, second(c.EnqueueBatch(ctx, "q", [][]byte{[]byte("a"), []byte("b")})))
	require.NoError(t, second(c.EnqueueBatch(ctx, "strict", [][]byte{[]byte("a"), []byte("b")})))

	for range 2 {
		assert.True(t, strings.HasPrefix(recv(t, lastErrs, 5*time.Second, "the retry"), ErrHandlerPanicked.Error()))
	}
	settledQueue(t, c, "q")
	settledQueue(t, c, "strict")
	assert.Equal(t, 2, a.get("q"), "the panic retried the batch")
	assert.Empty(t, deadPayloads(t, c, "q"))
	assert.Equal(t, 1, a.get("strict"))
	assert.ElementsMatch(t, []string{"a", "b"}, deadPayloads(t, c, "strict"))
}

// A task cancelled while its batch runs: its process ends (the handler
// sees it), it is dropped whatever the handler returns, and the others of
// the batch are finished.
func TestBatchCancelledTask(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	running := make(chan []*Process, 1)
	release := make(chan struct{})
	batchCause := make(chan error, 1)
	w := newWorker(t, c, WorkerOptions{})
	require.NoError(t, w.HandleBatch(ctx, "q", func(bctx context.Context, batch []*Process) error {
		running <- batch
		<-release
		batchCause <- context.Cause(bctx)
		return nil
	}, BatchOptions{Size: 2, MaxWait: time.Hour}))
	require.NoError(t, second(c.EnqueueBatch(ctx, "q", [][]byte{[]byte("keep"), []byte("drop")})))
	batch := recv(t, running, 5*time.Second, "the batch")
	require.Len(t, batch, 2)
	if string(batch[0].Task()) == "drop" {
		batch[0], batch[1] = batch[1], batch[0]
	}
	keep, drop := batch[0], batch[1]

	_, err := c.Cancel(ctx, "q", []byte("drop"))
	require.NoError(t, err)
	recv(t, drop.Done(), 5*time.Second, "the cancelled process ended")
	assert.ErrorIs(t, drop.Err(), ErrTaskCancelled)
	assert.NoError(t, keep.Err(), "the other still runs")
	close(release)
	assert.NoError(t, recv(t, batchCause, 5*time.Second, "the batch returned"), "one task's cancel does not end the batch")
	settledQueue(t, c, "q")
	assert.Empty(t, deadPayloads(t, c, "q"))
	assert.Empty(t, waiting(t, c, "q"))
}

// Shutdown's grace period ending mid-batch ends the batch's context with
// ErrShutdown; the tasks the handler then fails go back to the front of
// the queue, in their order, before those never dequeued, and so do the
// tasks of a batch that was filling (Shutdown started it, and it outlasted
// the grace period too).
func TestBatchShutdownReturnsTasksToTheFront(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	c.core.Signals.Joined.Init(t)
	running := make(batchSeen, 2)
	causes := make(chan error, 2)
	w := newWorker(t, c, WorkerOptions{})
	hold := func(bctx context.Context, batch []*Process) error {
		running.add(batch)
		<-bctx.Done()
		causes <- context.Cause(bctx)
		return bctx.Err()
	}
	require.NoError(t, w.HandleBatch(ctx, "q", hold, BatchOptions{Size: 3, MaxWait: time.Hour}))
	b, err := newBatcher(w, "filling", hold, BatchOptions{Size: 3, MaxWait: time.Hour})
	require.NoError(t, err)
	require.NoError(t, b.handle(ctx))
	enqueueNumbered(t, c, "q", 5)
	enqueueNumbered(t, c, "filling", 2)
	assert.Equal(t, []string{"t0000", "t0001", "t0002"}, recv(t, running, 5*time.Second, "the batch"))
	waitJoined(t, c, b.queue, 2) // two tasks waiting for their batch

	grace, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	assert.ErrorIs(t, w.Shutdown(grace), context.DeadlineExceeded)
	assert.Equal(t, []string{"t0000", "t0001"}, recv(t, running, time.Second, "the filling batch started"))
	for range 2 {
		assert.ErrorIs(t, recv(t, causes, time.Second, "a batch cancelled"), ErrShutdown)
	}
	assert.Equal(t, []string{"t0000", "t0001", "t0002", "t0003", "t0004"}, waiting(t, c, "q"))
	assert.Equal(t, []string{"t0000", "t0001"}, waiting(t, c, "filling"))
	assert.Zero(t, b.pending())
}

// Shutdown starts a batch still filling at once, rather than let it wait
// out MaxWait: its tasks run within the grace period and are finished,
// not given back. MaxWait's timer is on a Fake clock of the batch's own
// that nothing advances: only the stop can start the batch.
func TestBatchShutdownStartsTheFillingBatch(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	c.core.Signals.Joined.Init(t)
	seen := make(batchSeen, 10)
	var a attempts
	w := newWorker(t, c, WorkerOptions{})
	b, err := newBatcher(w, "q", func(_ context.Context, batch []*Process) error {
		for _, p := range batch {
			a.add(string(p.Task()))
		}
		seen.add(batch)
		return nil
	}, BatchOptions{Size: 10, MaxWait: time.Hour})
	require.NoError(t, err)
	fake := clock.NewFake(time.Now())
	b.clock = fake
	require.NoError(t, b.handle(ctx))
	enqueueNumbered(t, c, "q", 3)
	waitJoined(t, c, b.queue, 3) // three tasks in the batch

	grace, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	require.NoError(t, w.Shutdown(grace), "the batch ran within the grace period")
	assert.Equal(t, []string{"t0000", "t0001", "t0002"}, recv(t, seen, time.Second, "the batch"))
	assert.Zero(t, fake.Timers(), "MaxWait's timer stopped")
	assert.Empty(t, waiting(t, c, "q"), "no task given back")
	settledQueue(t, c, "q")
	for _, task := range []string{"t0000", "t0001", "t0002"} {
		assert.Equal(t, 1, a.get(task), task)
	}
	select {
	case got := <-seen:
		t.Fatalf("another batch %v", got)
	default:
	}
}

// A task whose handler joins after the stop (dequeued before it, its
// middleware held here until the stop's batch ran) starts a batch of its
// own at once: it does not join the batch the stop started, which it
// would fill (Size 3), and so that batch is not started twice.
func TestBatchShutdownLateJoinerRunsAlone(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	c.core.Signals.Joined.Init(t)
	seen := make(batchSeen, 10)
	var a attempts
	release := make(chan struct{})
	late := make(chan struct{})
	w := newWorker(t, c, WorkerOptions{})
	hold := func(next Handler) Handler {
		return func(ctx context.Context, p *Process) error {
			if string(p.Task()) == "t0002" {
				close(late)
				<-release
			}
			return next(ctx, p)
		}
	}
	b, err := newBatcher(w, "q", func(_ context.Context, batch []*Process) error {
		for _, p := range batch {
			a.add(string(p.Task()))
		}
		seen.add(batch)
		return nil
	}, BatchOptions{Size: 3, MaxWait: time.Hour, Middleware: []Middleware{hold}})
	require.NoError(t, err)
	fake := clock.NewFake(time.Now())
	b.clock = fake
	require.NoError(t, b.handle(ctx))
	enqueueNumbered(t, c, "q", 3)
	recv(t, late, 5*time.Second, "the third task's handler")
	waitJoined(t, c, b.queue, 2) // two tasks in the batch

	grace, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- w.Shutdown(grace) }()
	assert.Equal(t, []string{"t0000", "t0001"}, recv(t, seen, 5*time.Second, "the batch the stop started"))
	close(release)
	assert.Equal(t, []string{"t0002"}, recv(t, seen, 5*time.Second, "the late task's batch"))
	require.NoError(t, recv(t, done, 5*time.Second, "Shutdown"))
	assert.Zero(t, fake.Timers(), "no MaxWait timer left")
	assert.Empty(t, waiting(t, c, "q"), "no task given back")
	for _, task := range []string{"t0000", "t0001", "t0002"} {
		assert.Equal(t, 1, a.get(task), task)
	}
	select {
	case got := <-seen:
		t.Fatalf("another batch %v", got)
	default:
	}
}

// StopWork gives no grace: a batch still filling is started and cancelled
// at once (it may not reach the handler), and its tasks go back to the
// front of the queue; StopWork does not wait for MaxWait.
func TestBatchStopWorkGivesTheFillingBatchBack(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	c.core.Signals.Joined.Init(t)
	causes := make(chan error, 1)
	w := newWorker(t, c, WorkerOptions{})
	b, err := newBatcher(w, "q", func(bctx context.Context, batch []*Process) error {
		<-bctx.Done()
		causes <- context.Cause(bctx)
		return bctx.Err()
	}, BatchOptions{Size: 3, MaxWait: time.Hour})
	require.NoError(t, err)
	fake := clock.NewFake(time.Now())
	b.clock = fake
	require.NoError(t, b.handle(ctx))
	enqueueNumbered(t, c, "q", 2)
	waitJoined(t, c, b.queue, 2) // two tasks in the batch

	require.NoError(t, w.StopWork(ctx, "q"))
	assert.Equal(t, []string{"t0000", "t0001"}, waiting(t, c, "q"))
	assert.Zero(t, b.pending())
	assert.Zero(t, fake.Timers(), "MaxWait's timer stopped")
	select {
	case cause := <-causes:
		assert.ErrorIs(t, cause, ErrShutdown)
	default: // cancelled before the batch reached the handler
	}
}

// A worker that fences itself mid-batch: the batch's context ends with
// ErrWorkerFenced once every process of it is lost, nothing is written for
// them (the handler's nil finishes nothing), and the tasks run again
// after the reclaim.
func TestBatchFencedWorkerWritesNothing(t *testing.T) {
	t.Parallel()
	k := setupTimed(t, nil)
	k.beats()
	c, ctx := k.c, k.ctx
	c.core.Signals.Looked.Init(t)
	c.core.Signals.Registered.Init(t)
	var a attempts
	running := make(chan []*Process, 1)
	causes := make(chan error, 1)
	// Finish calls made before the second run: that batch starts only
	// once the first's outcome is settled (one batch at a time).
	finishedBefore := make(chan int64, 1)
	finishes := countCalls(c, store.OpFinish)
	w := newWorker(t, c, fast)
	require.NoError(t, w.HandleBatch(ctx, "q", func(bctx context.Context, batch []*Process) error {
		if a.add("batch") > 1 {
			finishedBefore <- finishes.Load()
			return nil // the second run, after the reclaim
		}
		running <- batch
		<-bctx.Done()
		causes <- context.Cause(bctx)
		return nil // would finish them, were the worker not fenced
	}, BatchOptions{Size: 2, MaxWait: time.Hour}))
	enqueueNumbered(t, c, "q", 2)
	batch := recv(t, running, testsignal.Wait, "the batch")
	oldID := w.ID()

	w.core.Lease.Fence(oldID, errors.New("lease lost (test)"))
	cause := recv(t, causes, testsignal.Wait, "the batch's context ended")
	assert.ErrorIs(t, cause, ErrWorkerFenced)
	for _, p := range batch {
		assert.ErrorIs(t, p.Err(), ErrProcessLost)
	}
	assert.NotEqual(t, oldID, recv(t, c.core.Signals.Registered.C(), testsignal.Wait, "registered again"))
	k.run(fast.TTL + fast.RenewInterval) // the old id's lease runs out
	reclaimed(t, 2, c)
	assert.Zero(t, recv(t, finishedBefore, testsignal.Wait, "run again after the reclaim"), "Finish calls for the fenced batch")
	settledQueue(t, c, "q")
}

// A batch's Timeout ends its context with ErrTaskTimeout; the tasks it
// then fails are retried with that cause.
func TestBatchTimeout(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	var a attempts
	lastErrs := make(chan string, 2)
	w := newWorker(t, c, WorkerOptions{})
	require.NoError(t, w.HandleBatch(ctx, "q", func(bctx context.Context, batch []*Process) error {
		if a.add("batch") == 1 {
			<-bctx.Done()
			return context.Cause(bctx)
		}
		for _, p := range batch {
			lastErrs <- p.LastError()
		}
		return nil
	}, BatchOptions{Size: 2, MaxWait: time.Hour, Timeout: 20 * time.Millisecond, Retry: retryNow}))
	enqueueNumbered(t, c, "q", 2)
	for range 2 {
		assert.Contains(t, recv(t, lastErrs, 5*time.Second, "the retry"), ErrTaskTimeout.Error())
	}
	settledQueue(t, c, "q")
}

func TestBatchOptionsChecked(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	w := newWorker(t, c, WorkerOptions{})
	h := func(context.Context, []*Process) error { return nil }
	for name, opts := range map[string]BatchOptions{
		"size": {Size: -1}, "wait": {MaxWait: -1}, "batches": {Batches: -1}, "timeout": {Timeout: -1},
		"overflow": {Size: math.MaxInt / 2, Batches: 3},
	} {
		assert.ErrorIs(t, w.HandleBatch(ctx, "q", h, opts), ErrInvalidOptions, name)
	}
	assert.ErrorIs(t, w.HandleBatch(ctx, "q", nil, BatchOptions{}), ErrInvalidOptions)
	b, err := newBatcher(w, "q", h, BatchOptions{})
	require.NoError(t, err)
	assert.Equal(t, DefaultBatchSize, b.eo.Size)
	assert.Equal(t, DefaultBatchWait, b.eo.Wait)
	assert.Equal(t, 1, b.eo.Batches)
}

// BatchErrors says how many tasks failed and the first one's error, and
// is found through a wrapping error.
func TestBatchErrorsText(t *testing.T) {
	t.Parallel()
	a, b := &Process{rec: engine.Proc{ID: "p1"}}, &Process{rec: engine.Proc{ID: "p2"}}
	errs := BatchErrors{b: errors.New("late"), a: errors.New("bad row"), &Process{rec: engine.Proc{ID: "p3"}}: nil}
	assert.Equal(t, "worqr: batch: 2 task(s) failed; process p1: bad row", errs.Error())
	assert.Equal(t, "worqr: batch: no task failed", BatchErrors{a: nil}.Error())
	var got BatchErrors
	require.ErrorAs(t, fmt.Errorf("insert: %w", errs), &got)
	assert.Len(t, got, 3)
}

// waitJoined waits until the batch filling of queue holds n processes, as
// its handler calls joined it. The test turned the joined signal on
// before the tasks were enqueued.
func waitJoined(t *testing.T, c *Client, queue string, n int) {
	t.Helper()
	for {
		j := c.core.Signals.Joined.WaitOrTimeout()
		if j.Queue == queue && j.N == n {
			return
		}
	}
}
