package worqrotel

import (
	"context"
	"fmt"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/worqr/worqr"
	"github.com/worqr/worqr/internal/queuestats"
)

// ScopeName is the instrumentation scope of the tracer and the meter.
const ScopeName = "github.com/worqr/worqr/otel"

// Attribute keys of worqr's own, beside the semantic conventions'.
const (
	// AttemptKey is the task's attempt the process runs (1 for the first).
	AttemptKey = attribute.Key("worqr.attempt")
	// ProcessIDKey is the process id (worqr.Process.ID).
	ProcessIDKey = attribute.Key("worqr.process.id")
	// ContextCauseKey is why the handler's context had ended, if it had
	// when the handler returned (task cancelled, queue deleted, worker
	// fenced, shutdown, timeout).
	ContextCauseKey = attribute.Key("worqr.context.cause")
	// OutcomeKey is how a process ended (a worqr.Outcome), on metrics.
	OutcomeKey = attribute.Key("worqr.outcome")
	// ReasonKey is why a task died, on dead outcomes (worqr.FinishEvent.Reason).
	ReasonKey = attribute.Key("worqr.reason")
	// FenceScopeKey is what a fence took, on worqr.fences: "worker" or
	// "queue".
	FenceScopeKey = attribute.Key("worqr.fence.scope")
	// TaskStateKey is the state of the tasks counted by worqr.queue.tasks:
	// "waiting", "delayed", "in_flight" or "dead".
	TaskStateKey = attribute.Key("worqr.task.state")
	// TaskKindKey is the task's kind (worqr.Process.Kind), absent for a
	// task without one: on spans, and on the metrics of processes bounded
	// by Options.MaxKinds.
	TaskKindKey = attribute.Key("worqr.task.kind")
	// QueueKey is the queue's name: the semantic conventions' destination.
	QueueKey = semconv.MessagingDestinationNameKey
)

// system is the value of messaging.system.
var system = semconv.MessagingSystemKey.String("worqr")

// Options configure Middleware and NewObserver. The zero value uses the
// global providers and the default buckets.
type Options struct {
	// TracerProvider makes Middleware's tracer. Default
	// otel.GetTracerProvider().
	TracerProvider trace.TracerProvider
	// MeterProvider makes NewObserver's meter. Default
	// otel.GetMeterProvider().
	MeterProvider metric.MeterProvider
	// DurationBuckets are the bucket boundaries, in seconds, of
	// worqr.process.duration. Default DefaultBuckets.
	DurationBuckets []float64
	// PickupBuckets are the bucket boundaries, in seconds, of
	// worqr.pickup.latency. Default DefaultBuckets.
	PickupBuckets []float64
	// MaxKinds bounds the values of worqr.task.kind on NewObserver's
	// metrics: the first MaxKinds task kinds the Observer sees are their
	// own value, for as long as it lives, and the tasks of any other kind
	// have OtherKind. A task without a kind has no worqr.task.kind. Set it
	// to at least the number of kinds the workers handle (say,
	// len(router.Kinds())), or the kinds first seen take the places,
	// which may differ from process to process. Default DefaultMaxKinds;
	// negative: none, every task with a kind is OtherKind. Spans, which
	// have no such limit, carry every kind.
	MaxKinds int
	// MaxQueues bounds the queue names in NewObserver's metrics (the
	// values of messaging.destination.name) and in the span names of
	// Middleware and NewTracer ("process <queue>", "send <queue>"): the
	// first MaxQueues queues each sees are their own name, the others
	// OtherQueue, so that a program with a queue per tenant does not grow
	// series or span names without end. Span attributes keep every name.
	// Default DefaultMaxQueues; negative: every queue is OtherQueue.
	MaxQueues int
	// MaxReasons bounds the values of worqr.reason on NewObserver's
	// worqr.tasks.finished: the built-in reasons (worqr.ReasonPermanent,
	// ReasonExhausted...) are always their own value, and so are the first
	// MaxReasons reasons of the application's own (worqr.WithReason) the
	// Observer sees; any other is OtherReason. Default DefaultMaxReasons;
	// negative: every reason of the application's own is OtherReason.
	MaxReasons int
}

// OtherQueue is the queue name past the bound of Options.MaxQueues.
const OtherQueue = queuestats.OtherQueue

// Middleware returns a worqr.Middleware that runs each handler in a span
// of its own: kind consumer, a child of the send span of the enqueue that
// made the task when the task carries its context (see Tracer; for a task
// of an EnqueueBatch, a link to it), else of the span in the handler's
// context if any, named "process <queue>" (the conventions' "{operation}
// {destination}"), with the attributes
//
//	messaging.system            "worqr"
//	messaging.operation.name    "process"
//	messaging.operation.type    "process"
//	messaging.destination.name  the queue
//	messaging.message.id        the task id
//	messaging.message.body.size the payload's length in bytes
//	messaging.client.id         the worker's id (worqr.Process.Owner)
//	worqr.attempt               the attempt (1 for the first)
//	worqr.process.id            the process id
//	worqr.task.kind             the task's kind, if it has one
//
// A handler that returns an error has it recorded on the span (an
// exception event), the span's status set to Error and error.type set;
// one that panics has the panic recorded with its stack before the panic
// goes on to worqr's runtime. If the handler's context had ended when it
// returned, worqr.context.cause says why. The span ends when the handler
// returns, before worqr writes the outcome to Redis.
//
// Put it first (outermost) in WorkerOptions.Middleware so that the span
// covers the other middleware.
func Middleware(opts Options) worqr.Middleware {
	tp := opts.TracerProvider
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	tracer := tp.Tracer(ScopeName, trace.WithSchemaURL(semconv.SchemaURL))
	names := queuestats.NewQueues(opts.MaxQueues)
	return func(next worqr.Handler) worqr.Handler {
		return func(ctx context.Context, p *worqr.Process) (err error) {
			queue := queuestats.Label(p.Queue())
			var from []trace.SpanStartOption
			if sc, link := carried(p); sc.IsValid() {
				from = append(from, trace.WithLinks(trace.Link{SpanContext: sc}))
				if !link {
					ctx = trace.ContextWithRemoteSpanContext(ctx, sc)
				}
			}
			ctx, span := tracer.Start(ctx, "process "+names.Label(p.Queue()), append(from,
				trace.WithSpanKind(trace.SpanKindConsumer),
				trace.WithAttributes(
					system,
					semconv.MessagingOperationName("process"),
					semconv.MessagingOperationTypeProcess,
					semconv.MessagingDestinationName(queue),
					semconv.MessagingMessageID(p.TaskID()),
					semconv.MessagingMessageBodySize(len(p.Task())),
					semconv.MessagingClientID(p.Owner()),
					AttemptKey.Int(p.Attempt()),
					ProcessIDKey.String(p.ID()),
				))...)
			if kind := p.Kind(); kind != "" {
				span.SetAttributes(TaskKindKey.String(queuestats.Label(kind)))
			}
			defer func() {
				if v := recover(); v != nil {
					msg := fmt.Sprintf("panic: %v", v)
					span.RecordError(fmt.Errorf("%s", msg), trace.WithStackTrace(true))
					span.SetStatus(codes.Error, msg)
					span.SetAttributes(semconv.ErrorTypeKey.String("panic"))
					span.End()
					panic(v)
				}
				if cause := context.Cause(ctx); cause != nil {
					span.SetAttributes(ContextCauseKey.String(cause.Error()))
				}
				if err != nil {
					span.RecordError(err)
					span.SetStatus(codes.Error, err.Error())
					span.SetAttributes(semconv.ErrorType(err))
				}
				span.End()
			}()
			return next(ctx, p)
		}
	}
}
