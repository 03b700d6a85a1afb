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

// A group with a limit of 1 is a sequence: across two workers, its tasks
// run one at a time and finish in enqueue order, through failures retried
// with a delay (the failing task holds the group until it succeeds), while
// another group goes on meanwhile.
func TestSequenceRunsInOrderThroughDelayedRetries(t *testing.T) {
	t.Parallel()
	b, c, ctx := setup(t)
	const n = 8
	require.NoError(t, c.SetGroupConcurrency(ctx, "q", "seq", 1, CreateQueue()))
	var mu sync.Mutex
	var done, otherDone []string
	running, most := 0, 0
	failed := map[string]int{}
	for range 2 {
		w := newWorker(t, b.client(), WorkerOptions{})
		require.NoError(t, w.Handle(ctx, "q", func(_ context.Context, p *Process) error {
			name := string(p.Task())
			mu.Lock()
			defer mu.Unlock()
			if name[0] != 's' {
				otherDone = append(otherDone, name)
				return nil
			}
			running++
			most = max(most, running)
			defer func() { running-- }()
			// s2 and s5 fail twice each before they succeed.
			if (name == "s2" || name == "s5") && failed[name] < 2 {
				failed[name]++
				return errors.New("not yet")
			}
			done = append(done, name)
			return nil
		}, HandleOptions{Concurrency: 4, Retry: RetryPolicy{Backoff: func(int, error) time.Duration { return 30 * time.Millisecond }}}))
	}
	var want []string
	tasks := make([][]byte, n)
	for i := range tasks {
		want = append(want, fmt.Sprintf("s%d", i))
		tasks[i] = []byte(want[i])
	}
	require.NoError(t, second(c.EnqueueBatch(ctx, "q", tasks, Group("seq"))))
	require.NoError(t, second(c.EnqueueBatch(ctx, "q", [][]byte{[]byte("o1"), []byte("o2")}, Group("other"))))
	eventually(t, 10*time.Second, "all done", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(done) == n && len(otherDone) == 2
	})
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, want, done, "in enqueue order, retried tasks included")
	assert.Equal(t, 1, most, "one at a time")
}

// With SetSequenceHold, a sequence whose task dies starts nothing more
// until the dead letter is requeued (it runs first) or deleted; QueueInfo
// and Groups show the hold; other groups go on; turning it off lets every
// held sequence go on. Without it (the default), the later tasks go on.
func TestSequenceHoldsOnDeadTask(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	require.NoError(t, c.SetGroupConcurrency(ctx, "q", "", 1, CreateQueue()))
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
		var got []string
		for _, p := range ps {
			got = append(got, string(p.Task()))
		}
		assert.ElementsMatch(t, want, got)
		return ps
	}
	finish := func(ps []*Process) {
		t.Helper()
		for _, p := range ps {
			require.NoError(t, p.Finish(ctx))
		}
	}

	// The default: a dead task's group goes on.
	require.NoError(t, second(c.EnqueueBatch(ctx, "q", [][]byte{[]byte("d0"), []byte("d1")}, Group("def"))))
	ps := take("d0")
	require.NoError(t, ps[0].DeadLetter(ctx, errors.New("no")))
	finish(take("d1"))

	require.NoError(t, c.SetSequenceHold(ctx, "q", true))
	info, err := c.QueueInfo(ctx, "q")
	require.NoError(t, err)
	assert.True(t, info.SequenceHold)
	ids, err := c.EnqueueBatch(ctx, "q", [][]byte{[]byte("s0"), []byte("s1"), []byte("s2")}, Group("seq"))
	require.NoError(t, err)
	ps = take("s0")
	require.NoError(t, ps[0].DeadLetter(ctx, errors.New("for good")))
	require.NoError(t, second(c.Enqueue(ctx, "q", []byte("o0"), Group("other"))))
	finish(take("o0")) // another group goes on; s1 waits
	take()

	info, err = c.QueueInfo(ctx, "q")
	require.NoError(t, err)
	assert.EqualValues(t, 1, info.GroupsHeldOnDead)
	assert.EqualValues(t, 0, info.GroupsReady)
	rep, err := c.Groups(ctx, "q", 10)
	require.NoError(t, err)
	require.Len(t, rep.HeldOnDead, 1)
	assert.Equal(t, "seq", rep.HeldOnDead[0].Key)
	assert.Equal(t, ids[0], rep.HeldOnDead[0].DeadTask)
	assert.EqualValues(t, 2, rep.HeldOnDead[0].Waiting)
	assert.True(t, rep.HeldOnDead[0].HeldBack)
	assert.Empty(t, rep.HeldBack, "listed once, as held on its dead task")
	chk, err := c.Check(ctx, CheckOptions{})
	require.NoError(t, err)
	assert.Zero(t, chk.Problems(), "a hold is no inconsistency: %s", chk)

	// A task enqueued to the held group does not free it.
	require.NoError(t, second(c.Enqueue(ctx, "q", []byte("s3"), Group("seq"))))
	take()
	// Nor does one enqueued to a held group that had none waiting.
	require.NoError(t, second(c.Enqueue(ctx, "q", []byte("l0"), Group("lone"))))
	ps = take("l0")
	require.NoError(t, ps[0].DeadLetter(ctx, errors.New("alone")))
	require.NoError(t, second(c.Enqueue(ctx, "q", []byte("l1"), Group("lone"))))
	take()

	// Requeued, the dead task runs first, then the rest in order.
	ok, err := c.RequeueDeadLetter(ctx, "q", ids[0])
	require.NoError(t, err)
	require.True(t, ok)
	for _, want := range []string{"s0", "s1"} {
		ps = take(want)
		if want == "s1" {
			// s1 dies too; deleting its dead letter lets s2 go on.
			require.NoError(t, ps[0].DeadLetter(ctx, errors.New("again")))
			take()
			ok, err = c.DeleteDeadLetter(ctx, "q", ids[1])
			require.NoError(t, err)
			require.True(t, ok)
			continue
		}
		finish(ps)
	}
	ps = take("s2")
	require.NoError(t, ps[0].DeadLetter(ctx, errors.New("and again")))
	take()
	// Turning the hold off lets it go on.
	require.NoError(t, c.SetSequenceHold(ctx, "q", false))
	finish(take("s3", "l1"))
	info, err = c.QueueInfo(ctx, "q")
	require.NoError(t, err)
	assert.False(t, info.SequenceHold)
	assert.EqualValues(t, 0, info.GroupsHeldOnDead)
	assert.ErrorIs(t, c.SetSequenceHold(ctx, "nosuch", true), ErrNoQueue)
}
