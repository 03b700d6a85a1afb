package worqrtest_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/worqr/worqr"
	"github.com/worqr/worqr/worqrtest"
)

// Resize is a typed task.
type Resize struct {
	Image string `json:"image"`
	Width int    `json:"width"`
}

// resize is the handler under test.
func resize(ctx context.Context, p *worqr.Process, r Resize) error {
	if r.Width <= 0 {
		return worqr.Permanent(errors.New("width must be positive"))
	}
	p.SetResult(fmt.Appendf(nil, "%s@%dw", r.Image, r.Width))
	return nil
}

// Run a typed handler on a value, with no worker and no Redis.
func ExampleRunJSON() {
	ctx := context.Background()
	result, err := worqrtest.RunJSON(ctx, resize, Resize{Image: "cat.png", Width: 200}, worqrtest.RunOptions{})
	fmt.Printf("%s %v\n", result, err)

	_, err = worqrtest.RunJSON(ctx, resize, Resize{Image: "cat.png"}, worqrtest.RunOptions{})
	fmt.Println(worqr.IsPermanent(err), err)
	// Output:
	// cat.png@200w <nil>
	// true width must be positive
}

// Run a handler under its queue's retry policy, as a worker runs it: a
// mail that always fails is tried three times, one and two minutes
// apart by the policy (a millisecond each here), then dead-lettered.
func ExampleRunPolicy() {
	send := func(context.Context, *worqr.Process) error {
		return errors.New("smtp: 451 try again later")
	}
	res, err := worqrtest.RunPolicy(context.Background(), send, []byte("to:ada"), worqrtest.PolicyOptions{
		Handle: worqr.HandleOptions{Retry: worqr.RetryPolicy{
			MaxAttempts: 3,
			Backoff:     worqr.ExponentialBackoff(time.Minute, time.Hour, 0),
		}},
		Logger: slog.New(slog.DiscardHandler), // the worker's logs
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, a := range res.Attempts {
		fmt.Printf("attempt %d: %s %q, next after %v\n", a.Number, a.Outcome, a.Reason, a.Delay)
	}
	fmt.Println(res.Outcome.Status, res.Outcome.Reason, res.Outcome.Error)
	// Output:
	// attempt 1: retried "", next after 1m0s
	// attempt 2: retried "", next after 2m0s
	// attempt 3: dead "exhausted", next after 0s
	// dead exhausted smtp: 451 try again later
}

// Run a handler of aggregated tasks (see worqr.Aggregate) on the members
// a gathering would hand it.
func ExampleRun_aggregated() {
	count := func(_ context.Context, p *worqr.Process) error {
		members, _ := p.Aggregated()
		for _, m := range members {
			fmt.Printf("%s: %s\n", m.TaskID, m.Task)
		}
		p.SetResult(fmt.Appendf(nil, "%d clicks", len(members)))
		return nil
	}
	result, err := worqrtest.Run(context.Background(), count, nil, worqrtest.RunOptions{
		Members: []worqr.AggregateMember{
			{TaskID: "t1", Task: []byte("click /home")},
			{TaskID: "t2", Task: []byte("click /about")},
		},
	})
	fmt.Printf("%s %v\n", result, err)
	// Output:
	// t1: click /home
	// t2: click /about
	// 2 clicks <nil>
}

// Run a batch handler on one batch: each task comes back with its own
// outcome, as a worker would settle it.
func ExampleRunBatch() {
	insert := func(_ context.Context, batch []*worqr.Process) error {
		failed := worqr.BatchErrors{}
		for _, p := range batch {
			if len(p.Task()) == 0 {
				failed[p] = worqr.Permanent(errors.New("empty row"))
			}
		}
		return failed
	}
	res, err := worqrtest.RunBatch(context.Background(), insert,
		[][]byte{[]byte("row 1"), nil, []byte("row 3")}, worqrtest.RunOptions{TaskID: "rows"})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, r := range res {
		fmt.Println(r.Task.TaskID(), r.Err, worqr.IsPermanent(r.Err))
	}
	// Output:
	// rows-1 <nil> false
	// rows-2 empty row true
	// rows-3 <nil> false
}
