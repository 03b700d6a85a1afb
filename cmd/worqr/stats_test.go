package main

import (
	"context"
	"errors"
	"strings"
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

// Tasks with kinds: a second table with each kind's counts and rates per
// minute over the span shown (in JSON, kinds per bucket and kindRates); a
// queue without kinds shows none.
func TestStatsByKind(t *testing.T) {
	t.Parallel()
	b := newBackend(t)
	c := b.client()
	ctx := ctxT(t)
	w := newWorker(t, c)
	require.NoError(t, w.Handle(ctx, "jobs", func(_ context.Context, p *worqr.Process) error {
		switch {
		case string(p.Task()) == "die":
			return worqr.Permanent(errors.New("no"))
		case string(p.Task()) == "flaky" && p.Attempt() == 1:
			return worqr.RetryAfter(0, errors.New("again"))
		}
		return nil
	}, worqr.HandleOptions{}))
	for _, task := range []struct{ payload, kind string }{
		{"ok", "email.welcome"}, {"flaky", "email.welcome"}, {"die", "report"}, {"ok", ""},
	} {
		var opts []worqr.EnqueueOption
		if task.kind != "" {
			opts = append(opts, worqr.Kind(task.kind))
		}
		_, err := c.Enqueue(ctx, "jobs", []byte(task.payload), opts...)
		require.NoError(t, err)
	}
	eventually(t, "every task ended", func() bool {
		s, err := c.Stats(ctx, "jobs", worqr.StatsOptions{})
		return err == nil && s.Total().Counts.Finished == 3 && s.Total().Counts.Dead == 1
	})

	out := b.ok("stats", "jobs", "--since", "10m").stdout
	assert.Equal(t, []string{"KIND", "FINISHED", "RETRIED", "DEAD", "FINISHED/MIN", "RETRIED/MIN", "DEAD/MIN"}, row(t, out, "KIND"))
	assert.Equal(t, []string{"email.welcome", "2", "1", "0", "0.20", "0.10", "0.00"}, row(t, out, "email.welcome"))
	assert.Equal(t, []string{"report", "0", "0", "1", "0.00", "0.00", "0.10"}, row(t, out, "report"))
	assert.Len(t, rows(out[strings.Index(out, "KIND"):]), 3, "the kinds' header and two kinds")

	js := jsonOf[statsJSON](b, "stats", "jobs", "--since", "10m")
	assert.Equal(t, map[string]kindCountsJSON{"email.welcome": {Finished: 2, Retried: 1}, "report": {Dead: 1}}, js.Total.Kinds)
	assert.Equal(t, int64(600_000), js.SpanMs)
	assert.InDelta(t, 0.2, js.KindRates["email.welcome"].FinishedPerMin, 1e-9)
	assert.InDelta(t, 0.1, js.KindRates["report"].DeadPerMin, 1e-9)

	_, err := c.Enqueue(ctx, "plain", []byte("p"))
	require.NoError(t, err)
	require.NoError(t, w.Handle(ctx, "plain", func(context.Context, *worqr.Process) error { return nil }, worqr.HandleOptions{}))
	eventually(t, "plain finished", func() bool {
		s, err := c.Stats(ctx, "plain", worqr.StatsOptions{})
		return err == nil && s.Total().Counts.Finished == 1
	})
	plain := b.ok("stats", "plain").stdout
	assert.NotContains(t, plain, "KIND")
	assert.Nil(t, jsonOf[statsJSON](b, "stats", "plain").KindRates)
}
