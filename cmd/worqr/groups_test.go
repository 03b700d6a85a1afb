package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/worqr/worqr"
)

// enqueue --group puts the task in its group: it waits there, under the
// group's limit.
func TestEnqueueGroup(t *testing.T) {
	t.Parallel()
	b := newBackend(t)
	c := b.client()
	ctx := ctxT(t)
	require.NoError(t, c.SetGroupConcurrency(ctx, "q", "", 1, worqr.CreateQueue()))
	b.ok("enqueue", "--group", "tenant-42", "q", "one")
	b.ok("enqueue", "--group", "tenant-42", "q", "two")
	info, err := c.QueueInfo(ctx, "q")
	require.NoError(t, err)
	assert.EqualValues(t, 2, info.Waiting)
	assert.EqualValues(t, 1, info.Groups)

	w := newWorker(t, c)
	require.NoError(t, w.StartWork(ctx, "q", worqr.Events{}))
	ps, err := w.DequeueN(ctx, "q", 2)
	require.NoError(t, err)
	require.Len(t, ps, 1, "the group's limit of 1")
	assert.Equal(t, "one", string(ps[0].Task()))
}
