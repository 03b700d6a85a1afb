package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/worqr/worqr"
)

const api = "https://partner.example.com/v1/orders/"

func callAPI(ctx context.Context, p *worqr.Process) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, api+url.PathEscape(string(p.Task())), nil)
	if err != nil {
		return worqr.Permanent(err) // a task that cannot make a request never will
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err // retried under the queue's policy
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusTooManyRequests:
		wait, err := strconv.Atoi(resp.Header.Get("Retry-After"))
		if err != nil {
			wait = 30
		}
		return worqr.RetryAfter(time.Duration(wait)*time.Second, fmt.Errorf("%s: %s", req.URL, resp.Status))
	case resp.StatusCode >= 500:
		return fmt.Errorf("%s: %s", req.URL, resp.Status)
	case resp.StatusCode >= 400:
		return worqr.Permanent(fmt.Errorf("%s: %s", req.URL, resp.Status))
	}
	return nil
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
	client, err := worqr.New(worqr.Options{Addr: addr})
	if err != nil {
		return err
	}
	defer client.Close(context.Background())

	// Once, from any program (or `worqr limit partner-api 4`); they stay in Redis.
	if err := client.SetRateLimit(ctx, "partner-api", 10, time.Second, worqr.CreateQueue()); err != nil {
		return err
	}
	if err := client.SetConcurrency(ctx, "partner-api", 4, worqr.CreateQueue()); err != nil {
		return err
	}

	worker, err := client.NewWorker(ctx, worqr.WorkerOptions{})
	if err != nil {
		return err
	}
	err = worker.Handle(ctx, "partner-api", callAPI, worqr.HandleOptions{Concurrency: 4, Timeout: 20 * time.Second})
	if err != nil {
		return err
	}
	log.Print("serving partner-api: at most 4 calls at once, 10 a second")

	<-ctx.Done()
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 25*time.Second)
	defer cancel()
	return worker.Shutdown(shutdownCtx)
}
