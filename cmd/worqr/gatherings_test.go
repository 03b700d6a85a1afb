package main

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/worqr/worqr"
)

// gatherings lists a queue's open gatherings, next to flush first, as a
// table and as JSON, paged by start and --limit.
func TestGatheringsCommand(t *testing.T) {
	t.Parallel()
	b := newBackend(t)
	c := b.client()
	ctx := ctxT(t)
	require.NoError(t, c.SetAggregation(ctx, "q", worqr.AggregateSettings{MaxSize: 10, MaxDelay: time.Hour}, worqr.CreateQueue()))
	for _, key := range []string{"first", "second", "first"} {
		_, err := c.Enqueue(ctx, "q", []byte("task"), worqr.Aggregate(key))
		require.NoError(t, err)
	}

	r := b.ok("gatherings", "q")
	assert.Contains(t, r.stderr, `"q": 2 open gatherings`)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	require.Len(t, lines, 3, "%s", r.stdout)
	assert.Regexp(t, `^KEY\s+TASKS\s+BYTES\s+DEADLINE$`, lines[0])
	assert.Regexp(t, `^first\s+2\s+\d+\s+\d{4}-`, lines[1])
	assert.Regexp(t, `^second\s+1\s+\d+\s+\d{4}-`, lines[2])

	got := jsonOf[gatheringsJSON](b, "gatherings", "q", "1", "--limit", "1")
	assert.Equal(t, "q", got.Queue)
	assert.EqualValues(t, 2, got.Open)
	assert.EqualValues(t, 1, got.Start)
	require.Len(t, got.Gatherings, 1)
	assert.Equal(t, "second", got.Gatherings[0].Key)
	assert.EqualValues(t, 1, got.Gatherings[0].Tasks)
	assert.Positive(t, got.Gatherings[0].Bytes)
	deadline, err := time.Parse(time.RFC3339Nano, got.Gatherings[0].Deadline)
	require.NoError(t, err)
	assert.WithinDuration(t, time.Now().Add(time.Hour), deadline, time.Minute)

	b.fails(2, "--limit must be in 1..1000", "gatherings", "q", "--limit", "0")
}
