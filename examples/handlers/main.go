// Command handlers shows worqr's Handle runtime: one worker serves three
// queues, each with its own concurrency limit ("emails" 4, "images" 2,
// "reports" 1), and the handlers show the three ways a task can go wrong:
// an error is retried (the task goes to the back of its queue), an error
// wrapped with worqr.Permanent finishes the task without a retry, and a
// panic is recovered and retried. The program measures how many handlers
// ran at once on each queue, waits until every queue is empty with nothing
// in flight, shuts the worker down, and exits 0 only if every limit held
// and every task ended as expected.
//
//	go run ./examples/handlers                       # embedded Redis (miniredis)
//	go run ./examples/handlers -addr 127.0.0.1:6379  # a real Redis
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/worqr/worqr"
	"github.com/worqr/worqr/examples/internal/demo"
)

// The special tasks, one per way of failing.
const (
	flaky   = "flaky-signup"   // emails: fails once, succeeds on the retry
	corrupt = "corrupt.png"    // images: fails permanently, never retried
	panicky = "panicky-report" // reports: panics once, succeeds on the retry
)

// queueSpec is one queue served by the worker.
type queueSpec struct {
	name        string
	concurrency int
	tasks       []string
}

func main() {
	addr := flag.String("addr", "", "Redis address (a cluster: any node, or seeds separated by commas); empty runs an embedded Redis")
	n := flag.Int("tasks", 12, "ordinary tasks per queue, besides the special one")
	timeout := flag.Duration("timeout", 8*time.Second, "give up if the queues have not settled by then")
	flag.Parse()
	if err := run(*addr, *n, *timeout); err != nil {
		fmt.Fprintln(os.Stderr, "handlers:", err)
		os.Exit(1)
	}
}

func run(addr string, n int, timeout time.Duration) error {
	// worqr logs retries, permanent failures and panics (with a stack); this
	// program prints its own line for each instead, so worqr's are dropped.
	client, _, stopDemo, err := demo.Start(addr, "handlers", nil)
	if err != nil {
		return err
	}
	defer stopDemo()
	ctx := context.Background()

	specs := []queueSpec{
		{name: "emails", concurrency: 4, tasks: tasks("mail", n, flaky)},
		{name: "images", concurrency: 2, tasks: tasks("img", n, corrupt)},
		{name: "reports", concurrency: 1, tasks: tasks("report", n/2, panicky)},
	}
	t := newTally()

	worker, err := client.NewWorker(ctx, worqr.WorkerOptions{})
	if err != nil {
		return err
	}
	defer worker.Close(ctx) // a no-op after Shutdown; cleans up on an early return
	handlers := map[string]worqr.Handler{
		"emails":  t.wrap("emails", sendEmail),
		"images":  t.wrap("images", resizeImage),
		"reports": t.wrap("reports", buildReport),
	}
	for _, s := range specs {
		err := worker.Handle(ctx, s.name, handlers[s.name], worqr.HandleOptions{
			Concurrency: s.concurrency,
			// A panic is retried like an error; true would finish the task.
			PanicIsPermanent: false,
		})
		if err != nil {
			return err
		}
	}
	start := time.Now()
	for _, s := range specs {
		batch := make([][]byte, len(s.tasks))
		for i, task := range s.tasks {
			batch[i] = []byte(task)
		}
		if _, err := client.EnqueueBatch(ctx, s.name, batch); err != nil {
			return err
		}
		fmt.Printf("enqueued %2d tasks on %-7s (concurrency %d)\n", len(batch), s.name, s.concurrency)
	}

	// Wait until every task has ended and Redis agrees: each queue empty,
	// nothing in flight.
	deadline := start.Add(timeout)
	for !t.complete(specs) || !settled(ctx, client, specs) {
		if time.Now().After(deadline) {
			return fmt.Errorf("queues not settled within %v", timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
	fmt.Printf("all queues settled after %v\n", time.Since(start).Round(time.Millisecond))

	sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if err := worker.Shutdown(sctx); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	for _, s := range specs {
		if _, err := client.DeleteQueue(ctx, s.name); err != nil {
			return err
		}
	}
	return t.report(specs)
}

// tasks names n ordinary tasks and the special one, which goes in the middle.
func tasks(kind string, n int, special string) []string {
	out := make([]string, 0, n+1)
	for i := range n {
		if i == n/2 {
			out = append(out, special)
		}
		out = append(out, fmt.Sprintf("%s-%02d", kind, i))
	}
	if n == 0 {
		out = append(out, special)
	}
	return out
}

// work pretends to do something for 20 to 60 ms, or until ctx ends.
func work(ctx context.Context) error {
	select {
	case <-time.After(time.Duration(20+rand.IntN(40)) * time.Millisecond):
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// sendEmail fails the first time it sends flaky-signup: the error makes
// worqr put the task back at the end of the queue, and the retry succeeds.
func sendEmail(ctx context.Context, task string, attempt int) error {
	if err := work(ctx); err != nil {
		return err
	}
	if task == flaky && attempt == 1 {
		return errors.New("SMTP server said 451: try again later")
	}
	return nil
}

// resizeImage cannot decode corrupt.png; retrying would not help, so the
// error is permanent and worqr finishes the task.
func resizeImage(ctx context.Context, task string, attempt int) error {
	if err := work(ctx); err != nil {
		return err
	}
	if task == corrupt {
		return worqr.Permanent(errors.New("png: invalid format"))
	}
	return nil
}

// buildReport panics the first time it builds panicky-report; worqr
// recovers the panic and retries the task.
func buildReport(ctx context.Context, task string, attempt int) error {
	if err := work(ctx); err != nil {
		return err
	}
	if task == panicky && attempt == 1 {
		panic("report: no totals for q3") // stands in for a bug in the handler
	}
	return nil
}

// tally records what every handler did, and how many ran at once.
type tally struct {
	mu       sync.Mutex
	running  map[string]int            // queue -> handlers running now
	peak     map[string]int            // queue -> most handlers running at once
	attempts map[string]int            // queue/task -> handler calls
	outcome  map[string][]string       // queue/task -> what each call did
	counts   map[string]map[string]int // queue -> outcome -> calls
}

func newTally() *tally {
	return &tally{
		running:  make(map[string]int),
		peak:     make(map[string]int),
		attempts: make(map[string]int),
		outcome:  make(map[string][]string),
		counts:   make(map[string]map[string]int),
	}
}

// wrap turns a plain task function into a worqr.Handler that records each
// call and prints the notable ones.
func (t *tally) wrap(queue string, do func(ctx context.Context, task string, attempt int) error) worqr.Handler {
	return func(ctx context.Context, p *worqr.Process) (err error) {
		task := string(p.Task())
		key := queue + "/" + task
		t.mu.Lock()
		t.running[queue]++
		t.peak[queue] = max(t.peak[queue], t.running[queue])
		t.attempts[key]++
		attempt := t.attempts[key]
		t.mu.Unlock()

		what := "panicked"
		defer func() {
			t.mu.Lock()
			t.running[queue]--
			t.outcome[key] = append(t.outcome[key], what)
			if t.counts[queue] == nil {
				t.counts[queue] = make(map[string]int)
			}
			t.counts[queue][what]++
			t.mu.Unlock()
			switch {
			case what == "panicked":
				// Look at the panic, then let it go on up to worqr,
				// which recovers it and retries the task.
				v := recover()
				fmt.Printf("%-7s %-15s attempt %d panicked: %v; worqr recovers and retries it\n", queue, task, attempt, v)
				panic(v)
			case what == "failed":
				fmt.Printf("%-7s %-15s attempt %d failed: %v; retrying\n", queue, task, attempt, err)
			case what == "interrupted":
				fmt.Printf("%-7s %-15s attempt %d interrupted by shutdown; back to the front of the queue\n", queue, task, attempt)
			case what == "permanent":
				fmt.Printf("%-7s %-15s attempt %d failed permanently: %v; finished, not retried\n", queue, task, attempt, errors.Unwrap(err))
			case attempt > 1:
				fmt.Printf("%-7s %-15s attempt %d succeeded\n", queue, task, attempt)
			}
		}()
		err = do(ctx, task, attempt)
		switch {
		case err == nil:
			what = "ok"
		case worqr.IsPermanent(err):
			what = "permanent"
		case errors.Is(context.Cause(ctx), worqr.ErrShutdown):
			what = "interrupted"
		default:
			what = "failed"
		}
		return err
	}
}

// complete reports whether every task has had its last expected call.
func (t *tally) complete(specs []queueSpec) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, s := range specs {
		for _, task := range s.tasks {
			out := t.outcome[s.name+"/"+task]
			if len(out) == 0 || (out[len(out)-1] != "ok" && out[len(out)-1] != "permanent") {
				return false
			}
		}
		if t.running[s.name] > 0 {
			return false
		}
	}
	return true
}

// report prints the counts and checks every limit and outcome.
func (t *tally) report(specs []queueSpec) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	want := map[string]string{
		flaky:   "failed ok",
		corrupt: "permanent",
		panicky: "panicked ok",
	}
	var problems []string
	for _, s := range specs {
		c := t.counts[s.name]
		fmt.Printf("%-7s %2d tasks: %2d ok, %d failed, %d permanent, %d panicked; peak %d/%d handlers at once\n",
			s.name, len(s.tasks), c["ok"], c["failed"], c["permanent"], c["panicked"], t.peak[s.name], s.concurrency)
		if t.peak[s.name] > s.concurrency {
			problems = append(problems, fmt.Sprintf("%s ran %d handlers at once, above its limit of %d", s.name, t.peak[s.name], s.concurrency))
		}
		for _, task := range s.tasks {
			expected, special := want[task]
			if !special {
				expected = "ok"
			}
			if got := strings.Join(t.outcome[s.name+"/"+task], " "); got != expected {
				problems = append(problems, fmt.Sprintf("%s %s: calls went %q, want %q", s.name, task, got, expected))
			}
		}
	}
	sort.Strings(problems)
	if len(problems) > 0 {
		return errors.New(strings.Join(problems, "; "))
	}
	fmt.Println("every limit held and every task ended as expected")
	return nil
}

// settled reports whether every queue is empty with nothing in flight.
func settled(ctx context.Context, c *worqr.Client, specs []queueSpec) bool {
	for _, s := range specs {
		n, err := c.QueueLen(ctx, s.name)
		if err != nil || n > 0 {
			return false
		}
		procs, err := c.Processes(ctx, s.name)
		if err != nil || len(procs) > 0 {
			return false
		}
	}
	return true
}
