package worqr

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// names are the payloads of tasks, as strings.
func names(ts []TaskInfo) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = string(t.Payload)
	}
	return out
}

// Tasks, Range, QueueLen, QueueInfo and FindTask see the tasks waiting in
// groups: after the plain ones, group by group, each in start order; a
// page among them reads that page.
func TestGroupedWaitingTasksAreListedAndFound(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	require.NoError(t, second(c.EnqueueBatch(ctx, "q", [][]byte{[]byte("b1")}, Group("b"))))
	require.NoError(t, second(c.EnqueueBatch(ctx, "q", [][]byte{[]byte("p1"), []byte("p2")})))
	ids, err := c.EnqueueBatch(ctx, "q", [][]byte{[]byte("a1"), []byte("a2")}, Group("a"))
	require.NoError(t, err)
	require.NoError(t, second(c.Enqueue(ctx, "q", []byte("a0"), Group("a"), HighPriority())))
	require.NoError(t, second(c.Enqueue(ctx, "q", []byte("h"), HighPriority())))

	want := []string{"h", "p1", "p2", "a0", "a1", "a2", "b1"}
	tasks, err := c.Tasks(ctx, "q", 0, -1)
	require.NoError(t, err)
	assert.Equal(t, want, names(tasks))
	assert.Equal(t, []string{"", "", "", "a", "a", "a", "b"}, []string{tasks[0].Group, tasks[1].Group, tasks[2].Group, tasks[3].Group, tasks[4].Group, tasks[5].Group, tasks[6].Group})
	cut, err := c.Tasks(ctx, "q", 0, -1, PayloadPrefix(1))
	require.NoError(t, err)
	assert.Equal(t, []string{"h", "p", "p", "a", "a", "a", "b"}, names(cut))
	assert.Equal(t, 2, cut[5].Size)
	page, err := c.Tasks(ctx, "q", 2, 4)
	require.NoError(t, err)
	assert.Equal(t, want[2:5], names(page), "a page across the lists and the groups")
	page, err = c.Tasks(ctx, "q", 5, 5, PayloadPrefix(10))
	require.NoError(t, err)
	assert.Equal(t, want[5:6], names(page))
	payloads, err := c.Range(ctx, "q", -2, -1)
	require.NoError(t, err)
	assert.Equal(t, [][]byte{[]byte("a2"), []byte("b1")}, payloads)

	n, err := c.QueueLen(ctx, "q")
	require.NoError(t, err)
	assert.EqualValues(t, 7, n)
	info, err := c.QueueInfo(ctx, "q")
	require.NoError(t, err)
	assert.EqualValues(t, 7, info.Waiting)

	l, err := c.FindTask(ctx, "q", ids[1])
	require.NoError(t, err)
	require.NotNil(t, l.Waiting, "a grouped task is found by its id")
	assert.Equal(t, "a2", string(l.Waiting.Payload))
	assert.Equal(t, "a", l.Waiting.Group)
	assert.EqualValues(t, 5, l.Position, "its place in Tasks' order")
	assert.False(t, l.Partial)
}

// Cancel by payload removes the waiting grouped tasks with the payload,
// with their unique keys, and leaves the groups' other tasks to run; a
// group left with none has no key left once its tasks are done.
func TestCancelByPayloadRemovesGroupedTasks(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	require.NoError(t, second(c.Enqueue(ctx, "q", []byte("same"), Group("a"), Unique("k"))))
	require.NoError(t, second(c.Enqueue(ctx, "q", []byte("a2"), Group("a"))))
	require.NoError(t, second(c.Enqueue(ctx, "q", []byte("same"), Group("b"))))
	require.NoError(t, second(c.Enqueue(ctx, "q", []byte("same"))))
	require.NoError(t, second(c.Enqueue(ctx, "q", []byte("p"))))
	res, err := c.Cancel(ctx, "q", []byte("same"))
	require.NoError(t, err)
	assert.EqualValues(t, 3, res.Removed)
	tasks, err := c.Tasks(ctx, "q", 0, -1)
	require.NoError(t, err)
	assert.Equal(t, []string{"p", "a2"}, names(tasks))
	require.NoError(t, second(c.Enqueue(ctx, "q", []byte("a3"), Group("a"), Unique("k"))), "the key was given up")

	w := newWorker(t, c, WorkerOptions{})
	require.NoError(t, w.StartWork(ctx, "q", Events{}))
	ps, err := w.DequeueN(ctx, "q", 5)
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{"p", "a2", "a3"}, taskNames(ps))
	for _, p := range ps {
		require.NoError(t, p.Finish(ctx))
	}
	assert.Empty(t, groupKeys(t, c, "q"))
}

// Check finds a group whose count of slots held does not match its
// processes, and a repair sets it from them: a group held back by a
// count too high starts its next task again.
func TestCheckRepairsTheGroupCounts(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	require.NoError(t, c.SetGroupConcurrency(ctx, "q", "", 4, CreateQueue()))
	require.NoError(t, second(c.EnqueueBatch(ctx, "q", [][]byte{[]byte("a1"), []byte("a2")}, Group("a"), Weight(2))))
	w := newWorker(t, c, WorkerOptions{})
	require.NoError(t, w.StartWork(ctx, "q", Events{}))
	p := dequeueOne(t, w, "q")
	assert.Equal(t, "a1", string(p.Task()))
	requireClean(t, c)

	k := c.core.Store.Keys().Queue("q")
	do(t, c, c.core.Redis.B().Hset().Key(k.GroupRunning).FieldValue().FieldValue("a", "3").FieldValue("ghost", "1").Build())
	_, err := w.Dequeue(ctx, "q")
	assert.ErrorIs(t, err, ErrNoTask, "the count too high holds a2 back")

	rep := check(t, c, false)
	assert.Equal(t, []GroupCount{{Queue: "q", Group: "a", Counted: 3, Held: 2}, {Queue: "q", Group: "ghost", Counted: 1, Held: 0}}, rep.MiscountedGroups)
	assert.Equal(t, 2, rep.Problems())
	rep = check(t, c, true)
	assert.EqualValues(t, 2, rep.Repaired.RecountedGroups)
	held := do(t, c, c.core.Redis.B().Hgetall().Key(k.GroupRunning).Build())
	m, err := held.AsStrMap()
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"a": "2"}, m)
	requireClean(t, c)

	p2 := dequeueOne(t, w, "q")
	assert.Equal(t, "a2", string(p2.Task()), "a's turn came back with its count set right")
	require.NoError(t, p.Finish(ctx))
	require.NoError(t, p2.Finish(ctx))
	assert.Empty(t, groupKeys(t, c, "q"))
}
