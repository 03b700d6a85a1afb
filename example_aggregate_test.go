package worqr_test

import (
	"context"
	"fmt"
	"time"

	"github.com/worqr/worqr"
)

// Gather a customer's events into one digest: the third event's enqueue
// makes the aggregated task, and its handler reads the three.
func ExampleAggregate() {
	client, stop := embedded()
	defer stop()
	ctx := context.Background()
	err := client.SetAggregation(ctx, "digests", worqr.AggregateSettings{MaxSize: 3, MaxDelay: time.Hour}, worqr.CreateQueue())
	if err != nil {
		panic(err)
	}
	worker, _ := client.NewWorker(ctx, worqr.WorkerOptions{})
	done := make(chan struct{})
	err = worker.Handle(ctx, "digests", func(ctx context.Context, p *worqr.Process) error {
		members, _ := p.Aggregated()
		fmt.Printf("one task of kind %q with %d members:", p.Kind(), len(members))
		for _, m := range members {
			fmt.Printf(" %s", m.Task)
		}
		fmt.Println()
		close(done)
		return nil
	}, worqr.HandleOptions{})
	if err != nil {
		panic(err)
	}
	for _, event := range []string{"login", "order", "logout"} {
		if _, err := client.Enqueue(ctx, "digests", []byte(event), worqr.Aggregate("customer:42"), worqr.Kind("digest")); err != nil {
			panic(err)
		}
	}
	<-done
	if err := worker.Shutdown(ctx); err != nil {
		panic(err)
	}
	// Output:
	// one task of kind "digest" with 3 members: login order logout
}

// An operator lists the gatherings still open, the next to flush first,
// without reading their tasks.
func ExampleClient_Gatherings() {
	client, stop := embedded()
	defer stop()
	ctx := context.Background()
	err := client.SetAggregation(ctx, "digests", worqr.AggregateSettings{MaxSize: 10, MaxDelay: time.Hour}, worqr.CreateQueue())
	if err != nil {
		panic(err)
	}
	for _, key := range []string{"customer:42", "customer:7", "customer:42"} {
		if _, err := client.Enqueue(ctx, "digests", []byte("event"), worqr.Aggregate(key)); err != nil {
			panic(err)
		}
	}
	gatherings, open, err := client.Gatherings(ctx, "digests", 0, 100)
	if err != nil {
		panic(err)
	}
	fmt.Println(open, "open")
	for _, g := range gatherings {
		fmt.Printf("%s: %d tasks, flushed within the hour: %t\n", g.Key, g.Tasks, time.Until(g.Deadline) <= time.Hour)
	}
	// Output:
	// 2 open
	// customer:42: 2 tasks, flushed within the hour: true
	// customer:7: 1 tasks, flushed within the hour: true
}
