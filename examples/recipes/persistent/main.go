package main

import (
	"context"
	"errors"
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

func follow(ctx context.Context, p *worqr.Process) error {
	feed := string(p.Task())
	log.Printf("subscribed to %s", feed)
	tick := time.NewTicker(2 * time.Second)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
			log.Printf("%s: polled", feed) // the subscription's work
		case <-ctx.Done():
			// Cancelled, queue deleted, worker fenced, or shutdown: let go.
			log.Printf("unsubscribed from %s: %v", feed, context.Cause(ctx))
			return context.Cause(ctx) // not nil: a shutdown puts the task back
		}
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

	worker, err := client.NewWorker(ctx, worqr.WorkerOptions{TTL: 5 * time.Second})
	if err != nil {
		return err
	}
	// Room for this worker's share of the feeds, and for a dead peer's.
	if err := worker.Handle(ctx, "feeds", follow, worqr.HandleOptions{Concurrency: 100}); err != nil {
		return err
	}

	for _, feed := range []string{"prices", "news", "weather"} {
		_, err := client.Enqueue(ctx, "feeds", []byte(feed), worqr.Unique(feed))
		if err != nil && !errors.Is(err, worqr.ErrDuplicate) { // a duplicate is already held or waiting
			return err
		}
	}

	<-ctx.Done()
	// Shutdown cancels the handlers once its context ends: a short grace,
	// since persistent handlers only return when cancelled.
	shutdownCtx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := worker.Shutdown(shutdownCtx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return nil
}
