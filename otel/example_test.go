package worqrotel_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"sync"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/rueidis"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/worqr/worqr"
	worqrotel "github.com/worqr/worqr/otel"
)

// embedded starts an in-memory Redis for the examples and a worqr client
// on it with opts (Redis and Logger are set here).
func embedded(opts worqr.Options) (*worqr.Client, func()) {
	m := miniredis.NewMiniRedis()
	m.ClockTTL(true)
	if err := m.Start(); err != nil {
		panic(err)
	}
	rdb, err := rueidis.NewClient(rueidis.ClientOption{
		InitAddress: []string{m.Addr()}, DisableCache: true, AlwaysRESP2: true, ForceSingleClient: true,
	})
	if err != nil {
		panic(err)
	}
	opts.Redis, opts.Logger = rdb, slog.New(slog.NewTextHandler(io.Discard, nil))
	client, err := worqr.New(opts)
	if err != nil {
		panic(err)
	}
	return client, func() { _ = client.Close(context.Background()); rdb.Close(); m.Close() }
}

// printMetrics prints the sums (those not zero), gauges and histogram
// counts a reader collects, one line per data point, sorted.
func printMetrics(reader sdkmetric.Reader, names ...string) {
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		panic(err)
	}
	var lines []string
	line := func(name string, attrs attribute.Set, v any) {
		lines = append(lines, fmt.Sprintf("%s %v %v", name, attrs.Encoded(attribute.DefaultEncoder()), v))
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			for _, want := range names {
				if m.Name != want {
					continue
				}
				switch d := m.Data.(type) {
				case metricdata.Sum[int64]:
					for _, dp := range d.DataPoints {
						if dp.Value != 0 { // the counts made ready at zero
							line(m.Name, dp.Attributes, dp.Value)
						}
					}
				case metricdata.Gauge[int64]:
					for _, dp := range d.DataPoints {
						line(m.Name, dp.Attributes, dp.Value)
					}
				case metricdata.Histogram[float64]:
					for _, dp := range d.DataPoints {
						line(m.Name+" count", dp.Attributes, dp.Count)
					}
				}
			}
		}
	}
	sort.Strings(lines)
	for _, l := range lines {
		fmt.Println(l)
	}
}

// Wire everything: the Observer as the Client's observer, the queue sizes
// read from Redis, and the tracing middleware on the worker. A real
// program gives the providers exporters (OTLP, Prometheus) instead of the
// in-memory recorder and reader used here.
func Example() {
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	ctx := context.Background()
	defer func() { _ = tp.Shutdown(ctx); _ = mp.Shutdown(ctx) }()
	opts := worqrotel.Options{TracerProvider: tp, MeterProvider: mp}

	observer, err := worqrotel.NewObserver(opts)
	if err != nil {
		panic(err)
	}
	client, stop := embedded(worqr.Options{Observer: observer})
	defer stop()
	queues, err := worqrotel.RegisterQueueMetrics(client, worqrotel.QueueMetricsOptions{MeterProvider: mp})
	if err != nil {
		panic(err)
	}
	defer func() { _ = queues.Unregister() }()

	worker, err := client.NewWorker(ctx, worqr.WorkerOptions{
		Middleware: []worqr.Middleware{worqrotel.Middleware(opts)},
	})
	if err != nil {
		panic(err)
	}
	var wg sync.WaitGroup
	wg.Add(2)
	err = worker.Handle(ctx, "emails", func(ctx context.Context, p *worqr.Process) error {
		defer wg.Done()
		return nil
	}, worqr.HandleOptions{})
	if err != nil {
		panic(err)
	}
	if _, err := client.EnqueueBatch(ctx, "emails", [][]byte{[]byte("to:ada"), []byte("to:grace")}, worqr.Kind("email.welcome")); err != nil {
		panic(err)
	}
	wg.Wait()
	if err := worker.Shutdown(ctx); err != nil {
		panic(err)
	}

	for _, s := range spans.Ended() {
		fmt.Println(s.Name(), s.SpanKind())
	}
	printMetrics(reader, "worqr.tasks.enqueued", "worqr.tasks.finished", "worqr.process.duration", "worqr.queue.tasks")
	// Output:
	// process emails consumer
	// process emails consumer
	// worqr.process.duration count messaging.destination.name=emails,worqr.outcome=succeeded,worqr.task.kind=email.welcome 2
	// worqr.queue.tasks messaging.destination.name=emails,worqr.task.state=dead 0
	// worqr.queue.tasks messaging.destination.name=emails,worqr.task.state=delayed 0
	// worqr.queue.tasks messaging.destination.name=emails,worqr.task.state=in_flight 0
	// worqr.queue.tasks messaging.destination.name=emails,worqr.task.state=waiting 0
	// worqr.tasks.enqueued messaging.destination.name=emails 2
	// worqr.tasks.finished messaging.destination.name=emails,worqr.outcome=succeeded,worqr.task.kind=email.welcome 2
}

// With zero Options the middleware uses the global tracer provider; spans
// the handler starts from its context are children of the handler's span.
func ExampleMiddleware() {
	spans := tracetest.NewSpanRecorder()
	prev := otel.GetTracerProvider()
	otel.SetTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans)))
	defer otel.SetTracerProvider(prev)

	client, stop := embedded(worqr.Options{})
	defer stop()
	ctx := context.Background()
	worker, err := client.NewWorker(ctx, worqr.WorkerOptions{
		Middleware: []worqr.Middleware{worqrotel.Middleware(worqrotel.Options{})},
	})
	if err != nil {
		panic(err)
	}

	done := make(chan struct{})
	err = worker.Handle(ctx, "thumbnails", func(ctx context.Context, p *worqr.Process) error {
		defer close(done)
		_, span := otel.Tracer("thumbnailer").Start(ctx, "resize")
		defer span.End()
		return nil
	}, worqr.HandleOptions{})
	if err != nil {
		panic(err)
	}
	if _, err := client.Enqueue(ctx, "thumbnails", []byte("cat.png")); err != nil {
		panic(err)
	}
	<-done
	if err := worker.Shutdown(ctx); err != nil {
		panic(err)
	}
	ended := spans.Ended() // the child ends first
	fmt.Println(ended[1].Name(), "has the child", ended[0].Name(), ended[0].Parent().SpanID() == ended[1].SpanContext().SpanID())
	// Output:
	// process thumbnails has the child resize true
}

// A request's trace continues in the handler of the task it enqueued.
func ExampleNewTracer() {
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	opts := worqrotel.Options{TracerProvider: tp}

	client, stop := embedded(worqr.Options{Tracer: worqrotel.NewTracer(opts)})
	defer stop()
	ctx := context.Background()
	worker, err := client.NewWorker(ctx, worqr.WorkerOptions{
		Middleware: []worqr.Middleware{worqrotel.Middleware(opts)},
	})
	if err != nil {
		panic(err)
	}
	done := make(chan struct{})
	err = worker.Handle(ctx, "invoices", func(ctx context.Context, p *worqr.Process) error {
		close(done)
		return nil
	}, worqr.HandleOptions{})
	if err != nil {
		panic(err)
	}

	reqCtx, request := tp.Tracer("shop").Start(ctx, "POST /checkout")
	if _, err := client.Enqueue(reqCtx, "invoices", []byte("order 7")); err != nil {
		panic(err)
	}
	request.End()
	<-done
	if err := worker.Shutdown(ctx); err != nil {
		panic(err)
	}
	for _, s := range spans.Ended() {
		fmt.Println(s.Name(), s.SpanContext().TraceID() == request.SpanContext().TraceID())
	}
	// Unordered output:
	// send invoices true
	// POST /checkout true
	// process invoices true
}
