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
// has started every task, for a TTL of 3 s and of 1 s (-short: 1 s only),
// or -recovery-ttl's, the workers renewing every third of it (the default
// for these two).
func runRecovery(ctx context.Context, b *bench) (*result, error) {
	res := &result{}
	ttls := []time.Duration{3 * time.Second, time.Second}
	if b.cfg.short {
		ttls = ttls[1:]
	}
	if len(b.cfg.recoveryTTLs) > 0 {
		ttls = b.cfg.recoveryTTLs
	}
	var lost int
	for _, ttl := range ttls {
		r, err := recoverOnce(ctx, b, ttl)
		if err != nil {
			return nil, fmt.Errorf("TTL %v: %w", ttl, err)
		}
		name := fmt.Sprintf("ttl%ds_", int(ttl.Seconds()))
		res.add(name+"recovery_s", "s", r.took.Seconds())
		res.add(name+"recovery_over_ttl", "×", r.took.Seconds()/ttl.Seconds())
		if r.lost == 0 {
			res.add(name+"after_expiry_ms", "ms", float64(r.afterExpiry.Microseconds())/1000)
		}
		lost += r.lost
		if len(r.twice) > 0 {
			res.note("TTL %v: started more than twice: %s", ttl, strings.Join(r.twice, ", "))
		}
	}
	res.add("lost", "tasks", float64(lost))
	return res, nil
}

// recovery is what one crash measured.
type recovery struct {
	took        time.Duration // from the kill until every task started again
	afterExpiry time.Duration // from the dead worker's lease expiry until then
	lost        int           // tasks not started again in time
	twice       []string      // tasks started more than twice
}

// recoverOnce runs one crash, in a registry of its own.
func recoverOnce(ctx context.Context, b *bench, ttl time.Duration) (recovery, error) {
	c, prefix, err := b.newClient()
	if err != nil {
		return recovery{}, err
	}
	defer func() { _ = c.Close(ctx); _ = cleanup(ctx, b.rdb, prefix) }()
	return crashAt(ctx, b, ttl, c, prefix, b.queues[0])
}

// crashAt runs one crash on queue, in the registry of prefix, c's: the
// crashed worker's peers there (the survivor, and any workers already
// registered, such as the idle scenario's fleet) renew as it dies.
func crashAt(ctx context.Context, b *bench, ttl time.Duration, c *worqr.Client, prefix, queue string) (recovery, error) {
	tasks := make([][]byte, recoveryTasks)
	for i := range tasks {
		tasks[i] = fmt.Appendf(nil, "slow-%02d", i)
	}
	if _, err := c.EnqueueBatch(ctx, queue, tasks); err != nil {
		return recovery{}, err
	}

	self, err := os.Executable()
	if err != nil {
		return recovery{}, err
	}
	args := []string{childArg, "-redis", strings.Join(b.cfg.addrs, ","), "-prefix", prefix, "-queue", queue, "-ttl", ttl.String(),
		fmt.Sprintf("-embedded=%v", b.embedded), fmt.Sprintf("-resp2=%v", b.cfg.resp2)}
	child := exec.Command(self, args...)
	child.Stderr = os.Stderr
	out, err := child.StdoutPipe()
	if err != nil {
		return recovery{}, err
	}
	if err := child.Start(); err != nil {
		return recovery{}, err
	}
	defer func() { _ = child.Process.Kill(); _ = child.Wait() }()

	starts := map[string]int{}
	var mu sync.Mutex
	held, dead := make(chan struct{}), make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		n := 0
		for sc.Scan() {
			if id, ok := strings.CutPrefix(sc.Text(), "worker "); ok {
				dead <- id
			}
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
		return recovery{}, errors.New("the child worker did not start its tasks")
	}

	// The child said who it is before it took a task.
	var id string
	select {
	case id = <-dead:
	default:
		return recovery{}, errors.New("the child worker did not say its id")
	}
	workers := prefix + ":{r}:workers"

	// The survivor: it holds what it takes until it is closed.
	survivor, err := c.NewWorker(ctx, worqr.WorkerOptions{TTL: ttl, RenewInterval: ttl / 3})
	if err != nil {
		return recovery{}, err
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
		return recovery{}, err
	}

	killed := time.Now()
	if err := child.Process.Signal(syscall.SIGKILL); err != nil {
		return recovery{}, err
	}
	// When its lease runs out, on this process's clock: the lease's
	// expiry less the Redis clock, from the moment Redis answered.
	expiry, err := b.rdb.Do(ctx, b.rdb.B().Zscore().Key(workers).Member(id).Build()).AsInt64()
	if err != nil {
		return recovery{}, fmt.Errorf("the dead worker's lease: %w", err)
	}
	clock, err := b.rdb.Do(ctx, b.rdb.B().Time().Build()).AsIntSlice()
	asked := time.Now()
	if err != nil || len(clock) != 2 {
		return recovery{}, fmt.Errorf("redis TIME: %v %w", clock, err)
	}
	expires := asked.Add(time.Duration(expiry-(clock[0]*1000+clock[1]/1000)) * time.Millisecond)
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
		return recovery{took: ttl + 10*time.Second, lost: lost, twice: twice}, nil
	}
	return recovery{took: last.Sub(killed), afterExpiry: last.Sub(expires), twice: twice}, nil
}

// crashChild is the worker process of the recovery scenario: it handles
// the queue with handlers that never return, reports its worker's id and
// each start on standard output, and waits to be killed.
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
	w, err := c.NewWorker(ctx, worqr.WorkerOptions{TTL: *ttl, RenewInterval: *ttl / 3})
	if err != nil {
		return err
	}
	fmt.Printf("worker %s\n", w.ID())
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
