// Package worqrotel traces and measures worqr with OpenTelemetry, outside
// the core package so that programs that do not use OpenTelemetry do not
// import it.
//
// Middleware starts a span around every handler run: kind consumer, named
// "process <queue>", with the attributes of OpenTelemetry's messaging
// semantic conventions (messaging.system "worqr",
// messaging.destination.name, messaging.message.id, ...) and worqr's own
// (worqr.attempt, worqr.process.id, worqr.task.kind). NewTracer, passed
// as worqr.Options.Tracer, runs each enqueue in a producer span "send
// <queue>" and has its tasks carry that span's context, so that their
// process spans continue the producer's trace (a child of the send span;
// a link, for the tasks of a batch) through every retry, delay and
// reclaim. A task enqueued without it starts no trace of its own: its
// handler's span is a root span, or a child of whatever the handler's
// context carries.
//
// Observer, passed as worqr.Options.Observer, records metrics of what the
// process's own Client and Workers do; RegisterQueueMetrics reports the
// sizes of the queues, read from Redis when the metrics are collected;
// RegisterSlotMetrics reports the handler slots of the program's own
// pools, busy and free (their saturation).
// Metric names are dotted and carry their units as instrument units
// (worqr.process.duration in "s"); an exporter to Prometheus that
// translates names turns them into the names the prometheus sub-package
// uses (worqr_process_duration_seconds), though the labels differ (the
// queue is messaging.destination.name here, as the conventions have it).
// The metrics of processes carry the task's kind, worqr.task.kind, with a
// bound on how many kinds they keep apart (Options.MaxKinds).
// Queue names may be any bytes; in span names and attributes, bytes that
// are not UTF-8 become U+FFFD.
//
// Zero-value Options use the global providers (otel.GetTracerProvider,
// otel.GetMeterProvider) as they are when Middleware, NewObserver or
// RegisterQueueMetrics is called: set them first. (OpenTelemetry's
// default global providers forward to the first provider set, so one set
// later works too, but a provider replaced later is not followed.)
package worqrotel
