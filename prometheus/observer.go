package worqrprom

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/worqr/worqr"
	"github.com/worqr/worqr/internal/queuestats"
)

// DefaultBuckets are the histogram buckets, in seconds, used when
// ObserverOptions leaves them empty: from 5 ms to an hour, since tasks
// range from quick calls to long batch jobs.
var DefaultBuckets = []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600}

// outcomes are every worqr.Outcome, for the counters made ready at zero.
var outcomes = []worqr.Outcome{
	worqr.OutcomeSucceeded, worqr.OutcomeRetried, worqr.OutcomeDead,
	worqr.OutcomeCancelled, worqr.OutcomeDeleted, worqr.OutcomeLost,
}

// Bounds of the kind label (see ObserverOptions.MaxKinds).
const (
	// DefaultMaxKinds is the number of task kinds an Observer keeps apart
	// when ObserverOptions.MaxKinds is 0.
	DefaultMaxKinds = queuestats.DefaultMaxKinds
	// OtherKind is the kind label of the tasks whose kind is past the
	// bound: it cannot be a task's kind (kinds have no parentheses).
	OtherKind = queuestats.OtherKind
	// OtherQueue is the queue label of the queues past the bound of
	// ObserverOptions.MaxQueues.
	OtherQueue = queuestats.OtherQueue
	// DefaultMaxReasons is the number of the application's own reasons
	// (worqr.WithReason) an Observer keeps apart when
	// ObserverOptions.MaxReasons is 0.
	DefaultMaxReasons = queuestats.DefaultMaxReasons
	// OtherReason is the reason label of the dead outcomes whose reason is
	// the application's own and past the bound: it cannot be a reason
	// (reasons have no parentheses).
	OtherReason = queuestats.OtherReason
)

// deadReasons are the built-in reasons a process's end can carry (a
// poison pill dies in a reclaim, not at the end of a process), whose dead
// counters are made ready at zero.
var deadReasons = []string{
	worqr.ReasonPermanent, worqr.ReasonExhausted, worqr.ReasonPanic, worqr.ReasonManual,
	worqr.ReasonTimeout, worqr.ReasonDecode, worqr.ReasonUnroutable,
}

// Values of the scope label of worqr_fences_total.
const (
	// ScopeWorker is a fence of a whole worker: it lost its lease.
	ScopeWorker = "worker"
	// ScopeQueue is a fence of one queue: the worker lost its lease on it.
	ScopeQueue = "queue"
)

// ObserverOptions configure an Observer. The zero value is the default.
type ObserverOptions struct {
	// ConstLabels are added to every metric (say, a service name).
	ConstLabels prometheus.Labels
	// DurationBuckets are the buckets of worqr_process_duration_seconds.
	// Default DefaultBuckets.
	DurationBuckets []float64
	// PickupBuckets are the buckets of worqr_pickup_latency_seconds.
	// Default DefaultBuckets.
	PickupBuckets []float64
	// MaxKinds bounds the values of the kind label: the first MaxKinds
	// task kinds the Observer sees are labelled with their name, for as
	// long as it lives, and the tasks of any other kind with OtherKind. A
	// task without a kind has kind "" (the same as no label to
	// Prometheus). Set it to at least the number of kinds the workers
	// handle (say, len(router.Kinds())), or the kinds first seen take the
	// places, which may differ from process to process. Default
	// DefaultMaxKinds; negative: none, every task with a kind is
	// OtherKind.
	MaxKinds int
	// MaxQueues bounds the values of the queue label as MaxKinds does
	// those of kind: the first MaxQueues queues the Observer sees are
	// labelled with their name, the others with OtherQueue, so that a
	// program with a queue per tenant does not grow series without end.
	// Default DefaultMaxQueues; negative: every queue is OtherQueue.
	MaxQueues int
	// MaxReasons bounds the values of the reason label of dead outcomes:
	// the built-in reasons (worqr.ReasonPermanent, ReasonExhausted...) are
	// always labelled as themselves, and so are the first MaxReasons
	// reasons of the application's own (worqr.WithReason) the Observer
	// sees; any other is OtherReason. Default DefaultMaxReasons;
	// negative: every reason of the application's own is OtherReason.
	MaxReasons int
}

// Observer counts what one program's worqr Client and Workers do, as
// Prometheus metrics. Pass it as worqr.Options.Observer and register it
// with a prometheus.Registerer; it implements every worqr observer
// interface and prometheus.Collector. Its metrics are local to the
// process: sum them across processes in queries. Safe for concurrent use.
//
// The kind label is the task's kind (worqr.Process.Kind), "" for a task
// without one, bounded by ObserverOptions.MaxKinds; the queue label is
// bounded by ObserverOptions.MaxQueues. The reason label is why a task
// died, for outcome "dead" (worqr.FinishEvent.Reason), bounded by
// ObserverOptions.MaxReasons, and "" for every other outcome. A queue's
// enqueue counters, and a queue and kind's finished counters (every
// outcome, and "dead" with every built-in reason), exist at zero from the
// first event of the queue (or pair), so that rate() over them starts
// there.
//
// Metrics:
//
//	worqr_tasks_enqueued_total{queue}          tasks enqueued by this program
//	worqr_enqueue_errors_total{queue}          Enqueue and EnqueueBatch calls that failed
//	worqr_tasks_started_total{queue,kind}      processes started (every attempt)
//	worqr_tasks_finished_total{queue,kind,outcome,reason}  processes ended, by worqr.Outcome (and reason, when dead)
//	worqr_process_duration_seconds{queue,kind,outcome}  histogram: dequeue to end
//	worqr_pickup_latency_seconds{queue,kind}   histogram: enqueue to first start
//	worqr_reclaims_total                       dead workers whose tasks this program returned
//	worqr_tasks_reclaimed_total                tasks so returned to their queues
//	worqr_tasks_poisoned_total                 tasks of dead workers sent to the dead letters instead, reason "poison"
//	worqr_fences_total{scope}                  fences: scope "worker" or "queue"
type Observer struct {
	enqueued      *prometheus.CounterVec
	enqueueErrors *prometheus.CounterVec
	started       *prometheus.CounterVec
	finished      *prometheus.CounterVec
	duration      *prometheus.HistogramVec
	pickup        *prometheus.HistogramVec
	reclaims      prometheus.Counter
	reclaimed     prometheus.Counter
	poisoned      prometheus.Counter
	fences        *prometheus.CounterVec

	kinds   *queuestats.Kinds   // the kind label's values, bounded
	queues  *queuestats.Queues  // the queue label's values, bounded
	reasons *queuestats.Reasons // the reason label's values, bounded
	seen    sync.Map            // labelPairs whose finished counters exist, and queues whose enqueue counters do
}

// The observer interfaces it implements.
var (
	_ worqr.EnqueueObserver = (*Observer)(nil)
	_ worqr.StartObserver   = (*Observer)(nil)
	_ worqr.FinishObserver  = (*Observer)(nil)
	_ worqr.ReclaimObserver = (*Observer)(nil)
	_ worqr.FenceObserver   = (*Observer)(nil)
	_ prometheus.Collector  = (*Observer)(nil)
)

// NewObserver returns an Observer. Register it before use, once per
// registry.
func NewObserver(opts ObserverOptions) *Observer {
	buckets := func(b []float64) []float64 {
		if len(b) == 0 {
			return DefaultBuckets
		}
		return b
	}
	counter := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help, ConstLabels: opts.ConstLabels}, labels)
	}
	o := &Observer{
		enqueued: counter("worqr_tasks_enqueued_total",
			"Tasks enqueued by this program (Enqueue and EnqueueBatch calls that succeeded, counted per task).", "queue"),
		enqueueErrors: counter("worqr_enqueue_errors_total",
			"Enqueue and EnqueueBatch calls of this program that failed.", "queue"),
		started: counter("worqr_tasks_started_total",
			"Processes started by this program's workers: every attempt of a task counts.", "queue", "kind"),
		finished: counter("worqr_tasks_finished_total",
			"Processes of this program's workers that ended, by outcome (succeeded, retried, dead, cancelled, deleted, lost) and, for dead, the dead letter's reason.", "queue", "kind", "outcome", "reason"),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:        "worqr_process_duration_seconds",
			Help:        "How long processes ran, from dequeue to their end (the handler's run and the write that settled it), on the worker's clock, by queue and outcome.",
			ConstLabels: opts.ConstLabels,
			Buckets:     buckets(opts.DurationBuckets),
		}, []string{"queue", "kind", "outcome"}),
		pickup: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "worqr_pickup_latency_seconds",
			Help: "Time from a task's enqueue to its first start (first attempts only; a delayed task's delay included). " +
				"The enqueue time is by the Redis clock, the start by this program's clock: skew between the two shifts it (negative values count as 0).",
			ConstLabels: opts.ConstLabels,
			Buckets:     buckets(opts.PickupBuckets),
		}, []string{"queue", "kind"}),
		reclaims: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "worqr_reclaims_total", Help: "Dead workers whose tasks this program's workers returned to their queues.", ConstLabels: opts.ConstLabels,
		}),
		reclaimed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "worqr_tasks_reclaimed_total", Help: "Tasks of dead workers that this program's workers returned to their queues.", ConstLabels: opts.ConstLabels,
		}),
		poisoned: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "worqr_tasks_poisoned_total", Help: `Tasks of dead workers that this program's workers sent to the dead letters, reason "poison", instead of their queues (see worqr.Options.PoisonLimit).`, ConstLabels: opts.ConstLabels,
		}),
		fences: counter("worqr_fences_total",
			`Times this program's workers fenced themselves: scope "worker" when a worker lost its lease, "queue" when it lost its lease on one queue.`, "scope"),
		kinds:   queuestats.NewKinds(opts.MaxKinds),
		queues:  queuestats.NewQueues(opts.MaxQueues),
		reasons: queuestats.NewReasons(opts.MaxReasons),
	}
	o.fences.WithLabelValues(ScopeWorker)
	o.fences.WithLabelValues(ScopeQueue)
	return o
}

// collectors are the Observer's metrics.
func (o *Observer) collectors() []prometheus.Collector {
	return []prometheus.Collector{o.enqueued, o.enqueueErrors, o.started, o.finished, o.duration, o.pickup, o.reclaims, o.reclaimed, o.poisoned, o.fences}
}

// Describe implements prometheus.Collector.
func (o *Observer) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range o.collectors() {
		c.Describe(ch)
	}
}

// Collect implements prometheus.Collector.
func (o *Observer) Collect(ch chan<- prometheus.Metric) {
	for _, c := range o.collectors() {
		c.Collect(ch)
	}
}

// labelPair is a queue and a kind, as labels.
type labelPair struct{ queue, kind string }

// labels are the queue and kind labels of a process's task.
func (o *Observer) labels(queue, kind string) labelPair {
	return labelPair{o.queues.Label(queue), o.kinds.Label(kind)}
}

// ready creates the finished counters of a queue and kind at zero the
// first time the pair is seen, so that rates over them start from its
// first task.
func (o *Observer) ready(l labelPair) {
	if _, ok := o.seen.Load(l); ok {
		return
	}
	if _, loaded := o.seen.LoadOrStore(l, struct{}{}); loaded {
		return
	}
	for _, out := range outcomes {
		if out != worqr.OutcomeDead {
			o.finished.WithLabelValues(l.queue, l.kind, string(out), "")
		}
	}
	for _, reason := range deadReasons {
		o.finished.WithLabelValues(l.queue, l.kind, string(worqr.OutcomeDead), reason)
	}
}

// ObserveEnqueue implements worqr.EnqueueObserver.
func (o *Observer) ObserveEnqueue(_ context.Context, e worqr.EnqueueEvent) {
	queue := o.queues.Label(e.Queue)
	if _, ok := o.seen.Load(queue); !ok {
		if _, loaded := o.seen.LoadOrStore(queue, struct{}{}); !loaded {
			o.enqueued.WithLabelValues(queue)
			o.enqueueErrors.WithLabelValues(queue)
		}
	}
	if e.Err != nil {
		o.enqueueErrors.WithLabelValues(queue).Inc()
		return
	}
	o.enqueued.WithLabelValues(queue).Add(float64(len(e.TaskIDs)))
}

// ObserveStart implements worqr.StartObserver.
func (o *Observer) ObserveStart(_ context.Context, e worqr.StartEvent) {
	l := o.labels(e.Queue, e.Kind)
	o.ready(l)
	o.started.WithLabelValues(l.queue, l.kind).Inc()
	if e.Attempt == 1 && !e.EnqueuedAt.IsZero() {
		o.pickup.WithLabelValues(l.queue, l.kind).Observe(max(time.Since(e.EnqueuedAt).Seconds(), 0))
	}
}

// ObserveFinish implements worqr.FinishObserver.
func (o *Observer) ObserveFinish(_ context.Context, e worqr.FinishEvent) {
	l := o.labels(e.Queue, e.Kind)
	o.ready(l)
	reason := ""
	if e.Outcome == worqr.OutcomeDead {
		reason = o.reasons.Label(e.Reason)
	}
	o.finished.WithLabelValues(l.queue, l.kind, string(e.Outcome), reason).Inc()
	o.duration.WithLabelValues(l.queue, l.kind, string(e.Outcome)).Observe(e.Duration.Seconds())
}

// ObserveReclaim implements worqr.ReclaimObserver.
func (o *Observer) ObserveReclaim(_ context.Context, e worqr.ReclaimEvent) {
	o.reclaims.Inc()
	o.reclaimed.Add(float64(e.Tasks))
	o.poisoned.Add(float64(e.Poison))
}

// ObserveFence implements worqr.FenceObserver.
func (o *Observer) ObserveFence(e worqr.FenceEvent) {
	if e.Queue != "" {
		o.fences.WithLabelValues(ScopeQueue).Inc()
		return
	}
	o.fences.WithLabelValues(ScopeWorker).Inc()
}
