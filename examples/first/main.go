// Command first is a complete worqr program, to copy: a worker that
// serves a queue with a handler, a producer that enqueues a few tasks,
// and a graceful shutdown on Ctrl-C or SIGTERM. It runs on an embedded
// Redis unless given the address of a real one.
//
//	go run ./examples/first                        # Ctrl-C to stop
//	go run ./examples/first -once                  # exits once its tasks are done
//	go run ./examples/first -addr 127.0.0.1:6379   # a real Redis (or a cluster's seeds, comma-separated)
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/worqr/worqr"
	"github.com/worqr/worqr/embedded"
)

func main() {
	addr := flag.String("addr", "", "Redis address; empty starts an embedded Redis")
	once := flag.Bool("once", false, "exit once the tasks enqueued at start are done")
	flag.Parse()
	if err := run(*addr, *once); err != nil {
		fmt.Fprintln(os.Stderr, "first:", err)
		os.Exit(1)
	}
}

func run(addr string, once bool) error {
	// ctx ends on Ctrl-C or SIGTERM.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	if addr == "" {
		redis, err := embedded.Start(embedded.Options{}) // an in-process Redis
		if err != nil {
			return err
		}
		defer redis.Close(context.Background())
		addr = redis.Addr()
	}
	client, err := worqr.New(worqr.Options{Addr: addr})
	if err != nil {
		return err
	}
	defer client.Close(context.Background())

	// The worker: Handle serves the queue on the worker's goroutines and
	// returns at once. nil finishes a task; an error retries it later.
	worker, err := client.NewWorker(ctx, worqr.WorkerOptions{})
	if err != nil {
		return err
	}
	err = worker.Handle(ctx, "greetings", func(ctx context.Context, p *worqr.Process) error {
		fmt.Printf("hello, %s (task %s, attempt %d)\n", p.Task(), p.TaskID(), p.Attempt())
		return nil
	}, worqr.HandleOptions{Concurrency: 4})
	if err != nil {
		return err
	}

	// The producer (usually another program): Retain keeps each task's
	// outcome for a minute, so that -once can wait for it.
	var ids []string
	for _, name := range []string{"ada", "grace", "alan"} {
		id, err := client.Enqueue(ctx, "greetings", []byte(name), worqr.Retain(time.Minute))
		if err != nil {
			return err
		}
		ids = append(ids, id)
	}

	if once {
		waitCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		for _, id := range ids {
			if _, err := client.Wait(waitCtx, "greetings", id); err != nil && ctx.Err() == nil {
				return err
			}
		}
	} else {
		fmt.Println("serving \"greetings\"; Ctrl-C to stop")
		<-ctx.Done()
	}

	// Running handlers get 10 s to finish; tasks still running then go
	// back to the front of the queue for another worker.
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := worker.Shutdown(shutdownCtx); err != nil {
		return err
	}
	fmt.Println("shut down")
	return nil
}
