package worqr_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/worqr/worqr"
)

// FindTask returns a task's failed attempts: here two retries, then the
// attempt that sent it to the dead letters.
func ExampleClient_FindTask_history() {
	client, stop := embedded()
	defer stop()
	ctx := context.Background()
	worker, _ := client.NewWorker(ctx, worqr.WorkerOptions{})
	defer worker.Close(ctx)
	_ = worker.StartWork(ctx, "payments", worqr.Events{})
	id, _ := client.Enqueue(ctx, "payments", []byte("charge 42"))

	for _, msg := range []string{"gateway timeout", "connection reset"} {
		p, _ := worker.Dequeue(ctx, "payments")
		_ = p.Retry(ctx, 0, errors.New(msg))
	}
	p, _ := worker.Dequeue(ctx, "payments")
	_ = p.DeadLetter(ctx, errors.New("card declined"))

	where, _ := client.FindTask(ctx, "payments", id)
	for _, a := range where.History {
		fmt.Printf("%s: %s\n", a.End, a.Error)
	}
	// Output:
	// retried: gateway timeout
	// retried: connection reset
	// dead: card declined
}

// Groups ranks a queue's groups and names those held back at their
// limit.
func ExampleClient_Groups() {
	client, stop := embedded()
	defer stop()
	ctx := context.Background()
	_ = client.SetGroupConcurrency(ctx, "reports", "", 1, worqr.CreateQueue())
	_, _ = client.EnqueueBatch(ctx, "reports", [][]byte{[]byte("a1"), []byte("a2")}, worqr.Group("tenant-a"))
	worker, _ := client.NewWorker(ctx, worqr.WorkerOptions{})
	defer worker.Close(ctx)
	_ = worker.StartWork(ctx, "reports", worqr.Events{})
	_, _ = worker.Dequeue(ctx, "reports") // tenant-a is now at its limit of 1
	_, _ = client.EnqueueBatch(ctx, "reports", [][]byte{[]byte("b1"), []byte("b2"), []byte("b3")}, worqr.Group("tenant-b"))

	groups, _ := client.Groups(ctx, "reports", 10)
	for _, g := range groups.TopWaiting {
		fmt.Printf("%s: %d waiting, %d running, limit %d, held back %v\n", g.Key, g.Waiting, g.Running, g.Limit, g.HeldBack)
	}
	// Output:
	// tenant-b: 3 waiting, 0 running, limit 1, held back false
	// tenant-a: 1 waiting, 1 running, limit 1, held back true
}

// Stats counts the tasks with a kind that finished, were retried or died,
// by kind, for any client to read; a queue keeps StatsKinds kinds apart.
func ExampleStatsBucket_kinds() {
	client, stop := embedded()
	defer stop()
	ctx := context.Background()
	worker, _ := client.NewWorker(ctx, worqr.WorkerOptions{})
	defer worker.Close(ctx)
	_ = worker.StartWork(ctx, "mail", worqr.Events{})
	for _, kind := range []string{"mail.welcome", "mail.welcome", "mail.receipt"} {
		_, _ = client.Enqueue(ctx, "mail", []byte("..."), worqr.Kind(kind))
	}
	p, _ := worker.Dequeue(ctx, "mail")
	_ = p.Retry(ctx, 0, errors.New("smtp timeout"))
	for range 3 {
		p, _ = worker.Dequeue(ctx, "mail")
		_ = p.Finish(ctx)
	}

	s, _ := client.Stats(ctx, "mail", worqr.StatsOptions{})
	total := s.Total()
	for _, kind := range []string{"mail.receipt", "mail.welcome"} {
		c := total.Kinds[kind]
		fmt.Printf("%s: %d finished, %d retried, %d dead\n", kind, c.Finished, c.Retried, c.Dead)
	}
	// Output:
	// mail.receipt: 1 finished, 0 retried, 0 dead
	// mail.welcome: 2 finished, 1 retried, 0 dead
}
