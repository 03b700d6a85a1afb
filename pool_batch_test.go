package worqr

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/worqr/worqr/internal/engine"
)

// A pool serves a batched queue and a plain one together: the batched
// queue's tasks come to its handler in batches of Size, and each task of
// a batch is settled on its own (finished, retried under the batch's
// Retry, dead-lettered when Permanent or out of attempts), while the
// plain queue's tasks run one by one.
func TestPoolBatchedAndPlainQueue(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	c.core.Signals.Joined.Init(t)
	var a attempts
	seen := make(batchSeen, 10)
	mails := make(chan string, 10)
	errFlaky := errors.New("flaky")
	w := newWorker(t, c, WorkerOptions{})
	require.NoError(t, w.HandleQueues(ctx, []QueueSpec{
		{Queue: "rows", Batch: func(_ context.Context, batch []*Process) error {
			seen.add(batch)
			errs := BatchErrors{}
			for _, p := range batch {
				switch task := string(p.Task()); {
				case a.add(task) == 1 && task == "flaky":
					errs[p] = errFlaky
				case task == "bad":
					errs[p] = Permanent(errFlaky)
				case task == "doomed":
					errs[p] = errFlaky
				}
			}
			return errs
		}, BatchOptions: BatchOptions{Size: 4, MaxWait: time.Hour, Retry: RetryPolicy{MaxAttempts: 2, Backoff: retryNow.Backoff}}},
		{Queue: "mail", Handler: func(_ context.Context, p *Process) error {
			mails <- string(p.Task())
			return nil
		}},
	}, PoolOptions{Concurrency: 8, Order: OrderShared}))

	require.NoError(t, second(c.EnqueueBatch(ctx, "rows", [][]byte{[]byte("ok1"), []byte("flaky"), []byte("bad"), []byte("doomed")})))
	require.NoError(t, second(c.EnqueueBatch(ctx, "mail", [][]byte{[]byte("m1"), []byte("m2")})))
	assert.Equal(t, []string{"bad", "doomed", "flaky", "ok1"}, recv(t, seen, 5*time.Second, "the batch"))
	waitJoined(t, c, "rows", 4) // the first batch's joins
	waitJoined(t, c, "rows", 2) // the two retries, in the next batch
	require.NoError(t, second(c.EnqueueBatch(ctx, "rows", [][]byte{[]byte("ok2"), []byte("ok3")})))
	assert.Equal(t, []string{"doomed", "flaky", "ok2", "ok3"}, recv(t, seen, 5*time.Second, "the retries' batch"))
	got := []string{recv(t, mails, 5*time.Second, "a mail"), recv(t, mails, 5*time.Second, "a mail")}
	assert.ElementsMatch(t, []string{"m1", "m2"}, got, "the plain queue's tasks, one call each")

	settledQueue(t, c, "rows")
	settledQueue(t, c, "mail")
	assert.ElementsMatch(t, []string{"bad", "doomed"}, deadPayloads(t, c, "rows"), "the permanent failure, and the one out of attempts")
	assert.Empty(t, deadPayloads(t, c, "mail"))
	for task, n := range map[string]int{"ok1": 1, "ok2": 1, "bad": 1, "flaky": 2, "doomed": 2, "ok3": 1} {
		assert.Equal(t, n, a.get(task), task)
	}
}

// A batched queue holds at most Size × Batches of the pool's slots,
// counted in tasks as any queue's: first in strict order, it takes that
// many and leaves the rest of the pool to the next queue, and the pool
// never runs more than its Concurrency.
func TestPoolBatchedQueueHoldsItsSlots(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	var rows, all peak
	release := make(chan struct{})
	started := make(chan string, 20)
	count := func(p *peak) Middleware {
		return func(next Handler) Handler {
			return func(ctx context.Context, pr *Process) error {
				p.enter()
				all.enter()
				defer all.leave()
				defer p.leave()
				return next(ctx, pr)
			}
		}
	}
	var mails peak
	w := newWorker(t, c, WorkerOptions{})
	require.NoError(t, w.HandleQueues(ctx, []QueueSpec{
		{Queue: "rows", Batch: func(_ context.Context, batch []*Process) error {
			started <- "batch"
			<-release
			return nil
		}, BatchOptions: BatchOptions{Size: 2, Batches: 2, MaxWait: time.Hour, Middleware: []Middleware{count(&rows)}}},
		{Queue: "mail", Handler: func(context.Context, *Process) error {
			started <- "mail"
			<-release
			return nil
		}, Options: HandleOptions{Middleware: []Middleware{count(&mails)}}},
	}, PoolOptions{Concurrency: 6}))

	enqueueNumbered(t, c, "rows", 10)
	assert.Equal(t, "batch", recv(t, started, 5*time.Second, "a batch"))
	assert.Equal(t, "batch", recv(t, started, 5*time.Second, "a batch"))
	enqueueNumbered(t, c, "mail", 10)
	assert.Equal(t, "mail", recv(t, started, 5*time.Second, "a mail"))
	assert.Equal(t, "mail", recv(t, started, 5*time.Second, "a mail"))
	assert.Equal(t, int32(4), rows.now.Load(), "the batched queue's tasks in hand: Size × Batches")
	assert.Equal(t, int32(2), mails.now.Load(), "the rest of the pool")
	close(release)
	settledQueue(t, c, "rows")
	settledQueue(t, c, "mail")
	assert.Equal(t, int32(4), rows.max.Load(), "the batched queue's most in hand")
	assert.Equal(t, int32(6), all.max.Load(), "the pool's most in hand")
}

// Shutdown starts a batched queue's filling batch at once, as under
// HandleBatch: its tasks run within the grace period rather than wait out
// MaxWait, and are finished.
func TestPoolShutdownStartsTheFillingBatch(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	c.core.Signals.Joined.Init(t)
	seen := make(batchSeen, 10)
	w := newWorker(t, c, WorkerOptions{})
	require.NoError(t, w.HandleQueues(ctx, []QueueSpec{
		{Queue: "mail", Handler: func(context.Context, *Process) error { return nil }},
		{Queue: "rows", Batch: func(_ context.Context, batch []*Process) error {
			seen.add(batch)
			return nil
		}, BatchOptions: BatchOptions{Size: 10, MaxWait: time.Hour}},
	}, PoolOptions{Concurrency: 20, Order: OrderShared}))
	enqueueNumbered(t, c, "rows", 3)
	waitJoined(t, c, "rows", 3) // three tasks in the filling batch

	grace, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	require.NoError(t, w.Shutdown(grace), "the batch ran within the grace period")
	assert.Equal(t, []string{"t0000", "t0001", "t0002"}, recv(t, seen, time.Second, "the batch"))
	assert.Empty(t, waiting(t, c, "rows"), "no task given back")
	settledQueue(t, c, "rows")
}

// A QueueSpec has a Handler or a Batch, never both, and one set of
// options: a batched queue's are its BatchOptions, checked as
// HandleBatch checks them.
func TestPoolBatchOptionsAreChecked(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	w := newWorker(t, c, WorkerOptions{})
	h := func(context.Context, *Process) error { return nil }
	bh := func(context.Context, []*Process) error { return nil }
	for name, spec := range map[string]QueueSpec{
		"both handlers":          {Queue: "a", Handler: h, Batch: bh},
		"batch options alone":    {Queue: "a", Handler: h, BatchOptions: BatchOptions{Size: 2}},
		"options on a batch":     {Queue: "a", Batch: bh, Options: HandleOptions{Retry: retryNow}},
		"negative size":          {Queue: "a", Batch: bh, BatchOptions: BatchOptions{Size: -1}},
		"negative max wait":      {Queue: "a", Batch: bh, BatchOptions: BatchOptions{MaxWait: -1}},
		"size × batches too big": {Queue: "a", Batch: bh, BatchOptions: BatchOptions{Size: engine.MaxBatchSlots, Batches: 2}},
	} {
		assert.ErrorIs(t, w.HandleQueues(ctx, []QueueSpec{spec}, PoolOptions{}), ErrInvalidOptions, name)
	}
	assert.Empty(t, w.Queues(), "nothing served")
	require.NoError(t, w.HandleQueues(ctx, []QueueSpec{{Queue: "a", Batch: bh}}, PoolOptions{}), "defaults")
}
