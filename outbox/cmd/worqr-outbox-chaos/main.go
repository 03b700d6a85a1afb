// Command worqr-outbox-chaos checks the outbox's promise under faults:
// a task exists if and only if the transaction that enqueued it
// committed, and once.
//
// Producers commit transactions that each insert a row into a ledger
// table and enqueue a task (its payload the ledger row's id) into the
// outbox, and roll some back. Relay processes (this binary again) move
// the rows into worqr. For -duration it injects faults at random: SIGKILL
// of a relay process (often in the middle of a move: batches are small),
// a Postgres restart as a crash would make it (the -pg-restart command),
// a Redis restart (SIGKILL, then a start on the same append-only file),
// and the termination of every other Postgres session. Then it stops the
// faults and the producers, waits for the outbox to drain, and checks
// that the tasks in Redis are the ledger's rows, each once: no task lost,
// none added twice, none whose transaction did not commit. It prints a
// one-line summary and exits 1 on any violation.
//
// It starts its own redis-server (a free loopback port, a temporary
// directory, append-only file fsynced at every write); Postgres is the
// caller's, in a schema of the run's own that it drops at the end. Its
// sessions ask for synchronous commits, so that a crash keeps what was
// acknowledged.
//
//	go run ./cmd/worqr-outbox-chaos -postgres "$(../.ci/postgres start)" -pg-restart '../.ci/postgres restart'
//
// -sabotage breaks the run on purpose, to show that the checks fail: drop
// commits a ledger row without its task (a task lost), phantom adds a
// task no transaction committed, twice enqueues a committed row's task
// again.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/rueidis"

	"github.com/worqr/worqr"
	worqroutbox "github.com/worqr/worqr/outbox"
)

// relayFlag runs the binary as a relay process.
const relayFlag = "-relay-process"

// prefix is the worqr key prefix of a run.
const prefix = "outboxchaos"

type config struct {
	dsn       string
	pgRestart string
	duration  time.Duration
	drain     time.Duration
	relays    int
	producers int
	rate      int
	queues    int
	redis     string
	sabotage  string
	seed      uint64
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == relayFlag {
		log.Fatal(runRelay(os.Args[2:])) // it returns only on failure
	}
	var cfg config
	flag.StringVar(&cfg.dsn, "postgres", os.Getenv("DATABASE_URL"), "Postgres DSN")
	flag.StringVar(&cfg.pgRestart, "pg-restart", "", "shell command that restarts Postgres as a crash would (none: no Postgres restarts)")
	flag.DurationVar(&cfg.duration, "duration", time.Minute, "how long to inject faults")
	flag.DurationVar(&cfg.drain, "drain", time.Minute, "longest wait for the outbox to drain once the faults stop")
	flag.IntVar(&cfg.relays, "relays", 3, "relay processes")
	flag.IntVar(&cfg.producers, "producers", 4, "producer goroutines")
	flag.IntVar(&cfg.rate, "rate", 300, "transactions per second, all producers together (the relays must keep up, or the run cannot drain)")
	flag.IntVar(&cfg.queues, "queues", 3, "queues the tasks go to")
	flag.StringVar(&cfg.redis, "redis-server", "redis-server", "redis-server binary")
	flag.StringVar(&cfg.sabotage, "sabotage", "", "break the run on purpose (drop, phantom or twice): it must FAIL")
	flag.Uint64Var(&cfg.seed, "seed", 0, "random seed (0: from the clock)")
	flag.Parse()
	if cfg.seed == 0 {
		cfg.seed = uint64(time.Now().UnixNano())
	}
	if cfg.dsn == "" || cfg.relays < 1 || cfg.producers < 1 || cfg.queues < 1 || cfg.rate < 1 ||
		(cfg.sabotage != "" && cfg.sabotage != "drop" && cfg.sabotage != "phantom" && cfg.sabotage != "twice") {
		flag.Usage()
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, cfg); err != nil {
		fmt.Println("FAIL:", err)
		os.Exit(1)
	}
}

// run is one chaos run.
func run(ctx context.Context, cfg config) (err error) {
	rng := rand.New(rand.NewPCG(cfg.seed, cfg.seed>>1|1))
	dir, err := os.MkdirTemp("", "worqr-outbox-chaos-")
	if err != nil {
		return err
	}
	// The relays' logs stay for a run that failed.
	defer func() {
		if err == nil {
			_ = os.RemoveAll(dir)
		}
	}()

	rs, err := startRedis(cfg.redis, dir)
	if err != nil {
		return err
	}
	defer rs.stop()

	pool, err := connect(ctx, cfg.dsn)
	if err != nil {
		return err
	}
	defer pool.Close()
	schema := "worqr_outbox_chaos_" + uuid.NewString()[:8]
	defer func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if _, err := pool.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
			log.Printf("drop the run's schema: %v", err)
		}
	}()
	ob, err := worqroutbox.New(worqroutbox.Config{Schema: schema})
	if err != nil {
		return err
	}
	if err := ob.Migrate(ctx, pool); err != nil {
		return err
	}
	ledger := pgx.Identifier{schema, "ledger"}.Sanitize()
	if _, err := pool.Exec(ctx, "CREATE TABLE "+ledger+" (id text PRIMARY KEY, queue text NOT NULL)"); err != nil {
		return err
	}

	fleet := &relays{dsn: cfg.dsn, redis: rs.addr, schema: schema, dir: dir}
	for i := range cfg.relays {
		if err := fleet.start(i); err != nil {
			return err
		}
	}
	defer fleet.stopAll()

	// Producers until the faults end.
	var committed, rolledBack, failed atomic.Int64
	prodCtx, stopProducers := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() {
		stopProducers()
		wg.Wait()
	}()
	// One transaction per tick, shared by the producers.
	tick := time.NewTicker(time.Second / time.Duration(cfg.rate))
	defer tick.Stop()
	for p := range cfg.producers {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(cfg.seed+uint64(p), uint64(p)))
			for prodCtx.Err() == nil {
				select {
				case <-prodCtx.Done():
					return
				case <-tick.C:
				}
				queue := "q" + strconv.Itoa(r.IntN(cfg.queues))
				rollback := r.IntN(10) == 0
				err := produce(prodCtx, pool, ob, ledger, queue, rollback)
				switch {
				case err == nil && rollback:
					rolledBack.Add(1)
				case err == nil:
					committed.Add(1)
				default:
					// Postgres restarting: the ledger says whether it committed.
					failed.Add(1)
					select {
					case <-prodCtx.Done():
					case <-time.After(50 * time.Millisecond):
					}
				}
			}
		})
	}

	faults := map[string]int{}
	deadline := time.After(cfg.duration)
	sabotaged := false
faultLoop:
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline:
			break faultLoop
		case <-time.After(time.Duration(500+rng.IntN(2000)) * time.Millisecond):
		}
		var fault string
		switch n := rng.IntN(100); {
		case n < 45:
			fault = "kill-relay"
			i := rng.IntN(cfg.relays)
			fleet.kill(i)
			if err := fleet.start(i); err != nil {
				return err
			}
		case n < 60 && cfg.pgRestart != "":
			fault = "restart-postgres"
			if out, err := exec.CommandContext(ctx, "sh", "-c", cfg.pgRestart).CombinedOutput(); err != nil {
				return fmt.Errorf("restart Postgres: %w: %s", err, out)
			}
		case n < 80:
			fault = "restart-redis"
			if err := rs.restart(); err != nil {
				return err
			}
		default:
			fault = "terminate-sessions"
			tctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			_, _ = pool.Exec(tctx, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()")
			cancel()
		}
		faults[fault]++
		// A relay that died of itself is started again, as a deployment
		// would restart it.
		for i := range cfg.relays {
			if !fleet.alive(i) {
				faults["relay-exited"]++
				if err := fleet.start(i); err != nil {
					return err
				}
			}
		}
		if cfg.sabotage != "" && !sabotaged {
			sabotaged = sabotage(ctx, cfg.sabotage, pool, ob, ledger, rs.addr)
		}
	}
	stopProducers()
	wg.Wait()

	// Every relay up again, then wait for the outbox to drain.
	for i := range cfg.relays {
		if !fleet.alive(i) {
			if err := fleet.start(i); err != nil {
				return err
			}
		}
	}
	drainBy := time.Now().Add(cfg.drain)
	var s worqroutbox.Stats
	for {
		sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		s, err = ob.Stats(sctx, pool)
		cancel()
		if err == nil && s.Backlog == 0 {
			break
		}
		if time.Now().After(drainBy) {
			return fmt.Errorf("the outbox did not drain within %v: %+v (%v); relay logs in %s", cfg.drain, s, err, dir)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if s.Failed > 0 {
		return fmt.Errorf("%d rows failed", s.Failed)
	}

	v, err := verify(ctx, pool, ledger, rs.addr, cfg.queues)
	if err != nil {
		return err
	}
	fmt.Printf("outbox chaos: seed=%d committed=%d rolled-back=%d failed-tx=%d ledger=%d tasks=%d lost=%d duplicated=%d phantom=%d faults=%v\n",
		cfg.seed, committed.Load(), rolledBack.Load(), failed.Load(), v.ledger, v.tasks, len(v.lost), len(v.duplicated), len(v.phantom), faults)
	if len(v.lost)+len(v.duplicated)+len(v.phantom) > 0 {
		return fmt.Errorf("lost %v, duplicated %v, phantom %v", first(v.lost), first(v.duplicated), first(v.phantom))
	}
	if v.ledger == 0 {
		return errors.New("no transaction committed: the run checked nothing")
	}
	return nil
}

// connect opens a pool whose sessions commit synchronously, so that a
// crash keeps every commit it acknowledged.
func connect(ctx context.Context, dsn string) (*pgxpool.Pool, error) {
	pc, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, err
	}
	pc.ConnConfig.RuntimeParams["synchronous_commit"] = "on"
	pc.MaxConns = 16
	return pgxpool.NewWithConfig(ctx, pc)
}

// produce commits, or rolls back, one transaction that records a ledger
// row and enqueues its task.
func produce(ctx context.Context, pool *pgxpool.Pool, ob *worqroutbox.Outbox, ledger, queue string, rollback bool) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	tx, err := pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	id := uuid.NewString()
	if _, err := tx.Exec(ctx, "INSERT INTO "+ledger+" (id, queue) VALUES ($1, $2)", id, queue); err != nil {
		return err
	}
	if _, err := ob.Enqueue(ctx, tx, queue, []byte(id)); err != nil {
		return err
	}
	if rollback {
		return tx.Rollback(ctx)
	}
	return tx.Commit(ctx)
}

// sabotage breaks the run once: it reports whether it did.
func sabotage(ctx context.Context, how string, pool *pgxpool.Pool, ob *worqroutbox.Outbox, ledger, redis string) bool {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	switch how {
	case "drop":
		// A committed ledger row whose task the outbox never got.
		_, err := pool.Exec(ctx, "INSERT INTO "+ledger+" (id, queue) VALUES ($1, 'q0')", uuid.NewString())
		return err == nil
	case "phantom", "twice":
		c, err := newClient(redis)
		if err != nil {
			return false
		}
		defer c.Close(ctx)
		queue, task := "q0", "phantom-"+uuid.NewString()
		if how == "twice" {
			// A committed row's task, enqueued a second time.
			if err := pool.QueryRow(ctx, "SELECT id, queue FROM "+ledger+" LIMIT 1").Scan(&task, &queue); err != nil {
				return false
			}
		}
		_, err = c.Enqueue(ctx, queue, []byte(task))
		return err == nil
	}
	return false
}

// verdict is what verify found.
type verdict struct {
	ledger, tasks             int
	lost, duplicated, phantom []string
}

// verify compares the tasks waiting in Redis with the ledger.
func verify(ctx context.Context, pool *pgxpool.Pool, ledger, redis string, queues int) (verdict, error) {
	var v verdict
	want := map[string]string{} // ledger id: its queue
	rows, err := pool.Query(ctx, "SELECT id, queue FROM "+ledger)
	if err != nil {
		return v, err
	}
	for rows.Next() {
		var id, q string
		if err := rows.Scan(&id, &q); err != nil {
			return v, err
		}
		want[id] = q
	}
	if err := rows.Err(); err != nil {
		return v, err
	}
	v.ledger = len(want)
	c, err := newClient(redis)
	if err != nil {
		return v, err
	}
	defer c.Close(ctx)
	seen := map[string]int{}
	for i := range queues {
		q := "q" + strconv.Itoa(i)
		tasks, err := c.Range(ctx, q, 0, -1)
		if err != nil {
			return v, err
		}
		for _, t := range tasks {
			id := string(t)
			v.tasks++
			seen[id]++
			switch wq, ok := want[id]; {
			case !ok:
				v.phantom = append(v.phantom, id)
			case wq != q:
				v.phantom = append(v.phantom, id+" in "+q)
			case seen[id] == 2:
				v.duplicated = append(v.duplicated, id)
			}
		}
	}
	for id := range want {
		if seen[id] == 0 {
			v.lost = append(v.lost, id)
		}
	}
	return v, nil
}

func first(ids []string) []string { return ids[:min(len(ids), 3)] }

// newClient is a worqr client on the run's Redis.
func newClient(addr string) (*worqr.Client, error) {
	r, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: true})
	if err != nil {
		return nil, err
	}
	return worqr.New(worqr.Options{Redis: r, Prefix: prefix})
}

// redisServer is the run's redis-server.
type redisServer struct {
	bin, dir, addr string
	port           int
	cmd            *exec.Cmd
}

func startRedis(bin, dir string) (*redisServer, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	rs := &redisServer{bin: bin, dir: dir, port: port, addr: "127.0.0.1:" + strconv.Itoa(port)}
	return rs, rs.start()
}

func (rs *redisServer) start() error {
	rs.cmd = exec.Command(rs.bin, "--port", strconv.Itoa(rs.port), "--bind", "127.0.0.1", "--dir", rs.dir,
		"--appendonly", "yes", "--appendfsync", "always", "--save", "")
	logf, err := os.OpenFile(filepath.Join(rs.dir, "redis.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	rs.cmd.Stdout, rs.cmd.Stderr = logf, logf
	if err := rs.cmd.Start(); err != nil {
		return fmt.Errorf("start redis-server: %w", err)
	}
	go func() { _ = rs.cmd.Wait() }()
	for range 100 {
		if c, err := net.Dial("tcp", rs.addr); err == nil {
			_ = c.Close()
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("redis-server did not listen on %s", rs.addr)
}

// restart kills the server as a crash would and starts it again on the
// same append-only file.
func (rs *redisServer) restart() error {
	rs.stop()
	return rs.start()
}

func (rs *redisServer) stop() {
	if rs.cmd != nil && rs.cmd.Process != nil {
		_ = rs.cmd.Process.Kill()
		for range 100 {
			if c, err := net.Dial("tcp", rs.addr); err != nil {
				return
			} else {
				_ = c.Close()
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// relays are the relay processes.
type relays struct {
	dsn, redis, schema, dir string
	mu                      sync.Mutex
	procs                   map[int]*exec.Cmd
	done                    map[int]chan struct{}
}

func (f *relays) start(i int) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.procs == nil {
		f.procs, f.done = map[int]*exec.Cmd{}, map[int]chan struct{}{}
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	cmd := exec.Command(self, relayFlag, f.dsn, f.redis, f.schema)
	logf, err := os.OpenFile(filepath.Join(f.dir, "relay-"+strconv.Itoa(i)+".log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start relay %d: %w", i, err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		_ = logf.Close()
		close(done)
	}()
	f.procs[i], f.done[i] = cmd, done
	return nil
}

func (f *relays) alive(i int) bool {
	f.mu.Lock()
	done := f.done[i]
	f.mu.Unlock()
	select {
	case <-done:
		return false
	default:
		return done != nil
	}
}

func (f *relays) kill(i int) {
	f.mu.Lock()
	cmd, done := f.procs[i], f.done[i]
	f.mu.Unlock()
	if cmd != nil {
		_ = cmd.Process.Signal(syscall.SIGKILL)
		<-done
	}
}

func (f *relays) stopAll() {
	f.mu.Lock()
	n := len(f.procs)
	f.mu.Unlock()
	for i := range n {
		f.kill(i)
	}
}

// runRelay is a relay process: it moves rows until it is killed, and
// returns only on failure.
func runRelay(args []string) error {
	if len(args) != 3 {
		return fmt.Errorf("%s DSN REDIS SCHEMA", relayFlag)
	}
	dsn, redis, schema := args[0], args[1], args[2]
	ctx := context.Background()
	pool, err := connect(ctx, dsn)
	if err != nil {
		return err
	}
	// Redis may be restarting as the relay starts: it tries until it
	// connects, as a relay started by a deployment would be restarted.
	var client *worqr.Client
	for {
		if client, err = newClient(redis); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	ob, err := worqroutbox.New(worqroutbox.Config{Schema: schema})
	if err != nil {
		return err
	}
	// Small batches and a short sweep: kills land in moves often, and a
	// notification lost to a restart is swept up soon.
	r, err := ob.NewRelay(pool, client, worqroutbox.RelayOptions{
		BatchSize: 10, Sweep: time.Second, MoveTimeout: 3 * time.Second,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		return err
	}
	if err := r.Start(ctx); err != nil {
		return err
	}
	select {} // until SIGKILL
}
