package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// pause, resume and limit change the queue's controls in Redis, and
// queues shows them.
func TestControls(t *testing.T) {
	t.Parallel()
	b := newBackend(t)
	c := b.client()
	ctx := ctxT(t)
	_, err := c.Enqueue(ctx, "jobs", []byte("x"))
	require.NoError(t, err)

	r := b.ok("pause", "jobs")
	assert.Contains(t, r.stdout, "paused=true")
	info, err := c.QueueInfo(ctx, "jobs")
	require.NoError(t, err)
	assert.True(t, info.Paused)
	assert.Equal(t, []string{"jobs", "1", "0", "0", "0", "yes"}, row(t, b.ok("queues").stdout, "jobs"))

	got := jsonOf[queueRow](b, "limit", "jobs", "3")
	assert.Equal(t, queueRow{Queue: "jobs", Waiting: 1, Paused: true, Concurrency: 3}, got)
	assert.Equal(t, []string{"jobs", "1", "0", "0", "0", "yes", "3"}, row(t, b.ok("queues").stdout, "jobs"))

	b.ok("resume", "jobs")
	b.ok("limit", "jobs", "0")
	info, err = c.QueueInfo(ctx, "jobs")
	require.NoError(t, err)
	assert.False(t, info.Paused)
	assert.Zero(t, info.Concurrency)

	b.fails(2, "not a count", "limit", "jobs", "-1")
	b.fails(2, "", "pause")
}
