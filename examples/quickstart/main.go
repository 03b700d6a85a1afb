// Command quickstart shows worqr end to end: it enqueues a few hundred
// tasks, runs three workers as separate OS processes, kills one of them
// with SIGKILL part-way (no cleanup at all), and waits while the two
// survivors reclaim its work and finish everything. It exits 0 when every
// task is finished, nothing waits and nothing is in flight.
//
//	go run ./examples/quickstart                       # embedded Redis (miniredis)
//	go run ./examples/quickstart -addr 127.0.0.1:6379  # a real Redis
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
	"github.com/worqr/worqr/examples/internal/demo"
)

const queue = "quickstart"

func main() {
	addr := flag.String("addr", "", "Redis address (a cluster: any node, or seeds separated by commas); empty runs an embedded Redis")
	tasks := flag.Int("tasks", 300, "tasks to enqueue")
	worker := flag.String("worker", "", "internal: run as the named worker process")
	prefix := flag.String("prefix", "", "internal: key prefix shared with the worker processes")
	embedded := flag.Bool("embedded", false, "internal: the Redis at -addr is miniredis")
	flag.Parse()

	var err error
	if *worker != "" {
		err = runWorker(*worker, *addr, *prefix, *embedded)
	} else {
		err = runDemo(*addr, *tasks)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "quickstart:", err)
		os.Exit(1)
	}
}

func runDemo(addr string, total int) error {
	client, env, stopDemo, err := demo.Start(addr, "quickstart", nil)
	if err != nil {
		return err
	}
	defer stopDemo()
	ctx := context.Background()

	batch := make([][]byte, total)
	for i := range batch {
		batch[i] = fmt.Appendf(nil, "task-%03d", i)
	}
	if _, err := client.EnqueueBatch(ctx, queue, batch); err != nil {
		return err
	}
	fmt.Printf("enqueued %d tasks on %q\n", total, queue)

	d := &tally{finished: make(map[string][]string), ids: make(map[string]string)}
	var children []*exec.Cmd
	defer func() {
		for _, c := range children {
			_ = c.Process.Signal(syscall.SIGTERM)
			_ = c.Wait()
		}
	}()
	for _, name := range []string{"w1", "w2", "w3"} {
		cmd, out, err := demo.Spawn("-worker", name, "-addr", env.Addr, "-prefix", env.Prefix, fmt.Sprintf("-embedded=%v", env.Embedded))
		if err != nil {
			return err
		}
		children = append(children, cmd)
		go d.read(name, out)
	}

	// Kill w1 once a fifth of the work is done, while it holds tasks.
	victim := children[0]
	killed := false
	var held []string
	start := time.Now()
	deadline := start.Add(60 * time.Second)
	lastReport := 0
	for {
		done, _ := d.counts()
		if done/50 > lastReport {
			lastReport = done / 50
			fmt.Printf("%4d/%d finished after %v\n", done, total, time.Since(start).Round(time.Millisecond))
		}
		if !killed && done >= total/5 {
			held = d.heldBy(ctx, client, "w1")
			if err := victim.Process.Kill(); err != nil {
				return err
			}
			_ = victim.Wait()
			children = children[1:]
			killed = true
			fmt.Printf("killed w1 (pid %d) with SIGKILL while it held %d tasks; its lease expires within %v\n", victim.Process.Pid, len(held), worqr.DefaultTTL)
		}
		// w1 reports each task right after its Finish, so a SIGKILL can
		// cut off at most one report: a task finished in Redis that nobody
		// printed. Once nothing waits or is in flight, that one is allowed.
		if killed && done >= total-1 && settled(ctx, client) {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not finished within a minute: %d/%d", done, total)
		}
		time.Sleep(20 * time.Millisecond)
	}
	done, repeats := d.counts()
	fmt.Printf("all %d tasks finished in %v\n", total, time.Since(start).Round(time.Millisecond))
	if done < total {
		fmt.Printf("(%d of them by w1 as it was killed: finished in Redis, its report cut off)\n", total-done)
	}
	fmt.Printf("of the %d tasks w1 held when it died, %d were reclaimed and finished by w2 and w3 (the rest it finished just before the kill)\n",
		len(held), d.finishedByOthers(held, "w1"))
	if _, err := client.DeleteQueue(ctx, queue); err != nil {
		return err
	}
	if repeats > 0 {
		return fmt.Errorf("%d tasks were finished twice", repeats)
	}
	return nil
}

// tally counts what the worker processes report on stdout.
type tally struct {
	mu       sync.Mutex
	finished map[string][]string // task -> the workers that finished it
	ids      map[string]string   // worker name -> worker id
}

func (d *tally) read(name string, out io.Reader) {
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		kind, arg, _ := strings.Cut(sc.Text(), " ")
		d.mu.Lock()
		switch kind {
		case "id":
			d.ids[name] = arg
		case "done":
			d.finished[arg] = append(d.finished[arg], name)
		}
		d.mu.Unlock()
	}
}

func (d *tally) counts() (unique, repeats int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, by := range d.finished {
		repeats += len(by) - 1
	}
	return len(d.finished), repeats
}

func (d *tally) finishedByOthers(tasks []string, name string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := 0
	for _, t := range tasks {
		if by := d.finished[t]; len(by) > 0 && by[0] != name {
			n++
		}
	}
	return n
}

// heldBy lists the tasks a worker holds, read from Redis.
func (d *tally) heldBy(ctx context.Context, c *worqr.Client, name string) []string {
	d.mu.Lock()
	id := d.ids[name]
	d.mu.Unlock()
	procs, _ := c.Processes(ctx, queue)
	var held []string
	for _, p := range procs {
		if p.Owner == id {
			held = append(held, string(p.Task))
		}
	}
	return held
}

// settled reports whether nothing waits and nothing is in flight.
func settled(ctx context.Context, c *worqr.Client) bool {
	n, err := c.QueueLen(ctx, queue)
	if err != nil || n > 0 {
		return false
	}
	procs, err := c.Processes(ctx, queue)
	return err == nil && len(procs) == 0
}

// runWorker is one worker process: it takes tasks whenever it hears of
// work, "processes" each for a few milliseconds, and reports it on stdout.
// On SIGTERM it closes, giving back anything it holds.
func runWorker(name, addr, prefix string, embedded bool) error {
	ctx, w, stop, err := demo.JoinAsWorker(name, demo.Env{Addr: addr, Embedded: embedded, Prefix: prefix}, slog.LevelInfo)
	if err != nil {
		return err
	}
	defer stop()
	defer w.Close(context.Background())
	fmt.Println("id", w.ID())

	wake := make(chan struct{}, 1)
	err = w.StartWork(ctx, queue, worqr.Events{Work: func(string, int64) {
		select {
		case wake <- struct{}{}:
		default:
		}
	}})
	if err != nil {
		return err
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-wake:
		}
		for ctx.Err() == nil {
			ps, err := w.DequeueN(ctx, queue, 4)
			if errors.Is(err, worqr.ErrNoTask) {
				break
			}
			if err != nil {
				fmt.Fprintf(os.Stderr, "%s: dequeue failed: %v\n", name, err)
				break
			}
			for _, p := range ps {
				time.Sleep(5 * time.Millisecond) // the work
				if err := p.Finish(ctx); err != nil {
					fmt.Fprintf(os.Stderr, "%s: finish %s failed: %v\n", name, p.Task(), err)
					continue
				}
				fmt.Println("done", string(p.Task()))
			}
		}
	}
}
