package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/worqr/worqr"
)

// childArg, as the first argument, makes the program a worker process for
// the recovery scenario: it is not a flag, so it stays out of -help.
const childArg = "__crash-child"

// recoveryTasks is how many slow tasks the crashed worker holds.
const recoveryTasks = 20

// runRecovery SIGKILLs a worker process holding slow tasks while a second
// worker runs, and measures the time from the kill until the second one
// has started every task, for a TTL of 3 s and of 1 s (-short: 1 s only).
func runRecovery(ctx context.Context, b *bench) (*result, error) {
	res := &result{}
	ttls := []time.Duration{3 * time.Second, time.Second}
	if b.cfg.short {
		ttls = ttls[1:]
	}
	var lost int
	for _, ttl := range ttls {
		took, l, twice, err := recoverOnce(ctx, b, ttl)
		if err != nil {
			return nil, fmt.Errorf("TTL %v: %w", ttl, err)
		}
		name := fmt.Sprintf("ttl%ds_", int(ttl.Seconds()))
		res.add(name+"recovery_s", "s", took.Seconds())
		res.add(name+"recovery_over_ttl", "×", took.Seconds()/ttl.Seconds())
		lost += l
		if len(twice) > 0 {
			res.note("TTL %v: started more than twice: %s", ttl, strings.Join(twice, ", "))
		}
	}
	res.add("lost", "tasks", float64(lost))
	return res, nil
}

// recoverOnce runs one crash and returns the recovery time, the tasks not
// started again in time, and the tasks started more than twice.
func recoverOnce(ctx context.Context, b *bench, ttl time.Duration) (time.Duration, int, []string, error) {
	c, prefix, err := b.newClient()
	if err != nil {
		return 0, 0, nil, err
	}
	defer func() { _ = c.Close(ctx); _ = cleanup(ctx, b.rdb, prefix) }()
	queue := b.queues[0]
	tasks := make([][]byte, recoveryTasks)
	for i := range tasks {
		tasks[i] = fmt.Appendf(nil, "slow-%02d", i)
	}
	if _, err := c.EnqueueBatch(ctx, queue, tasks); err != nil {
		return 0, 0, nil, err
	}

	self, err := os.Executable()
	if err != nil {
		return 0, 0, nil, err
	}
	args := []string{childArg, "-redis", strings.Join(b.cfg.addrs, ","), "-prefix", prefix, "-queue", queue, "-ttl", ttl.String(),
		fmt.Sprintf("-embedded=%v", b.embedded), fmt.Sprintf("-resp2=%v", b.cfg.resp2)}
	child := exec.Command(self, args...)
	child.Stderr = os.Stderr
	out, err := child.StdoutPipe()
	if err != nil {
		return 0, 0, nil, err
	}
	if err := child.Start(); err != nil {
		return 0, 0, nil, err
	}
	defer func() { _ = child.Process.Kill(); _ = child.Wait() }()

	starts := map[string]int{}
	var mu sync.Mutex
	held := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(out)
		n := 0
		for sc.Scan() {
			if task, ok := strings.CutPrefix(sc.Text(), "start "); ok {
				mu.Lock()
				starts[task]++
				mu.Unlock()
				if n++; n == recoveryTasks {
					close(held)
				}
			}
		}
		_, _ = io.Copy(io.Discard, out)
	}()
	select {
	case <-held:
	case <-time.After(timeout(true)):
		return 0, 0, nil, errors.New("the child worker did not start its tasks")
	}

	// The survivor: it holds what it takes until it is closed.
	survivor, err := c.NewWorker(ctx, worqr.WorkerOptions{TTL: ttl})
	if err != nil {
		return 0, 0, nil, err
	}
	defer func() { _ = survivor.Close(ctx) }()
	again := map[string]time.Time{}
	all := make(chan struct{})
	h := func(hctx context.Context, p *worqr.Process) error {
		now := time.Now()
		mu.Lock()
		task := string(p.Task())
		starts[task]++
		if _, seen := again[task]; !seen {
			again[task] = now
			if len(again) == recoveryTasks {
				close(all)
			}
		}
		mu.Unlock()
		<-hctx.Done()
		return hctx.Err()
	}
	if err := survivor.Handle(ctx, queue, h, worqr.HandleOptions{Concurrency: recoveryTasks}); err != nil {
		return 0, 0, nil, err
	}

	killed := time.Now()
	if err := child.Process.Signal(syscall.SIGKILL); err != nil {
		return 0, 0, nil, err
	}
	select {
	case <-all:
	case <-time.After(ttl + 10*time.Second):
	}
	mu.Lock()
	defer mu.Unlock()
	var last time.Time
	for _, at := range again {
		if at.After(last) {
			last = at
		}
	}
	lost := recoveryTasks - len(again)
	var twice []string
	for task, n := range starts {
		if n > 2 {
			twice = append(twice, fmt.Sprintf("%s×%d", task, n))
		}
	}
	if lost > 0 {
		return ttl + 10*time.Second, lost, twice, nil
	}
	return last.Sub(killed), 0, twice, nil
}

// crashChild is the worker process of the recovery scenario: it handles
// the queue with handlers that never return, reports each start on
// standard output, and waits to be killed.
func crashChild(args []string) error {
	fs := flag.NewFlagSet(childArg, flag.ContinueOnError)
	addrs := fs.String("redis", "", "")
	prefix := fs.String("prefix", "", "")
	queue := fs.String("queue", "", "")
	ttl := fs.Duration("ttl", worqr.DefaultTTL, "")
	embedded := fs.Bool("embedded", false, "")
	resp2 := fs.Bool("resp2", false, "")
	if err := fs.Parse(args); err != nil {
		return err
	}
	rdb, err := connect(strings.Split(*addrs, ","), *embedded, *resp2)
	if err != nil {
		return err
	}
	defer rdb.Close()
	c, err := worqr.New(worqr.Options{Redis: rdb, Prefix: *prefix, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		return err
	}
	ctx := context.Background()
	w, err := c.NewWorker(ctx, worqr.WorkerOptions{TTL: *ttl})
	if err != nil {
		return err
	}
	var mu sync.Mutex
	h := func(hctx context.Context, p *worqr.Process) error {
		mu.Lock()
		fmt.Printf("start %s\n", p.Task())
		mu.Unlock()
		<-hctx.Done()
		return hctx.Err()
	}
	if err := w.Handle(ctx, *queue, h, worqr.HandleOptions{Concurrency: recoveryTasks}); err != nil {
		return err
	}
	select {} // until SIGKILL
}
