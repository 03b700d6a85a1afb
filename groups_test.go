package worqr

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// taskNames are the payloads of processes, in order.
func taskNames(ps []*Process) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = string(p.Task())
	}
	return out
}

// groupKeys are the queue's group keys that exist in Redis.
func groupKeys(t *testing.T, c *Client, queue string) []string {
	t.Helper()
	k := c.core.Store.Keys().Queue(queue)
	var out []string
	for _, key := range []string{k.GroupWait, k.GroupReady, k.GroupRunning, k.GroupLimits} {
		n, err := c.core.Redis.Do(context.Background(), c.core.Redis.B().Exists().Key(key).Build()).AsInt64()
		require.NoError(t, err)
		if n > 0 {
			out = append(out, key[strings.LastIndexByte(key, ':')+1:])
		}
	}
	return out
}

// A group at its limit holds back its own tasks only: the other groups
// and the tasks without a group go on, and the group runs again once a
// process of it ends. A group's own limit overrides the default.
func TestGroupAtItsLimitHoldsBackOnlyItself(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	require.NoError(t, c.SetGroupConcurrency(ctx, "q", "", 1, CreateQueue()))
	require.NoError(t, second(c.EnqueueBatch(ctx, "q", [][]byte{[]byte("a1"), []byte("a2"), []byte("a3")}, Group("a"))))
	require.NoError(t, second(c.EnqueueBatch(ctx, "q", [][]byte{[]byte("b1"), []byte("b2")}, Group("b"))))
	require.NoError(t, second(c.Enqueue(ctx, "q", []byte("p1"))))
	info, err := c.QueueInfo(ctx, "q")
	require.NoError(t, err)
	assert.EqualValues(t, 6, info.Waiting, "grouped tasks count as waiting")
	assert.EqualValues(t, 2, info.Groups)
	assert.Equal(t, 1, info.GroupConcurrency)

	w := newWorker(t, c, WorkerOptions{})
	require.NoError(t, w.StartWork(ctx, "q", Events{}))
	ps, err := w.DequeueN(ctx, "q", 10)
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{"a1", "b1", "p1"}, taskNames(ps), "one of each group, and the plain task")
	_, err = w.Dequeue(ctx, "q")
	assert.ErrorIs(t, err, ErrNoTask, "both groups are at their limit")
	info, err = c.QueueInfo(ctx, "q")
	require.NoError(t, err)
	assert.EqualValues(t, 2, info.Groups, "held back, the groups still count")
	assert.EqualValues(t, 0, info.GroupsReady)

	byName := map[string]*Process{}
	for _, p := range ps {
		byName[string(p.Task())] = p
	}
	require.NoError(t, byName["a1"].Finish(ctx))
	assert.Equal(t, "a2", string(dequeueOne(t, w, "q").Task()), "a's slot freed: a's next")
	_, err = w.Dequeue(ctx, "q")
	assert.ErrorIs(t, err, ErrNoTask)

	// b's own limit of 2 overrides the default: b2 may start beside b1.
	require.NoError(t, c.SetGroupConcurrency(ctx, "q", "b", 2))
	assert.Equal(t, "b2", string(dequeueOne(t, w, "q").Task()))
	// Removing b's limit falls back to the default, which a lets go.
	require.NoError(t, c.SetGroupConcurrency(ctx, "q", "b", 0))
	require.NoError(t, c.SetGroupConcurrency(ctx, "q", "", 0))
	assert.Equal(t, "a3", string(dequeueOne(t, w, "q").Task()), "no limit left")

	assert.ErrorIs(t, c.SetGroupConcurrency(ctx, "q", "", -1), ErrInvalidOptions)
	assert.ErrorIs(t, c.SetGroupConcurrency(ctx, "q", strings.Repeat("x", MaxGroupLen+1), 1), ErrInvalidOptions)
	assert.ErrorIs(t, c.SetGroupConcurrency(ctx, "nosuch", "a", 1), ErrNoQueue)
}

// The limit holds across workers that race for a group's tasks.
func TestGroupLimitHoldsAcrossWorkers(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	require.NoError(t, c.SetGroupConcurrency(ctx, "q", "g", 2, CreateQueue()))
	tasks := make([][]byte, 40)
	for i := range tasks {
		tasks[i] = []byte(fmt.Sprint(i))
	}
	require.NoError(t, second(c.EnqueueBatch(ctx, "q", tasks, Group("g"))))
	var workers []*Worker
	for range 4 {
		w := newWorker(t, c, WorkerOptions{})
		require.NoError(t, w.StartWork(ctx, "q", Events{}))
		workers = append(workers, w)
	}
	var mu sync.Mutex
	var got []*Process
	var wg sync.WaitGroup
	for _, w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 5 {
				ps, err := w.DequeueN(ctx, "q", 3)
				if err != nil {
					assert.ErrorIs(t, err, ErrNoTask)
				}
				mu.Lock()
				got = append(got, ps...)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	require.Len(t, got, 2, "two in flight at most, whoever asks")
	assert.Equal(t, []string{"0", "1"}, func() []string {
		n := taskNames(got)
		if n[0] > n[1] {
			n[0], n[1] = n[1], n[0]
		}
		return n
	}(), "in enqueue order")
}

// A dead worker's grouped processes count against their group's limit
// until it is reclaimed; then the group runs again, its reclaimed task
// first (it takes its place by its id).
func TestGroupCountsADeadWorkersProcessesUntilReclaimed(t *testing.T) {
	t.Parallel()
	k := setupTimed(t, nil)
	c, ctx := k.c, k.ctx
	require.NoError(t, c.SetGroupConcurrency(ctx, "q", "", 1, CreateQueue()))
	require.NoError(t, second(c.EnqueueBatch(ctx, "q", [][]byte{[]byte("g1"), []byte("g2")}, Group("g"))))
	dead := newWorker(t, k.client(), fast)
	require.NoError(t, dead.StartWork(ctx, "q", Events{}))
	assert.Equal(t, "g1", string(dequeueOne(t, dead, "q").Task()))
	crash(dead)

	lc, live := k.reclaimingPeer()
	require.NoError(t, live.StartWork(ctx, "q", Events{}))
	_, err := live.Dequeue(ctx, "q")
	require.ErrorIs(t, err, ErrNoTask, "the dead worker's process holds the group's slot")
	k.run(fast.TTL + fast.RenewInterval)
	reclaimed(t, 1, lc)
	info, err := c.QueueInfo(ctx, "q")
	require.NoError(t, err)
	require.Zero(t, info.InFlight, "the dead worker is reclaimed")
	p := dequeueOne(t, live, "q")
	assert.Equal(t, "g1", string(p.Task()), "the reclaimed task first: the group keeps its order")
	assert.Equal(t, 2, p.Attempt())
	_, err = live.Dequeue(ctx, "q")
	require.ErrorIs(t, err, ErrNoTask)
	require.NoError(t, p.Finish(ctx))
	require.NoError(t, dequeueOne(t, live, "q").Finish(ctx))
	assert.Empty(t, groupKeys(t, c, "q"), "nothing left once the group is done")
}

// A retried grouped task comes back in its place (ahead of the group's
// later tasks), after its delay if it has one; a delayed grouped task
// joins its group when due; a group's priorities order its own tasks.
func TestGroupRetriesDelaysAndPriorities(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	require.NoError(t, c.SetGroupConcurrency(ctx, "q", "", 1, CreateQueue()))
	require.NoError(t, second(c.EnqueueBatch(ctx, "q", [][]byte{[]byte("g1"), []byte("g2")}, Group("g"))))
	require.NoError(t, second(c.Enqueue(ctx, "q", []byte("gh"), Group("g"), HighPriority())))
	w := newWorker(t, c, WorkerOptions{})
	require.NoError(t, w.StartWork(ctx, "q", Events{}))
	p := dequeueOne(t, w, "q")
	require.Equal(t, "gh", string(p.Task()), "the group's high-priority task first")
	require.NoError(t, p.Finish(ctx))

	p = dequeueOne(t, w, "q")
	require.Equal(t, "g1", string(p.Task()))
	require.NoError(t, p.Retry(ctx, 0, fmt.Errorf("again")))
	p = dequeueOne(t, w, "q")
	require.Equal(t, "g1", string(p.Task()), "a retried task keeps its place in its group")
	assert.Equal(t, "again", p.LastError())

	// With a delay, it holds its group while it waits (a limit of 1: a
	// sequence), and the group's later task waits for it.
	require.NoError(t, p.Retry(ctx, 50*time.Millisecond, fmt.Errorf("later")))
	_, err := w.Dequeue(ctx, "q")
	require.ErrorIs(t, err, ErrRateLimited, "the group waits for its retried task, and the error says until when")
	require.NoError(t, second(c.Enqueue(ctx, "q", []byte("g3"), Group("g"), In(time.Hour))))
	eventually(t, 5*time.Second, "the retried task is due", func() bool {
		p, err := w.Dequeue(ctx, "q")
		if err != nil {
			return false
		}
		assert.Equal(t, "g1", string(p.Task()), "the retried task before the group's later one")
		require.NoError(t, p.Finish(ctx))
		return true
	})
	p2 := dequeueOne(t, w, "q")
	require.Equal(t, "g2", string(p2.Task()))
	require.NoError(t, p2.Finish(ctx))
	info, err := c.QueueInfo(ctx, "q")
	require.NoError(t, err)
	assert.EqualValues(t, 1, info.Delayed)
	assert.EqualValues(t, 0, info.Waiting)
	tasks, err := c.Delayed(ctx, "q", 0, -1)
	require.NoError(t, err)
	require.Len(t, tasks, 1)
	assert.Equal(t, "g", tasks[0].Group)
}

// Unique keys hold for grouped tasks as for any; pausing a queue holds its
// groups too; the queue's limit counts grouped tasks.
func TestGroupWithUniquePauseAndQueueLimit(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	_, err := c.Enqueue(ctx, "q", []byte("u1"), Group("g"), Unique("k"))
	require.NoError(t, err)
	_, err = c.Enqueue(ctx, "q", []byte("u2"), Group("h"), Unique("k"))
	require.ErrorIs(t, err, ErrDuplicate)
	require.NoError(t, second(c.EnqueueBatch(ctx, "q", [][]byte{[]byte("h1"), []byte("h2")}, Group("h"))))

	require.NoError(t, c.Pause(ctx, "q"))
	w := newWorker(t, c, WorkerOptions{})
	require.NoError(t, w.StartWork(ctx, "q", Events{}))
	_, err = w.Dequeue(ctx, "q")
	require.ErrorIs(t, err, ErrNoTask, "paused")
	require.NoError(t, c.Resume(ctx, "q"))

	require.NoError(t, c.SetConcurrency(ctx, "q", 2))
	ps, err := w.DequeueN(ctx, "q", 5)
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{"u1", "h1"}, taskNames(ps), "the queue's limit of 2, one from each group's turn")
	for _, p := range ps {
		require.NoError(t, p.Finish(ctx))
	}
	_, err = c.Enqueue(ctx, "q", []byte("u3"), Group("g"), Unique("k"))
	require.NoError(t, err, "the key was given up when u1 finished")
}

// A group's tasks cannot starve another's: one group floods the queue,
// then small groups enqueue; every small group's tasks start within the
// first rounds of turns, by start order.
func TestGroupsAreServedInTurn(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	flood := make([][]byte, 1000)
	for i := range flood {
		flood[i] = []byte("F")
	}
	require.NoError(t, second(c.EnqueueBatch(ctx, "q", flood, Group("flood"))))
	const small, each = 9, 10
	for g := range small {
		tasks := make([][]byte, each)
		for i := range tasks {
			tasks[i] = []byte(fmt.Sprint("s", g))
		}
		require.NoError(t, second(c.EnqueueBatch(ctx, "q", tasks, Group(fmt.Sprint("small", g)))))
	}
	w := newWorker(t, c, WorkerOptions{})
	require.NoError(t, w.StartWork(ctx, "q", Events{}))
	var order []string
	for len(order) < 200 {
		ps, err := w.DequeueN(ctx, "q", 7)
		require.NoError(t, err)
		for _, p := range ps {
			order = append(order, string(p.Task()))
			require.NoError(t, p.Finish(ctx))
		}
	}
	floods, smallDone := 0, 0
	for _, name := range order {
		if name == "F" {
			floods++
			continue
		}
		smallDone++
		if smallDone == small*each {
			break
		}
	}
	require.Equal(t, small*each, smallDone)
	assert.LessOrEqual(t, floods, each+1, "the small groups' tasks all start within %d rounds", each+1)
	assert.GreaterOrEqual(t, floods, each-1, "the flood has its turns too")
}

// Plain tasks take turns with the groups, as one group of their own;
// high-priority plain tasks go before every group.
func TestPlainTasksTakeTurnsWithGroups(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	require.NoError(t, second(c.EnqueueBatch(ctx, "q", [][]byte{[]byte("a1"), []byte("a2"), []byte("a3")}, Group("a"))))
	require.NoError(t, second(c.EnqueueBatch(ctx, "q", [][]byte{[]byte("p1"), []byte("p2"), []byte("p3")})))
	require.NoError(t, second(c.Enqueue(ctx, "q", []byte("hi"), HighPriority())))
	w := newWorker(t, c, WorkerOptions{})
	require.NoError(t, w.StartWork(ctx, "q", Events{}))
	var order []string
	for range 7 {
		order = append(order, string(dequeueOne(t, w, "q").Task()))
	}
	assert.Equal(t, "hi", order[0])
	// After hi, turns alternate between the plain list and group a.
	for i := 1; i < 6; i++ {
		assert.NotEqual(t, order[i][0], order[i+1][0], "turns alternate: %v", order)
	}
}

// Group keys are any bytes up to MaxGroupLen; they come back as given.
func TestGroupKeys(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	_, err := c.Enqueue(ctx, "q", []byte("x"), Group(""))
	assert.ErrorIs(t, err, ErrInvalidOptions)
	_, err = c.Enqueue(ctx, "q", []byte("x"), Group(strings.Repeat("x", MaxGroupLen+1)))
	assert.ErrorIs(t, err, ErrInvalidOptions)
	odd := "tenant:42, 100% \x00\n{é}"
	require.NoError(t, second(c.Enqueue(ctx, "q", []byte("x"), Group(odd))))
	require.NoError(t, second(c.Enqueue(ctx, "q", []byte("y"), Group(strings.Repeat("k", MaxGroupLen)))))
	tasks, err := c.Tasks(ctx, "q", 0, -1)
	require.NoError(t, err)
	require.Len(t, tasks, 2, "Tasks lists grouped tasks")
	assert.ElementsMatch(t, []string{odd, strings.Repeat("k", MaxGroupLen)}, []string{tasks[0].Group, tasks[1].Group}, "each with its key as given")
	w := newWorker(t, c, WorkerOptions{})
	require.NoError(t, w.StartWork(ctx, "q", Events{}))
	ps, err := w.DequeueN(ctx, "q", 5)
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{"x", "y"}, taskNames(ps))
	procs, err := c.Processes(ctx, "q")
	require.NoError(t, err)
	require.Len(t, procs, 2)
	for _, p := range ps {
		require.NoError(t, p.Finish(ctx))
	}
	assert.Empty(t, groupKeys(t, c, "q"))
}

// Handle runs every group's tasks to the end under a limit of 1: a
// runtime the limit held back is woken when a group's process ends.
func TestHandleRunsGroupsUnderALimit(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	require.NoError(t, c.SetGroupConcurrency(ctx, "q", "", 1, CreateQueue()))
	var mu sync.Mutex
	running := map[string]int{}
	over := false
	done := make(chan struct{}, 100)
	w := newWorker(t, c, WorkerOptions{})
	require.NoError(t, w.Handle(ctx, "q", func(ctx context.Context, p *Process) error {
		g := string(p.Task()[:1])
		mu.Lock()
		running[g]++
		over = over || running[g] > 1
		mu.Unlock()
		mu.Lock()
		running[g]--
		mu.Unlock()
		done <- struct{}{}
		return nil
	}, HandleOptions{Concurrency: 8}))
	for i := range 30 {
		g := string(rune('a' + i%3))
		require.NoError(t, second(c.Enqueue(ctx, "q", []byte(g+fmt.Sprint(i)), Group(g))))
	}
	for range 30 {
		recv(t, done, 10*time.Second, "a task ends")
	}
	mu.Lock()
	assert.False(t, over, "no group ran two at once")
	mu.Unlock()
	eventually(t, 5*time.Second, "the groups' keys go", func() bool { return len(groupKeys(t, c, "q")) == 0 })
}

// CancelTask finds a task waiting in a group by its id and removes it,
// with its unique key; the group's other tasks stay.
func TestCancelAGroupedTask(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	id, err := c.Enqueue(ctx, "q", []byte("a1"), Group("a"), Unique("k"))
	require.NoError(t, err)
	require.NoError(t, second(c.Enqueue(ctx, "q", []byte("a2"), Group("a"))))
	res, err := c.CancelTask(ctx, "q", id)
	require.NoError(t, err)
	assert.EqualValues(t, 1, res.Removed)
	require.NoError(t, second(c.Enqueue(ctx, "q", []byte("a3"), Group("a"), Unique("k"))), "the key was given up")
	w := newWorker(t, c, WorkerOptions{})
	require.NoError(t, w.StartWork(ctx, "q", Events{}))
	ps, err := w.DequeueN(ctx, "q", 5)
	require.NoError(t, err)
	assert.Equal(t, []string{"a2", "a3"}, taskNames(ps))
}
