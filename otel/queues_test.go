package worqrotel_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/worqr/worqr"
	worqrotel "github.com/worqr/worqr/otel"
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

func state(s string) attribute.KeyValue { return worqrotel.TaskStateKey.String(s) }

func queueMetrics(t *testing.T, c *worqr.Client, opts worqrotel.QueueMetricsOptions) *sdkmetric.ManualReader {
	t.Helper()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	opts.MeterProvider = mp
	reg, err := worqrotel.RegisterQueueMetrics(c, opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = reg.Unregister() })
	return reader
}

func TestQueueMetricsReadQueueSizes(t *testing.T) {
	t.Parallel()
	c := clientOn(t, redisOn(t, backend(t)), nil)
	fill(t, c)
	rm := collect(t, queueMetrics(t, c, worqrotel.QueueMetricsOptions{}))

	want := map[string]map[string]int64{
		"a": {worqrotel.StateWaiting: 2, worqrotel.StateDelayed: 1, worqrotel.StateInFlight: 0, worqrotel.StateDead: 0},
		"b": {worqrotel.StateWaiting: 1, worqrotel.StateDelayed: 0, worqrotel.StateInFlight: 1, worqrotel.StateDead: 1},
	}
	for q, states := range want {
		for s, n := range states {
			assert.Equal(t, n, sum(t, rm, "worqr.queue.tasks", queue(q), state(s)), "%s %s", q, s)
		}
	}
	tasks := find(t, rm, "worqr.queue.tasks")
	assert.Equal(t, "{task}", tasks.Unit)
	gauge, ok := tasks.Data.(metricdata.Gauge[int64])
	require.True(t, ok, "worqr.queue.tasks is a gauge: every program reports the same sizes, which do not add up")
	assert.Len(t, gauge.DataPoints, 8)
	for _, name := range []string{"worqr.queues", "worqr.workers"} {
		assert.IsType(t, metricdata.Gauge[int64]{}, find(t, rm, name).Data, name)
	}
	assert.Equal(t, int64(2), sum(t, rm, "worqr.queues"))
	assert.Equal(t, int64(1), sum(t, rm, "worqr.workers"))
	assert.Equal(t, int64(0), sum(t, rm, "worqr.scrape.errors"))
	assert.Equal(t, "s", find(t, rm, "worqr.scrape.duration").Unit)
}

func TestQueueMetricsBoundTheQueuesReported(t *testing.T) {
	t.Parallel()
	c := clientOn(t, redisOn(t, backend(t)), nil)
	fill(t, c)
	rm := collect(t, queueMetrics(t, c, worqrotel.QueueMetricsOptions{MaxQueues: 1}))
	assert.Len(t, find(t, rm, "worqr.queue.tasks").Data.(metricdata.Gauge[int64]).DataPoints, 4)
	assert.Equal(t, int64(-1), sum(t, rm, "worqr.queue.tasks", queue("b")))
	assert.Equal(t, int64(2), sum(t, rm, "worqr.queues"))
}

func TestQueueMetricsCountErrors(t *testing.T) {
	t.Parallel()
	m := backend(t)
	c := clientOn(t, redisOn(t, m), nil)
	fill(t, c)
	var errs atomic.Int64
	reader := queueMetrics(t, c, worqrotel.QueueMetricsOptions{OnError: func(error) { errs.Add(1) }})

	m.SetError("ERR injected")
	rm := collect(t, reader)
	m.SetError("")
	assert.Equal(t, int64(1), sum(t, rm, "worqr.scrape.errors"))
	assert.Equal(t, int64(1), errs.Load())
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			assert.NotContains(t, []string{"worqr.queue.tasks", "worqr.queues", "worqr.workers"}, m.Name, "a number not read is left out")
		}
	}

	rm = collect(t, reader)
	assert.Equal(t, int64(1), sum(t, rm, "worqr.scrape.errors"))
	assert.Equal(t, int64(2), sum(t, rm, "worqr.queues"))
}

// worqr.queue.oldest_waiting is the age of each queue's task that has
// waited longest, by the Redis clock: 0 for a queue where none waits.
func TestQueueMetricsReportTheOldestWaitingTasksAge(t *testing.T) {
	t.Parallel()
	m := backend(t)
	c := clientOn(t, redisOn(t, m), nil)
	ctx := context.Background()
	m.SetTime(time.Now().Add(-time.Hour)) // the Redis clock, which gives task ids
	_, err := c.Enqueue(ctx, "backlog", []byte("old"))
	require.NoError(t, err)
	m.SetTime(time.Now())
	_, err = c.Enqueue(ctx, "drained", []byte("x"), worqr.In(time.Hour))
	require.NoError(t, err)
	rm := collect(t, queueMetrics(t, c, worqrotel.QueueMetricsOptions{}))
	oldest := find(t, rm, "worqr.queue.oldest_waiting")
	assert.Equal(t, "s", oldest.Unit)
	ages := map[string]float64{}
	for _, dp := range oldest.Data.(metricdata.Gauge[float64]).DataPoints {
		v, _ := dp.Attributes.Value(worqrotel.QueueKey)
		ages[v.AsString()] = dp.Value
	}
	require.Len(t, ages, 2)
	assert.InDelta(t, time.Hour.Seconds(), ages["backlog"], 60)
	assert.Zero(t, ages["drained"])
}
