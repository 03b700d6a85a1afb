package worqr

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// inFlightWeight reads a queue's weight in flight, checking it against
// the processes Redis holds.
func inFlightWeight(t *testing.T, c *Client, queue string) int64 {
	t.Helper()
	info, err := c.QueueInfo(context.Background(), queue)
	require.NoError(t, err)
	procs, err := c.Processes(context.Background(), queue)
	require.NoError(t, err)
	var held int64
	for _, p := range procs {
		held += int64(p.Weight)
	}
	require.Equal(t, held, info.InFlightWeight, "the count matches the processes")
	return info.InFlightWeight
}

// dequeueOne takes one task, or fails the test.
func dequeueOne(t *testing.T, w *Worker, queue string) *Process {
	t.Helper()
	p, err := w.Dequeue(context.Background(), queue)
	require.NoError(t, err)
	return p
}

// Under a limit, a task holds its weight's slots; the front task that does
// not fit holds back the tasks behind it (strict order); a task heavier
// than the limit starts alone.
func TestWeightsUnderALimit(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	require.NoError(t, c.SetConcurrency(ctx, "q", 3, CreateQueue()))
	for _, task := range []struct {
		payload string
		weight  int
	}{{"a2", 2}, {"b2", 2}, {"c1", 1}, {"d9", 9}, {"e1", 0}} {
		require.NoError(t, second(c.Enqueue(ctx, "q", []byte(task.payload), Weight(task.weight))))
	}
	tasks, err := c.Tasks(ctx, "q", 0, -1)
	require.NoError(t, err)
	require.Len(t, tasks, 5)
	assert.Equal(t, []int{2, 2, 1, 9, 1}, []int{tasks[0].Weight, tasks[1].Weight, tasks[2].Weight, tasks[3].Weight, tasks[4].Weight})

	w := newWorker(t, c, WorkerOptions{})
	require.NoError(t, w.StartWork(ctx, "q", Events{}))
	a := dequeueOne(t, w, "q")
	assert.Equal(t, "a2", string(a.Task()))
	assert.EqualValues(t, 2, inFlightWeight(t, c, "q"))
	_, err = w.Dequeue(ctx, "q")
	assert.ErrorIs(t, err, ErrNoTask, "b2 does not fit in the one slot left, and c1 waits behind it")
	procs, err := w.DequeueN(ctx, "q", 5)
	require.ErrorIs(t, err, ErrNoTask)
	assert.Empty(t, procs)

	require.NoError(t, a.Finish(ctx))
	assert.EqualValues(t, 0, inFlightWeight(t, c, "q"))
	procs, err = w.DequeueN(ctx, "q", 5)
	require.NoError(t, err)
	require.Len(t, procs, 2, "b2 and c1 fill the limit; d9 waits")
	assert.Equal(t, []string{"b2", "c1"}, []string{string(procs[0].Task()), string(procs[1].Task())})
	assert.EqualValues(t, 3, inFlightWeight(t, c, "q"))

	// d9 is heavier than the limit: it waits until nothing is in flight,
	// then starts alone, and nothing starts beside it.
	require.NoError(t, procs[0].Finish(ctx))
	_, err = w.Dequeue(ctx, "q")
	assert.ErrorIs(t, err, ErrNoTask, "d9 waits for c1")
	require.NoError(t, procs[1].Finish(ctx))
	d := dequeueOne(t, w, "q")
	assert.Equal(t, "d9", string(d.Task()))
	assert.EqualValues(t, 9, inFlightWeight(t, c, "q"))
	_, err = w.Dequeue(ctx, "q")
	assert.ErrorIs(t, err, ErrNoTask, "nothing beside the heavy task")
	require.NoError(t, d.Finish(ctx))
	e := dequeueOne(t, w, "q")
	assert.Equal(t, "e1", string(e.Task()))
	require.NoError(t, e.Finish(ctx))
	assert.EqualValues(t, 0, inFlightWeight(t, c, "q"))

	_, err = c.Enqueue(ctx, "q", []byte("x"), Weight(-1))
	assert.ErrorIs(t, err, ErrInvalidOptions)
	_, err = c.Enqueue(ctx, "q", []byte("x"), Weight(MaxWeight+1))
	assert.ErrorIs(t, err, ErrInvalidOptions)
}

// Without a limit a weight changes nothing, but is counted: a limit set
// while weighted tasks run sees them.
func TestWeightsCountedWithoutALimit(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	require.NoError(t, second(c.EnqueueBatch(ctx, "q", [][]byte{[]byte("a"), []byte("b")}, Weight(3))))
	require.NoError(t, second(c.Enqueue(ctx, "q", []byte("c"))))
	w := newWorker(t, c, WorkerOptions{})
	require.NoError(t, w.StartWork(ctx, "q", Events{}))
	procs, err := w.DequeueN(ctx, "q", 2)
	require.NoError(t, err)
	require.Len(t, procs, 2)
	assert.EqualValues(t, 6, inFlightWeight(t, c, "q"))
	require.NoError(t, c.SetConcurrency(ctx, "q", 6))
	_, err = w.Dequeue(ctx, "q")
	assert.ErrorIs(t, err, ErrNoTask, "the six slots are held")
	require.NoError(t, procs[0].Finish(ctx))
	p := dequeueOne(t, w, "q")
	assert.EqualValues(t, 4, inFlightWeight(t, c, "q"))
	require.NoError(t, p.Finish(ctx))
	require.NoError(t, procs[1].Finish(ctx))
	assert.EqualValues(t, 0, inFlightWeight(t, c, "q"))
}

// A task keeps its weight through a retry, a stop, a dead letter and its
// requeue, and a reclaim of its dead holder; every one of them gives the
// slots back.
func TestWeightKeptAndFreedEverywhere(t *testing.T) {
	t.Parallel()
	k := setupTimed(t, nil)
	c, ctx := k.c, k.ctx
	require.NoError(t, c.SetConcurrency(ctx, "q", 4, CreateQueue()))
	id, err := c.Enqueue(ctx, "q", []byte("heavy"), Weight(4))
	require.NoError(t, err)
	c.core.Signals.Looked.Init(t) // w's reclaimer may be the one that wakes for the victim
	w := newWorker(t, c, WorkerOptions{})
	require.NoError(t, w.StartWork(ctx, "q", Events{}))
	weightOf := func(p *Process) {
		t.Helper()
		assert.Equal(t, id, p.TaskID())
		assert.EqualValues(t, 4, inFlightWeight(t, c, "q"))
	}

	p := dequeueOne(t, w, "q")
	weightOf(p)
	require.NoError(t, p.Retry(ctx, 0, errors.New("again")))
	assert.EqualValues(t, 0, inFlightWeight(t, c, "q"), "retry")
	p = dequeueOne(t, w, "q")
	weightOf(p)
	require.NoError(t, p.Requeue(ctx))
	assert.EqualValues(t, 0, inFlightWeight(t, c, "q"), "stop")
	p = dequeueOne(t, w, "q")
	weightOf(p)
	require.NoError(t, p.DeadLetter(ctx, errors.New("dead")))
	assert.EqualValues(t, 0, inFlightWeight(t, c, "q"), "dead letter")
	dead, err := c.DeadLetters(ctx, "q", 0, 10)
	require.NoError(t, err)
	require.Len(t, dead, 1)
	assert.Equal(t, 4, dead[0].Weight)
	ok, err := c.RequeueDeadLetter(ctx, "q", id)
	require.NoError(t, err)
	require.True(t, ok)

	// Its holder dies: the reclaim gives the slots back, and the task
	// comes back with its weight.
	victim := newWorker(t, k.client(), fast)
	require.NoError(t, victim.StartWork(ctx, "q", Events{}))
	weightOf(dequeueOne(t, victim, "q"))
	crash(victim)
	pc, peer := k.reclaimingPeer()
	require.NoError(t, peer.StartWork(ctx, "q", Events{}))
	k.run(fast.TTL + fast.RenewInterval)
	reclaimed(t, 1, pc, c)
	n, err := c.QueueLen(ctx, "q")
	require.NoError(t, err)
	require.EqualValues(t, 1, n, "the dead holder's task is reclaimed")
	assert.EqualValues(t, 0, inFlightWeight(t, c, "q"), "reclaim")
	p = dequeueOne(t, w, "q")
	weightOf(p)

	// A cancelled one gives them back when its holder lets it go; so does
	// one whose queue was deleted.
	_, err = c.CancelTask(ctx, "q", id)
	require.NoError(t, err)
	_ = p.Finish(ctx) // the process was cancelled: nothing to finish
	assert.EqualValues(t, 0, inFlightWeight(t, c, "q"), "cancel")
	require.NoError(t, second(c.Enqueue(ctx, "q", []byte("again"), Weight(4))))
	p = dequeueOne(t, w, "q")
	assert.EqualValues(t, 4, inFlightWeight(t, c, "q"))
	_, err = c.DeleteQueue(ctx, "q")
	require.NoError(t, err)
	_ = p.Finish(ctx)
	assert.EqualValues(t, 0, inFlightWeight(t, c, "q"), "delete")
}

// Handlers across workers never hold more weight than the limit, and a
// freed slot wakes a waiting worker (else the run would not finish).
func TestWeightedLimitAcrossWorkers(t *testing.T) {
	t.Parallel()
	b, c, ctx := setup(t)
	const limit, n = 5, 40
	require.NoError(t, c.SetConcurrency(ctx, "q", limit, CreateQueue()))
	var mu sync.Mutex
	var held, peak int
	done := make(map[byte]bool)
	h := func(_ context.Context, p *Process) error {
		wt := int(p.Task()[0]) // the task is its weight and its index
		mu.Lock()
		held += wt
		peak = max(peak, held)
		mu.Unlock()
		time.Sleep(5 * time.Millisecond) // the work
		mu.Lock()
		held -= wt
		done[p.Task()[1]] = true
		mu.Unlock()
		return nil
	}
	for range 3 {
		// A long lease: a worker that fenced itself on a loaded machine
		// would leave a handler running beside its task's next run (the
		// processes test covers fencing).
		w := newWorker(t, b.client(), WorkerOptions{TTL: 30 * time.Second})
		require.NoError(t, w.Handle(ctx, "q", h, HandleOptions{Concurrency: 4}))
	}
	for i := range n {
		wt := 1 + i%3
		require.NoError(t, second(c.Enqueue(ctx, "q", []byte{byte(wt), byte(i)}, Weight(wt))))
	}
	eventually(t, 20*time.Second, "all done", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(done) == n
	})
	eventually(t, 5*time.Second, "all finished", func() bool {
		info, err := c.QueueInfo(ctx, "q")
		return err == nil && info.InFlight == 0
	})
	mu.Lock()
	defer mu.Unlock()
	assert.LessOrEqual(t, peak, limit, "weight held by handlers at once")
	assert.GreaterOrEqual(t, peak, limit-1, "slots were handed on")
	assert.EqualValues(t, 0, inFlightWeight(t, c, "q"))
}

// Check finds a count of weight in flight that does not match the
// processes, and a repair sets it right.
func TestCheckRepairsTheWeightCount(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	require.NoError(t, second(c.Enqueue(ctx, "q", []byte("a"), Weight(3))))
	w := newWorker(t, c, WorkerOptions{})
	require.NoError(t, w.StartWork(ctx, "q", Events{}))
	p := dequeueOne(t, w, "q")
	assert.Zero(t, check(t, c, false).Problems())
	k := c.core.Store.Keys().Queue("q")
	do(t, c, c.core.Redis.B().Hset().Key(k.Meta).FieldValue().FieldValue("wx", "7").Build())

	rep := check(t, c, false)
	assert.Equal(t, []string{"q"}, rep.MiscountedQueues)
	assert.Equal(t, 1, rep.Problems())
	rep = check(t, c, true)
	assert.Equal(t, []string{"q"}, rep.Repaired.RecountedQueues)
	assert.EqualValues(t, 3, inFlightWeight(t, c, "q"))
	assert.Zero(t, check(t, c, false).Problems())
	require.NoError(t, p.Finish(ctx))
	assert.EqualValues(t, 0, inFlightWeight(t, c, "q"))
}
