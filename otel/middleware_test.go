package worqrotel_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/worqr/worqr"
	worqrotel "github.com/worqr/worqr/otel"
)

// attrs are a span's attributes by key.
func attrs(s sdktrace.ReadOnlySpan) map[attribute.Key]attribute.Value {
	out := make(map[attribute.Key]attribute.Value)
	for _, kv := range s.Attributes() {
		out[kv.Key] = kv.Value
	}
	return out
}

func TestMiddlewareTracesEachHandlerRun(t *testing.T) {
	t.Parallel()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })

	c := clientOn(t, redisOn(t, backend(t)), nil)
	ctx := context.Background()
	w := newWorker(t, c, worqr.WorkerOptions{Middleware: []worqr.Middleware{worqrotel.Middleware(worqrotel.Options{TracerProvider: tp})}})

	var mu sync.Mutex
	inner := map[string]trace.SpanContext{} // the span each handler saw, by task
	var wg sync.WaitGroup
	wg.Add(5) // ok, flaky twice, bad, panics
	require.NoError(t, w.Handle(ctx, "mail", func(ctx context.Context, p *worqr.Process) error {
		defer wg.Done()
		mu.Lock()
		inner[p.TaskID()+"/"+p.ID()] = trace.SpanContextFromContext(ctx)
		mu.Unlock()
		switch string(p.Task()) {
		case "flaky":
			if p.Attempt() == 1 {
				return errors.New("smtp busy")
			}
		case "bad":
			return worqr.Permanent(errors.New("malformed"))
		case "panics":
			panic("nil map")
		}
		return nil
	}, worqr.HandleOptions{PanicIsPermanent: true, Retry: worqr.RetryPolicy{Backoff: func(int, error) time.Duration { return 0 }}}))

	ids, err := c.EnqueueBatch(ctx, "mail", [][]byte{[]byte("ok"), []byte("flaky"), []byte("bad"), []byte("panics")})
	require.NoError(t, err)
	wg.Wait()
	require.NoError(t, w.Shutdown(ctx))

	spans := rec.Ended()
	require.Len(t, spans, 5)
	byTask := map[string][]sdktrace.ReadOnlySpan{}
	for _, s := range spans {
		a := attrs(s)
		assert.Equal(t, "process mail", s.Name())
		assert.Equal(t, trace.SpanKindConsumer, s.SpanKind())
		assert.Equal(t, worqrotel.ScopeName, s.InstrumentationScope().Name)
		assert.Equal(t, "worqr", a["messaging.system"].AsString())
		assert.Equal(t, "process", a["messaging.operation.type"].AsString())
		assert.Equal(t, "process", a["messaging.operation.name"].AsString())
		assert.Equal(t, "mail", a["messaging.destination.name"].AsString())
		assert.Equal(t, w.ID(), a["messaging.client.id"].AsString())
		assert.NotEmpty(t, a["worqr.process.id"].AsString())
		task := a["messaging.message.id"].AsString()
		byTask[task] = append(byTask[task], s)
		// The handler ran inside the span.
		mu.Lock()
		assert.Equal(t, s.SpanContext(), inner[task+"/"+a["worqr.process.id"].AsString()])
		mu.Unlock()
	}

	ok := byTask[ids[0]]
	require.Len(t, ok, 1)
	assert.Equal(t, codes.Unset, ok[0].Status().Code)
	assert.Equal(t, int64(1), attrs(ok[0])["worqr.attempt"].AsInt64())
	assert.Equal(t, int64(2), attrs(ok[0])["messaging.message.body.size"].AsInt64())
	assert.Empty(t, ok[0].Events())

	flaky := byTask[ids[1]]
	require.Len(t, flaky, 2)
	if attrs(flaky[0])["worqr.attempt"].AsInt64() == 2 {
		flaky[0], flaky[1] = flaky[1], flaky[0]
	}
	assert.Equal(t, codes.Error, flaky[0].Status().Code)
	assert.Equal(t, "smtp busy", flaky[0].Status().Description)
	require.Len(t, flaky[0].Events(), 1)
	assert.Equal(t, "exception", flaky[0].Events()[0].Name)
	assert.Equal(t, "*errors.errorString", attrs(flaky[0])["error.type"].AsString())
	assert.Equal(t, int64(2), attrs(flaky[1])["worqr.attempt"].AsInt64())
	assert.Equal(t, codes.Unset, flaky[1].Status().Code)
	assert.NotEqual(t, attrs(flaky[0])["worqr.process.id"], attrs(flaky[1])["worqr.process.id"])

	bad := byTask[ids[2]]
	require.Len(t, bad, 1)
	assert.Equal(t, codes.Error, bad[0].Status().Code)
	assert.Equal(t, "malformed", bad[0].Status().Description)

	panics := byTask[ids[3]]
	require.Len(t, panics, 1)
	assert.Equal(t, codes.Error, panics[0].Status().Code)
	assert.Equal(t, "panic: nil map", panics[0].Status().Description)
	assert.Equal(t, "panic", attrs(panics[0])["error.type"].AsString())
	require.Len(t, panics[0].Events(), 1)
	var stack bool
	for _, kv := range panics[0].Events()[0].Attributes {
		stack = stack || (kv.Key == "exception.stacktrace" && kv.Value.AsString() != "")
	}
	assert.True(t, stack, "the panic's stack is recorded")

	// The panic went on to worqr's runtime: the task is a dead letter.
	dead, err := c.DeadLetterCount(ctx, "mail")
	require.NoError(t, err)
	assert.Equal(t, int64(2), dead)
}

// A handler whose task is cancelled while it runs: its span says why its
// context ended.
func TestMiddlewareRecordsTheContextCause(t *testing.T) {
	t.Parallel()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	c := clientOn(t, redisOn(t, backend(t)), nil)
	ctx := context.Background()
	w := newWorker(t, c, worqr.WorkerOptions{})
	running := make(chan struct{})
	require.NoError(t, w.Handle(ctx, "exports", func(ctx context.Context, p *worqr.Process) error {
		close(running)
		<-ctx.Done()
		return context.Cause(ctx)
	}, worqr.HandleOptions{Middleware: []worqr.Middleware{worqrotel.Middleware(worqrotel.Options{TracerProvider: tp})}}))
	id, err := c.Enqueue(ctx, "exports", []byte("all.csv"))
	require.NoError(t, err)
	<-running
	_, err = c.CancelTask(ctx, "exports", id)
	require.NoError(t, err)
	eventually(t, 5*time.Second, "the span ended", func() bool { return len(rec.Ended()) == 1 })
	s := rec.Ended()[0]
	assert.Equal(t, worqr.ErrTaskCancelled.Error(), attrs(s)["worqr.context.cause"].AsString())
	assert.Equal(t, codes.Error, s.Status().Code)
}

// Zero Options use the global tracer provider. (Not parallel: it sets
// the global provider.)
func TestMiddlewareUsesTheGlobalProvider(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	prev := otel.GetTracerProvider()
	otel.SetTracerProvider(tp)
	t.Cleanup(func() { otel.SetTracerProvider(prev) })
	mw := worqrotel.Middleware(worqrotel.Options{})

	c := clientOn(t, redisOn(t, backend(t)), nil)
	ctx := context.Background()
	w := newWorker(t, c, worqr.WorkerOptions{Middleware: []worqr.Middleware{mw}})
	done := make(chan struct{})
	require.NoError(t, w.Handle(ctx, "q", func(ctx context.Context, p *worqr.Process) error {
		close(done)
		return nil
	}, worqr.HandleOptions{}))
	_, err := c.Enqueue(ctx, "q", []byte("x"))
	require.NoError(t, err)
	<-done
	require.NoError(t, w.Shutdown(ctx))
	require.Len(t, rec.Ended(), 1)
	assert.Equal(t, "process q", rec.Ended()[0].Name())
}

// A task's kind is on its span; a task without one has no worqr.task.kind.
func TestMiddlewareRecordsTheKind(t *testing.T) {
	t.Parallel()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })

	c := clientOn(t, redisOn(t, backend(t)), nil)
	ctx := context.Background()
	w := newWorker(t, c, worqr.WorkerOptions{Middleware: []worqr.Middleware{worqrotel.Middleware(worqrotel.Options{TracerProvider: tp})}})
	var wg sync.WaitGroup
	wg.Add(2)
	require.NoError(t, w.Handle(ctx, "mail", func(context.Context, *worqr.Process) error {
		wg.Done()
		return nil
	}, worqr.HandleOptions{}))
	kinded, err := c.Enqueue(ctx, "mail", []byte("a"), worqr.Kind("email.welcome"))
	require.NoError(t, err)
	plain, err := c.Enqueue(ctx, "mail", []byte("b"))
	require.NoError(t, err)
	wg.Wait()
	require.NoError(t, w.Shutdown(ctx))

	spans := rec.Ended()
	require.Len(t, spans, 2)
	for _, s := range spans {
		a := attrs(s)
		kind, ok := a[worqrotel.TaskKindKey]
		switch a["messaging.message.id"].AsString() {
		case kinded:
			assert.Equal(t, "email.welcome", kind.AsString())
		case plain:
			assert.False(t, ok, "a task without a kind has no %s", worqrotel.TaskKindKey)
		default:
			t.Errorf("span of an unknown task: %v", a)
		}
	}
}
