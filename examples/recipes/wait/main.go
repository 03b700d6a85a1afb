package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"strings"
	"time"

	"github.com/worqr/worqr"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:6379", "Redis address")
	flag.Parse()
	if err := run(*addr); err != nil {
		log.Fatal(err)
	}
}

func run(addr string) error {
	ctx := context.Background()
	client, err := worqr.New(worqr.Options{Addr: addr})
	if err != nil {
		return err
	}
	defer client.Close(ctx)

	// The worker's side.
	worker, err := client.NewWorker(ctx, worqr.WorkerOptions{})
	if err != nil {
		return err
	}
	defer worker.Close(ctx)
	err = worker.Handle(ctx, "shout", func(ctx context.Context, p *worqr.Process) error {
		p.SetResult([]byte(strings.ToUpper(string(p.Task()))))
		return nil
	}, worqr.HandleOptions{})
	if err != nil {
		return err
	}

	// The producer's side: Retain keeps the outcome an hour after the task ends.
	id, err := client.Enqueue(ctx, "shout", []byte("hello"), worqr.Retain(time.Hour))
	if err != nil {
		return err
	}
	waitCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	outcome, err := client.Wait(waitCtx, "shout", id)
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("task %s has not ended after 30 s: ask again later with TaskResult or Wait", id)
	case err != nil:
		return err // ErrTaskCancelled, ErrQueueDeleted, ErrNoTask (the outcome expired)...
	}
	if outcome.Status == worqr.OutcomeDead {
		return fmt.Errorf("task %s died (%s): %s", id, outcome.Reason, outcome.Error)
	}
	fmt.Printf("%s after %d attempt(s), in %v\n", outcome.Result, outcome.Attempts, outcome.EndedAt.Sub(outcome.EnqueuedAt))
	return nil
}
