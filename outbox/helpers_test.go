package worqroutbox

import (
	"context"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"

	"github.com/worqr/worqr"
)

// The tests that need Postgres run against the server WORQR_TEST_POSTGRES
// names (a DSN: "postgres://postgres@127.0.0.1:5499/postgres", as
// .ci/postgres start prints) and skip without it, so `go test ./...`
// passes with no database. Each uses a schema of its own, dropped at its
// end. Redis is miniredis, or the server WORQR_TEST_REDIS names, or the
// cluster WORQR_TEST_CLUSTER names, under a prefix of the test's own.
const (
	envPostgres = "WORQR_TEST_POSTGRES"
	envRedis    = "WORQR_TEST_REDIS"
	envCluster  = "WORQR_TEST_CLUSTER" // a Redis Cluster's seed nodes, comma-separated
)

// env is one test's Postgres schema, outbox, Redis and worqr client.
type env struct {
	t      *testing.T
	ctx    context.Context
	pool   *pgxpool.Pool
	schema string
	ob     *Outbox
	rdb    rueidis.Client
	prefix string
	client *worqr.Client
}

// newEnv starts a test's environment, with an outbox table named table
// (DefaultTable when empty) in a schema of its own, migrated.
func newEnv(t *testing.T, table string) *env {
	t.Helper()
	dsn := os.Getenv(envPostgres)
	if dsn == "" {
		t.Skipf("%s is not set: this test needs a Postgres (.ci/postgres start prints a DSN for it)", envPostgres)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	pool, err := pgxpool.New(ctx, dsn)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	e := &env{t: t, ctx: ctx, pool: pool, schema: "worqr_outbox_test_" + uuid.NewString()[:8]}
	t.Cleanup(func() {
		_, err := pool.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+pgx.Identifier{e.schema}.Sanitize()+" CASCADE")
		if err != nil {
			t.Errorf("drop the test's schema: %v", err)
		}
	})
	e.ob, err = New(Config{Schema: e.schema, Table: table})
	require.NoError(t, err)
	require.NoError(t, e.ob.Migrate(ctx, pool))

	e.prefix = "worqroutboxtest-" + uuid.NewString()[:8]
	opt := rueidis.ClientOption{DisableCache: true}
	cluster := os.Getenv(envCluster)
	if cluster != "" {
		opt.InitAddress = strings.Split(cluster, ",")
	} else if addr := os.Getenv(envRedis); addr != "" {
		opt.InitAddress = []string{addr}
	} else {
		m := miniredis.NewMiniRedis()
		m.ClockTTL(true)
		require.NoError(t, m.Start())
		t.Cleanup(m.Close)
		// miniredis speaks RESP2 only and has no client tracking.
		opt.InitAddress, opt.AlwaysRESP2, opt.ForceSingleClient = []string{m.Addr()}, true, true
	}
	e.rdb, err = rueidis.NewClient(opt)
	require.NoError(t, err)
	t.Cleanup(e.rdb.Close)
	// A cluster's keys are spread over its nodes, and CI's is thrown away
	// after the run: only a single Redis is cleaned.
	if cluster == "" && os.Getenv(envRedis) != "" {
		t.Cleanup(e.deleteKeys)
	}
	e.client = e.newClient()
	return e
}

// newClient is another worqr client on the test's Redis and prefix, as
// another process would have.
func (e *env) newClient() *worqr.Client {
	e.t.Helper()
	c, err := worqr.New(worqr.Options{Redis: e.rdb, Prefix: e.prefix, Logger: discard()})
	require.NoError(e.t, err)
	e.t.Cleanup(func() { _ = c.Close(context.Background()) })
	return c
}

// deleteKeys deletes the test's keys from a real Redis.
func (e *env) deleteKeys() {
	ctx := context.Background()
	var cursor uint64
	for {
		res, err := e.rdb.Do(ctx, e.rdb.B().Scan().Cursor(cursor).Match(e.prefix+"*").Count(1000).Build()).AsScanEntry()
		if err != nil {
			e.t.Errorf("delete the test's keys: %v", err)
			return
		}
		for _, k := range res.Elements {
			_ = e.rdb.Do(ctx, e.rdb.B().Unlink().Key(k).Build()).Error()
		}
		if cursor = res.Cursor; cursor == 0 {
			return
		}
	}
}

// relay makes a relay of the outbox into c (the test's client when nil),
// with a huge sweep unless opts says otherwise, so that only
// notifications move rows. It is stopped at the end of the test.
func (e *env) relay(c *worqr.Client, opts RelayOptions) *Relay {
	e.t.Helper()
	if c == nil {
		c = e.client
	}
	if opts.Sweep == 0 {
		opts.Sweep = time.Hour
	}
	opts.Logger = testLogger(e.t)
	r, err := e.ob.NewRelay(e.pool, c, opts)
	require.NoError(e.t, err)
	e.t.Cleanup(r.Stop)
	return r
}

// start turns r's idle signal on, starts r and waits until it listens
// and has moved what the table held.
func (e *env) start(r *Relay) {
	e.t.Helper()
	r.idle.Init(e.t)
	require.NoError(e.t, r.Start(e.ctx))
	r.idle.WaitOrTimeout()
}

// inTx runs f in a transaction and commits it, or rolls it back if
// rollback is set.
func (e *env) inTx(rollback bool, f func(tx pgx.Tx)) {
	e.t.Helper()
	tx, err := e.pool.Begin(e.ctx)
	require.NoError(e.t, err)
	// A failed require in f ends the test's goroutine here: the
	// transaction must not stay open, or its locks hold the cleanup's
	// DROP SCHEMA forever.
	defer func() { _ = tx.Rollback(context.Background()) }()
	f(tx)
	if rollback {
		require.NoError(e.t, tx.Rollback(e.ctx))
		return
	}
	require.NoError(e.t, tx.Commit(e.ctx))
}

// rows counts the outbox's rows.
func (e *env) rows() int {
	e.t.Helper()
	var n int
	require.NoError(e.t, e.pool.QueryRow(e.ctx, "SELECT count(*) FROM "+e.ob.Table()).Scan(&n))
	return n
}

// waitMoved waits, on r's idle signal, until queue's waiting tasks are
// want and the outbox is empty: a task reaches Redis before its move's
// delete commits, and an idle signal may be left from the relay's start,
// so both ends of the move are waited for.
func (e *env) waitMoved(r *Relay, queue string, want ...string) {
	e.t.Helper()
	deadline := time.After(10 * time.Second)
	for !slices.Equal(e.payloads(queue), want) || e.rows() > 0 {
		select {
		case <-r.idle.C():
		case <-deadline:
			e.t.Fatalf("the relay did not move the rows within 10s: %q waiting, %d rows left", e.payloads(queue), e.rows())
		}
	}
}

// payloads are the payloads of queue's waiting tasks, in order.
func (e *env) payloads(queue string) []string {
	e.t.Helper()
	tasks, err := e.client.Range(e.ctx, queue, 0, -1)
	require.NoError(e.t, err)
	out := make([]string, len(tasks))
	for i, t := range tasks {
		out[i] = string(t)
	}
	return out
}

// eventually waits for cond with a deadline.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within 30s: %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func discard() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// testLogger writes to the test's log.
func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p))
	return len(p), nil
}
