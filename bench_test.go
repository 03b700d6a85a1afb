package worqr

import (
	"context"
	"io"
	"log/slog"
	"os"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/google/uuid"
	"github.com/redis/rueidis"
	"github.com/worqr/worqr/internal/store"
)

// Micro-benchmarks of the hot paths. They run only with -bench, on an
// embedded miniredis unless WORQR_TEST_REDIS names a real Redis:
//
//	go test -run '^$' -bench . -benchmem
//	WORQR_TEST_REDIS=127.0.0.1:6391 go test -run '^$' -bench . -benchmem
//
// On miniredis they measure mostly this package's own allocations and CPU
// (the Lua interpreter in miniredis is slow); on a real Redis, the round
// trip. cmd/worqr-bench measures throughput and latency end to end.

// benchClient opens a client under a fresh prefix; its keys are deleted
// afterwards on a real Redis.
func benchClient(b *testing.B) *Client {
	b.Helper()
	be := &backend{prefix: "worqrbench-" + uuid.NewString()[:8]}
	opt := rueidis.ClientOption{DisableCache: true}
	if addr := os.Getenv(envRedis); addr != "" {
		be.addr, be.real = addr, true
		b.Cleanup(be.deleteKeys)
	} else {
		m := miniredis.NewMiniRedis()
		if err := m.Start(); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(m.Close)
		be.addr = m.Addr()
		opt.AlwaysRESP2, opt.ForceSingleClient = true, true
	}
	opt.InitAddress = []string{be.addr}
	rdb, err := rueidis.NewClient(opt)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(rdb.Close)
	c, err := New(Options{Redis: rdb, Prefix: be.prefix, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = c.Close(context.Background()) })
	return c
}

// processCPU is the CPU time this process has used: on a shared machine
// it says more about the client's cost than the wall clock does.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func benchTask(i int) []byte {
	t := make([]byte, 64)
	copy(t, strconv.Itoa(i))
	return t
}

func BenchmarkEnqueue(b *testing.B) {
	c := benchClient(b)
	ctx := context.Background()
	task := benchTask(0)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Enqueue(ctx, "q", task); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEnqueueParallel(b *testing.B) {
	c := benchClient(b)
	ctx := context.Background()
	task := benchTask(0)
	b.ReportAllocs()
	b.SetParallelism(25) // 50 goroutines on 2 cores, as in worqr-bench
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := c.Enqueue(ctx, "q", task); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

func BenchmarkEnqueueBatch1000(b *testing.B) {
	c := benchClient(b)
	ctx := context.Background()
	tasks := make([][]byte, 1000)
	for i := range tasks {
		tasks[i] = benchTask(i)
	}
	b.ReportAllocs()
	n := 0
	cpu := processCPU()
	defer func() { b.ReportMetric(float64(processCPU()-cpu)/float64(n*len(tasks)), "cpu-ns/task") }()
	for b.Loop() {
		if _, err := c.EnqueueBatch(ctx, "q", tasks); err != nil {
			b.Fatal(err)
		}
		n++
		if n%10 == 0 { // keep miniredis's list short: it prepends by copying
			b.StopTimer()
			if _, err := c.DeleteQueue(ctx, "q"); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
		}
	}
	b.ReportMetric(float64(n*len(tasks))/b.Elapsed().Seconds(), "tasks/s")
}

// BenchmarkDequeueFinish takes one task and finishes it, the by-hand
// worker's loop; the tasks are queued beforehand, untimed.
func BenchmarkDequeueFinish(b *testing.B) {
	c := benchClient(b)
	ctx := context.Background()
	w, err := c.NewWorker(ctx, WorkerOptions{TTL: time.Minute, RenewInterval: 20 * time.Second})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = w.Close(context.Background()) })
	if err := w.StartWork(ctx, "q", Events{}); err != nil {
		b.Fatal(err)
	}
	refill := func() {
		tasks := make([][]byte, 1000)
		for i := range tasks {
			tasks[i] = benchTask(i)
		}
		if _, err := c.EnqueueBatch(ctx, "q", tasks); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if i%1000 == 0 {
			b.StopTimer()
			refill()
			b.StartTimer()
		}
		i++
		p, err := w.Dequeue(ctx, "q")
		if err != nil {
			b.Fatal(err)
		}
		if err := p.Finish(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkHandle runs no-op handlers (concurrency 50) over queued tasks:
// dequeue, start, finish, through the runtime.
func BenchmarkHandle(b *testing.B) {
	c := benchClient(b)
	ctx := context.Background()
	total := int64(b.N)
	for start := 0; start < b.N; start += 1000 {
		tasks := make([][]byte, min(1000, b.N-start))
		for i := range tasks {
			tasks[i] = benchTask(start + i)
		}
		if _, err := c.EnqueueBatch(ctx, "q", tasks); err != nil {
			b.Fatal(err)
		}
	}
	w, err := c.NewWorker(ctx, WorkerOptions{TTL: time.Minute, RenewInterval: 20 * time.Second})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = w.Close(context.Background()) })
	var handled atomic.Int64
	done := make(chan struct{})
	b.ReportAllocs()
	b.ResetTimer()
	cpu := processCPU()
	defer func() { b.ReportMetric(float64(processCPU()-cpu)/float64(b.N), "cpu-ns/op") }()
	err = w.Handle(ctx, "q", func(context.Context, *Process) error {
		if handled.Add(1) == total {
			close(done)
		}
		return nil
	}, HandleOptions{Concurrency: 50})
	if err != nil {
		b.Fatal(err)
	}
	<-done
}

// BenchmarkWorkEvent is a work event from PUBLISH to the Work callback:
// the subscription, parseEvent, the mailbox and the dispatcher.
func BenchmarkWorkEvent(b *testing.B) {
	c := benchClient(b)
	ctx := context.Background()
	w, err := c.NewWorker(ctx, WorkerOptions{TTL: time.Minute, RenewInterval: 20 * time.Second})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = w.Close(context.Background()) })
	got := make(chan int64, 1)
	if err := w.StartWork(ctx, "q", Events{Work: func(_ string, n int64) { got <- n }}); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := c.core.Store.Publish(ctx, "q", "w1"); err != nil {
			b.Fatal(err)
		}
		<-got
	}
}

func BenchmarkParseEvent(b *testing.B) {
	msgs := []string{"w1", "w1000", "c1a2b,1a2c", "d1a2b"}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if _, ok := store.ParseEvent(msgs[i%len(msgs)]); !ok {
			b.Fatal("unparsed")
		}
		i++
	}
}
