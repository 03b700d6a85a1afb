package worqr

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Groups ranks a queue's groups by tasks waiting and by slots running,
// and names those held back at their limit with tasks waiting.
func TestGroupsReport(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	require.NoError(t, c.SetGroupConcurrency(ctx, "q", "", 1, CreateQueue()))
	require.NoError(t, c.SetGroupConcurrency(ctx, "q", "big", 5))
	_, err := c.EnqueueBatch(ctx, "q", [][]byte{[]byte("h1"), []byte("h2"), []byte("h3")}, Group("held"))
	require.NoError(t, err)
	w := newWorker(t, c, WorkerOptions{})
	require.NoError(t, w.StartWork(ctx, "q", Events{}))
	ps, err := w.DequeueN(ctx, "q", 1)
	require.NoError(t, err)
	require.Len(t, ps, 1)
	_, err = c.EnqueueBatch(ctx, "q", [][]byte{[]byte("b1"), []byte("b2"), []byte("b3"), []byte("b4")}, Group("big"))
	require.NoError(t, err)
	_, err = c.Enqueue(ctx, "q", []byte("s1"), Group("small, with a comma"))
	require.NoError(t, err)

	r, err := c.Groups(ctx, "q", 10)
	require.NoError(t, err)
	assert.Equal(t, "q", r.Queue)
	assert.EqualValues(t, 2, r.Ready, "big and small")
	assert.EqualValues(t, 1, r.Running, "held")
	assert.Equal(t, 1, r.DefaultLimit)
	assert.False(t, r.Partial)
	assert.Equal(t, []GroupInfo{
		{Key: "big", Turns: 1, Waiting: 4, Limit: 5},
		{Key: "held", Turns: 1, Waiting: 2, Running: 1, Limit: 1, HeldBack: true},
		{Key: "small, with a comma", Turns: 1, Waiting: 1, Limit: 1},
	}, r.TopWaiting)
	assert.Equal(t, []GroupInfo{{Key: "held", Turns: 1, Waiting: 2, Running: 1, Limit: 1, HeldBack: true}}, r.TopRunning)
	assert.Equal(t, []GroupInfo{{Key: "held", Turns: 1, Waiting: 2, Running: 1, Limit: 1, HeldBack: true}}, r.HeldBack)

	r, err = c.Groups(ctx, "q", 1)
	require.NoError(t, err)
	require.Len(t, r.TopWaiting, 1, "the top one")
	assert.Equal(t, "big", r.TopWaiting[0].Key)

	// Its process ends: the group is no longer held back.
	require.NoError(t, ps[0].Finish(ctx))
	r, err = c.Groups(ctx, "q", 10)
	require.NoError(t, err)
	assert.Empty(t, r.HeldBack)
	assert.Empty(t, r.TopRunning)
	assert.EqualValues(t, 3, r.Ready)

	_, err = c.Groups(ctx, "q", 0)
	assert.ErrorIs(t, err, ErrInvalidOptions)
	_, err = c.Groups(ctx, "q", MaxGroupsRead+1)
	assert.ErrorIs(t, err, ErrInvalidOptions)
}
