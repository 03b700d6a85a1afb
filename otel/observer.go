package worqrotel

import (
	"context"
	"errors"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"

	"github.com/worqr/worqr"
	"github.com/worqr/worqr/internal/queuestats"
)

// DefaultBuckets are the histogram bucket boundaries, in seconds, used
// when Options leaves them empty: from 5 ms to an hour, since tasks range
// from quick calls to long batch jobs.
var DefaultBuckets = []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600}

// Bounds of worqr.task.kind on metrics (see Options.MaxKinds).
const (
	// DefaultMaxKinds is the number of task kinds an Observer keeps apart
	// when Options.MaxKinds is 0.
	DefaultMaxKinds = queuestats.DefaultMaxKinds
	// OtherKind is the worqr.task.kind of the tasks whose kind is past the
	// bound: it cannot be a task's kind (kinds have no parentheses).
	OtherKind = queuestats.OtherKind
	// DefaultMaxReasons is the number of the application's own reasons
	// (worqr.WithReason) an Observer keeps apart when Options.MaxReasons
	// is 0.
	DefaultMaxReasons = queuestats.DefaultMaxReasons
	// OtherReason is the worqr.reason of the dead outcomes whose reason is
	// the application's own and past the bound: it cannot be a reason
	// (reasons have no parentheses).
	OtherReason = queuestats.OtherReason
)

// Values of worqr.fence.scope.
const (
	// ScopeWorker is a fence of a whole worker: it lost its lease.
	ScopeWorker = "worker"
	// ScopeQueue is a fence of one queue: the worker lost its lease on it.
	ScopeQueue = "queue"
)

// Observer records OpenTelemetry metrics of what one program's worqr
// Client and Workers do. Pass it as worqr.Options.Observer; it implements
// every worqr observer interface. Safe for concurrent use. A queue's
// enqueue counts, and a queue and kind's finished counts (every outcome,
// and dead with every built-in reason), are recorded at zero from the
// first event of the queue (or pair), so that rates over them start there.
//
// Instruments (messaging.destination.name is the queue, worqr.task.kind
// the task's kind, absent for a task without one, bounded by
// Options.MaxKinds; worqr.reason why a task died, on dead outcomes only,
// bounded by Options.MaxReasons):
//
//	worqr.tasks.enqueued    counter {task}    messaging.destination.name
//	worqr.enqueue.errors    counter {error}   messaging.destination.name (failed Enqueue/EnqueueBatch calls)
//	worqr.tasks.started     counter {task}    messaging.destination.name, worqr.task.kind (every attempt)
//	worqr.tasks.finished    counter {task}    messaging.destination.name, worqr.task.kind, worqr.outcome, worqr.reason
//	worqr.process.duration  histogram s       messaging.destination.name, worqr.task.kind, worqr.outcome (dequeue to end)
//	worqr.pickup.latency    histogram s       messaging.destination.name, worqr.task.kind (enqueue to first start)
//	worqr.reclaims          counter {reclaim} (dead workers whose tasks were returned)
//	worqr.tasks.reclaimed   counter {task}    (tasks so returned)
//	worqr.tasks.poisoned    counter {task}    (tasks of dead workers sent to the dead letters instead, reason "poison")
//	worqr.fences            counter {fence}   worqr.fence.scope ("worker" or "queue")
type Observer struct {
	enqueued      metric.Int64Counter
	enqueueErrors metric.Int64Counter
	started       metric.Int64Counter
	finished      metric.Int64Counter
	duration      metric.Float64Histogram
	pickup        metric.Float64Histogram
	reclaims      metric.Int64Counter
	reclaimed     metric.Int64Counter
	poisoned      metric.Int64Counter
	fences        metric.Int64Counter

	kinds   *queuestats.Kinds   // the values of worqr.task.kind, bounded
	queues  *queuestats.Queues  // the values of messaging.destination.name, bounded
	reasons *queuestats.Reasons // the values of worqr.reason, bounded
	attrs   sync.Map            // attribute sets by attrKey
	ready   sync.Map            // attrKeys (queue and kind) whose finished counts exist
}

// outcomes are every worqr.Outcome but OutcomeDead, and deadReasons the
// built-in reasons a process's end can carry (a poison pill dies in a
// reclaim), for the finished counts made ready at zero.
var (
	outcomes = []worqr.Outcome{
		worqr.OutcomeSucceeded, worqr.OutcomeRetried,
		worqr.OutcomeCancelled, worqr.OutcomeDeleted, worqr.OutcomeLost,
	}
	deadReasons = []string{
		worqr.ReasonPermanent, worqr.ReasonExhausted, worqr.ReasonPanic, worqr.ReasonManual,
		worqr.ReasonTimeout, worqr.ReasonDecode, worqr.ReasonUnroutable,
	}
)

// attrKey is what an attribute set is made of: a queue, and a kind, an
// outcome and a reason if not "".
type attrKey struct {
	queue, kind string
	outcome     worqr.Outcome
	reason      string
}

// The observer interfaces it implements.
var (
	_ worqr.EnqueueObserver = (*Observer)(nil)
	_ worqr.StartObserver   = (*Observer)(nil)
	_ worqr.FinishObserver  = (*Observer)(nil)
	_ worqr.ReclaimObserver = (*Observer)(nil)
	_ worqr.FenceObserver   = (*Observer)(nil)
)

// NewObserver makes the instruments of an Observer with opts's
// MeterProvider. It fails only if the provider refuses an instrument.
func NewObserver(opts Options) (*Observer, error) {
	mp := opts.MeterProvider
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	meter := mp.Meter(ScopeName, metric.WithSchemaURL(semconv.SchemaURL))
	var errs []error
	counter := func(name, unit, desc string) metric.Int64Counter {
		c, err := meter.Int64Counter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		return c
	}
	histogram := func(name, desc string, buckets []float64) metric.Float64Histogram {
		if len(buckets) == 0 {
			buckets = DefaultBuckets
		}
		h, err := meter.Float64Histogram(name, metric.WithUnit("s"), metric.WithDescription(desc), metric.WithExplicitBucketBoundaries(buckets...))
		errs = append(errs, err)
		return h
	}
	o := &Observer{
		enqueued:      counter("worqr.tasks.enqueued", "{task}", "Tasks enqueued by this program (Enqueue and EnqueueBatch calls that succeeded, counted per task)."),
		enqueueErrors: counter("worqr.enqueue.errors", "{error}", "Enqueue and EnqueueBatch calls of this program that failed."),
		started:       counter("worqr.tasks.started", "{task}", "Processes started by this program's workers: every attempt of a task counts."),
		finished:      counter("worqr.tasks.finished", "{task}", "Processes of this program's workers that ended, by outcome (succeeded, retried, dead, cancelled, deleted, lost)."),
		duration: histogram("worqr.process.duration",
			"How long processes ran, from dequeue to their end (the handler's run and the write that settled it), on the worker's clock.", opts.DurationBuckets),
		pickup: histogram("worqr.pickup.latency",
			"Time from a task's enqueue to its first start (first attempts only; a delayed task's delay included). "+
				"The enqueue time is by the Redis clock, the start by this program's clock: skew between the two shifts it (negative values count as 0).", opts.PickupBuckets),
		reclaims:  counter("worqr.reclaims", "{reclaim}", "Dead workers whose tasks this program's workers returned to their queues."),
		reclaimed: counter("worqr.tasks.reclaimed", "{task}", "Tasks of dead workers that this program's workers returned to their queues."),
		poisoned:  counter("worqr.tasks.poisoned", "{task}", `Tasks of dead workers that this program's workers sent to the dead letters, reason "poison", instead of their queues (see worqr.Options.PoisonLimit).`),
		fences:    counter("worqr.fences", "{fence}", `Times this program's workers fenced themselves: scope "worker" when a worker lost its lease, "queue" when it lost its lease on one queue.`),
		kinds:     queuestats.NewKinds(opts.MaxKinds),
		queues:    queuestats.NewQueues(opts.MaxQueues),
		reasons:   queuestats.NewReasons(opts.MaxReasons),
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return o, nil
}

// queueAttrs are the attributes of a queue (bounded here), with a kind
// and a reason (label values, already bounded) and an outcome if not "",
// made once.
func (o *Observer) queueAttrs(queue, kind string, outcome worqr.Outcome, reason string) metric.MeasurementOption {
	key := attrKey{o.queues.Label(queue), kind, outcome, reason}
	if a, ok := o.attrs.Load(key); ok {
		return a.(metric.MeasurementOption)
	}
	kvs := []attribute.KeyValue{QueueKey.String(key.queue)}
	if kind != "" {
		kvs = append(kvs, TaskKindKey.String(kind))
	}
	if outcome != "" {
		kvs = append(kvs, OutcomeKey.String(string(outcome)))
	}
	if reason != "" {
		kvs = append(kvs, ReasonKey.String(reason))
	}
	a, _ := o.attrs.LoadOrStore(key, metric.WithAttributeSet(attribute.NewSet(kvs...)))
	return a.(metric.MeasurementOption)
}

// ObserveEnqueue implements worqr.EnqueueObserver.
func (o *Observer) ObserveEnqueue(ctx context.Context, e worqr.EnqueueEvent) {
	attrs := o.queueAttrs(e.Queue, "", "", "")
	if e.Err != nil {
		o.enqueueErrors.Add(ctx, 1, attrs)
		o.enqueued.Add(ctx, 0, attrs)
		return
	}
	o.enqueued.Add(ctx, int64(len(e.TaskIDs)), attrs)
	o.enqueueErrors.Add(ctx, 0, attrs) // the series exists before the first error
}

// ObserveStart implements worqr.StartObserver.
func (o *Observer) ObserveStart(ctx context.Context, e worqr.StartEvent) {
	kind := o.kinds.Label(e.Kind)
	attrs := o.queueAttrs(e.Queue, kind, "", "")
	o.readyFinished(ctx, e.Queue, kind)
	o.started.Add(ctx, 1, attrs)
	if e.Attempt == 1 && !e.EnqueuedAt.IsZero() {
		o.pickup.Record(ctx, max(time.Since(e.EnqueuedAt).Seconds(), 0), attrs)
	}
}

// readyFinished records 0 to the finished counts of a queue and kind, of
// every outcome and of dead with every built-in reason, the first time
// the pair starts a process, so that rates over them start there.
func (o *Observer) readyFinished(ctx context.Context, queue, kind string) {
	key := attrKey{queue: o.queues.Label(queue), kind: kind}
	if _, ok := o.ready.Load(key); ok {
		return
	}
	if _, loaded := o.ready.LoadOrStore(key, struct{}{}); loaded {
		return
	}
	for _, out := range outcomes {
		o.finished.Add(ctx, 0, o.queueAttrs(queue, kind, out, ""))
	}
	for _, reason := range deadReasons {
		o.finished.Add(ctx, 0, o.queueAttrs(queue, kind, worqr.OutcomeDead, reason))
	}
}

// ObserveFinish implements worqr.FinishObserver.
func (o *Observer) ObserveFinish(ctx context.Context, e worqr.FinishEvent) {
	kind := o.kinds.Label(e.Kind)
	attrs := o.queueAttrs(e.Queue, kind, e.Outcome, "")
	if e.Outcome == worqr.OutcomeDead {
		o.finished.Add(ctx, 1, o.queueAttrs(e.Queue, kind, e.Outcome, o.reasons.Label(e.Reason)))
	} else {
		o.finished.Add(ctx, 1, attrs)
	}
	o.duration.Record(ctx, e.Duration.Seconds(), attrs)
}

// ObserveReclaim implements worqr.ReclaimObserver.
func (o *Observer) ObserveReclaim(ctx context.Context, e worqr.ReclaimEvent) {
	o.reclaims.Add(ctx, 1)
	o.reclaimed.Add(ctx, e.Tasks)
	o.poisoned.Add(ctx, e.Poison)
}

// ObserveFence implements worqr.FenceObserver.
func (o *Observer) ObserveFence(e worqr.FenceEvent) {
	scope := ScopeWorker
	if e.Queue != "" {
		scope = ScopeQueue
	}
	o.fences.Add(context.Background(), 1, metric.WithAttributes(FenceScopeKey.String(scope)))
}
