package main

import (
	"context"
	"flag"
	"log"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/worqr/worqr"
	"github.com/worqr/worqr/cron"
)

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
	client, err := worqr.New(worqr.Options{Addr: addr})
	if err != nil {
		return err
	}
	defer client.Close(context.Background())

	worker, err := client.NewWorker(ctx, worqr.WorkerOptions{})
	if err != nil {
		return err
	}
	err = worker.Handle(ctx, "maintenance", func(ctx context.Context, p *worqr.Process) error {
		log.Printf("%s (attempt %d)", p.Task(), p.Attempt())
		return nil
	}, worqr.HandleOptions{})
	if err != nil {
		return err
	}

	// At 03:00 in Paris every day, and every ten seconds.
	nightly := cron.MustParse("CRON_TZ=Europe/Paris 0 3 * * *")
	if err := worker.Periodic(ctx, "nightly-cleanup", "maintenance", nightly, []byte("cleanup"), worqr.PeriodicOptions{MaxAttempts: 3}); err != nil {
		return err
	}
	every10s := worqr.PeriodicOptions{ // the payload says which tick a task is for
		Payload: func(tick time.Time) []byte { return []byte("heartbeat of " + tick.Format(time.TimeOnly)) },
	}
	if err := worker.Periodic(ctx, "heartbeat", "maintenance", worqr.Every(10*time.Second), nil, every10s); err != nil {
		return err
	}

	<-ctx.Done()
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return worker.Shutdown(shutdownCtx) // stops this worker's schedules; the others' go on
}
