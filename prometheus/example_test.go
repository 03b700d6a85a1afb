package worqrprom_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/rueidis"

	"github.com/worqr/worqr"
	worqrprom "github.com/worqr/worqr/prometheus"
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

// scrape fetches url and prints the lines that start with one of the
// prefixes.
func scrape(url string, prefixes ...string) {
	resp, err := http.Get(url)
	if err != nil {
		panic(err)
	}
	defer resp.Body.Close()
	lines := bufio.NewScanner(resp.Body)
	for lines.Scan() {
		for _, p := range prefixes {
			if strings.HasPrefix(lines.Text(), p) {
				fmt.Println(lines.Text())
			}
		}
	}
}

// Wire both parts: the Observer as the Client's observer, and the
// Collector of queue sizes, in one registry served on /metrics.
func Example() {
	observer := worqrprom.NewObserver(worqrprom.ObserverOptions{})
	client, stop := embedded(worqr.Options{Observer: observer})
	defer stop()
	ctx := context.Background()

	reg := prometheus.NewRegistry()
	reg.MustRegister(observer, worqrprom.NewCollector(client, worqrprom.CollectorOptions{}))
	// A real program: http.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer srv.Close()

	worker, err := client.NewWorker(ctx, worqr.WorkerOptions{})
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
	if err := worker.Shutdown(ctx); err != nil { // waits for the handlers' ends to be written
		panic(err)
	}
	if _, err := client.Enqueue(ctx, "emails", []byte("to:linus")); err != nil {
		panic(err)
	}

	scrape(srv.URL,
		"worqr_tasks_enqueued_total",
		`worqr_tasks_finished_total{kind="email.welcome",outcome="succeeded"`,
		"worqr_process_duration_seconds_count",
		`worqr_queue_tasks{queue="emails",state="waiting"}`)
	// Output:
	// worqr_process_duration_seconds_count{kind="email.welcome",outcome="succeeded",queue="emails"} 2
	// worqr_queue_tasks{queue="emails",state="waiting"} 1
	// worqr_tasks_enqueued_total{queue="emails"} 3
	// worqr_tasks_finished_total{kind="email.welcome",outcome="succeeded",queue="emails",reason=""} 2
}

// A Collector alone, in a process that runs no workers (a sidecar, or the
// one process chosen to report queue sizes), bounded per scrape.
func ExampleNewCollector() {
	client, stop := embedded(worqr.Options{})
	defer stop()
	ctx := context.Background()
	if _, err := client.EnqueueBatch(ctx, "thumbnails", [][]byte{[]byte("a.png"), []byte("b.png")}); err != nil {
		panic(err)
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(worqrprom.NewCollector(client, worqrprom.CollectorOptions{
		Timeout:   2 * time.Second,
		MaxQueues: 50,
		OnError:   func(err error) { slog.Warn("worqr metrics", "err", err) },
	}))
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer srv.Close()

	scrape(srv.URL, "worqr_queue_tasks{", "worqr_queues ", "worqr_workers ", "worqr_scrape_errors_total ")
	// Output:
	// worqr_queue_tasks{queue="thumbnails",state="dead"} 0
	// worqr_queue_tasks{queue="thumbnails",state="delayed"} 0
	// worqr_queue_tasks{queue="thumbnails",state="in_flight"} 0
	// worqr_queue_tasks{queue="thumbnails",state="waiting"} 2
	// worqr_queues 1
	// worqr_scrape_errors_total 0
	// worqr_workers 0
}
