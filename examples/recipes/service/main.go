package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/worqr/worqr"
)

func sendEmail(ctx context.Context, p *worqr.Process) error {
	select {
	case <-time.After(time.Second): // the work
		return nil
	case <-ctx.Done():
		return context.Cause(ctx) // ErrShutdown once the deadline passed: the task goes back
	}
}

func main() {
	addr := flag.String("addr", "127.0.0.1:6379", "Redis address")
	listen := flag.String("listen", "127.0.0.1:8000", "HTTP address")
	flag.Parse()
	if err := run(*addr, *listen); err != nil {
		log.Fatal(err)
	}
}

func run(addr, listen string) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	client, err := worqr.New(worqr.Options{Addr: addr})
	if err != nil {
		return err
	}
	defer client.Close(context.Background()) // last: after the server and the worker

	worker, err := client.NewWorker(ctx, worqr.WorkerOptions{})
	if err != nil {
		return err
	}
	if err := worker.Handle(ctx, "emails", sendEmail, worqr.HandleOptions{Concurrency: 10}); err != nil {
		return err
	}

	mux := http.NewServeMux()
	mux.HandleFunc("POST /emails", func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		id, err := client.Enqueue(r.Context(), "emails", body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, id)
	})
	server := &http.Server{Addr: listen, Handler: mux, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- server.ListenAndServe() }()

	select {
	case <-ctx.Done(): // SIGINT or SIGTERM
	case err := <-served:
		return err // could not listen
	}
	stop() // a second signal kills the process at once

	// One deadline for everything, inside the platform's.
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	// No new requests; those running finish (and may still enqueue).
	httpErr := server.Shutdown(shutdownCtx)
	// No new tasks; running handlers finish, or at the deadline are
	// cancelled and their tasks go back to the front of the queue.
	workerErr := worker.Shutdown(shutdownCtx)
	return errors.Join(httpErr, workerErr)
}
