package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/worqr/worqr"
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

// pause, resume and limit on a queue that does not exist exit 1 and
// make nothing, unless given --create.
func TestControlsOnAQueueThatDoesNotExist(t *testing.T) {
	t.Parallel()
	b := newBackend(t)
	b.fails(exitFailure, `no queue "nonexistent2" (worqr queues lists them; --create makes it)`, "resume", "nonexistent2")
	b.fails(exitFailure, `no queue "nonexistent2"`, "pause", "nonexistent2")
	b.fails(exitFailure, `no queue "nonexistent2"`, "limit", "nonexistent2", "3")
	assert.NotContains(t, b.ok("queues").stdout, "nonexistent2")

	r := b.ok("pause", "new", "--create")
	assert.Contains(t, r.stdout, "paused=true")
	b.ok("limit", "--create", "other", "2")
	assert.Equal(t, []string{"new", "0", "0", "0", "0", "yes"}, row(t, b.ok("queues").stdout, "new"))
	assert.Equal(t, []string{"other", "0", "0", "0", "0", "2"}, row(t, b.ok("queues").stdout, "other"))
	assert.Contains(t, b.ok("resume", "-h").stdout, "--create")
}

// limit refuses counts the scripts cannot hold exactly (above 2^53 - 1),
// and takes the largest they can.
func TestLimitOutOfRange(t *testing.T) {
	t.Parallel()
	b := newBackend(t)
	_, err := b.client().Enqueue(ctxT(t), "jobs", []byte("x"))
	require.NoError(t, err)
	for _, n := range []string{"9223372036854775807", "9007199254740992", "99999999999999999999"} {
		b.fails(exitUsage, `limit: "`+n+`" is not a count from 0 (no limit) to 9007199254740991`, "limit", "jobs", n)
	}
	got := jsonOf[queueRow](b, "limit", "jobs", "9007199254740991")
	assert.Equal(t, 9007199254740991, got.Concurrency)
	assert.Equal(t, []string{"jobs", "1", "0", "0", "0", "9007199254740991"}, row(t, b.ok("queues").stdout, "jobs"))
}

// aggregate sets the aggregation settings and prints them with the open
// gatherings; 0 puts back a default.
func TestAggregateSettings(t *testing.T) {
	t.Parallel()
	b := newBackend(t)
	c := b.client()
	ctx := ctxT(t)
	_, err := c.Enqueue(ctx, "jobs", []byte("x"), worqr.Aggregate("k"))
	require.NoError(t, err)
	got := jsonOf[aggregateRow](b, "aggregate", "jobs", "20", "90s")
	assert.Equal(t, aggregateRow{Queue: "jobs", MaxSize: 20, MaxDelayMs: 90_000, Gatherings: 1, Gathering: 1}, got)
	info, err := c.QueueInfo(ctx, "jobs")
	require.NoError(t, err)
	assert.Equal(t, worqr.AggregateSettings{MaxSize: 20, MaxDelay: 90 * time.Second}, info.Aggregation)
	assert.Contains(t, b.ok("aggregate", "jobs", "0", "90s").stdout, "up to 100, flushed 1m30s after the first; 1 gatherings open, holding 1 tasks")
	b.fails(exitUsage, "not a duration", "aggregate", "jobs", "5", "1.5ms")
	b.fails(exitFailure, `no queue "other"`, "aggregate", "other", "5", "1s")
}
