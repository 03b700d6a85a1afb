package worqroutbox

import (
	"context"
	"net"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
)

// roundTrips counts the statements and pipelines a pool's connections
// send: each is one round trip to Postgres once its statements are
// prepared.
type roundTrips struct{ n atomic.Int64 }

func (c *roundTrips) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	c.n.Add(1)
	return ctx
}
func (c *roundTrips) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (c *roundTrips) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	c.n.Add(1)
	return ctx
}
func (c *roundTrips) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}
func (c *roundTrips) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData)     {}

// A move that finds a row is two round trips to Postgres: the begin,
// settings and take in one, the delete and commit in the other.
func TestMoveIsTwoRoundTrips(t *testing.T) {
	e := newEnv(t, "")
	cfg, err := pgxpool.ParseConfig(os.Getenv(envPostgres))
	require.NoError(t, err)
	var trips roundTrips
	cfg.ConnConfig.Tracer = &trips
	pool, err := pgxpool.NewWithConfig(e.ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	r, err := e.ob.NewRelay(pool, e.client, RelayOptions{Sweep: time.Hour, Logger: testLogger(t)})
	require.NoError(t, err)
	t.Cleanup(r.Stop)
	e.start(r)
	commitAndMove := func(payload string) {
		e.inTx(false, func(tx pgx.Tx) {
			_, err := e.ob.Enqueue(e.ctx, tx, "q", []byte(payload))
			require.NoError(t, err)
		})
		for e.rows() > 0 {
			select {
			case <-r.idle.C():
			case <-time.After(10 * time.Second):
				t.Fatal("the relay did not move the row within 10s of its commit")
			}
		}
	}
	commitAndMove("first") // prepares the move's statements
	trips.n.Store(0)
	commitAndMove("second")
	require.Equal(t, int64(2), trips.n.Load(), "round trips of a move of one row")
	require.Equal(t, []string{"first", "second"}, e.payloads("q"))
}

// OnMove reports each move that took rows, with its times in order.
func TestOnMoveReportsEachMove(t *testing.T) {
	e := newEnv(t, "")
	moves := make(chan MoveTrace, 16)
	r := e.relay(nil, RelayOptions{OnMove: func(m MoveTrace) { moves <- m }})
	e.start(r)
	committed := time.Now()
	e.inTx(false, func(tx pgx.Tx) {
		for i := range 3 {
			_, err := e.ob.Enqueue(e.ctx, tx, "q", []byte(strconv.Itoa(i)))
			require.NoError(t, err)
		}
	})
	deadline := time.After(10 * time.Second)
	for {
		var m MoveTrace
		select {
		case m = <-moves:
		case <-deadline:
			t.Fatal("no move of the 3 rows reported within 10s")
		}
		if m.Rows == 0 {
			continue // the move at the start, before the commit
		}
		require.NoError(t, m.Err)
		require.Equal(t, 3, m.Rows)
		require.False(t, m.Notified.Before(committed), "notified %v, before the commit %v", m.Notified, committed)
		times := []time.Time{m.Notified, m.Begun, m.Taken, m.Enqueued, m.Committed}
		for i := 1; i < len(times); i++ {
			require.False(t, times[i].Before(times[i-1]), "time %d of notified, begun, taken, enqueued, committed is before the one before: %v", i, times)
		}
		return
	}
}

// The take reads the primary key in order and stops at the batch's end,
// even on a table the planner has no statistics of (an outbox is empty
// when autovacuum looks at it): no scan and sort of the whole backlog.
func TestTakeReadsThePrimaryKey(t *testing.T) {
	e := newEnv(t, "")
	r := e.relay(nil, RelayOptions{})
	tx, err := e.pool.Begin(e.ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(e.ctx) }()
	for i := range 2000 {
		_, err := e.ob.Enqueue(e.ctx, tx, "q", []byte(strconv.Itoa(i)))
		require.NoError(t, err)
	}
	_, err = tx.Exec(e.ctx, r.settingsSQL, r.moveTimeout)
	require.NoError(t, err)
	rows, err := tx.Query(e.ctx, "EXPLAIN "+r.selectSQL, r.opts.BatchSize)
	require.NoError(t, err)
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	plan := strings.Join(lines, "\n")
	require.Contains(t, plan, "Index Scan using", plan)
	require.NotContains(t, plan, "Sort", plan)
	require.NotContains(t, plan, "Seq Scan", plan)
}

// A move's transaction ends itself when idle past MoveTimeout and turns
// off the plans that would read the whole table.
func TestMoveSettings(t *testing.T) {
	e := newEnv(t, "")
	r := e.relay(nil, RelayOptions{MoveTimeout: 1500 * time.Millisecond})
	settings := make(chan map[string]string, 1)
	r.afterEnqueue = func(ctx context.Context, conn *pgx.Conn) error {
		got := make(map[string]string)
		for _, name := range []string{"idle_in_transaction_session_timeout", "enable_seqscan", "jit"} {
			var v string
			if err := conn.QueryRow(ctx, "SELECT current_setting($1)", name).Scan(&v); err != nil {
				return err
			}
			got[name] = v
		}
		select {
		case settings <- got:
		default:
		}
		return nil
	}
	e.inTx(false, func(tx pgx.Tx) {
		_, err := e.ob.Enqueue(e.ctx, tx, "q", []byte("x"))
		require.NoError(t, err)
	})
	e.start(r)
	require.Equal(t, map[string]string{
		"idle_in_transaction_session_timeout": "1500ms",
		"enable_seqscan":                      "off",
		"jit":                                 "off",
	}, <-settings)
	require.Equal(t, []string{"x"}, e.payloads("q"))
	// The settings were the transaction's own: a session from the pool
	// has the server's.
	var v string
	require.NoError(t, e.pool.QueryRow(e.ctx, "SELECT current_setting('enable_seqscan')").Scan(&v))
	require.Equal(t, "on", v)
}

// writes counts what a pool's connections write to their sockets: a
// round trip is one write (a pipeline is sent whole).
type writes struct{ n atomic.Int64 }

func (w *writes) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	return countingConn{c, w}, nil
}

type countingConn struct {
	net.Conn
	w *writes
}

func (c countingConn) Write(p []byte) (int, error) {
	c.w.n.Add(1)
	return c.Conn.Write(p)
}

// relayOnPool starts a relay of e's outbox on a pool of its own made
// from cfg, with OnMove's reports sent to moves.
func (e *env) relayOnPool(cfg *pgxpool.Config, moves chan<- MoveTrace) *Relay {
	e.t.Helper()
	pool, err := pgxpool.NewWithConfig(e.ctx, cfg)
	require.NoError(e.t, err)
	e.t.Cleanup(pool.Close)
	r, err := e.ob.NewRelay(pool, e.client, RelayOptions{Sweep: time.Hour, Logger: testLogger(e.t), OnMove: func(m MoveTrace) {
		if m.Rows > 0 || m.Err != nil {
			moves <- m
		}
	}})
	require.NoError(e.t, err)
	e.t.Cleanup(r.Stop)
	e.start(r)
	return r
}

// commitRow commits a row and returns the report of the move that took
// it (or failed).
func (e *env) commitRow(payload string, moves <-chan MoveTrace) MoveTrace {
	e.t.Helper()
	e.inTx(false, func(tx pgx.Tx) {
		_, err := e.ob.Enqueue(e.ctx, tx, "q", []byte(payload))
		require.NoError(e.t, err)
	})
	select {
	case m := <-moves:
		return m
	case <-time.After(10 * time.Second):
		e.t.Fatal("no move within 10s of the commit")
	}
	return MoveTrace{}
}

// A move is two round trips however long its connection has idled: the
// relay's connection for its moves is never pinged, whatever the given
// pool's policy. pgxpool's default pings a connection idle for over a
// second before handing it out; the pool here pings every connection it
// hands out (a threshold of zero), so a relay that kept the pool's policy
// would ping before every move after the first, as the default would on a
// quiet fleet.
func TestIdleMoveIsNotPinged(t *testing.T) {
	e := newEnv(t, "")
	cfg, err := pgxpool.ParseConfig(os.Getenv(envPostgres))
	require.NoError(t, err)
	var w writes
	cfg.ConnConfig.DialFunc = w.dial
	cfg.ShouldPing = func(context.Context, pgxpool.ShouldPingParams) bool { return true }
	moves := make(chan MoveTrace, 10)
	e.relayOnPool(cfg, moves)
	m := e.commitRow("first", moves) // connects and prepares the move's statements
	require.NoError(t, m.Err)
	w.n.Store(0)
	m = e.commitRow("second", moves)
	require.NoError(t, m.Err)
	require.Equal(t, int64(2), w.n.Load(), "writes of a move on a connection the pool would ping")
	require.Equal(t, []string{"first", "second"}, e.payloads("q"))
}

// A move whose connection died while idle (Postgres restarted, a proxy's
// idle timeout) takes again on a new one: the move does not fail.
func TestMoveOnADeadConnectionTakesAgain(t *testing.T) {
	e := newEnv(t, "")
	cfg, err := pgxpool.ParseConfig(os.Getenv(envPostgres))
	require.NoError(t, err)
	name := "worqr-outbox-test-" + e.schema
	cfg.ConnConfig.RuntimeParams["application_name"] = name
	moves := make(chan MoveTrace, 10)
	e.relayOnPool(cfg, moves)
	require.NoError(t, e.commitRow("first", moves).Err)
	// The listening connection's last statement is its LISTEN; the
	// move's, its COMMIT.
	var killed int
	require.NoError(t, e.pool.QueryRow(e.ctx, `SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity
WHERE application_name = $1 AND query NOT LIKE 'LISTEN%') AS t`, name).Scan(&killed))
	require.Equal(t, 1, killed, "the move's connection")
	m := e.commitRow("second", moves)
	require.NoError(t, m.Err)
	require.Equal(t, 1, m.Rows)
	require.Equal(t, []string{"first", "second"}, e.payloads("q"))
}
