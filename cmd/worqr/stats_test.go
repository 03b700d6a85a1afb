package main

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/worqr/worqr"
)

func TestStats(t *testing.T) {
	t.Parallel()
	b := newBackend(t)
	c := b.client()
	ctx := ctxT(t)
	w := newWorker(t, c)
	require.NoError(t, w.Handle(ctx, "jobs", func(context.Context, *worqr.Process) error { return nil }, worqr.HandleOptions{}))
	_, err := c.EnqueueBatch(ctx, "jobs", [][]byte{[]byte("a"), []byte("b"), []byte("c")})
	require.NoError(t, err)
	_, err = c.Enqueue(ctx, "jobs", []byte("later"), worqr.In(time.Hour))
	require.NoError(t, err)
	eventually(t, "three finished", func() bool {
		s, err := c.Stats(ctx, "jobs", worqr.StatsOptions{})
		return err == nil && s.Total().Counts.Finished == 3
	})
	_, err = c.Cancel(ctx, "jobs", []byte("later"))
	require.NoError(t, err)

	out := b.ok("stats", "jobs").stdout
	assert.Equal(t, []string{"TIME", "ENQUEUED", "STARTED", "FINISHED", "RETRIED", "REQUEUED", "DEAD", "RECLAIMED", "CANCELLED",
		"WAIT-P50", "WAIT-P99", "RUN-P50", "RUN-P99"}, rows(out)[0])
	total := row(t, out, "TOTAL")
	require.Len(t, total, 13)
	assert.Equal(t, []string{"4", "3", "3", "0", "0", "0", "0", "1"}, total[1:9])
	for _, cell := range total[9:] {
		assert.NotEqual(t, "-", cell, "a percentile of three starts and ends")
		_, err := time.ParseDuration(cell)
		assert.NoError(t, err, "%q", cell)
	}
	assert.GreaterOrEqual(t, len(rows(out)), 3, "header, a minute or two, total")

	js := jsonOf[statsJSON](b, "stats", "jobs")
	assert.Equal(t, "jobs", js.Queue)
	assert.Equal(t, int64(60_000), js.ResolutionMs)
	assert.Equal(t, countsJSON{Enqueued: 4, Started: 3, Finished: 3, Cancelled: 1}, js.Total.Counts)
	assert.EqualValues(t, 3, js.Total.Wait.Count)
	assert.EqualValues(t, 3, js.Total.Run.Count)
	var inBuckets int64
	for _, n := range js.Total.Run.Buckets {
		inBuckets += n
	}
	assert.EqualValues(t, 3, inBuckets)
	require.NotEmpty(t, js.Buckets)
	assert.NotNil(t, js.Buckets[0].Start)

	hourly := jsonOf[statsJSON](b, "stats", "jobs", "--hourly", "--since", "1h")
	assert.Equal(t, int64(3_600_000), hourly.ResolutionMs)
	assert.NotEmpty(t, hourly.Buckets)
	assert.Equal(t, js.Total.Counts, hourly.Total.Counts)

	r := b.ok("stats", "other")
	assert.Empty(t, r.stdout)
	assert.Contains(t, r.stderr, "no stats")
	b.fails(2, "", "stats")
	b.fails(2, "not a duration", "stats", "jobs", "--since", "soon")
}
