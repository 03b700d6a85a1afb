package worqr

import (
	"context"
	"fmt"

	"github.com/worqr/worqr/worqrtype"
)

// MaxTraceLen is the longest trace context a task carries, in bytes.
const MaxTraceLen = 256

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

// traceEnqueue asks the client's Tracer, if it has one, for the trace
// context of an enqueue call of n tasks, sets it in o, and returns the
// func to call with the call's result (never nil).
func (c *Client) traceEnqueue(ctx context.Context, queue string, o *enqueueOptions, n int) (func([]string, error), error) {
	if c.tracer == nil {
		return func([]string, error) {}, nil
	}
	trace, end := c.tracer.StartEnqueue(ctx, EnqueueStart{Queue: queue, Kind: o.Kind, Tasks: n})
	if end == nil {
		end = func([]string, error) {}
	}
	if err := checkTrace(trace); err != nil {
		end(nil, err)
		return nil, err
	}
	o.Trace = trace
	return end, nil
}

// checkTrace refuses a trace context that is not "" or one a task header
// can carry.
func checkTrace(trace string) error {
	if len(trace) > MaxTraceLen {
		return fmt.Errorf("%w: the Tracer gave a trace context of %d bytes, limit %d", ErrInvalidOptions, len(trace), MaxTraceLen)
	}
	for i := 0; i < len(trace); i++ {
		if b := trace[i]; !traceByte(b) {
			return fmt.Errorf("%w: the Tracer gave a trace context with byte %q (letters, digits and \"-_./=+\" only)", ErrInvalidOptions, b)
		}
	}
	return nil
}

// traceByte reports whether b may appear in a trace context: never ','
// or ':', which end header fields.
func traceByte(b byte) bool {
	return 'a' <= b && b <= 'z' || 'A' <= b && b <= 'Z' || '0' <= b && b <= '9' ||
		b == '-' || b == '_' || b == '.' || b == '/' || b == '=' || b == '+'
}
