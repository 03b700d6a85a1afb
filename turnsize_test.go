package worqr

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// SetGroupTurnSize checks what it is given, refuses a queue that does not
// exist, and its setting reads back in QueueInfo and Groups; 1 puts back
// the default.
func TestSetGroupTurnSize(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	for _, n := range []int{-1, 0, MaxGroupTurnSize + 1} {
		assert.ErrorIs(t, c.SetGroupTurnSize(ctx, "q", n, CreateQueue()), ErrInvalidOptions, "turn size %d", n)
	}
	assert.ErrorIs(t, c.SetGroupTurnSize(ctx, "none", 8), ErrNoQueue)
	info, err := c.QueueInfo(ctx, "none")
	require.NoError(t, err)
	assert.Equal(t, 1, info.GroupTurnSize, "the default")

	require.NoError(t, c.SetGroupTurnSize(ctx, "q", MaxGroupTurnSize, CreateQueue()))
	info, err = c.QueueInfo(ctx, "q")
	require.NoError(t, err)
	assert.Equal(t, MaxGroupTurnSize, info.GroupTurnSize)
	require.NoError(t, c.SetGroupTurnSize(ctx, "q", 8))
	r, err := c.Groups(ctx, "q", 1)
	require.NoError(t, err)
	assert.Equal(t, 8, r.TurnSize)
	info, err = c.QueueInfo(ctx, "q")
	require.NoError(t, err)
	assert.Equal(t, 8, info.GroupTurnSize)

	require.NoError(t, c.SetGroupTurnSize(ctx, "q", 1))
	info, err = c.QueueInfo(ctx, "q")
	require.NoError(t, err)
	assert.Equal(t, 1, info.GroupTurnSize)
	r, err = c.Groups(ctx, "q", 1)
	require.NoError(t, err)
	assert.Equal(t, 1, r.TurnSize)
}

// A flood of 1,000 tasks and 9 small groups of 10, drained 10 at a time:
// under the default turn size the groups alternate task by task until the
// small groups are done; under a turn size of 8 they alternate in runs of
// more than one task and no more than 8, and the small groups still finish
// within 5 of the flood's turns.
func TestGroupTurnSizeRuns(t *testing.T) {
	t.Parallel()
	for _, size := range []int{1, 8} {
		t.Run(fmt.Sprint("size=", size), func(t *testing.T) {
			t.Parallel()
			_, c, ctx := setup(t)
			if size > 1 {
				require.NoError(t, c.SetGroupTurnSize(ctx, "q", size, CreateQueue()))
			}
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
			// The starts up to the small groups' last.
			var order []string
			smallDone := 0
			for smallDone < small*each {
				ps, err := w.DequeueN(ctx, "q", 10)
				require.NoError(t, err)
				for _, p := range ps {
					if smallDone < small*each {
						order = append(order, string(p.Task()))
						if string(p.Task()) != "F" {
							smallDone++
						}
					}
					require.NoError(t, p.Finish(ctx))
				}
			}
			longest, run, floods := 0, 0, 0
			for i, name := range order {
				if i > 0 && name == order[i-1] {
					run++
				} else {
					run = 1
				}
				longest = max(longest, run)
				if name == "F" {
					floods++
				}
			}
			if size == 1 {
				assert.Equal(t, 1, longest, "task by task: %v", order)
				assert.LessOrEqual(t, floods, each+1)
				return
			}
			assert.Greater(t, longest, 1, "runs of more than one: %v", order)
			assert.LessOrEqual(t, longest, size, "runs of up to the turn size: %v", order)
			// A turn the dequeue's count cuts short (the second group of a
			// dequeue takes the 2 left of 10) still moves its group on, so
			// a small group takes 2 a turn at worst: 5 turns, and the flood
			// 8 in each.
			t.Logf("the flood's starts before the small groups' last: %d", floods)
			assert.LessOrEqual(t, floods, size*each/(10-size), "the flood's starts before the small groups' last")
		})
	}
}
