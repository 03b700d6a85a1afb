package embedded_test

import (
	"context"
	"fmt"
	"time"

	"github.com/worqr/worqr"
	"github.com/worqr/worqr/embedded"
)

// Start an in-process Redis, serve a queue and wait for a task's outcome.
func ExampleStart() {
	redis, err := embedded.Start(embedded.Options{})
	if err != nil {
		panic(err)
	}
	defer redis.Close(context.Background())
	client := redis.Client()
	ctx := context.Background()

	worker, err := client.NewWorker(ctx, worqr.WorkerOptions{})
	if err != nil {
		panic(err)
	}
	err = worker.Handle(ctx, "greetings", func(ctx context.Context, p *worqr.Process) error {
		p.SetResult([]byte("hello, " + string(p.Task())))
		return nil
	}, worqr.HandleOptions{})
	if err != nil {
		panic(err)
	}
	id, err := client.Enqueue(ctx, "greetings", []byte("ada"), worqr.Retain(time.Minute))
	if err != nil {
		panic(err)
	}
	outcome, err := client.Wait(ctx, "greetings", id)
	if err != nil {
		panic(err)
	}
	fmt.Println(string(outcome.Result))
	if err := worker.Shutdown(ctx); err != nil {
		panic(err)
	}
	// Output:
	// hello, ada
}
