// Command persistent shows persistent tasks: twelve simulated connections,
// each a task that a handler holds open until its context ends, spread over
// three worker processes. One worker is killed with SIGKILL (no cleanup at
// all); its connections reopen on the survivors within the TTL plus one
// check interval. The program prints who holds what, checks from every
// worker's reports that no connection was ever open twice at once, then
// shuts the survivors down gracefully, which puts every connection back in
// the queue, and exits 0.
//
//	go run ./examples/persistent                       # embedded Redis (miniredis)
//	go run ./examples/persistent -addr 127.0.0.1:6379  # a real Redis
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/worqr/worqr"
	"github.com/worqr/worqr/examples/internal/demo"
)

const (
	queue       = "connections"
	connections = 12
)

func main() {
	addr := flag.String("addr", "", "Redis address (a cluster: any node, or seeds separated by commas); empty runs an embedded Redis")
	worker := flag.String("worker", "", "internal: run as the named worker process")
	prefix := flag.String("prefix", "", "internal: key prefix shared with the worker processes")
	embedded := flag.Bool("embedded", false, "internal: the Redis at -addr is miniredis")
	flag.Parse()

	var err error
	if *worker != "" {
		err = runWorker(*worker, *addr, *prefix, *embedded)
	} else {
		err = run(*addr)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "persistent:", err)
		os.Exit(1)
	}
}

// hold is one stretch of time a worker held a connection open.
type hold struct {
	worker     string
	start, end time.Time // end is zero while open
}

// ledger collects the workers' open and close reports.
type ledger struct {
	mu    sync.Mutex
	holds map[string][]hold
}

func (l *ledger) read(worker string, out io.Reader) {
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		// "open conn-03 <unix nanos>" or "close conn-03 <unix nanos> <cause>"
		f := strings.Fields(sc.Text())
		if len(f) < 3 {
			continue
		}
		nanos, err := strconv.ParseInt(f[2], 10, 64)
		if err != nil {
			continue
		}
		l.record(worker, f[0], f[1], time.Unix(0, nanos))
	}
}

func (l *ledger) record(worker, kind, conn string, at time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	hs := l.holds[conn]
	switch kind {
	case "open":
		l.holds[conn] = append(hs, hold{worker: worker, start: at})
	case "close":
		for i := len(hs) - 1; i >= 0; i-- {
			if hs[i].worker == worker && hs[i].end.IsZero() {
				hs[i].end = at
				break
			}
		}
	}
}

// killed closes every hold of a killed worker at the time of the kill:
// its process, and so its connections, are gone.
func (l *ledger) killed(worker string, at time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, hs := range l.holds {
		for i := range hs {
			if hs[i].worker == worker && hs[i].end.IsZero() {
				hs[i].end = at
			}
		}
	}
}

// holders maps each open connection to its worker.
func (l *ledger) holders() map[string]string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[string]string)
	for conn, hs := range l.holds {
		for _, h := range hs {
			if h.end.IsZero() {
				out[conn] = h.worker
			}
		}
	}
	return out
}

// overlaps lists every time a connection was open on two workers at once.
func (l *ledger) overlaps() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for conn, hs := range l.holds {
		for i := range hs {
			for j := i + 1; j < len(hs); j++ {
				a, b := hs[i], hs[j]
				aEnd, bEnd := a.end, b.end
				if aEnd.IsZero() {
					aEnd = time.Now()
				}
				if bEnd.IsZero() {
					bEnd = time.Now()
				}
				if a.start.Before(bEnd) && b.start.Before(aEnd) {
					out = append(out, fmt.Sprintf("%s on %s and %s", conn, a.worker, b.worker))
				}
			}
		}
	}
	return out
}

func (l *ledger) print(names []string) {
	byWorker := make(map[string][]string)
	for conn, w := range l.holders() {
		byWorker[w] = append(byWorker[w], conn)
	}
	for _, w := range names {
		conns := byWorker[w]
		slices.Sort(conns)
		fmt.Printf("  %s holds %2d: %s\n", w, len(conns), strings.Join(conns, " "))
	}
}

func run(addr string) error {
	client, env, stopDemo, err := demo.Start(addr, "persistent", nil)
	if err != nil {
		return err
	}
	defer stopDemo()
	ctx := context.Background()

	l := &ledger{holds: make(map[string][]hold)}
	names := []string{"w1", "w2", "w3"}
	workers := make(map[string]*exec.Cmd)
	defer func() {
		for _, cmd := range workers {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	}()
	for _, name := range names {
		cmd, out, err := demo.Spawn("-worker", name, "-addr", env.Addr, "-prefix", env.Prefix, fmt.Sprintf("-embedded=%v", env.Embedded))
		if err != nil {
			return err
		}
		workers[name] = cmd
		go l.read(name, out)
	}
	// Wait until all three serve the queue, then open the connections one
	// by one so that each goes to whichever worker hears of it first.
	if err := until(10*time.Second, "three workers", func() bool {
		ws, err := client.Workers(ctx)
		return err == nil && len(ws) == 3
	}); err != nil {
		return err
	}
	for i := range connections {
		if _, err := client.Enqueue(ctx, queue, fmt.Appendf(nil, "conn-%02d", i)); err != nil {
			return err
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := until(10*time.Second, "all connections open", func() bool { return len(l.holders()) == connections }); err != nil {
		return err
	}
	fmt.Println("all connections open:")
	l.print(names)

	// Kill the busiest worker: no cleanup, no goodbye.
	victim := names[0]
	counts := make(map[string]int)
	for _, w := range l.holders() {
		counts[w]++
	}
	for _, w := range names {
		if counts[w] > counts[victim] {
			victim = w
		}
	}
	cmd := workers[victim]
	if err := cmd.Process.Kill(); err != nil {
		return err
	}
	killedAt := time.Now()
	_ = cmd.Wait()
	delete(workers, victim)
	l.killed(victim, killedAt)
	fmt.Printf("killed %s (SIGKILL) holding %d connections; lease TTL %v\n", victim, counts[victim], worqr.DefaultTTL)

	if err := until(worqr.DefaultTTL+worqr.DefaultRenewInterval+5*time.Second, "connections reopened", func() bool {
		return len(l.holders()) == connections
	}); err != nil {
		return err
	}
	fmt.Printf("all %d connections open again %v after the kill:\n", connections, time.Since(killedAt).Round(time.Millisecond))
	l.print(names)

	// Shut the survivors down gracefully: their handlers' contexts end
	// (cause ErrShutdown) and every connection goes back to the queue.
	for _, cmd := range workers {
		_ = cmd.Process.Signal(syscall.SIGTERM)
	}
	for name, cmd := range workers {
		if err := cmd.Wait(); err != nil {
			return fmt.Errorf("worker %s: %w", name, err)
		}
		delete(workers, name)
	}
	n, err := client.QueueLen(ctx, queue)
	if err != nil {
		return err
	}
	fmt.Printf("survivors shut down; %d connections wait in the queue for the next workers\n", n)
	if bad := l.overlaps(); len(bad) > 0 {
		return fmt.Errorf("connections open twice at once: %s", strings.Join(bad, "; "))
	}
	if n != connections {
		return fmt.Errorf("%d connections back in the queue, want %d", n, connections)
	}
	fmt.Println("no connection was ever open on two workers at once")
	_, err = client.DeleteQueue(ctx, queue)
	return err
}

func until(within time.Duration, what string, cond func() bool) error {
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			return fmt.Errorf("not within %v: %s", within, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nil
}

// runWorker is one worker process. Each connection it is handed stays
// open until the handler's context ends; it reports opening and closing on
// stdout. On SIGTERM it shuts down gracefully.
func runWorker(name, addr, prefix string, embedded bool) error {
	ctx, w, stop, err := demo.JoinAsWorker(name, demo.Env{Addr: addr, Embedded: embedded, Prefix: prefix}, slog.LevelWarn)
	if err != nil {
		return err
	}
	defer stop()
	var out sync.Mutex // one report line at a time
	report := func(format string, args ...any) {
		out.Lock()
		defer out.Unlock()
		fmt.Printf(format+"\n", args...)
	}
	hold := func(hctx context.Context, p *worqr.Process) error {
		report("open %s %d", p.Task(), time.Now().UnixNano())
		<-hctx.Done() // the connection would be served here
		report("close %s %d %v", p.Task(), time.Now().UnixNano(), context.Cause(hctx))
		return hctx.Err()
	}
	// At most half the connections each, so they spread over at least two
	// workers, and two survivors can take them all.
	if err := w.Handle(ctx, queue, hold, worqr.HandleOptions{Concurrency: connections / 2}); err != nil {
		return err
	}
	<-ctx.Done()
	grace, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	// Persistent handlers never finish by themselves: the grace period
	// runs out, their contexts end and their tasks go back to the front.
	_ = w.Shutdown(grace)
	return nil
}
