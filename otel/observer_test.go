package worqrotel_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/worqr/worqr"
	"github.com/worqr/worqr/internal/testenv"
	worqrotel "github.com/worqr/worqr/otel"
)

func queue(name string) attribute.KeyValue { return worqrotel.QueueKey.String(name) }
func outcome(o worqr.Outcome) attribute.KeyValue {
	return worqrotel.OutcomeKey.String(string(o))
}

func newObserver(t *testing.T) (*worqrotel.Observer, *sdkmetric.ManualReader) {
	t.Helper()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	obs, err := worqrotel.NewObserver(worqrotel.Options{MeterProvider: mp})
	require.NoError(t, err)
	return obs, reader
}

// worqr.task.kind: a task's kind, absent for none, and past MaxKinds the
// kinds seen later are OtherKind.
func TestObserverRecordsKindsUpToMaxKinds(t *testing.T) {
	t.Parallel()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	obs, err := worqrotel.NewObserver(worqrotel.Options{MeterProvider: mp, MaxKinds: 2})
	require.NoError(t, err)
	c := clientOn(t, redisOn(t, backend(t)), obs)

	// Started one at a time, so that the first two kinds seen are a and b.
	testenv.RunKinds(t, c, "jobs", "a", "b", "", "c", "other", "a")

	rm := collect(t, reader)
	for _, name := range []string{"worqr.tasks.started", "worqr.tasks.finished"} {
		data, ok := find(t, rm, name).Data.(metricdata.Sum[int64])
		require.True(t, ok)
		got := map[string]int64{}
		for _, dp := range data.DataPoints {
			kind, ok := dp.Attributes.Value(worqrotel.TaskKindKey)
			label := "(none)"
			if ok {
				label = kind.AsString()
			}
			got[label] += dp.Value
		}
		assert.Equal(t, map[string]int64{"a": 2, "b": 1, worqrotel.OtherKind: 2, "(none)": 1}, got, name)
	}
	succeeded := outcome(worqr.OutcomeSucceeded)
	assert.Equal(t, uint64(2), histogram(t, rm, "worqr.process.duration", queue("jobs"), worqrotel.TaskKindKey.String(worqrotel.OtherKind), succeeded).Count)
	assert.Equal(t, uint64(2), histogram(t, rm, "worqr.pickup.latency", queue("jobs"), worqrotel.TaskKindKey.String("a")).Count)
}

func TestObserverRecordsTasksThroughAWorker(t *testing.T) {
	t.Parallel()
	obs, reader := newObserver(t)
	c := clientOn(t, redisOn(t, backend(t)), obs)
	ctx := context.Background()

	w := newWorker(t, c, worqr.WorkerOptions{})
	require.NoError(t, w.Handle(ctx, "mail", func(ctx context.Context, p *worqr.Process) error {
		switch string(p.Task()) {
		case "slow":
			time.Sleep(50 * time.Millisecond)
		case "flaky":
			if p.Attempt() == 1 {
				return errors.New("smtp busy")
			}
		case "bad":
			return worqr.Permanent(errors.New("malformed"))
		}
		return nil
	}, worqr.HandleOptions{Retry: worqr.RetryPolicy{Backoff: func(int, error) time.Duration { return 0 }}}))
	_, err := c.EnqueueBatch(ctx, "mail", [][]byte{[]byte("slow"), []byte("flaky"), []byte("bad")})
	require.NoError(t, err)
	_, err = c.Enqueue(ctx, "mail", []byte("quick"))
	require.NoError(t, err)

	eventually(t, 5*time.Second, "five processes ended", func() bool {
		rm := collect(t, reader)
		for _, sm := range rm.ScopeMetrics {
			for _, m := range sm.Metrics {
				if m.Name == "worqr.tasks.finished" {
					return sum(t, rm, "worqr.tasks.finished", queue("mail")) == 5
				}
			}
		}
		return false
	})
	rm := collect(t, reader)
	assert.Equal(t, int64(4), sum(t, rm, "worqr.tasks.enqueued", queue("mail")))
	assert.Equal(t, int64(5), sum(t, rm, "worqr.tasks.started", queue("mail")))
	assert.Equal(t, int64(3), sum(t, rm, "worqr.tasks.finished", queue("mail"), outcome(worqr.OutcomeSucceeded)))
	assert.Equal(t, int64(1), sum(t, rm, "worqr.tasks.finished", queue("mail"), outcome(worqr.OutcomeRetried)))
	assert.Equal(t, int64(1), sum(t, rm, "worqr.tasks.finished", queue("mail"), outcome(worqr.OutcomeDead)))
	assert.Equal(t, "{task}", find(t, rm, "worqr.tasks.finished").Unit)

	succeeded := histogram(t, rm, "worqr.process.duration", queue("mail"), outcome(worqr.OutcomeSucceeded))
	assert.Equal(t, uint64(3), succeeded.Count)
	assert.GreaterOrEqual(t, succeeded.Sum, 0.05)
	assert.Equal(t, worqrotel.DefaultBuckets, succeeded.Bounds)
	assert.Equal(t, uint64(1), histogram(t, rm, "worqr.process.duration", queue("mail"), outcome(worqr.OutcomeRetried)).Count)
	pickup := histogram(t, rm, "worqr.pickup.latency", queue("mail"))
	assert.Equal(t, uint64(4), pickup.Count) // first attempts only
	assert.GreaterOrEqual(t, pickup.Sum, 0.0)
	require.NoError(t, w.Shutdown(ctx))
}

func TestObserverRecordsEnqueueErrors(t *testing.T) {
	t.Parallel()
	obs, reader := newObserver(t)
	m := backend(t)
	c := clientOn(t, redisOn(t, m), obs)
	m.SetError("ERR injected")
	_, err := c.Enqueue(context.Background(), "invoices", []byte("x"))
	require.Error(t, err)
	m.SetError("")
	rm := collect(t, reader)
	assert.Equal(t, int64(1), sum(t, rm, "worqr.enqueue.errors", queue("invoices")))
}

// A worker cut off from Redis fences itself; a peer reclaims its task.
func TestObserverRecordsFencesAndReclaims(t *testing.T) {
	t.Parallel()
	obs, reader := newObserver(t)
	m := backend(t)
	ctx := context.Background()
	fast := worqr.WorkerOptions{TTL: time.Second, RenewInterval: 250 * time.Millisecond}

	doomedRedis := redisOn(t, m)
	doomed := newWorker(t, clientOn(t, doomedRedis, obs), fast)
	c := clientOn(t, redisOn(t, m), obs)
	require.NoError(t, doomed.StartWork(ctx, "reports", worqr.Events{}))
	_, err := c.Enqueue(ctx, "reports", []byte("monthly"))
	require.NoError(t, err)
	_, err = doomed.Dequeue(ctx, "reports")
	require.NoError(t, err)
	peer := newWorker(t, c, fast)
	require.NoError(t, peer.StartWork(ctx, "reports", worqr.Events{}))
	doomedRedis.Close()

	eventually(t, 10*time.Second, "the fence and the reclaim recorded", func() bool {
		rm := collect(t, reader)
		has := map[string]bool{}
		for _, sm := range rm.ScopeMetrics {
			for _, m := range sm.Metrics {
				has[m.Name] = true
			}
		}
		// The fenced worker's process ends as lost after the fence is
		// observed, on its own goroutine: wait for that too.
		return has["worqr.fences"] && has["worqr.reclaims"] && has["worqr.tasks.finished"] &&
			sum(t, rm, "worqr.fences", worqrotel.FenceScopeKey.String(worqrotel.ScopeWorker)) == 1 &&
			sum(t, rm, "worqr.reclaims") == 1 &&
			sum(t, rm, "worqr.tasks.finished", queue("reports"), outcome(worqr.OutcomeLost)) == 1
	})
	rm := collect(t, reader)
	assert.Equal(t, int64(1), sum(t, rm, "worqr.tasks.reclaimed"))
}

// Zero Options use the global meter provider. (Not parallel: it sets
// the global provider.)
func TestObserverUsesTheGlobalProvider(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	prev := otel.GetMeterProvider()
	otel.SetMeterProvider(mp)
	t.Cleanup(func() { otel.SetMeterProvider(prev) })
	obs, err := worqrotel.NewObserver(worqrotel.Options{})
	require.NoError(t, err)

	c := clientOn(t, redisOn(t, backend(t)), obs)
	_, err = c.Enqueue(context.Background(), "q", []byte("x"))
	require.NoError(t, err)
	assert.Equal(t, int64(1), sum(t, collect(t, reader), "worqr.tasks.enqueued", queue("q")))
}

// The queue names in metrics and span names are bounded by MaxQueues;
// span attributes keep every name. A queue's error counter exists at zero
// from its first enqueue.
func TestQueueNamesAreBoundedByMaxQueues(t *testing.T) {
	t.Parallel()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	opts := worqrotel.Options{MeterProvider: mp, TracerProvider: tp, MaxQueues: 1}
	obs, err := worqrotel.NewObserver(opts)
	require.NoError(t, err)
	c, err := worqr.New(worqr.Options{Redis: redisOn(t, backend(t)), Observer: obs, Tracer: worqrotel.NewTracer(opts)})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	ctx := context.Background()
	for _, q := range []string{"tenant-1", "tenant-2", "tenant-3"} {
		_, err := c.Enqueue(ctx, q, []byte("x"))
		require.NoError(t, err)
	}
	rm := collect(t, reader)
	assert.Equal(t, int64(1), sum(t, rm, "worqr.tasks.enqueued", queue("tenant-1")))
	assert.Equal(t, int64(2), sum(t, rm, "worqr.tasks.enqueued", queue(worqrotel.OtherQueue)))
	assert.Equal(t, int64(-1), sum(t, rm, "worqr.tasks.enqueued", queue("tenant-2")))
	assert.Equal(t, int64(0), sum(t, rm, "worqr.enqueue.errors", queue("tenant-1")))

	var names []string
	for _, s := range rec.Ended() {
		names = append(names, s.Name()+" "+attrs(s)["messaging.destination.name"].AsString())
	}
	assert.Equal(t, []string{"send tenant-1 tenant-1", "send (other) tenant-2", "send (other) tenant-3"}, names)
}

// worqr.reason on dead outcomes: the built-in reasons as themselves, the
// application's own up to MaxReasons, then OtherReason; absent on every
// other outcome. Poison pills, which die in a reclaim, have a counter of
// their own.
func TestObserverRecordsDeadReasonsUpToMaxReasons(t *testing.T) {
	t.Parallel()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	obs, err := worqrotel.NewObserver(worqrotel.Options{MeterProvider: mp, MaxReasons: 2})
	require.NoError(t, err)
	ctx := context.Background()
	finish := func(o worqr.Outcome, reason string) {
		obs.ObserveFinish(ctx, worqr.FinishEvent{Queue: "mail", Outcome: o, Reason: reason, Duration: time.Millisecond})
	}
	finish(worqr.OutcomeSucceeded, "")
	finish(worqr.OutcomeRetried, "")
	for _, r := range []string{worqr.ReasonPermanent, worqr.ReasonPermanent, "smtp-5xx", "bad-input", "quota", "over", "smtp-5xx", worqr.ReasonTimeout, worqr.ReasonExhausted} {
		finish(worqr.OutcomeDead, r)
	}
	obs.ObserveReclaim(ctx, worqr.ReclaimEvent{DeadWorker: "w", Tasks: 1, Poison: 2})

	rm := collect(t, reader)
	data, ok := find(t, rm, "worqr.tasks.finished").Data.(metricdata.Sum[int64])
	require.True(t, ok)
	got := map[string]int64{}
	for _, dp := range data.DataPoints {
		o, _ := dp.Attributes.Value(worqrotel.OutcomeKey)
		key := o.AsString()
		if r, ok := dp.Attributes.Value(worqrotel.ReasonKey); ok {
			key += "/" + r.AsString()
		}
		got[key] += dp.Value
	}
	assert.Equal(t, map[string]int64{
		"succeeded": 1, "retried": 1,
		"dead/permanent": 2, "dead/smtp-5xx": 2, "dead/bad-input": 1, "dead/" + worqrotel.OtherReason: 2,
		"dead/timeout": 1, "dead/exhausted": 1,
	}, got)
	assert.Equal(t, int64(2), sum(t, rm, "worqr.tasks.poisoned"))

	// A queue's finished counts exist at zero from its first start, every
	// outcome and dead with each built-in reason a process can end with.
	obs.ObserveStart(ctx, worqr.StartEvent{Queue: "fresh", Attempt: 1})
	rm = collect(t, reader)
	for _, o := range []worqr.Outcome{worqr.OutcomeSucceeded, worqr.OutcomeRetried, worqr.OutcomeCancelled, worqr.OutcomeDeleted, worqr.OutcomeLost} {
		assert.Equal(t, int64(0), sum(t, rm, "worqr.tasks.finished", queue("fresh"), outcome(o)), o)
	}
	for _, r := range []string{worqr.ReasonPermanent, worqr.ReasonExhausted, worqr.ReasonPanic, worqr.ReasonManual, worqr.ReasonTimeout, worqr.ReasonDecode, worqr.ReasonUnroutable} {
		assert.Equal(t, int64(0), sum(t, rm, "worqr.tasks.finished", queue("fresh"), outcome(worqr.OutcomeDead), worqrotel.ReasonKey.String(r)), r)
	}
	// The duration histogram is not split by reason.
	assert.Equal(t, uint64(9), histogram(t, rm, "worqr.process.duration", queue("mail"), outcome(worqr.OutcomeDead)).Count)
}
