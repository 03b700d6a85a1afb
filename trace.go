package worqr

import (
	"context"

	"github.com/worqr/worqr/internal/enqueue"
	"github.com/worqr/worqr/worqrtype"
)

// MaxTraceLen is the longest trace context a task carries, in bytes.
const MaxTraceLen = 256

// The limit is internal/enqueue's, which checks trace contexts: see the
// limits of enqueue.go for how this fails the build when the two part.
const _ = uint(MaxTraceLen-enqueue.MaxTraceLen) + uint(enqueue.MaxTraceLen-MaxTraceLen)

// Tracer carries a trace across the queue: the client asks it for a trace
// context as each Enqueue or EnqueueBatch call begins, the call's tasks
// carry that context through delays, retries, reclaims and requeues, and
// a handler reads it back with Process.Trace. The package
// github.com/worqr/worqr/otel has one for OpenTelemetry (NewTracer),
// whose Middleware makes each process's span a child of the enqueue's.
type Tracer interface {
	// StartEnqueue begins an enqueue call under ctx (for a span of the
	// producer's) and returns the trace context its tasks carry ("" for
	// none: at most MaxTraceLen bytes of ASCII letters, digits and
	// "-_./=+", such as a W3C traceparent) and a func the client calls
	// once with the call's result, the tasks' ids or the error, or nil
	// when nothing is to be told. The call it begins is not joined with
	// other Enqueue calls, so a traced task costs its own script call.
	StartEnqueue(ctx context.Context, e EnqueueStart) (trace string, end func(ids []string, err error))
}

// EnqueueStart describes an enqueue call to a Tracer (see
// worqrtype.EnqueueStart).
type EnqueueStart = worqrtype.EnqueueStart
