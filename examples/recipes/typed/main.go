package main

import (
	"context"
	"errors"
	"flag"
	"log"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/worqr/worqr"
)

type Welcome struct {
	Email string `json:"email"`
	Name  string `json:"name"`
}

func sendWelcome(ctx context.Context, p *worqr.Process, w Welcome) error {
	if w.Email == "" {
		return worqr.Permanent(errors.New("no address")) // to the dead letters at once
	}
	slog.Info("welcome", "to", w.Email, "attempt", p.Attempt(), "last error", p.LastError())
	return nil // an error here (the mail server's) is retried under the policy
}

// alerter is an observer: worqr calls ObserveFinish as each process ends,
// on its own goroutine, so it must be quick.
type alerter struct{}

func (alerter) ObserveFinish(ctx context.Context, e worqr.FinishEvent) {
	if e.Outcome == worqr.OutcomeDead {
		slog.Error("ALERT: task dead", "queue", e.Queue, "task", e.TaskID, "attempt", e.Attempt, "err", e.Err)
	}
}

func main() {
	addr := flag.String("addr", "127.0.0.1:6379", "Redis address")
	flag.Parse()
	if err := run(*addr); err != nil {
		log.Fatal(err)
	}
}

func run(addr string) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	client, err := worqr.New(worqr.Options{Addr: addr, Observer: alerter{}})
	if err != nil {
		return err
	}
	defer client.Close(context.Background())

	worker, err := client.NewWorker(ctx, worqr.WorkerOptions{})
	if err != nil {
		return err
	}
	err = worqr.HandleJSON(ctx, worker, "welcome", sendWelcome, worqr.HandleOptions{
		Concurrency: 8,
		Timeout:     30 * time.Second, // each attempt's; its context ends with ErrTaskTimeout
		Retry: worqr.RetryPolicy{
			MaxAttempts: 5,
			// Backoff is a func(attempt int, err error) time.Duration: 2 s,
			// 4 s, 8 s... at most a minute, each between half and all of it.
			Backoff: worqr.ExponentialBackoff(2*time.Second, time.Minute, 0.5),
		},
	})
	if err != nil {
		return err
	}

	// The producer's side, usually in another program.
	for _, w := range []Welcome{{Email: "ada@example.com", Name: "Ada"}, {Name: "nobody"}} {
		if _, err := worqr.EnqueueJSON(ctx, client, "welcome", w, worqr.Timeout(10*time.Second)); err != nil {
			return err
		}
	}

	<-ctx.Done()
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return worker.Shutdown(shutdownCtx)
}
