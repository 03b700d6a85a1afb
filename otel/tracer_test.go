package worqrotel_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/worqr/worqr"
	worqrotel "github.com/worqr/worqr/otel"
)

// tracedClient is a worqr client on rdb whose enqueues run in send spans
// of tp.
func tracedClient(t *testing.T, rdb rueidis.Client, tp trace.TracerProvider) *worqr.Client {
	t.Helper()
	c, err := worqr.New(worqr.Options{
		Redis:  rdb,
		Tracer: worqrotel.NewTracer(worqrotel.Options{TracerProvider: tp}),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	return c
}

// One trace runs from the producer's span through the send span to every
// process span of the task, as the SDK's in-memory exporter has them: a
// failed attempt retried after a delay, an attempt whose worker died and a
// peer reclaimed, and the run that finished it.
func TestATraceCrossesTheQueueThroughRetriesDelaysAndReclaims(t *testing.T) {
	t.Parallel()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	m := backend(t)
	producer := tracedClient(t, redisOn(t, m), tp)
	ctx := context.Background()
	mw := []worqr.Middleware{worqrotel.Middleware(worqrotel.Options{TracerProvider: tp})}

	// The first worker fails attempt 1 (retried 50 ms later) and holds
	// attempt 2 until its connection is cut and its lease runs out.
	doomedRedis, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{m.Addr()}, DisableCache: true, AlwaysRESP2: true, ForceSingleClient: true})
	require.NoError(t, err)
	doomed := newWorker(t, clientOn(t, doomedRedis, nil), worqr.WorkerOptions{TTL: worqr.MinTTL, Middleware: mw})
	holding := make(chan struct{})
	require.NoError(t, doomed.Handle(ctx, "orders", func(ctx context.Context, p *worqr.Process) error {
		if p.Attempt() == 1 {
			return errors.New("the warehouse is busy")
		}
		close(holding)
		<-ctx.Done() // lost with the worker
		return context.Cause(ctx)
	}, worqr.HandleOptions{Retry: worqr.RetryPolicy{Backoff: func(int, error) time.Duration { return 50 * time.Millisecond }}}))

	pctx, checkout := tp.Tracer("shop").Start(ctx, "checkout")
	id, err := producer.Enqueue(pctx, "orders", []byte("order 7"))
	require.NoError(t, err)
	checkout.End()

	<-holding
	doomedRedis.Close() // the worker dies: its lease runs out
	finished := make(chan struct{})
	peer := newWorker(t, clientOn(t, redisOn(t, m), nil), worqr.WorkerOptions{TTL: worqr.MinTTL, Middleware: mw})
	require.NoError(t, peer.Handle(ctx, "orders", func(ctx context.Context, p *worqr.Process) error {
		defer close(finished)
		return nil
	}, worqr.HandleOptions{}))
	select {
	case <-finished:
	case <-time.After(30 * time.Second):
		t.Fatal("the peer did not reclaim the task")
	}
	require.NoError(t, peer.Shutdown(ctx))

	var send *tracetest.SpanStub
	var runs []tracetest.SpanStub
	eventually(t, 10*time.Second, "three process spans", func() bool {
		send, runs = nil, nil
		for _, s := range exp.GetSpans() {
			switch s.Name {
			case "send orders":
				send = &s
			case "process orders":
				runs = append(runs, s)
			}
		}
		return send != nil && len(runs) == 3
	})
	a := stubAttrs(*send)
	assert.Equal(t, trace.SpanKindProducer, send.SpanKind)
	assert.Equal(t, "send", a["messaging.operation.type"].AsString())
	assert.Equal(t, "orders", a["messaging.destination.name"].AsString())
	assert.Equal(t, id, a["messaging.message.id"].AsString())
	assert.Equal(t, checkout.SpanContext().SpanID(), send.Parent.SpanID(), "the send span is the producer's child")
	assert.Equal(t, checkout.SpanContext().TraceID(), send.SpanContext.TraceID())

	byAttempt := map[int64]tracetest.SpanStub{}
	for _, r := range runs {
		assert.Equal(t, send.SpanContext.TraceID(), r.SpanContext.TraceID(), "every run is in the producer's trace")
		assert.Equal(t, send.SpanContext.SpanID(), r.Parent.SpanID(), "every run is a child of the send span")
		assert.Equal(t, id, stubAttrs(r)["messaging.message.id"].AsString())
		byAttempt[stubAttrs(r)["worqr.attempt"].AsInt64()] = r
	}
	require.Len(t, byAttempt, 3, "attempts 1, 2 and 3")
	first, held, last := byAttempt[1], byAttempt[2], byAttempt[3]
	assert.Equal(t, codes.Error, first.Status.Code, "attempt 1 failed")
	assert.GreaterOrEqual(t, held.StartTime.Sub(first.EndTime), 50*time.Millisecond, "attempt 2 waited out its retry's delay")
	assert.Equal(t, doomed.ID(), stubAttrs(held)["messaging.client.id"].AsString(), "attempt 2 ran on the worker that died")
	assert.Equal(t, peer.ID(), stubAttrs(last)["messaging.client.id"].AsString(), "attempt 3 ran on the peer that reclaimed it")
	assert.NotEqual(t, codes.Error, last.Status.Code, "the final run succeeded")
}

// stubAttrs are an exported span's attributes by key.
func stubAttrs(s tracetest.SpanStub) map[string]attribute.Value {
	m := map[string]attribute.Value{}
	for _, kv := range s.Attributes {
		m[string(kv.Key)] = kv.Value
	}
	return m
}

// The tasks of an EnqueueBatch link their process spans to the batch's
// send span, as the messaging conventions have it for batches; a task
// enqueued outside any span starts a trace at its send span.
func TestABatchsRunsLinkToItsSendSpan(t *testing.T) {
	t.Parallel()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	m := backend(t)
	c := tracedClient(t, redisOn(t, m), tp)
	ctx := context.Background()
	w := newWorker(t, c, worqr.WorkerOptions{Middleware: []worqr.Middleware{worqrotel.Middleware(worqrotel.Options{TracerProvider: tp})}})
	var wg sync.WaitGroup
	wg.Add(2)
	require.NoError(t, w.Handle(ctx, "mail", func(context.Context, *worqr.Process) error { wg.Done(); return nil }, worqr.HandleOptions{}))
	_, err := c.EnqueueBatch(ctx, "mail", [][]byte{[]byte("a"), []byte("b")}, worqr.Kind("mail.a"))
	require.NoError(t, err)
	wg.Wait()
	require.NoError(t, w.Shutdown(ctx))

	var send sdktrace.ReadOnlySpan
	var runs []sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		switch s.Name() {
		case "send mail":
			send = s
		case "process mail":
			runs = append(runs, s)
		}
	}
	require.NotNil(t, send)
	require.Len(t, runs, 2)
	assert.False(t, send.Parent().IsValid(), "no producer span: the send span is a root")
	assert.Equal(t, int64(2), attrs(send)["messaging.batch.message_count"].AsInt64())
	assert.Equal(t, "mail.a", attrs(send)["worqr.task.kind"].AsString())
	for _, r := range runs {
		assert.NotEqual(t, send.SpanContext().TraceID(), r.SpanContext().TraceID())
		require.Len(t, r.Links(), 1)
		assert.Equal(t, send.SpanContext().SpanID(), r.Links()[0].SpanContext.SpanID())
	}
}
