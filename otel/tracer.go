package worqrotel

import (
	"context"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/worqr/worqr"
	"github.com/worqr/worqr/internal/queuestats"
)

// batchMark starts the trace context of a task enqueued by EnqueueBatch:
// its process spans link to the send span rather than being its children,
// as the messaging conventions have it for batches.
const batchMark = "l/"

// Tracer is a worqr.Tracer, for worqr.Options.Tracer: each Enqueue and
// EnqueueBatch call runs in a span of its own, kind producer, named "send
// <queue>", a child of the span in the call's context, with the
// attributes
//
//	messaging.system                "worqr"
//	messaging.operation.name        "send"
//	messaging.operation.type        "send"
//	messaging.destination.name      the queue
//	messaging.message.id            the task id (Enqueue)
//	messaging.batch.message_count   the tasks (EnqueueBatch)
//	worqr.task.kind                 the tasks' kind, if they have one
//
// and the tasks carry the span's context (its W3C traceparent) to their
// handlers. Middleware then makes each process span of a task enqueued by
// Enqueue a child of that send span, so that the producer's trace runs on
// through every attempt (retried, delayed, reclaimed or requeued), and
// gives those of a task enqueued by EnqueueBatch a link to it. The
// W3C tracestate is not carried.
type Tracer struct {
	tracer trace.Tracer
	names  *queuestats.Queues // the queues in span names, bounded
}

// NewTracer makes a Tracer on opts.TracerProvider (default the global
// one).
func NewTracer(opts Options) *Tracer {
	tp := opts.TracerProvider
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	return &Tracer{tracer: tp.Tracer(ScopeName, trace.WithSchemaURL(semconv.SchemaURL)), names: queuestats.NewQueues(opts.MaxQueues)}
}

// StartEnqueue starts the send span and returns its traceparent.
func (t *Tracer) StartEnqueue(ctx context.Context, e worqr.EnqueueStart) (string, func([]string, error)) {
	queue := queuestats.Label(e.Queue)
	ctx, span := t.tracer.Start(ctx, "send "+t.names.Label(e.Queue),
		trace.WithSpanKind(trace.SpanKindProducer),
		trace.WithAttributes(
			system,
			semconv.MessagingOperationName("send"),
			semconv.MessagingOperationTypeSend,
			semconv.MessagingDestinationName(queue),
		))
	if e.Tasks > 1 {
		span.SetAttributes(semconv.MessagingBatchMessageCount(e.Tasks))
	}
	if e.Kind != "" {
		span.SetAttributes(TaskKindKey.String(queuestats.Label(e.Kind)))
	}
	carrier := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, carrier)
	parent := carrier["traceparent"]
	if parent != "" && e.Tasks > 1 {
		parent = batchMark + parent
	}
	return parent, func(ids []string, err error) {
		if len(ids) == 1 && e.Tasks == 1 {
			span.SetAttributes(semconv.MessagingMessageID(ids[0]))
		}
		if err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
			span.SetAttributes(semconv.ErrorType(err))
		}
		span.End()
	}
}

// carried is the span context a task carries (see Tracer), and whether
// its process spans link to it rather than being its children.
func carried(p *worqr.Process) (sc trace.SpanContext, link bool) {
	parent := p.Trace()
	if parent == "" {
		return trace.SpanContext{}, false
	}
	parent, link = strings.CutPrefix(parent, batchMark)
	ctx := propagation.TraceContext{}.Extract(context.Background(), propagation.MapCarrier{"traceparent": parent})
	return trace.SpanContextFromContext(ctx), link
}
