package worqrotel

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"

	"github.com/worqr/worqr"
	"github.com/worqr/worqr/internal/queuestats"
)

// Defaults of QueueMetricsOptions.
const (
	// DefaultTimeout bounds the reads of one collection.
	DefaultTimeout = queuestats.DefaultTimeout
	// DefaultMaxQueues is how many queues a collection reports.
	DefaultMaxQueues = queuestats.DefaultMaxQueues
	// DefaultParallel is how many reads a collection has in flight at once.
	DefaultParallel = queuestats.DefaultParallel
)

// Values of worqr.task.state.
const (
	StateWaiting  = "waiting"   // in the queue, ready to run
	StateDelayed  = "delayed"   // scheduled for later, or waiting out a retry backoff
	StateInFlight = "in_flight" // held by a worker
	StateDead     = "dead"      // in the queue's dead letters
)

// QueueMetricsOptions configure RegisterQueueMetrics. The zero value is
// the default.
type QueueMetricsOptions struct {
	// MeterProvider makes the meter. Default otel.GetMeterProvider().
	MeterProvider metric.MeterProvider
	// Timeout bounds the reads of one collection; what is not read by
	// then is left out of it and counted in worqr.scrape.errors. Default
	// DefaultTimeout.
	Timeout time.Duration
	// MaxQueues is how many queues a collection reports, the first by
	// name; worqr.queues still counts them all. Default DefaultMaxQueues.
	MaxQueues int
	// Parallel is how many reads a collection has in flight at once.
	// Default DefaultParallel.
	Parallel int
	// OnError, if set, is given the first error of each collection that
	// had any (to log it).
	OnError func(error)
}

// RegisterQueueMetrics registers asynchronous instruments that read, each
// time the meter's reader collects, the sizes of the queues and the number
// of live workers from Redis through client: numbers shared by every
// program, so register them in one program (or aggregate with max, not
// sum). A collection makes four reads per queue (the in-flight count
// reads the processes' payloads) and two more, bounded by opts;
// collections that overlap share one read. Unregister the returned
// Registration to stop.
//
// Instruments:
//
//	worqr.queue.tasks           gauge {task}    messaging.destination.name, worqr.task.state
//	worqr.queue.oldest_waiting  gauge s         messaging.destination.name (how long its task waiting longest has waited; 0: none waits)
//	worqr.queues                gauge {queue}   (queues in the registry, reported or not)
//	worqr.workers               gauge {worker}  (workers whose lease is live)
//	worqr.scrape.errors         counter {error} (collections in which a read failed or timed out)
//	worqr.scrape.duration       gauge s         (how long the last collection's reads took)
//
// The sizes are gauges, not sums: every program that registers them
// reports the same fleet-wide numbers, which add up to nothing across
// programs (aggregate them with max, or last value).
//
// A number whose read failed is left out of the collection rather than
// reported as zero.
func RegisterQueueMetrics(client *worqr.Client, opts QueueMetricsOptions) (metric.Registration, error) {
	mp := opts.MeterProvider
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	meter := mp.Meter(ScopeName, metric.WithSchemaURL(semconv.SchemaURL))
	tasks, err1 := meter.Int64ObservableGauge("worqr.queue.tasks", metric.WithUnit("{task}"),
		metric.WithDescription("Tasks of a queue by state: waiting (ready to run), delayed (scheduled, or waiting out a retry backoff), in_flight (held by a worker), dead (dead letters)."))
	queues, err2 := meter.Int64ObservableGauge("worqr.queues", metric.WithUnit("{queue}"),
		metric.WithDescription("Queues in the registry, including any beyond the limit of queues reported."))
	workers, err3 := meter.Int64ObservableGauge("worqr.workers", metric.WithUnit("{worker}"),
		metric.WithDescription("Workers whose lease is live."))
	scrapeErrors, err4 := meter.Int64ObservableCounter("worqr.scrape.errors", metric.WithUnit("{error}"),
		metric.WithDescription("Collections of the queue sizes in which a read from Redis failed or timed out (the numbers not read were left out)."))
	took, err5 := meter.Float64ObservableGauge("worqr.scrape.duration", metric.WithUnit("s"),
		metric.WithDescription("How long the last collection took to read the queue sizes from Redis."))
	oldest, err6 := meter.Float64ObservableGauge("worqr.queue.oldest_waiting", metric.WithUnit("s"),
		metric.WithDescription("How long the task of a queue that has waited longest (since its enqueue, or the end of its delay or backoff) has waited, by the Redis clock against this process's; 0 when none waits."))
	if err := errors.Join(err1, err2, err3, err4, err5, err6); err != nil {
		return nil, err
	}

	reader := &queuestats.Reader{Client: client, Timeout: opts.Timeout, MaxQueues: opts.MaxQueues, Parallel: opts.Parallel}
	var failed atomic.Int64
	states := [4]attribute.KeyValue{TaskStateKey.String(StateWaiting), TaskStateKey.String(StateDelayed), TaskStateKey.String(StateInFlight), TaskStateKey.String(StateDead)}
	return meter.RegisterCallback(func(ctx context.Context, o metric.Observer) error {
		s := reader.Read(ctx)
		for _, q := range s.Queues {
			queue := QueueKey.String(queuestats.Label(q.Name))
			for i, n := range [4]queuestats.Count{q.Waiting, q.Delayed, q.InFlight, q.Dead} {
				if n.OK {
					o.ObserveInt64(tasks, n.N, metric.WithAttributes(queue, states[i]))
				}
			}
			if q.Waiting.OK {
				o.ObserveFloat64(oldest, q.OldestWaiting(time.Now()).Seconds(), metric.WithAttributes(queue))
			}
		}
		if s.QueueCount.OK {
			o.ObserveInt64(queues, s.QueueCount.N)
		}
		if s.Workers.OK {
			o.ObserveInt64(workers, s.Workers.N)
		}
		o.ObserveFloat64(took, s.Took.Seconds())
		if s.Failures > 0 {
			failed.Add(1)
			if opts.OnError != nil {
				opts.OnError(s.Err)
			}
		}
		o.ObserveInt64(scrapeErrors, failed.Load())
		return nil
	}, tasks, oldest, queues, workers, scrapeErrors, took)
}
