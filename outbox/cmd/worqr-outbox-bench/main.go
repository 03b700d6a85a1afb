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
	flag.Parse()
	if err := run(*dsn, *addr, *n, *queues, *relays, *batch, *latency); err != nil {
		log.Fatal(err)
	}
}

func run(dsn, addr string, n, queues, relays, batch int, latency bool) error {
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
		return measureLatency(ctx, pool, client, ob, n, batch)
	}
	return measureThroughput(ctx, pool, client, ob, n, queues, relays, batch)
}

func measureThroughput(ctx context.Context, pool *pgxpool.Pool, client *worqr.Client, ob *worqroutbox.Outbox, n, queues, relays, batch int) error {
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
	for range relays {
		r, err := ob.NewRelay(pool, client, worqroutbox.RelayOptions{BatchSize: batch})
		if err != nil {
			return err
		}
		if err := r.Start(ctx); err != nil {
			return err
		}
		defer r.Stop()
	}
	for {
		var left int
		if err := pool.QueryRow(ctx, "SELECT count(*) FROM "+ob.Table()).Scan(&left); err != nil {
			return err
		}
		if left == 0 {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	d := time.Since(start)
	fmt.Printf("moved %d rows in %v: %.0f rows/s (%d queues, %d relays, batch %d)\n", n, d.Round(time.Millisecond), float64(n)/d.Seconds(), queues, relays, batch)
	return nil
}

func measureLatency(ctx context.Context, pool *pgxpool.Pool, client *worqr.Client, ob *worqroutbox.Outbox, n, batch int) error {
	r, err := ob.NewRelay(pool, client, worqroutbox.RelayOptions{BatchSize: batch})
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
	var mu sync.Mutex
	committed := make(map[string]time.Time, n)
	started := make(chan time.Duration, n)
	err = w.Handle(ctx, "latency", func(_ context.Context, p *worqr.Process) error {
		now := time.Now()
		mu.Lock()
		at, ok := committed[string(p.Task())]
		mu.Unlock()
		if ok {
			started <- now.Sub(at)
		}
		return nil
	}, worqr.HandleOptions{})
	if err != nil {
		return err
	}
	// Each row is committed after the last one's handler started: an
	// idle fleet. The time is taken before the transaction begins, so
	// each latency includes the transaction's own round trips (begin,
	// insert, commit): an upper bound.
	lat := make([]time.Duration, 0, n)
	for i := range n {
		key := strconv.Itoa(i)
		mu.Lock()
		committed[key] = time.Now()
		mu.Unlock()
		err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			_, err := ob.Enqueue(ctx, tx, "latency", []byte(key))
			return err
		})
		if err != nil {
			return err
		}
		select {
		case d := <-started:
			lat = append(lat, d)
		case <-time.After(10 * time.Second):
			return fmt.Errorf("row %d did not start within 10s", i)
		}
	}
	slices.Sort(lat)
	q := func(p float64) time.Duration {
		return lat[min(len(lat)-1, int(p*float64(len(lat))))].Round(10 * time.Microsecond)
	}
	fmt.Printf("commit to handler start over %d rows: p50 %v, p90 %v, p99 %v, max %v\n", n, q(0.5), q(0.9), q(0.99), lat[len(lat)-1])
	return nil
}
