package worqr_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/rueidis"

	"github.com/worqr/worqr"
)

// embedded starts an in-memory Redis for the examples and a worqr client
// on it (miniredis speaks RESP2 only and has no client tracking, hence the
// rueidis options).
func embedded() (*worqr.Client, func()) {
	m := miniredis.NewMiniRedis()
	m.ClockTTL(true)
	if err := m.Start(); err != nil {
		panic(err)
	}
	rdb, err := rueidis.NewClient(rueidis.ClientOption{
		InitAddress:       []string{m.Addr()},
		DisableCache:      true,
		AlwaysRESP2:       true,
		ForceSingleClient: true,
	})
	if err != nil {
		panic(err)
	}
	client, err := worqr.New(worqr.Options{Redis: rdb, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		panic(err)
	}
	return client, func() { _ = client.Close(context.Background()); rdb.Close(); m.Close() }
}

// Enqueue tasks, take them with a worker, and finish them.
func Example() {
	client, stop := embedded()
	defer stop()
	ctx := context.Background()

	_, err := client.EnqueueBatch(ctx, "emails", [][]byte{[]byte("to:ada"), []byte("to:grace")})
	if err != nil {
		panic(err)
	}

	worker, err := client.NewWorker(ctx, worqr.WorkerOptions{})
	if err != nil {
		panic(err)
	}
	defer worker.Close(ctx)
	if err := worker.StartWork(ctx, "emails", worqr.Events{}); err != nil {
		panic(err)
	}
	for {
		p, err := worker.Dequeue(ctx, "emails")
		if errors.Is(err, worqr.ErrNoTask) {
			break
		}
		if err != nil {
			panic(err)
		}
		fmt.Printf("sending %s\n", p.Task())
		if err := p.Finish(ctx); err != nil {
			panic(err)
		}
	}
	// Output:
	// sending to:ada
	// sending to:grace
}

// Drive dequeues from work events: the worker is told when tasks arrive,
// including after a reconnect, so it never polls.
func ExampleWorker_StartWork() {
	client, stop := embedded()
	defer stop()
	ctx := context.Background()
	worker, err := client.NewWorker(ctx, worqr.WorkerOptions{})
	if err != nil {
		panic(err)
	}
	defer worker.Close(ctx)

	wake := make(chan struct{}, 1)
	err = worker.StartWork(ctx, "thumbnails", worqr.Events{
		// Events run on the worker's own goroutine: hand off, don't block.
		Work: func(queue string, count int64) {
			select {
			case wake <- struct{}{}:
			default:
			}
		},
	})
	if err != nil {
		panic(err)
	}
	if _, err := client.Enqueue(ctx, "thumbnails", []byte("cat.png")); err != nil {
		panic(err)
	}

	<-wake
	for {
		p, err := worker.Dequeue(ctx, "thumbnails")
		if errors.Is(err, worqr.ErrNoTask) {
			break
		}
		if err != nil {
			panic(err)
		}
		fmt.Printf("resizing %s\n", p.Task())
		_ = p.Finish(ctx)
	}
	// Output:
	// resizing cat.png
}

// Stop returns a task to the back of its queue for a retry.
func ExampleProcess_Stop() {
	client, stop := embedded()
	defer stop()
	ctx := context.Background()
	worker, _ := client.NewWorker(ctx, worqr.WorkerOptions{})
	defer worker.Close(ctx)
	_ = worker.StartWork(ctx, "jobs", worqr.Events{})
	_, _ = client.EnqueueBatch(ctx, "jobs", [][]byte{[]byte("flaky"), []byte("next")})

	p, _ := worker.Dequeue(ctx, "jobs")
	if err := p.Requeue(ctx); err != nil {
		panic(err)
	}
	waiting, _ := client.Range(ctx, "jobs", 0, -1)
	fmt.Printf("%s\n", waiting)
	// Output:
	// [next flaky]
}

// Cancel removes waiting copies of a task and tells the worker holding one.
func ExampleClient_Cancel() {
	client, stop := embedded()
	defer stop()
	ctx := context.Background()
	worker, _ := client.NewWorker(ctx, worqr.WorkerOptions{})
	defer worker.Close(ctx)
	_ = worker.StartWork(ctx, "reports", worqr.Events{})
	_, _ = client.EnqueueBatch(ctx, "reports", [][]byte{[]byte("q3"), []byte("q3")})
	held, _ := worker.Dequeue(ctx, "reports")

	res, _ := client.Cancel(ctx, "reports", []byte("q3"))
	fmt.Printf("removed %d waiting, marked %d in flight\n", res.Removed, res.Marked)
	<-held.Done()
	fmt.Println(held.Err())
	// Output:
	// removed 1 waiting, marked 1 in flight
	// worqr: task cancelled
}

// Serve a queue with a handler: nil finishes a task, an error retries it,
// and Shutdown waits for running handlers.
func ExampleWorker_Handle() {
	client, stop := embedded()
	defer stop()
	ctx := context.Background()
	worker, _ := client.NewWorker(ctx, worqr.WorkerOptions{})

	done := make(chan struct{})
	tries := 0
	err := worker.Handle(ctx, "invoices", func(ctx context.Context, p *worqr.Process) error {
		tries++
		if tries == 1 {
			return errors.New("ledger busy") // retried at the back
		}
		fmt.Printf("invoiced %s on try %d\n", p.Task(), tries)
		close(done)
		return nil
	}, worqr.HandleOptions{Concurrency: 1})
	if err != nil {
		panic(err)
	}
	_, _ = client.Enqueue(ctx, "invoices", []byte("order-7"))
	<-done
	if err := worker.Shutdown(ctx); err != nil {
		panic(err)
	}
	// Output:
	// invoiced order-7 on try 2
}
