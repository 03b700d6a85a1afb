package worqr

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// enqueueGroup enqueues n tasks to a group, each its group's key.
func enqueueGroup(t *testing.T, c *Client, queue, group string, n int) {
	t.Helper()
	tasks := make([][]byte, n)
	for i := range tasks {
		tasks[i] = []byte(group)
	}
	require.NoError(t, second(c.EnqueueBatch(context.Background(), queue, tasks, Group(group))))
}

// assertShares fails unless, in every prefix of starts, the group
// "premium" took 3 starts for every one of "basic", within bound.
func assertShares(t *testing.T, starts []string, bound int) {
	t.Helper()
	premium, basic, worst := 0, 0, 0
	for _, g := range starts {
		switch g {
		case "premium":
			premium++
		case "basic":
			basic++
		default:
			t.Fatalf("a start of %q", g)
		}
		worst = max(worst, premium-3*basic, 3*basic-premium)
	}
	assert.LessOrEqual(t, worst, bound, "premium %d, basic %d: the 3:1 drifted by %d at most", premium, basic, worst)
	assert.InDelta(t, 3, float64(premium)/float64(max(basic, 1)), 0.1, "premium %d, basic %d", premium, basic)
}

// A group of 3 turns starts 3 tasks for every one of a group of 1 while
// both have work, through dequeues of one task and of several, retries
// (a retried task is a start again, and its group keeps its turns) and
// a dead worker's processes reclaimed.
func TestGroupTurnsShareTheStarts(t *testing.T) {
	t.Parallel()
	b, c, ctx := setup(t)
	require.NoError(t, c.SetGroupTurns(ctx, "q", "premium", 3, CreateQueue()))
	enqueueGroup(t, c, "q", "premium", 600)
	enqueueGroup(t, c, "q", "basic", 600)
	// The worker that takes the shares only dequeues and finishes: a long
	// lease keeps a loaded machine from fencing it between two takes.
	w := newWorker(t, c, WorkerOptions{TTL: 30 * time.Second})
	require.NoError(t, w.StartWork(ctx, "q", Events{}))

	var starts []string
	take := func(n int) []*Process {
		t.Helper()
		ps, err := w.DequeueN(ctx, "q", n)
		require.NoError(t, err)
		for _, p := range ps {
			starts = append(starts, string(p.Task()))
		}
		return ps
	}
	// One at a time; every fifth start is retried at once.
	for i := range 200 {
		for _, p := range take(1) {
			if i%5 == 4 {
				require.NoError(t, p.Retry(ctx, 0, errors.New("again")))
			} else {
				require.NoError(t, p.Finish(ctx))
			}
		}
	}
	assertShares(t, starts, 3)

	// Several at a time, of sizes that do not divide the turns.
	starts = nil
	for _, n := range []int{7, 2, 5, 13, 1, 3, 9, 6, 11, 4} {
		for _, p := range take(n) {
			require.NoError(t, p.Finish(ctx))
		}
	}
	assertShares(t, starts, 12)

	// A dead worker's processes are reclaimed to the front of their
	// groups; the shares go on.
	dead := newWorker(t, b.client(), fast)
	require.NoError(t, dead.StartWork(ctx, "q", Events{}))
	for range 4 {
		ps, err := dead.DequeueN(ctx, "q", 1)
		require.NoError(t, err)
		require.Len(t, ps, 1)
	}
	crash(dead)
	eventually(t, fast.TTL+5*time.Second, "the dead worker is reclaimed", func() bool {
		info, err := c.QueueInfo(ctx, "q")
		require.NoError(t, err)
		return info.InFlight == 0
	})
	starts = nil
	for range 200 {
		for _, p := range take(1) {
			require.NoError(t, p.Finish(ctx))
		}
	}
	assertShares(t, starts, 4)

	rep, err := c.Groups(ctx, "q", 10)
	require.NoError(t, err)
	assert.Equal(t, 1, rep.DefaultTurns)
	turns := map[string]int{}
	for _, g := range rep.TopWaiting {
		turns[g.Key] = g.Turns
	}
	assert.Equal(t, map[string]int{"premium": 3, "basic": 1}, turns)
}

// Handle's runtime, dequeuing for its free slots, gives the groups their
// turns too, and the default turns apply to every group without its own.
func TestGroupTurnsUnderHandle(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	require.NoError(t, c.SetGroupTurns(ctx, "q", "", 3, CreateQueue()))
	require.NoError(t, c.SetGroupTurns(ctx, "q", "basic", 1))
	info, err := c.QueueInfo(ctx, "q")
	require.NoError(t, err)
	assert.Equal(t, 3, info.GroupTurns)
	enqueueGroup(t, c, "q", "premium", 500)
	enqueueGroup(t, c, "q", "basic", 500)
	var mu sync.Mutex
	var starts []string
	enough := make(chan struct{})
	w := newWorker(t, c, WorkerOptions{})
	require.NoError(t, w.Handle(ctx, "q", func(ctx context.Context, p *Process) error {
		mu.Lock()
		defer mu.Unlock()
		starts = append(starts, string(p.Task()))
		if len(starts) == 400 {
			close(enough)
		}
		return nil
	}, HandleOptions{Concurrency: 4}))
	recv(t, enough, 30*time.Second, "400 starts")
	require.NoError(t, w.StopWork(ctx, "q"))
	mu.Lock()
	defer mu.Unlock()
	// The handlers' starts are in the order they ran, not quite that of
	// their dequeues: a looser bound.
	assertShares(t, starts[:400], 12)
}

// Turns cost a queue that has none no Redis command: a dequeue of grouped
// tasks makes as many as on a queue whose turns, the default or its
// groups' own, were set and removed, and one of plain tasks as many as on
// a queue with turns. The client's own loops add commands now and then:
// each count is the fewest of five.
func TestGroupTurnsCostNoCalls(t *testing.T) {
	t.Parallel()
	b, c, ctx := setup(t)
	require.NoError(t, c.SetGroupTurns(ctx, "q2", "", 3, CreateQueue()))
	require.NoError(t, c.SetGroupTurns(ctx, "q2", "", 0))
	require.NoError(t, c.SetGroupTurns(ctx, "p2", "", 3, CreateQueue()))
	// A queue whose groups' own turns all went reads no more either.
	require.NoError(t, c.SetGroupTurns(ctx, "q3", "g0", 3, CreateQueue()))
	require.NoError(t, c.SetGroupTurns(ctx, "q3", "g1", 2))
	require.NoError(t, c.SetGroupTurns(ctx, "q3", "g0", 0))
	require.NoError(t, c.SetGroupTurns(ctx, "q3", "g1", 0))
	for _, q := range []string{"q1", "q2", "q3"} {
		for g := range 3 {
			enqueueGroup(t, c, q, fmt.Sprint("g", g), 20)
		}
	}
	for _, q := range []string{"p1", "p2"} {
		for range 20 {
			require.NoError(t, second(c.Enqueue(ctx, q, []byte("plain"))))
		}
	}
	w := newWorker(t, c, WorkerOptions{})
	counts := map[string]int{}
	for _, q := range []string{"q1", "q2", "q3", "p1", "p2"} {
		require.NoError(t, w.StartWork(ctx, q, Events{}))
		counts[q] = 1 << 30
	}
	for range 6 {
		for _, q := range []string{"q1", "q2", "q3", "p1", "p2"} {
			n, ok := b.commandsOf(func() {
				ps, err := w.DequeueN(ctx, q, 2)
				require.NoError(t, err)
				require.Len(t, ps, 2)
			})
			if !ok {
				t.Skip("counts commands on a private miniredis only")
			}
			counts[q] = min(counts[q], n)
		}
	}
	assert.Equal(t, counts["q1"], counts["q2"], "grouped tasks, no turns")
	assert.Equal(t, counts["q1"], counts["q3"], "grouped tasks, own turns gone")
	assert.Equal(t, counts["p1"], counts["p2"], "plain tasks, turns or not")
}

// SetGroupTurns and SetGroupSequenceHold check what they are given.
func TestGroupTurnsAndHoldRefuse(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	assert.ErrorIs(t, c.SetGroupTurns(ctx, "q", "", -1, CreateQueue()), ErrInvalidOptions)
	assert.ErrorIs(t, c.SetGroupTurns(ctx, "q", string(make([]byte, MaxGroupLen+1)), 2, CreateQueue()), ErrInvalidOptions)
	assert.ErrorIs(t, c.SetGroupTurns(ctx, "none", "", 2), ErrNoQueue)
	assert.ErrorIs(t, c.SetGroupSequenceHold(ctx, "q", "g", GroupHold(3), CreateQueue()), ErrInvalidOptions)
	assert.ErrorIs(t, c.SetGroupSequenceHold(ctx, "q", "", GroupHoldOn, CreateQueue()), ErrInvalidOptions)
	assert.ErrorIs(t, c.SetGroupSequenceHold(ctx, "none", "g", GroupHoldOn), ErrNoQueue)
}

// A group's own sequence-hold setting goes over the queue's: on, its
// sequence is held on a dead task though the queue's is off, and turning
// the queue's off does not let it go; off, it goes on though the queue's
// is on; Groups shows the setting.
func TestGroupSequenceHold(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	require.NoError(t, c.SetGroupConcurrency(ctx, "q", "", 1, CreateQueue()))
	require.NoError(t, c.SetGroupSequenceHold(ctx, "q", "strict", GroupHoldOn))
	require.NoError(t, c.SetGroupSequenceHold(ctx, "q", "loose", GroupHoldOff))
	w := newWorker(t, c, WorkerOptions{})
	require.NoError(t, w.StartWork(ctx, "q", Events{}))
	take := func(want ...string) []*Process {
		t.Helper()
		ps, err := w.DequeueN(ctx, "q", 10)
		if len(want) == 0 {
			require.ErrorIs(t, err, ErrNoTask)
			return nil
		}
		require.NoError(t, err)
		assert.ElementsMatch(t, want, taskNames(ps))
		return ps
	}
	for _, g := range []string{"strict", "loose", "plain"} {
		require.NoError(t, second(c.EnqueueBatch(ctx, "q", [][]byte{[]byte(g + "0"), []byte(g + "1")}, Group(g))))
	}
	for _, p := range take("strict0", "loose0", "plain0") {
		require.NoError(t, p.DeadLetter(ctx, errors.New("for good")))
	}
	// The queue holds nothing: strict is held by its own setting.
	for _, p := range take("loose1", "plain1") {
		require.NoError(t, p.Finish(ctx))
	}
	take()
	rep, err := c.Groups(ctx, "q", 10)
	require.NoError(t, err)
	require.Len(t, rep.HeldOnDead, 1)
	assert.Equal(t, "strict", rep.HeldOnDead[0].Key)
	assert.Equal(t, GroupHoldOn, rep.HeldOnDead[0].Hold)

	// The queue holds its sequences; loose's own setting is off.
	require.NoError(t, c.SetSequenceHold(ctx, "q", true))
	for _, g := range []string{"loose", "plain"} {
		require.NoError(t, second(c.EnqueueBatch(ctx, "q", [][]byte{[]byte(g + "2"), []byte(g + "3")}, Group(g))))
	}
	for _, p := range take("loose2", "plain2") {
		require.NoError(t, p.DeadLetter(ctx, errors.New("for good")))
	}
	require.NoError(t, take("loose3")[0].Finish(ctx))
	info, err := c.QueueInfo(ctx, "q")
	require.NoError(t, err)
	assert.EqualValues(t, 2, info.GroupsHeldOnDead, "strict and plain")

	// The queue's off: plain goes on, strict stays held.
	require.NoError(t, c.SetSequenceHold(ctx, "q", false))
	require.NoError(t, take("plain3")[0].Finish(ctx))
	take()
	// strict back to the queue's setting, which is off: it goes on.
	require.NoError(t, c.SetGroupSequenceHold(ctx, "q", "strict", GroupHoldAsQueue))
	require.NoError(t, take("strict1")[0].Finish(ctx))
	info, err = c.QueueInfo(ctx, "q")
	require.NoError(t, err)
	assert.Zero(t, info.GroupsHeldOnDead)
}

// A group in the middle of its run that a cancel empties forgets the
// turns it used, whichever cancel empties it: no field of it is left.
func TestGroupTurnsForgottenWhenACancelEmptiesTheGroup(t *testing.T) {
	t.Parallel()
	for _, how := range []string{"by id", "by payload", "waiting"} {
		t.Run(how, func(t *testing.T) {
			t.Parallel()
			_, c, ctx := setup(t)
			require.NoError(t, c.SetGroupTurns(ctx, "q", "", 3, CreateQueue()))
			ids, err := c.EnqueueBatch(ctx, "q", [][]byte{[]byte("a"), []byte("a"), []byte("a")}, Group("a"))
			require.NoError(t, err)
			enqueueGroup(t, c, "q", "b", 3)
			w := newWorker(t, c, WorkerOptions{})
			require.NoError(t, w.StartWork(ctx, "q", Events{}))
			ps, err := w.DequeueN(ctx, "q", 1)
			require.NoError(t, err)
			require.Equal(t, []string{"a"}, taskNames(ps))
			k := c.core.Store.Keys().Queue("q")
			used := func() int64 {
				n, err := do(t, c, c.core.Redis.B().Hexists().Key(k.GroupLimits).Field("a:u").Build()).AsInt64()
				require.NoError(t, err)
				return n
			}
			require.EqualValues(t, 1, used(), "a is in the middle of its run")
			switch how {
			case "by id":
				for _, id := range ids[1:] {
					res, err := c.CancelTask(ctx, "q", id)
					require.NoError(t, err)
					require.EqualValues(t, 1, res.Removed)
				}
			case "by payload":
				res, err := c.Cancel(ctx, "q", []byte("a"))
				require.NoError(t, err)
				require.EqualValues(t, 2, res.Removed)
			case "waiting":
				n, _, err := c.CancelWaiting(ctx, "q", WaitingSelection{IDs: ids[1:]})
				require.NoError(t, err)
				require.EqualValues(t, 2, n)
			}
			assert.EqualValues(t, 0, used(), "a's run ended with its tasks")
			ps, err = w.DequeueN(ctx, "q", 3)
			require.NoError(t, err)
			assert.Equal(t, []string{"b", "b", "b"}, taskNames(ps))
		})
	}
}

// Check reports the turn fields no dequeue would read (the mark of a
// group's own turns when none has any, and a group's turns used kept
// while it is not ready), and a repair removes them and leaves the turns
// a group in the middle of its run used.
func TestCheckFindsStaleTurns(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	require.NoError(t, c.SetGroupTurns(ctx, "q", "", 3, CreateQueue()))
	enqueueGroup(t, c, "q", "a", 3)
	enqueueGroup(t, c, "q", "b", 3)
	w := newWorker(t, c, WorkerOptions{})
	require.NoError(t, w.StartWork(ctx, "q", Events{}))
	ps, err := w.DequeueN(ctx, "q", 1)
	require.NoError(t, err)
	require.Equal(t, []string{"a"}, taskNames(ps))
	requireClean(t, c)

	k := c.core.Store.Keys().Queue("q")
	do(t, c, c.core.Redis.B().Hset().Key(k.Meta).FieldValue().FieldValue("gtx", "1").Build())
	do(t, c, c.core.Redis.B().Hset().Key(k.GroupLimits).FieldValue().FieldValue("ghost:u", "1/123").Build())
	rep := check(t, c, false)
	assert.EqualValues(t, 2, rep.StaleTurns)
	assert.Equal(t, 2, rep.Problems())
	rep = check(t, c, true)
	assert.EqualValues(t, 2, rep.Repaired.ClearedTurns)
	fields, err := do(t, c, c.core.Redis.B().Hkeys().Key(k.GroupLimits).Build()).AsStrSlice()
	require.NoError(t, err)
	assert.Equal(t, []string{"a:u"}, fields, "a's run goes on")
	n, err := do(t, c, c.core.Redis.B().Hexists().Key(k.Meta).Field("gtx").Build()).AsInt64()
	require.NoError(t, err)
	assert.Zero(t, n)
	requireClean(t, c)

	// A queue left without turns keeps no turns used either.
	do(t, c, c.core.Redis.B().Hdel().Key(k.Meta).Field("gturns").Build())
	rep = check(t, c, true)
	assert.EqualValues(t, 1, rep.StaleTurns)
	requireClean(t, c)
}
