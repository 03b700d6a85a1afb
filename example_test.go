package worqr_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/worqr/worqr"
	worqrembedded "github.com/worqr/worqr/embedded"
)

// embedded starts an in-process Redis for the examples and a worqr client
// on it (see the embedded package).
func embedded() (*worqr.Client, func()) { return embeddedWith(worqr.Options{}) }

// embeddedWith is embedded with options of the caller's (Logger is set
// here).
func embeddedWith(opts worqr.Options) (*worqr.Client, func()) {
	opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	redis, err := worqrembedded.Start(worqrembedded.Options{Client: opts})
	if err != nil {
		panic(err)
	}
	return redis.Client(), func() { _ = redis.Close(context.Background()) }
}

// Enqueue tasks, take them with a worker, and finish them.
func Example() {
	client, stop := embedded()
	defer stop()
	ctx := context.Background()

	_, err := client.EnqueueBatch(ctx, "emails", [][]byte{[]byte("to:ada"), []byte("to:grace")})
	if err != nil {
		panic(err)
	}

	worker, err := client.NewWorker(ctx, worqr.WorkerOptions{})
	if err != nil {
		panic(err)
	}
	defer worker.Close(ctx)
	if err := worker.StartWork(ctx, "emails", worqr.Events{}); err != nil {
		panic(err)
	}
	for {
		p, err := worker.Dequeue(ctx, "emails")
		if errors.Is(err, worqr.ErrNoTask) {
			break
		}
		if err != nil {
			panic(err)
		}
		fmt.Printf("sending %s\n", p.Task())
		if err := p.Finish(ctx); err != nil {
			panic(err)
		}
	}
	// Output:
	// sending to:ada
	// sending to:grace
}

// Drive dequeues from work events: the worker is told when tasks arrive,
// including after a reconnect, so it never polls.
func ExampleWorker_StartWork() {
	client, stop := embedded()
	defer stop()
	ctx := context.Background()
	worker, err := client.NewWorker(ctx, worqr.WorkerOptions{})
	if err != nil {
		panic(err)
	}
	defer worker.Close(ctx)

	wake := make(chan struct{}, 1)
	err = worker.StartWork(ctx, "thumbnails", worqr.Events{
		// Events run on the worker's own goroutine: hand off, don't block.
		Work: func(queue string, count int64) {
			select {
			case wake <- struct{}{}:
			default:
			}
		},
	})
	if err != nil {
		panic(err)
	}
	if _, err := client.Enqueue(ctx, "thumbnails", []byte("cat.png")); err != nil {
		panic(err)
	}

	<-wake
	for {
		p, err := worker.Dequeue(ctx, "thumbnails")
		if errors.Is(err, worqr.ErrNoTask) {
			break
		}
		if err != nil {
			panic(err)
		}
		fmt.Printf("resizing %s\n", p.Task())
		_ = p.Finish(ctx)
	}
	// Output:
	// resizing cat.png
}

// Requeue returns a task to the back of its queue for a retry.
func ExampleProcess_Requeue() {
	client, stop := embedded()
	defer stop()
	ctx := context.Background()
	worker, _ := client.NewWorker(ctx, worqr.WorkerOptions{})
	defer worker.Close(ctx)
	_ = worker.StartWork(ctx, "jobs", worqr.Events{})
	_, _ = client.EnqueueBatch(ctx, "jobs", [][]byte{[]byte("flaky"), []byte("next")})

	p, _ := worker.Dequeue(ctx, "jobs")
	if err := p.Requeue(ctx); err != nil {
		panic(err)
	}
	waiting, _ := client.Range(ctx, "jobs", 0, -1)
	fmt.Printf("%s\n", waiting)
	// Output:
	// [next flaky]
}

// Cancel removes waiting copies of a task and tells the worker holding one.
func ExampleClient_Cancel() {
	client, stop := embedded()
	defer stop()
	ctx := context.Background()
	worker, _ := client.NewWorker(ctx, worqr.WorkerOptions{})
	defer worker.Close(ctx)
	_ = worker.StartWork(ctx, "reports", worqr.Events{})
	_, _ = client.EnqueueBatch(ctx, "reports", [][]byte{[]byte("q3"), []byte("q3")})
	held, _ := worker.Dequeue(ctx, "reports")

	res, _ := client.Cancel(ctx, "reports", []byte("q3"))
	fmt.Printf("removed %d waiting, marked %d in flight\n", res.Removed, res.Marked)
	<-held.Done()
	fmt.Println(held.Err())
	// Output:
	// removed 1 waiting, marked 1 in flight
	// task cancelled
}

// Serve a queue with a handler: nil finishes a task, an error retries it,
// and Shutdown waits for running handlers.
func ExampleWorker_Handle() {
	client, stop := embedded()
	defer stop()
	ctx := context.Background()
	worker, _ := client.NewWorker(ctx, worqr.WorkerOptions{})

	done := make(chan struct{})
	tries := 0
	err := worker.Handle(ctx, "invoices", func(ctx context.Context, p *worqr.Process) error {
		tries++
		if tries == 1 {
			return errors.New("ledger busy") // retried at the back
		}
		fmt.Printf("invoiced %s on try %d\n", p.Task(), tries)
		close(done)
		return nil
	}, worqr.HandleOptions{Concurrency: 1})
	if err != nil {
		panic(err)
	}
	_, _ = client.Enqueue(ctx, "invoices", []byte("order-7"))
	<-done
	if err := worker.Shutdown(ctx); err != nil {
		panic(err)
	}
	// Output:
	// invoiced order-7 on try 2
}

// Serve several queues from one pool of handler slots: in strict order a
// free slot goes to the first queue with work, so critical tasks start
// before default ones whatever order they came in.
func ExampleWorker_HandleQueues() {
	client, stop := embedded()
	defer stop()
	ctx := context.Background()
	_, _ = client.EnqueueBatch(ctx, "default", [][]byte{[]byte("report"), []byte("thumbnail")})
	_, _ = client.EnqueueBatch(ctx, "critical", [][]byte{[]byte("payment"), []byte("refund")})

	worker, _ := client.NewWorker(ctx, worqr.WorkerOptions{})
	var wg sync.WaitGroup
	wg.Add(4)
	run := func(ctx context.Context, p *worqr.Process) error {
		fmt.Printf("%s: %s\n", p.Queue(), p.Task())
		wg.Done()
		return nil
	}
	err := worker.HandleQueues(ctx, []worqr.QueueSpec{
		{Queue: "critical", Handler: run},
		{Queue: "default", Handler: run},
	}, worqr.PoolOptions{Concurrency: 1, Order: worqr.OrderStrict})
	if err != nil {
		panic(err)
	}
	wg.Wait()
	if err := worker.Shutdown(ctx); err != nil {
		panic(err)
	}
	// Output:
	// critical: payment
	// critical: refund
	// default: report
	// default: thumbnail
}

// Every task gets an id, and options change how it is queued.
func ExampleClient_Enqueue() {
	client, stop := embedded()
	defer stop()
	ctx := context.Background()

	id, err := client.Enqueue(ctx, "reports", []byte("monthly"))
	if err != nil {
		panic(err)
	}
	if _, err := client.Enqueue(ctx, "reports", []byte("urgent"), worqr.AtFront()); err != nil {
		panic(err)
	}
	tasks, err := client.Tasks(ctx, "reports", 0, -1)
	if err != nil {
		panic(err)
	}
	for _, t := range tasks {
		fmt.Printf("%s (same id: %v)\n", t.Payload, t.ID == id)
	}
	// Output:
	// urgent (same id: false)
	// monthly (same id: true)
}

// CancelTask cancels one task by the id Enqueue returned.
func ExampleClient_CancelTask() {
	client, stop := embedded()
	defer stop()
	ctx := context.Background()
	ids, err := client.EnqueueBatch(ctx, "exports", [][]byte{[]byte("a.csv"), []byte("b.csv")})
	if err != nil {
		panic(err)
	}
	res, err := client.CancelTask(ctx, "exports", ids[0])
	if err != nil {
		panic(err)
	}
	left, _ := client.Range(ctx, "exports", 0, -1)
	fmt.Printf("removed %d, left %s\n", res.Removed, left)
	// Output:
	// removed 1, left [b.csv]
}

// Middleware wraps every handler of a worker (or of one queue), here to
// log each task's attempt and how long it took.
func ExampleMiddleware() {
	client, stop := embedded()
	defer stop()
	ctx := context.Background()

	logged := func(next worqr.Handler) worqr.Handler {
		return func(ctx context.Context, p *worqr.Process) error {
			start := time.Now()
			err := next(ctx, p)
			_ = time.Since(start) // a real one would log or record it
			fmt.Printf("%s attempt %d: err=%v\n", p.Task(), p.Attempt(), err)
			return err
		}
	}
	worker, err := client.NewWorker(ctx, worqr.WorkerOptions{Middleware: []worqr.Middleware{logged}})
	if err != nil {
		panic(err)
	}
	done := make(chan struct{})
	err = worker.Handle(ctx, "mail", func(ctx context.Context, p *worqr.Process) error {
		if p.Attempt() == 1 {
			return errors.New("smtp busy")
		}
		close(done)
		return nil
	}, worqr.HandleOptions{})
	if err != nil {
		panic(err)
	}
	if _, err := client.Enqueue(ctx, "mail", []byte("welcome")); err != nil {
		panic(err)
	}
	<-done
	if err := worker.Shutdown(ctx); err != nil {
		panic(err)
	}
	// Output:
	// welcome attempt 1: err=smtp busy
	// welcome attempt 2: err=<nil>
}

// counter is an observer that counts outcomes, as a metrics package would.
type counter struct {
	mu       sync.Mutex
	outcomes map[worqr.Outcome]int
}

func (c *counter) ObserveFinish(_ context.Context, e worqr.FinishEvent) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.outcomes[e.Outcome]++
}

// An observer is told how every task ended (and, if it implements the
// other observer interfaces, of enqueues, starts, reclaims and fencing).
func Example_observer() {
	metrics := &counter{outcomes: make(map[worqr.Outcome]int)}
	client, stop := embeddedWith(worqr.Options{Observer: metrics})
	defer stop()
	ctx := context.Background()

	worker, err := client.NewWorker(ctx, worqr.WorkerOptions{})
	if err != nil {
		panic(err)
	}
	var wg sync.WaitGroup
	wg.Add(3)
	err = worker.Handle(ctx, "q", func(ctx context.Context, p *worqr.Process) error {
		defer wg.Done()
		if string(p.Task()) == "bad" {
			return worqr.Permanent(errors.New("malformed"))
		}
		return nil
	}, worqr.HandleOptions{})
	if err != nil {
		panic(err)
	}
	if _, err := client.EnqueueBatch(ctx, "q", [][]byte{[]byte("ok"), []byte("bad"), []byte("ok")}); err != nil {
		panic(err)
	}
	wg.Wait()
	if err := worker.Shutdown(ctx); err != nil {
		panic(err)
	}
	fmt.Println(metrics.outcomes[worqr.OutcomeSucceeded], "succeeded,", metrics.outcomes[worqr.OutcomeDead], "dead-lettered")
	// Output:
	// 2 succeeded, 1 dead-lettered
}

// A main serves its queues until SIGINT or SIGTERM, then shuts down: Handle
// returns at once, so main waits on the signal, and Shutdown lets running
// handlers finish (here for up to 10 s) before their tasks go back.
// Cancelling the ctx given to NewWorker or Handle does not stop the worker.
func ExampleWorker_Shutdown() {
	client, stop := embedded()
	defer stop()
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()

	worker, err := client.NewWorker(ctx, worqr.WorkerOptions{})
	if err != nil {
		panic(err)
	}
	err = worker.Handle(ctx, "mail", func(ctx context.Context, p *worqr.Process) error {
		fmt.Printf("sent %s\n", p.Task())
		cancel() // stands in for the SIGTERM a real main waits for
		return nil
	}, worqr.HandleOptions{})
	if err != nil {
		panic(err)
	}
	// (A producer elsewhere; not on ctx, which the handler ends.)
	if _, err := client.Enqueue(context.Background(), "mail", []byte("welcome")); err != nil {
		panic(err)
	}

	<-ctx.Done()
	shutdownCtx, done := context.WithTimeout(context.Background(), 10*time.Second)
	defer done()
	if err := worker.Shutdown(shutdownCtx); err != nil {
		panic(err)
	}
	fmt.Println("shut down")
	// Output:
	// sent welcome
	// shut down
}

// Welcome is a typed task: EnqueueJSON encodes it, HandleJSON decodes it.
type Welcome struct {
	Email string `json:"email"`
	Name  string `json:"name"`
}

// Enqueue and handle typed tasks. A payload that does not decode into
// the handler's type goes to the dead letters at once, kind "decode".
func ExampleHandleJSON() {
	client, stop := embedded()
	defer stop()
	ctx := context.Background()

	worker, err := client.NewWorker(ctx, worqr.WorkerOptions{})
	if err != nil {
		panic(err)
	}
	done := make(chan struct{})
	err = worqr.HandleJSON(ctx, worker, "welcome", func(ctx context.Context, p *worqr.Process, w Welcome) error {
		fmt.Printf("welcome, %s <%s>\n", w.Name, w.Email)
		close(done)
		return nil
	}, worqr.HandleOptions{})
	if err != nil {
		panic(err)
	}

	// Not JSON: dead-lettered without calling the handler.
	bad, err := client.Enqueue(ctx, "welcome", []byte("oops"), worqr.Retain(time.Minute))
	if err != nil {
		panic(err)
	}
	outcome, err := client.Wait(ctx, "welcome", bad)
	if err != nil {
		panic(err)
	}
	fmt.Println(outcome.Status, outcome.Reason)

	if _, err := worqr.EnqueueJSON(ctx, client, "welcome", Welcome{Email: "ada@example.com", Name: "Ada"}); err != nil {
		panic(err)
	}
	<-done
	if err := worker.Shutdown(ctx); err != nil {
		panic(err)
	}
	// Output:
	// dead decode
	// welcome, Ada <ada@example.com>
}

// SignupEmail and ReceiptEmail are task types that name their kinds
// (worqr.Kinded): producers and workers share these definitions.
type SignupEmail struct{ To string }

func (SignupEmail) Kind() string { return "email.signup" }

type ReceiptEmail struct{ Order int }

func (ReceiptEmail) Kind() string { return "email.receipt" }

// Serve one queue with a handler per task kind.
func ExampleRouter() {
	client, stop := embedded()
	defer stop()
	ctx := context.Background()

	router := &worqr.Router{}
	done := make(chan struct{}, 2)
	if err := worqr.RouteJSON(router, func(ctx context.Context, p *worqr.Process, m SignupEmail) error {
		fmt.Printf("%s: welcome, %s\n", p.Kind(), m.To)
		done <- struct{}{}
		return nil
	}); err != nil {
		panic(err)
	}
	if err := worqr.RouteJSON(router, func(ctx context.Context, p *worqr.Process, m ReceiptEmail) error {
		fmt.Printf("%s: order %d\n", p.Kind(), m.Order)
		done <- struct{}{}
		return nil
	}); err != nil {
		panic(err)
	}

	worker, err := client.NewWorker(ctx, worqr.WorkerOptions{})
	if err != nil {
		panic(err)
	}
	if err := worker.Handle(ctx, "mail", router.Serve, worqr.HandleOptions{}); err != nil {
		panic(err)
	}
	// Each task is waited for before the next goes, so that the output
	// has their order.
	if _, err := worqr.EnqueueJSON(ctx, client, "mail", SignupEmail{To: "ada@example.com"}); err != nil {
		panic(err)
	}
	<-done
	if _, err := worqr.EnqueueJSON(ctx, client, "mail", ReceiptEmail{Order: 42}); err != nil {
		panic(err)
	}
	<-done

	// A kind the router has no handler for: dead at once, not retried.
	id, err := client.Enqueue(ctx, "mail", []byte("{}"), worqr.Kind("email.unknown"), worqr.Retain(time.Minute))
	if err != nil {
		panic(err)
	}
	outcome, err := client.Wait(ctx, "mail", id)
	if err != nil {
		panic(err)
	}
	fmt.Println(outcome.Status, outcome.Reason, outcome.Attempts)
	fmt.Println(outcome.Error)
	if err := worker.Shutdown(ctx); err != nil {
		panic(err)
	}
	// Output:
	// email.signup: welcome, ada@example.com
	// email.receipt: order 42
	// dead unroutable 1
	// no handler for the task's kind: "email.unknown"
}
