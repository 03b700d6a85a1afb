package worqr

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A batch whose tasks each have a unique key: the items whose keys are
// held, by tasks before or by earlier items, are reported with the
// holders' ids; the others are added, and hold their keys as Enqueue's
// would.
func TestEnqueueBatchItems(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	held, err := c.Enqueue(ctx, "q", []byte("held"), Unique("row:1"))
	require.NoError(t, err)
	res, err := c.EnqueueBatchItems(ctx, "q", []BatchItem{
		{Payload: []byte("one"), UniqueKey: "row:1"},
		{Payload: []byte("two"), UniqueKey: "row:2"},
		{Payload: []byte("plain")},
		{Payload: []byte("two again"), UniqueKey: "row:2"},
		{Payload: []byte("three"), UniqueKey: "row:3", UniqueFor: time.Hour},
	}, Kind("rows"))
	require.NoError(t, err, "duplicates are no error")
	require.Len(t, res, 5)
	assert.Equal(t, BatchResult{ID: held, Duplicate: true}, res[0])
	assert.False(t, res[1].Duplicate)
	assert.False(t, res[2].Duplicate)
	assert.Equal(t, BatchResult{ID: res[1].ID, Duplicate: true}, res[3], "taken by an earlier item")
	assert.False(t, res[4].Duplicate)
	two := res[1].ID
	assert.Equal(t, []string{"held", "two", "plain", "three"}, waiting(t, c, "q"))
	for _, r := range []BatchResult{res[1], res[2], res[4]} {
		loc, err := c.FindTask(ctx, "q", r.ID)
		require.NoError(t, err)
		require.NotNil(t, loc.Waiting, r.ID)
		assert.Equal(t, "rows", loc.Waiting.Kind)
	}

	// The keys taken are held as Enqueue's are.
	again, err := c.Enqueue(ctx, "q", []byte("x"), Unique("row:2"))
	assert.ErrorIs(t, err, ErrDuplicate)
	assert.Equal(t, res[1].ID, again)
	again, err = c.Enqueue(ctx, "q", []byte("x"), Unique("row:3"))
	assert.ErrorIs(t, err, ErrDuplicate)
	assert.Equal(t, res[4].ID, again)

	// Every key held: nothing added, no error.
	res, err = c.EnqueueBatchItems(ctx, "q", []BatchItem{{Payload: []byte("a"), UniqueKey: "row:1"}, {Payload: []byte("b"), UniqueKey: "row:2"}})
	require.NoError(t, err)
	assert.Equal(t, []BatchResult{{ID: held, Duplicate: true}, {ID: two, Duplicate: true}}, res)
	assert.Len(t, waiting(t, c, "q"), 4)

	// Bad items fail the whole call, naming the item; nothing is added.
	_, err = c.EnqueueBatchItems(ctx, "q", []BatchItem{{Payload: []byte("a"), UniqueKey: "row:9"}, {Payload: []byte("b"), UniqueKey: "k", UniqueFor: -time.Second}})
	assert.ErrorIs(t, err, ErrInvalidOptions)
	assert.ErrorContains(t, err, "item 1")
	_, err = c.EnqueueBatchItems(ctx, "q", []BatchItem{{Payload: []byte("a")}}, Unique("k"))
	assert.ErrorIs(t, err, ErrInvalidOptions, "keys go in the items")
	assert.Len(t, waiting(t, c, "q"), 4)
	res, err = c.EnqueueBatchItems(ctx, "q", nil)
	require.NoError(t, err)
	assert.Empty(t, res)
}
