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
