// Command graceful shows a graceful shutdown with worqr's Handle runtime:
// a worker handles a queue of slow tasks (each takes -task, default 300ms,
// or until its context ends) while the program keeps enqueueing more. On
// SIGINT (Ctrl-C) or SIGTERM it stops enqueueing and calls worker.Shutdown
// with a grace period: handlers still running get that long to finish;
// those that do not have their contexts cancelled (context.Cause says
// worqr.ErrShutdown) and their tasks go back to the front of the queue.
// It prints how many handlers were running, how each ended, and what is
// left in the queue, and exits 0 if every task is either finished or back
// in the queue.
//
//	go run ./examples/graceful                       # embedded Redis; stop it with Ctrl-C
//	go run ./examples/graceful -addr 127.0.0.1:6379  # a real Redis
//	go run ./examples/graceful -after 1s             # sends itself SIGTERM after 1s (for CI)
//	go run ./examples/graceful -after 1s -grace 100ms  # too short: handlers are cancelled
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/worqr/worqr"
	"github.com/worqr/worqr/examples/internal/demo"
)

const queue = "slow"

func main() {
	addr := flag.String("addr", "", "Redis address (a cluster: any node, or seeds separated by commas); empty runs an embedded Redis")
	grace := flag.Duration("grace", 2*time.Second, "how long Shutdown lets running handlers finish")
	after := flag.Duration("after", 0, "send ourselves SIGTERM after this long; 0 waits for a signal")
	concurrency := flag.Int("concurrency", 4, "handlers running at once")
	task := flag.Duration("task", 300*time.Millisecond, "how long each task takes")
	every := flag.Duration("every", 50*time.Millisecond, "enqueue a task this often")
	flag.Parse()

	if err := run(*addr, *grace, *after, *concurrency, *task, *every); err != nil {
		fmt.Fprintln(os.Stderr, "graceful:", err)
		os.Exit(1)
	}
}

func run(addr string, grace, after time.Duration, concurrency int, taskTime, every time.Duration) error {
	// Signals end this context; the handlers' contexts are worqr's, so a
	// signal alone does not interrupt them: Shutdown decides.
	sigCtx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	client, _, stopDemo, err := demo.Start(addr, "graceful", nil)
	if err != nil {
		return err
	}
	defer stopDemo()
	ctx := context.Background()
	defer client.DeleteQueue(ctx, queue) // leave nothing behind in a real Redis

	worker, err := client.NewWorker(ctx, worqr.WorkerOptions{})
	if err != nil {
		return err
	}
	defer worker.Close(ctx) // a no-op after Shutdown; cleans up on an early return

	s := &stats{running: make(map[string]bool)}
	slow := func(ctx context.Context, p *worqr.Process) error {
		task := string(p.Task())
		s.begin(task)
		select {
		case <-time.After(taskTime):
			s.end(task, nil)
			return nil // finished
		case <-ctx.Done():
			// Returning an error leaves the task unfinished: after a
			// shutdown it goes back to the front of the queue.
			cause := context.Cause(ctx)
			s.end(task, cause)
			return cause
		}
	}
	if err := worker.Handle(ctx, queue, slow, worqr.HandleOptions{Concurrency: concurrency}); err != nil {
		return err
	}

	// Enqueue a task every so often until a signal comes.
	type result struct {
		n   int
		err error
	}
	produced := make(chan result, 1)
	go func() {
		n := 0
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			if _, err := client.Enqueue(ctx, queue, fmt.Appendf(nil, "task-%03d", n)); err != nil {
				produced <- result{n, fmt.Errorf("enqueue: %w", err)}
				return
			}
			n++
			select {
			case <-sigCtx.Done():
				produced <- result{n, nil}
				return
			case <-t.C:
			}
		}
	}()
	fmt.Printf("handling %q with %d handlers at once, %v per task, a new task every %v\n", queue, concurrency, taskTime, every)
	if after > 0 {
		fmt.Printf("sending SIGTERM to ourselves in %v\n", after)
		time.AfterFunc(after, func() {
			if p, err := os.FindProcess(os.Getpid()); err == nil {
				_ = p.Signal(syscall.SIGTERM)
			}
		})
	} else {
		fmt.Println("press Ctrl-C (or send SIGTERM) to shut down")
	}

	select {
	case <-sigCtx.Done():
	case r := <-produced:
		return r.err // enqueueing failed before any signal
	}
	stop() // a second Ctrl-C kills the program at once
	r := <-produced
	if r.err != nil {
		return r.err
	}
	enqueued := r.n
	started, ended := s.counts()
	fmt.Printf("%v: %d tasks enqueued, %d finished, %d handlers running; shutting down with a %v grace period\n",
		context.Cause(sigCtx), enqueued, s.finishedCount(), started-ended, grace)

	start := time.Now()
	gctx, cancel := context.WithTimeout(ctx, grace)
	defer cancel()
	serr := worker.Shutdown(gctx)
	took := time.Since(start).Round(time.Millisecond)

	// The handlers Shutdown waited for: those running when it was called
	// (and any the runtime started in the moment before it stopped taking).
	startedAll, _ := s.counts()
	during := startedAll - ended
	cancelled := s.cancelledTasks()
	slices.SortFunc(cancelled, func(a, b cancellation) int { return strings.Compare(a.task, b.task) })
	for _, c := range cancelled {
		fmt.Printf("  %s cancelled: %v\n", c.task, c.cause)
	}
	switch {
	case serr == nil && len(cancelled) == 0:
		fmt.Printf("all %d running handlers finished within the grace period (Shutdown took %v)\n", during, took)
	case errors.Is(serr, context.DeadlineExceeded):
		fmt.Printf("grace period ran out: %d of %d running handlers cancelled, %d finished in time (Shutdown took %v)\n",
			len(cancelled), during, during-len(cancelled), took)
	default:
		return fmt.Errorf("shutdown: %v (%d handlers cancelled)", serr, len(cancelled))
	}

	// Check the books: every task enqueued is finished or waiting again,
	// nothing is in flight, and the cancelled ones are at the front.
	waiting, err := client.QueueLen(ctx, queue)
	if err != nil {
		return err
	}
	procs, err := client.Processes(ctx, queue)
	if err != nil {
		return err
	}
	finished := s.finishedCount()
	fmt.Printf("queue %q afterwards: %d waiting, %d in flight; %d of %d tasks finished\n", queue, waiting, len(procs), finished, enqueued)
	if len(cancelled) > 0 {
		front, err := client.Range(ctx, queue, 0, int64(len(cancelled))-1)
		if err != nil {
			return err
		}
		fmt.Printf("front of the queue: %q\n", front)
		want := make(map[string]bool)
		for _, c := range cancelled {
			want[c.task] = true
		}
		for _, t := range front {
			if !want[string(t)] {
				return fmt.Errorf("%s is at the front of the queue, not a cancelled task", t)
			}
		}
	}
	if len(procs) > 0 {
		return fmt.Errorf("%d processes still in flight after Shutdown", len(procs))
	}
	if int64(finished)+waiting != int64(enqueued) {
		return fmt.Errorf("%d finished + %d waiting != %d enqueued", finished, waiting, enqueued)
	}
	if s.stillRunning() > 0 {
		return fmt.Errorf("%d handlers still running after Shutdown", s.stillRunning())
	}
	return nil
}

// stats follows the handlers.
type stats struct {
	mu             sync.Mutex
	running        map[string]bool // tasks whose handlers are running
	started, ended int             // handler calls begun and returned
	finished       int
	cancelled      []cancellation
}

type cancellation struct {
	task  string
	cause error
}

func (s *stats) begin(task string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.running[task] = true
	s.started++
}

func (s *stats) end(task string, cause error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.running, task)
	s.ended++
	if cause == nil {
		s.finished++
	} else {
		s.cancelled = append(s.cancelled, cancellation{task, cause})
	}
}

func (s *stats) counts() (started, ended int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.started, s.ended
}

func (s *stats) stillRunning() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.running)
}

func (s *stats) finishedCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.finished
}

func (s *stats) cancelledTasks() []cancellation {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]cancellation(nil), s.cancelled...)
}
