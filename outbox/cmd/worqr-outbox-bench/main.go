// Command worqr-outbox-bench measures the outbox's relay against a real
// Postgres and Redis, in a schema and a key prefix of its own that it
// removes at the end:
//
//   - throughput: -n rows committed over -queues queues, then -relays
//     relays started, timed until the table is empty;
//   - latency (-latency): rows committed one at a time, each timed from
//     its commit to its handler's start, with one relay and one worker.
//
// Example:
//
//	go run ./cmd/worqr-outbox-bench -postgres postgres://postgres@127.0.0.1:5499/postgres -redis 127.0.0.1:6379
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/worqr/worqr"
	worqroutbox "github.com/worqr/worqr/outbox"
)

func main() {
	dsn := flag.String("postgres", "postgres://postgres@127.0.0.1:5499/postgres", "Postgres DSN")
	addr := flag.String("redis", "127.0.0.1:6379", "Redis address")
	n := flag.Int("n", 10000, "rows to move (throughput), or to time (latency)")
	queues := flag.Int("queues", 1, "queues the rows go to (throughput)")
	relays := flag.Int("relays", 1, "relays (throughput)")
	batch := flag.Int("batch", worqroutbox.DefaultBatchSize, "relay batch size")
	latency := flag.Bool("latency", false, "measure commit-to-start latency instead of throughput")
	gap := flag.Duration("gap", 0, "pause before each row's transaction (latency)")
	deadline := flag.Duration("deadline", 5*time.Minute, "longest the relays may take to move the rows (throughput)")
	flag.Parse()
	if err := run(*dsn, *addr, *n, *queues, *relays, *batch, *latency, *gap, *deadline); err != nil {
		log.Fatal(err)
	}
}

func run(dsn, addr string, n, queues, relays, batch int, latency bool, gap, deadline time.Duration) error {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		return err
	}
	defer pool.Close()
	schema := "worqr_outbox_bench_" + uuid.NewString()[:8]
	defer func() {
		if _, err := pool.Exec(ctx, "DROP SCHEMA "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
			log.Print(err)
		}
	}()
	ob, err := worqroutbox.New(worqroutbox.Config{Schema: schema})
	if err != nil {
		return err
	}
	if err := ob.Migrate(ctx, pool); err != nil {
		return err
	}
	client, err := worqr.New(worqr.Options{Addr: addr, Prefix: schema})
	if err != nil {
		return err
	}
	defer client.Close(ctx)
	defer func() {
		qs, err := client.Queues(ctx)
		if err != nil {
			log.Print(err)
		}
		for _, q := range qs {
			if _, err := client.DeleteQueue(ctx, q); err != nil {
				log.Print(err)
			}
		}
	}()
	if latency {
		return measureLatency(ctx, pool, client, ob, n, batch, gap)
	}
	return measureThroughput(ctx, pool, client, ob, n, queues, relays, batch, deadline)
}

func measureThroughput(ctx context.Context, pool *pgxpool.Pool, client *worqr.Client, ob *worqroutbox.Outbox, n, queues, relays, batch int, deadline time.Duration) error {
	start := time.Now()
	for i := 0; i < n; i += 1000 {
		err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			for j := i; j < min(i+1000, n); j++ {
				if _, err := ob.Enqueue(ctx, tx, "q"+strconv.Itoa(j%queues), []byte(strconv.Itoa(j))); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	fmt.Printf("inserted %d rows in %v\n", n, time.Since(start).Round(time.Millisecond))
	start = time.Now()
	var mu sync.Mutex
	var h hops
	moved := 0
	var lastErr error
	all := make(chan struct{})
	onMove := func(m worqroutbox.MoveTrace) {
		mu.Lock()
		defer mu.Unlock()
		if m.Err != nil {
			// A move that partly failed moved some of its rows, which the
			// report does not say: the table's count below covers them.
			lastErr = m.Err
			return
		}
		if m.Rows == 0 {
			return
		}
		if moved += m.Rows; moved == n {
			close(all)
		}
		h.add("take", m.Taken.Sub(m.Begun))
		h.add("enqueue", m.Enqueued.Sub(m.Taken))
		h.add("delete+commit", m.Committed.Sub(m.Enqueued))
	}
	for range relays {
		r, err := ob.NewRelay(pool, client, worqroutbox.RelayOptions{BatchSize: batch, OnMove: onMove})
		if err != nil {
			return err
		}
		if err := r.Start(ctx); err != nil {
			return err
		}
		defer r.Stop()
	}
	// The relays report their moves: no query of the table's own (a
	// count scans it) takes Postgres's time from them meanwhile, but for
	// a count every few seconds, which ends the run when the reports
	// cannot (a move that partly failed), and a deadline.
	count := time.NewTicker(3 * time.Second)
	defer count.Stop()
	end := time.After(deadline)
	countSQL := "SELECT count(*) FILTER (WHERE error IS NULL), count(*) FILTER (WHERE error IS NOT NULL) FROM " + ob.Table()
wait:
	for {
		select {
		case <-all:
			break wait
		case <-count.C:
			var waiting, failed int
			if err := pool.QueryRow(ctx, countSQL).Scan(&waiting, &failed); err != nil {
				log.Printf("count the rows left: %v", err)
				continue
			}
			if failed > 0 {
				return fmt.Errorf("worqr refused %d rows (marked failed in %s)", failed, ob.Name())
			}
			if waiting == 0 {
				break wait
			}
		case <-end:
			mu.Lock()
			defer mu.Unlock()
			return fmt.Errorf("the relays did not move %d rows within %v (-deadline): %d reported moved, last move error: %v", n, deadline, moved, lastErr)
		}
	}
	d := time.Since(start)
	fmt.Printf("moved %d rows in %v: %.0f rows/s (%d queues, %d relays, batch %d)\n", n, d.Round(time.Millisecond), float64(n)/d.Seconds(), queues, relays, batch)
	mu.Lock()
	defer mu.Unlock()
	fmt.Println("each move's hops, and their sum over the run:")
	h.print()
	return nil
}

func measureLatency(ctx context.Context, pool *pgxpool.Pool, client *worqr.Client, ob *worqroutbox.Outbox, n, batch int, gap time.Duration) error {
	// The relay reports each move; in this run each move that takes rows
	// takes one, the row last committed, so the k-th such move is row k's.
	moves := make(chan worqroutbox.MoveTrace, n+1)
	r, err := ob.NewRelay(pool, client, worqroutbox.RelayOptions{BatchSize: batch, OnMove: func(m worqroutbox.MoveTrace) {
		if m.Rows > 0 {
			select {
			case moves <- m:
			default:
			}
		}
	}})
	if err != nil {
		return err
	}
	if err := r.Start(ctx); err != nil {
		return err
	}
	defer r.Stop()
	<-r.Started()
	w, err := client.NewWorker(ctx, worqr.WorkerOptions{})
	if err != nil {
		return err
	}
	defer w.Close(ctx)
	started := make(chan time.Time, n)
	err = w.Handle(ctx, "latency", func(_ context.Context, p *worqr.Process) error {
		started <- time.Now()
		return nil
	}, worqr.HandleOptions{})
	if err != nil {
		return err
	}
	// Each row is committed after the last one has moved and its handler
	// started: an idle fleet. Each hop is timed on its own: the
	// producer's begin and insert (before the commit), the commit's round
	// trip, the notification's arrival at the relay, the relay's wake,
	// the move's take (begin, lock and read), its enqueue, its delete and
	// commit, and the worker's pickup (from the enqueue's end to the
	// handler's start).
	// The hops in the order they happen, whichever is timed first.
	h := hops{names: []string{"begin+insert", "commit", "commit>notified", "notified>move", "take", "enqueue", "delete+commit", "enqueued>start", "COMMIT>START", "begin>start"}}
	unnotified := 0
	for i := range n {
		if gap > 0 {
			time.Sleep(gap)
		}
		begin := time.Now()
		tx, err := pool.Begin(ctx)
		if err != nil {
			return err
		}
		if _, err := ob.Enqueue(ctx, tx, "latency", []byte(strconv.Itoa(i))); err != nil {
			return err
		}
		commit := time.Now()
		if err := tx.Commit(ctx); err != nil {
			return err
		}
		committed := time.Now()
		var start time.Time
		var m worqroutbox.MoveTrace
		timeout := time.After(10 * time.Second)
		select {
		case start = <-started:
		case <-timeout:
			return fmt.Errorf("row %d did not start within 10s", i)
		}
		select {
		case m = <-moves:
		case <-timeout:
			return fmt.Errorf("row %d's move was not reported within 10s", i)
		}
		if m.Err != nil {
			return fmt.Errorf("row %d: %w", i, m.Err)
		}
		h.add("begin+insert", commit.Sub(begin))
		h.add("commit", committed.Sub(commit))
		if m.Notified.Before(commit) {
			// A move no notification of this row began (the relay's
			// first, woken by its start, found the row): no notification
			// hops to time.
			unnotified++
		} else {
			h.add("commit>notified", m.Notified.Sub(commit))
			h.add("notified>move", m.Begun.Sub(m.Notified))
		}
		h.add("take", m.Taken.Sub(m.Begun))
		h.add("enqueue", m.Enqueued.Sub(m.Taken))
		h.add("delete+commit", m.Committed.Sub(m.Enqueued))
		h.add("enqueued>start", start.Sub(m.Enqueued))
		h.add("COMMIT>START", start.Sub(commit))
		h.add("begin>start", start.Sub(begin))
		// The move's report may come after the handler's start: wait for
		// the move's end, so that the next row finds the relay idle.
		for len(moves) > 0 {
			<-moves
		}
	}
	fmt.Printf("latency over %d rows, one at a time (gap %v), batch %d:\n", n, gap, batch)
	if unnotified > 0 {
		fmt.Printf("(%d rows moved before their notification came: not in the notification's hops)\n", unnotified)
	}
	h.print()
	return nil
}

// hops are the times of each hop, in the order of names, or first added.
type hops struct {
	names []string
	times map[string][]time.Duration
}

func (h *hops) add(name string, d time.Duration) {
	if h.times == nil {
		h.times = make(map[string][]time.Duration)
	}
	if !slices.Contains(h.names, name) {
		h.names = append(h.names, name)
	}
	h.times[name] = append(h.times[name], d)
}

func (h *hops) print() {
	fmt.Printf("%-16s %9s %9s %9s %9s %9s %10s\n", "hop", "p50", "p90", "p99", "p99.9", "max", "sum")
	for _, name := range h.names {
		lat := h.times[name]
		if len(lat) == 0 {
			continue
		}
		slices.Sort(lat)
		q := func(p float64) string {
			d := lat[min(len(lat)-1, int(p*float64(len(lat))))]
			return fmt.Sprintf("%.2fms", float64(d)/float64(time.Millisecond))
		}
		var sum time.Duration
		for _, d := range lat {
			sum += d
		}
		fmt.Printf("%-16s %9s %9s %9s %9s %9s %10s\n", name, q(0.5), q(0.9), q(0.99), q(0.999), q(1), sum.Round(time.Millisecond))
	}
}
