package worqrprom_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/worqr/worqr"
	worqrprom "github.com/worqr/worqr/prometheus"
)

// fill makes two queues: "a" with two tasks waiting and one delayed, "b"
// with one waiting, one in flight and one dead letter, and one worker.
func fill(t *testing.T, c *worqr.Client) {
	t.Helper()
	ctx := context.Background()
	_, err := c.EnqueueBatch(ctx, "a", [][]byte{[]byte("1"), []byte("2")})
	require.NoError(t, err)
	_, err = c.Enqueue(ctx, "a", []byte("later"), worqr.In(time.Hour))
	require.NoError(t, err)
	_, err = c.EnqueueBatch(ctx, "b", [][]byte{[]byte("doomed"), []byte("held"), []byte("waiting")})
	require.NoError(t, err)
	w := newWorker(t, c, worqr.WorkerOptions{})
	require.NoError(t, w.StartWork(ctx, "b", worqr.Events{}))
	doomed, err := w.Dequeue(ctx, "b")
	require.NoError(t, err)
	require.NoError(t, doomed.DeadLetter(ctx, errors.New("malformed")))
	_, err = w.Dequeue(ctx, "b")
	require.NoError(t, err)
}

const queueSizes = `
# HELP worqr_queue_tasks Tasks of a queue by state: waiting (ready to run), delayed (scheduled, or waiting out a retry backoff), in_flight (held by a worker), dead (dead letters).
# TYPE worqr_queue_tasks gauge
worqr_queue_tasks{queue="a",state="dead"} 0
worqr_queue_tasks{queue="a",state="delayed"} 1
worqr_queue_tasks{queue="a",state="in_flight"} 0
worqr_queue_tasks{queue="a",state="waiting"} 2
`
const queueSizesB = `worqr_queue_tasks{queue="b",state="dead"} 1
worqr_queue_tasks{queue="b",state="delayed"} 0
worqr_queue_tasks{queue="b",state="in_flight"} 1
worqr_queue_tasks{queue="b",state="waiting"} 1
`
const counts = `
# HELP worqr_queues Queues in the registry, including any beyond the collector's limit of queues reported.
# TYPE worqr_queues gauge
worqr_queues 2
# HELP worqr_workers Workers whose lease is live.
# TYPE worqr_workers gauge
worqr_workers 1
`
const noErrors = `
# HELP worqr_scrape_errors_total Scrapes of the queue sizes in which a read from Redis failed or timed out (the numbers not read were left out).
# TYPE worqr_scrape_errors_total counter
worqr_scrape_errors_total 0
`

func TestCollectorReadsQueueSizes(t *testing.T) {
	t.Parallel()
	c := clientOn(t, redisOn(t, backend(t)), nil)
	fill(t, c)

	col := worqrprom.NewCollector(c, worqrprom.CollectorOptions{})
	require.NoError(t, testutil.CollectAndCompare(col, strings.NewReader(queueSizes+queueSizesB+counts+noErrors),
		"worqr_queue_tasks", "worqr_queues", "worqr_workers", "worqr_scrape_errors_total"))
	problems, err := testutil.CollectAndLint(col)
	require.NoError(t, err)
	assert.Empty(t, problems)
	assert.Equal(t, 12, testutil.CollectAndCount(col, "worqr_queue_tasks", "worqr_queues", "worqr_workers", "worqr_scrape_errors_total", "worqr_scrape_duration_seconds"))

	// Registered with a registry, and served.
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(col)
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(counts), "worqr_queues", "worqr_workers"))
}

func TestCollectorBoundsTheQueuesReported(t *testing.T) {
	t.Parallel()
	c := clientOn(t, redisOn(t, backend(t)), nil)
	fill(t, c)
	col := worqrprom.NewCollector(c, worqrprom.CollectorOptions{MaxQueues: 1})
	require.NoError(t, testutil.CollectAndCompare(col, strings.NewReader(queueSizes+counts),
		"worqr_queue_tasks", "worqr_queues", "worqr_workers"))
}

func TestCollectorCountsScrapeErrors(t *testing.T) {
	t.Parallel()
	m := backend(t)
	c := clientOn(t, redisOn(t, m), nil)
	fill(t, c)
	var mu sync.Mutex
	var errs []error
	col := worqrprom.NewCollector(c, worqrprom.CollectorOptions{OnError: func(err error) {
		mu.Lock()
		defer mu.Unlock()
		errs = append(errs, err)
	}})

	// Redis failing: nothing is reported but the error count.
	m.SetError("ERR injected")
	require.NoError(t, testutil.CollectAndCompare(col, strings.NewReader(`
# HELP worqr_scrape_errors_total Scrapes of the queue sizes in which a read from Redis failed or timed out (the numbers not read were left out).
# TYPE worqr_scrape_errors_total counter
worqr_scrape_errors_total 1
`), "worqr_queue_tasks", "worqr_queues", "worqr_workers", "worqr_scrape_errors_total"))
	m.SetError("")
	mu.Lock()
	require.Len(t, errs, 1)
	assert.ErrorContains(t, errs[0], "injected")
	mu.Unlock()

	// Redis back: the numbers are back, and the count stays.
	require.NoError(t, testutil.CollectAndCompare(col, strings.NewReader(counts+`
# HELP worqr_scrape_errors_total Scrapes of the queue sizes in which a read from Redis failed or timed out (the numbers not read were left out).
# TYPE worqr_scrape_errors_total counter
worqr_scrape_errors_total 1
`), "worqr_queues", "worqr_workers", "worqr_scrape_errors_total"))
}

func TestCollectorTimesOut(t *testing.T) {
	t.Parallel()
	c := clientOn(t, redisOn(t, backend(t)), nil)
	fill(t, c)
	col := worqrprom.NewCollector(c, worqrprom.CollectorOptions{Timeout: time.Nanosecond})
	require.NoError(t, testutil.CollectAndCompare(col, strings.NewReader(`
# HELP worqr_scrape_errors_total Scrapes of the queue sizes in which a read from Redis failed or timed out (the numbers not read were left out).
# TYPE worqr_scrape_errors_total counter
worqr_scrape_errors_total 1
`), "worqr_queue_tasks", "worqr_queues", "worqr_workers", "worqr_scrape_errors_total"))
}

// worqr_queue_oldest_waiting_seconds is the age of each queue's task that
// has waited longest, by the Redis clock: 0 for a queue where none waits.
func TestCollectorReportsTheOldestWaitingTasksAge(t *testing.T) {
	t.Parallel()
	m := backend(t)
	c := clientOn(t, redisOn(t, m), nil)
	ctx := context.Background()
	m.SetTime(time.Now().Add(-time.Hour)) // the Redis clock, which gives task ids
	_, err := c.Enqueue(ctx, "backlog", []byte("old"))
	require.NoError(t, err)
	m.SetTime(time.Now())
	_, err = c.Enqueue(ctx, "backlog", []byte("new"))
	require.NoError(t, err)
	_, err = c.Enqueue(ctx, "drained", []byte("x"), worqr.In(time.Hour)) // a queue where none waits
	require.NoError(t, err)

	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(worqrprom.NewCollector(c, worqrprom.CollectorOptions{}))
	families, err := reg.Gather()
	require.NoError(t, err)
	ages := map[string]float64{}
	for _, f := range families {
		if f.GetName() != "worqr_queue_oldest_waiting_seconds" {
			continue
		}
		for _, m := range f.GetMetric() {
			ages[m.GetLabel()[0].GetValue()] = m.GetGauge().GetValue()
		}
	}
	require.Len(t, ages, 2)
	assert.InDelta(t, time.Hour.Seconds(), ages["backlog"], 60)
	assert.Zero(t, ages["drained"])
}
