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
	err = worker.Handle(ctx, "reminders", func(ctx context.Context, p *worqr.Process) error {
		log.Printf("reminder %q, due %s, enqueued %s", p.Task(), p.DueAt().Format(time.TimeOnly), p.EnqueuedAt().Format(time.TimeOnly))
		return nil
	}, worqr.HandleOptions{})
	if err != nil {
		return err
	}

	// In 5 seconds (24*time.Hour in real life), or at a given time.
	if _, err := client.Enqueue(ctx, "reminders", []byte("renew the certificate"), worqr.In(5*time.Second)); err != nil {
		return err
	}
	if _, err := client.Enqueue(ctx, "reminders", []byte("the minute turned"), worqr.At(time.Now().Truncate(time.Minute).Add(time.Minute))); err != nil {
		return err
	}

	<-ctx.Done()
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return worker.Shutdown(shutdownCtx)
}
