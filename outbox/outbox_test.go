package worqroutbox

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/stretchr/testify/require"

	"github.com/worqr/worqr"
	"github.com/worqr/worqr/internal/testenv"
)

func TestRolledBackEnqueuesNothingCommittedEnqueuesOne(t *testing.T) {
	e := newEnv(t, "")
	e.inTx(true, func(tx pgx.Tx) {
		_, err := e.ob.Enqueue(e.ctx, tx, "q", []byte("rolled back"))
		require.NoError(t, err)
	})
	e.inTx(false, func(tx pgx.Tx) {
		_, err := e.ob.Enqueue(e.ctx, tx, "q", []byte("committed"))
		require.NoError(t, err)
	})
	e.start(e.relay(nil, RelayOptions{}))
	require.Equal(t, []string{"committed"}, e.payloads("q"))
	require.Zero(t, e.rows())
}

// The insert trigger's notification wakes a relay whose sweep would not
// come round for an hour.
func TestNotificationWakesTheRelay(t *testing.T) {
	e := newEnv(t, "")
	r := e.relay(nil, RelayOptions{Sweep: time.Hour})
	e.start(r)
	e.inTx(false, func(tx pgx.Tx) {
		_, err := e.ob.Enqueue(e.ctx, tx, "q", []byte("woken"))
		require.NoError(t, err)
	})
	e.waitMoved(r, "q", "woken")
}

// Two relays (two processes, each its own client) race over 1,000 rows
// committed in many transactions: each row becomes one task.
func TestTwoRelaysMoveEachRowOnce(t *testing.T) {
	e := newEnv(t, "")
	a := e.relay(e.newClient(), RelayOptions{BatchSize: 37})
	b := e.relay(e.newClient(), RelayOptions{BatchSize: 50})
	for _, r := range []*Relay{a, b} {
		require.NoError(t, r.Start(e.ctx))
		<-r.Started()
	}
	const n, perTx = 1000, 20
	var wg sync.WaitGroup
	for i := 0; i < n; i += perTx {
		wg.Go(func() {
			e.inTx(false, func(tx pgx.Tx) {
				for j := i; j < i+perTx; j++ {
					_, err := e.ob.Enqueue(e.ctx, tx, "q", []byte(strconv.Itoa(j)))
					require.NoError(t, err)
				}
			})
		})
	}
	wg.Wait()
	eventually(t, "every row moved", func() bool { return e.rows() == 0 })
	got := e.payloads("q")
	require.Len(t, got, n)
	seen := make(map[string]bool, n)
	for _, p := range got {
		require.False(t, seen[p], "task %s twice", p)
		seen[p] = true
	}
}

// A relay that dies after enqueueing a batch into Redis and before
// deleting its rows (its connection gone, so the delete fails and
// Postgres rolls the move back) leaves the rows; the next move finds each
// row's key held and adds no second task.
func TestRelayDyingBeforeTheDeleteAddsNoSecondTask(t *testing.T) {
	e := newEnv(t, "")
	const n = 30
	e.inTx(false, func(tx pgx.Tx) {
		for i := range n {
			_, err := e.ob.Enqueue(e.ctx, tx, "q", []byte(strconv.Itoa(i)))
			require.NoError(t, err)
		}
	})
	dying := e.relay(e.newClient(), RelayOptions{})
	var died atomic.Int32
	dying.afterEnqueue = func(ctx context.Context, conn *pgx.Conn) error {
		died.Add(1)
		// The session dies as its process would: no rollback sent.
		return conn.PgConn().Close(ctx)
	}
	require.NoError(t, dying.Start(e.ctx))
	eventually(t, "the relay enqueued the batch and died", func() bool { return died.Load() > 0 })
	dying.Stop()
	require.Len(t, e.payloads("q"), n, "the batch reached Redis")
	require.Equal(t, n, e.rows(), "the rows stayed")

	e.start(e.relay(e.newClient(), RelayOptions{}))
	require.Zero(t, e.rows())
	got := e.payloads("q")
	require.Len(t, got, n)
	slices.Sort(got)
	require.Equal(t, n, len(slices.Compact(got)))
}

// The same when the move fails before its delete and rolls back: the
// relay itself moves the rows again, without a second task.
func TestFailedMoveIsRetriedWithoutASecondTask(t *testing.T) {
	e := newEnv(t, "")
	r := e.relay(nil, RelayOptions{})
	var calls atomic.Int32
	r.afterEnqueue = func(context.Context, *pgx.Conn) error {
		if calls.Add(1) == 1 {
			return errors.New("injected: the delete fails")
		}
		return nil
	}
	e.start(r)
	e.inTx(false, func(tx pgx.Tx) {
		_, err := e.ob.Enqueue(e.ctx, tx, "q", []byte("once"))
		require.NoError(t, err)
	})
	eventually(t, "the row moved", func() bool { return e.rows() == 0 })
	require.GreaterOrEqual(t, calls.Load(), int32(2))
	require.Equal(t, []string{"once"}, e.payloads("q"))
}

type welcome struct{ Email string }

func (welcome) Kind() string { return "email.welcome" }

// The options reach worqr, and the typed form gives the task its type's
// kind.
func TestOptionsReachWorqr(t *testing.T) {
	e := newEnv(t, "")
	e.inTx(false, func(tx pgx.Tx) {
		_, err := EnqueueJSON(e.ctx, e.ob, tx, "q", welcome{Email: "ada@example.com"}, MaxAttempts(7), Weight(3))
		require.NoError(t, err)
		_, err = e.ob.Enqueue(e.ctx, tx, "q", []byte("later"), In(time.Hour))
		require.NoError(t, err)
		_, err = e.ob.Enqueue(e.ctx, tx, "q", []byte("first"), HighPriority(), Kind("k"))
		require.NoError(t, err)
		_, err = e.ob.Enqueue(e.ctx, tx, "q", []byte("unique"), UniqueFor("u", time.Hour))
		require.NoError(t, err)
		_, err = e.ob.Enqueue(e.ctx, tx, "q", []byte("unique again"), UniqueFor("u", time.Hour))
		require.NoError(t, err)
	})
	e.start(e.relay(nil, RelayOptions{}))
	require.Zero(t, e.rows())
	tasks, err := e.client.Tasks(e.ctx, "q", 0, -1)
	require.NoError(t, err)
	require.Len(t, tasks, 3)
	require.Equal(t, "first", string(tasks[0].Payload), "high priority goes first")
	require.Equal(t, "k", tasks[0].Kind)
	require.JSONEq(t, `{"Email":"ada@example.com"}`, string(tasks[1].Payload))
	require.Equal(t, "email.welcome", tasks[1].Kind)
	require.Equal(t, 7, tasks[1].MaxAttempts)
	require.Equal(t, 3, tasks[1].Weight)
	require.Equal(t, "unique", string(tasks[2].Payload), "the second of a unique key adds nothing")
	info, err := e.client.QueueInfo(e.ctx, "q")
	require.NoError(t, err)
	require.Equal(t, int64(1), info.Delayed)
}

// The options TestOptionsReachWorqr leaves out reach worqr too: At, a
// low priority and Unique (held while the task lives) as the queue shows
// them; Timeout and Retain as a worker's attempt and a kept outcome show
// them.
func TestMoreOptionsReachWorqr(t *testing.T) {
	e := newEnv(t, "")
	due := time.Now().Add(time.Hour).Truncate(time.Millisecond)
	e.inTx(false, func(tx pgx.Tx) {
		for _, row := range []struct {
			payload string
			opts    []Option
		}{
			{"low", []Option{LowPriority()}},
			{"normal", nil},
			{"unique", []Option{Unique("u")}},
			{"unique again", []Option{Unique("u")}},
			{"due", []Option{At(due)}},
		} {
			_, err := e.ob.Enqueue(e.ctx, tx, "q", []byte(row.payload), row.opts...)
			require.NoError(t, err)
		}
		_, err := e.ob.Enqueue(e.ctx, tx, "timed", []byte("timed"), Timeout(7*time.Second), Retain(time.Hour))
		require.NoError(t, err)
	})
	e.start(e.relay(nil, RelayOptions{}))
	require.Zero(t, e.rows())
	require.Equal(t, []string{"normal", "unique", "low"}, e.payloads("q"),
		"the low priority goes last; the second of a unique key adds nothing")
	delayed, err := e.client.Delayed(e.ctx, "q", 0, -1)
	require.NoError(t, err)
	require.Len(t, delayed, 1)
	require.Equal(t, "due", string(delayed[0].Payload))
	require.True(t, delayed[0].DueAt.Equal(due), "due at %v, not %v", delayed[0].DueAt, due)

	timed, err := e.client.Tasks(e.ctx, "timed", 0, -1)
	require.NoError(t, err)
	require.Len(t, timed, 1)
	w, err := e.client.NewWorker(e.ctx, worqr.WorkerOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = w.Close(context.Background()) })
	left := make(chan time.Duration, 1)
	err = w.Handle(e.ctx, "timed", func(ctx context.Context, p *worqr.Process) error {
		var d time.Duration // 0: no deadline
		if at, ok := ctx.Deadline(); ok {
			d = time.Until(at)
		}
		left <- d
		p.SetResult([]byte("done"))
		return nil
	}, worqr.HandleOptions{})
	require.NoError(t, err)
	select {
	case d := <-left:
		require.True(t, d > 5*time.Second && d <= 7*time.Second, "the attempt's deadline is %v away (0: none), not within Timeout's 7s", d)
	case <-time.After(10 * time.Second):
		t.Fatal("the timed task did not start within 10s")
	}
	ctx, cancel := context.WithTimeout(e.ctx, 10*time.Second)
	defer cancel()
	out, err := e.client.Wait(ctx, "timed", timed[0].ID)
	require.NoError(t, err, "the outcome is kept (Retain)")
	require.Equal(t, "done", string(out.Result))
}

// enqueueCounter counts a client's enqueue calls that reached Redis.
type enqueueCounter struct{ calls, tasks atomic.Int32 }

func (c *enqueueCounter) ObserveEnqueue(_ context.Context, e worqr.EnqueueEvent) {
	c.calls.Add(1)
	c.tasks.Add(int32(len(e.TaskIDs)))
}

// The rows of a queue with the same options move in one enqueue call,
// each keyed by its row; a row of other options starts a call of its own,
// in order.
func TestRelayMovesARunOfRowsInOneCall(t *testing.T) {
	e := newEnv(t, "")
	var seen enqueueCounter
	c, err := worqr.New(worqr.Options{Redis: e.rdb, Prefix: e.prefix, Logger: discard(), Observer: &seen})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	const n = 40
	e.inTx(false, func(tx pgx.Tx) {
		for i := range n {
			_, err := e.ob.Enqueue(e.ctx, tx, "q", []byte(strconv.Itoa(i)))
			require.NoError(t, err)
		}
		_, err := e.ob.Enqueue(e.ctx, tx, "q", []byte("kinded"), Kind("k"))
		require.NoError(t, err)
	})
	e.start(e.relay(c, RelayOptions{}))
	require.Zero(t, e.rows())
	require.Equal(t, int32(n+1), seen.tasks.Load())
	require.Equal(t, int32(2), seen.calls.Load(), "a call for the run, one for the row of other options")
	got := e.payloads("q")
	require.Len(t, got, n+1)
	require.Equal(t, "0", got[0], "in the rows' order")
	require.Equal(t, "kinded", got[n])
}

// A relay moves past the rows another move holds (FOR UPDATE SKIP
// LOCKED): it neither enqueues a held row nor waits for it, so relays
// racing over the table take disjoint rows and never wait for each other.
// Once the holder lets go, the next move takes the row.
func TestRelaySkipsRowsAnotherMoveHolds(t *testing.T) {
	e := newEnv(t, "")
	var held string
	e.inTx(false, func(tx pgx.Tx) {
		var err error
		held, err = e.ob.Enqueue(e.ctx, tx, "q", []byte("held"))
		require.NoError(t, err)
	})
	// Another relay's move, between its take and its commit.
	holder, err := e.pool.Begin(e.ctx)
	require.NoError(t, err)
	defer func() { _ = holder.Rollback(context.Background()) }()
	_, err = holder.Exec(e.ctx, "SELECT 1 FROM "+e.ob.Table()+" WHERE id = $1 FOR UPDATE", held)
	require.NoError(t, err)
	e.inTx(false, func(tx pgx.Tx) {
		_, err := e.ob.Enqueue(e.ctx, tx, "q", []byte("free"))
		require.NoError(t, err)
	})
	r := e.relay(nil, RelayOptions{})
	e.start(r) // the relay drained what it could take
	require.Equal(t, []string{"free"}, e.payloads("q"), "the held row is not enqueued")
	require.Equal(t, 1, e.rows(), "the held row waits for its holder")

	require.NoError(t, holder.Rollback(e.ctx)) // the other move failed
	e.inTx(false, func(tx pgx.Tx) {
		_, err := e.ob.Enqueue(e.ctx, tx, "q", []byte("after"))
		require.NoError(t, err)
	})
	e.waitMoved(r, "q", "free", "held", "after")
}

// Rows for the front of their queue move one at a time, so the newest
// runs first, as Enqueue(AtFront) calls made in the producers' order put
// it.
func TestRelayMovesFrontRowsOneAtATime(t *testing.T) {
	e := newEnv(t, "")
	e.inTx(false, func(tx pgx.Tx) {
		for _, p := range []string{"a", "b", "c"} {
			_, err := e.ob.Enqueue(e.ctx, tx, "q", []byte(p), AtFront())
			require.NoError(t, err)
		}
	})
	e.start(e.relay(e.client, RelayOptions{}))
	require.Zero(t, e.rows())
	require.Equal(t, []string{"c", "b", "a"}, e.payloads("q"))
}

// A row worqr refuses for good (too large for the relay's client) is
// marked failed and kept; the rows behind it move.
func TestRefusedRowIsMarkedAndSkipped(t *testing.T) {
	e := newEnv(t, "")
	small, err := worqr.New(worqr.Options{Redis: e.rdb, Prefix: e.prefix, MaxTaskSize: 4, Logger: discard()})
	require.NoError(t, err)
	t.Cleanup(func() { _ = small.Close(context.Background()) })
	e.inTx(false, func(tx pgx.Tx) {
		_, err := e.ob.Enqueue(e.ctx, tx, "q", []byte("far too large"))
		require.NoError(t, err)
		_, err = e.ob.Enqueue(e.ctx, tx, "q", []byte("ok"))
		require.NoError(t, err)
	})
	e.start(e.relay(small, RelayOptions{}))
	require.Equal(t, []string{"ok"}, e.payloads("q"))
	var msg string
	require.NoError(t, e.pool.QueryRow(e.ctx, "SELECT error FROM "+e.ob.Table()+" WHERE failed_at IS NOT NULL").Scan(&msg))
	require.Contains(t, msg, "over the limit")
}

// database/sql through pgx's stdlib driver, on a table whose name needs
// quoting, migrated twice.
func TestDatabaseSQLAndAQuotedTableName(t *testing.T) {
	e := newEnv(t, `my "odd" table; --`)
	db := stdlib.OpenDBFromPool(e.pool)
	t.Cleanup(func() { _ = db.Close() })
	require.NoError(t, e.ob.Migrate(e.ctx, SQL(db)), "a second migration changes nothing")
	r := e.relay(nil, RelayOptions{})
	e.start(r)
	tx, err := db.BeginTx(e.ctx, nil)
	require.NoError(t, err)
	_, err = e.ob.Enqueue(e.ctx, SQL(tx), "q", []byte("via database/sql"), Kind("sql"))
	require.NoError(t, err)
	require.NoError(t, tx.Commit())
	e.waitMoved(r, "q", "via database/sql")
	var n int
	require.NoError(t, db.QueryRowContext(e.ctx, "SELECT count(*) FROM "+e.ob.Table()).Scan(&n))
	require.Zero(t, n)
}

// A schema and table whose "schema.table" is over 63 bytes notify on a
// digest of it, which the trigger (Postgres's md5) and the relay (Go's)
// must make alike: the notification wakes a relay whose sweep would not
// come round for an hour.
func TestLongNamesNotifyOnADigestChannel(t *testing.T) {
	long := "t23456789012345678901234567890123456789012345678901" // the longest New takes
	e := newEnv(t, long)
	require.Greater(t, len(e.ob.Name()), 63)
	require.Equal(t, "worqr_outbox_", e.ob.Channel()[:len("worqr_outbox_")])
	r := e.relay(nil, RelayOptions{Sweep: time.Hour})
	e.start(r)
	e.inTx(false, func(tx pgx.Tx) {
		_, err := e.ob.Enqueue(e.ctx, tx, "q", []byte("woken"))
		require.NoError(t, err)
	})
	e.waitMoved(r, "q", "woken")
}

// execFunc is an Execer of a function, for tests that need no database.
type execFunc func(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)

func (f execFunc) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	return f(ctx, sql, args...)
}

// Options worqr would refuse at the move are refused at the insert, and
// nothing is inserted.
func TestEnqueueRefusesBadOptionsAndNames(t *testing.T) {
	ob, err := New(Config{})
	require.NoError(t, err)
	noInsert := execFunc(func(context.Context, string, ...any) (pgconn.CommandTag, error) {
		t.Error("inserted")
		return pgconn.CommandTag{}, nil
	})
	ctx := context.Background()
	for name, opt := range map[string]Option{
		"negative delay":   In(-time.Second),
		"negative timeout": Timeout(-1),
		"negative retain":  Retain(-1),
		"weight":           Weight(worqr.MaxWeight + 1),
		"empty unique":     Unique(""),
		"negative ttl":     UniqueFor("k", -1),
		"kind":             Kind("a,b"),
		"long kind":        Kind(string(make([]byte, worqr.MaxKindLen+1))),
		"empty group":      Group(""),
		"long group":       Group(string(make([]byte, worqr.MaxGroupLen+1))),
		"nul in group":     Group("a\x00b"),
		"aggregate":        Aggregate("k"),
	} {
		_, err := ob.Enqueue(ctx, noInsert, "q", nil, opt)
		require.ErrorIs(t, err, worqr.ErrInvalidOptions, name)
	}
	for _, q := range []string{"", "a{b}", "nul\x00"} {
		_, err := ob.Enqueue(ctx, noInsert, q, nil)
		require.ErrorIs(t, err, worqr.ErrInvalidQueueName, "%q", q)
	}
	_, err = New(Config{Table: string(make([]byte, 64))})
	require.ErrorIs(t, err, ErrInvalidConfig)
}

// prefixCodec encodes a string with a prefix, to tell its payloads from
// JSON's.
type prefixCodec struct{}

func (prefixCodec) Marshal(v string) ([]byte, error) { return []byte("codec:" + v), nil }
func (prefixCodec) Unmarshal(data []byte, v *string) error {
	*v = strings.TrimPrefix(string(data), "codec:")
	return nil
}

// kindedName is a Kinded string, for EnqueueWith's kind.
type kindedName string

func (kindedName) Kind() string { return "name" }

type kindedCodec struct{}

func (kindedCodec) Marshal(v kindedName) ([]byte, error) { return []byte("codec:" + v), nil }
func (kindedCodec) Unmarshal(data []byte, v *kindedName) error {
	*v = kindedName(strings.TrimPrefix(string(data), "codec:"))
	return nil
}

// EnqueueWith inserts the codec's payload (JSON's with none), with the
// type's kind when it is Kinded, which a Kind option overrides; an
// encoding error inserts nothing.
func TestEnqueueWithACodec(t *testing.T) {
	ob, err := New(Config{})
	require.NoError(t, err)
	type insert struct {
		payload string
		kind    *string
	}
	var got []insert
	capture := execFunc(func(_ context.Context, _ string, args ...any) (pgconn.CommandTag, error) {
		got = append(got, insert{string(args[2].([]byte)), args[10].(*string)})
		return pgconn.CommandTag{}, nil
	})
	ctx := context.Background()
	_, err = EnqueueWith[string](ctx, ob, capture, prefixCodec{}, "q", "ada")
	require.NoError(t, err)
	_, err = EnqueueWith[string](ctx, ob, capture, nil, "q", "ada")
	require.NoError(t, err)
	_, err = EnqueueWith[kindedName](ctx, ob, capture, kindedCodec{}, "q", "bob")
	require.NoError(t, err)
	_, err = EnqueueWith[kindedName](ctx, ob, capture, kindedCodec{}, "q", "eve", Kind("other"))
	require.NoError(t, err)
	require.Len(t, got, 4)
	require.Equal(t, insert{"codec:ada", nil}, got[0])
	require.Equal(t, insert{`"ada"`, nil}, got[1], "JSON without a codec")
	require.Equal(t, "codec:bob", got[2].payload)
	require.NotNil(t, got[2].kind, "the type's kind")
	require.Equal(t, "name", *got[2].kind, "the type's kind")
	require.NotNil(t, got[3].kind)
	require.Equal(t, "other", *got[3].kind, "a Kind option overrides the type's")

	_, err = EnqueueWith[float64](ctx, ob, capture, nil, "q", math.NaN())
	require.Error(t, err, "NaN does not encode as JSON")
	require.Len(t, got, 4, "nothing inserted")
}

// The options a row stores turn back into worqr's: In becomes an absolute
// due time, durations whole milliseconds rounded up, and the row's id is
// the unique key unless the row has its own.
func TestRowOptions(t *testing.T) {
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	o := collect(now, []Option{In(time.Minute), At(now.Add(time.Second)), Timeout(1500 * time.Microsecond)})
	require.Equal(t, now.Add(time.Minute), o.at, "the later of In and At")
	require.Equal(t, int64(2), *millis(o.timeout))
	require.Nil(t, millis(0))
	o = collect(now, []Option{At(now.Add(time.Hour)), In(time.Minute)})
	require.Equal(t, now.Add(time.Hour), o.at)

	var ids []string
	ob, err := New(Config{})
	require.NoError(t, err)
	capture := execFunc(func(_ context.Context, _ string, args ...any) (pgconn.CommandTag, error) {
		ids = append(ids, args[0].(string))
		return pgconn.CommandTag{}, nil
	})
	for range 3 {
		_, err := ob.Enqueue(context.Background(), capture, "q", nil)
		require.NoError(t, err)
	}
	require.True(t, slices.IsSorted(ids), "ids are time-ordered: %v", ids)
	require.Equal(t, fmt.Sprint(len(row{}.enqueueOptions(time.Minute))), "1", "a bare row gets its dedupe key")
}

// With no notification (the trigger dropped), the sweep moves the rows.
func TestSweepMovesRowsWithoutANotification(t *testing.T) {
	e := newEnv(t, "")
	_, err := e.pool.Exec(e.ctx, "DROP TRIGGER "+pgx.Identifier{DefaultTable + "_notify"}.Sanitize()+" ON "+e.ob.Table())
	require.NoError(t, err)
	e.start(e.relay(nil, RelayOptions{Sweep: 50 * time.Millisecond}))
	e.inTx(false, func(tx pgx.Tx) {
		_, err := e.ob.Enqueue(e.ctx, tx, "q", []byte("swept"))
		require.NoError(t, err)
	})
	eventually(t, "the sweep moved the row", func() bool { return e.rows() == 0 })
	require.Equal(t, []string{"swept"}, e.payloads("q"))
}

// A relay whose listening connection is cut connects and listens again
// (and looks for rows committed meanwhile), and notifications wake it
// again.
func TestRelayListensAgainAfterItsConnectionIsCut(t *testing.T) {
	e := newEnv(t, "")
	r := e.relay(nil, RelayOptions{Sweep: time.Hour})
	e.start(r)
	var cut int
	require.NoError(t, e.pool.QueryRow(e.ctx,
		"SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE query = $1",
		"LISTEN "+pgx.Identifier{e.ob.Channel()}.Sanitize()).Scan(&cut))
	require.Equal(t, 1, cut)
	r.idle.WaitOrTimeout() // listening again: it looked for rows missed
	e.inTx(false, func(tx pgx.Tx) {
		_, err := e.ob.Enqueue(e.ctx, tx, "q", []byte("after the cut"))
		require.NoError(t, err)
	})
	e.waitMoved(r, "q", "after the cut")
}

// While Redis is down the rows stay (a failed enqueue is not a move), and
// the relay, retrying, moves them once Redis is back, each once.
func TestRowsWaitForRedisToComeBack(t *testing.T) {
	e := newEnv(t, "")
	m := miniredis.RunT(t)
	c, err := worqr.New(worqr.Options{Addr: m.Addr(), Logger: discard()})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	failed := make(chan error, 100)
	r := e.relay(c, RelayOptions{OnMove: func(mv MoveTrace) {
		if mv.Err != nil {
			select {
			case failed <- mv.Err:
			default:
			}
		}
	}})
	e.start(r)
	m.Close()
	e.inTx(false, func(tx pgx.Tx) {
		for _, p := range []string{"a", "b"} {
			_, err := e.ob.Enqueue(e.ctx, tx, "q", []byte(p))
			require.NoError(t, err)
		}
	})
	// OnMove reports a move once it has committed or rolled back.
	select {
	case err := <-failed:
		t.Logf("the move failed as it should: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("no failed move reported within 30s of Redis going down")
	}
	require.Equal(t, 2, e.rows(), "the rows wait for Redis")
	require.NoError(t, m.Restart())
	eventually(t, "the rows moved once Redis was back", func() bool { return e.rows() == 0 })
	got, err := c.Range(e.ctx, "q", 0, -1)
	require.NoError(t, err)
	require.Equal(t, [][]byte{[]byte("a"), []byte("b")}, got)
}

// A dedupe window must outlast a stuck move and the sweep after it.
func TestNewRelayRefusesAShortDedupeWindow(t *testing.T) {
	ob, err := New(Config{})
	require.NoError(t, err)
	pool, err := pgxpool.New(context.Background(), "postgres://nobody@127.0.0.1:1/none") // connects lazily
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	m := miniredis.RunT(t)
	client, err := worqr.New(worqr.Options{Addr: m.Addr(), Logger: discard()})
	require.NoError(t, err)
	t.Cleanup(func() { _ = client.Close(context.Background()) })

	_, err = ob.NewRelay(pool, client, RelayOptions{Sweep: time.Minute, MoveTimeout: time.Minute, DedupeWindow: 3 * time.Minute})
	require.ErrorIs(t, err, ErrInvalidConfig)
	r, err := ob.NewRelay(pool, client, RelayOptions{Sweep: time.Hour})
	require.NoError(t, err)
	require.GreaterOrEqual(t, r.opts.DedupeWindow, 2*(time.Hour+DefaultMoveTimeout), "the default grows with the sweep")
	_, err = ob.NewRelay(nil, client, RelayOptions{})
	require.ErrorIs(t, err, ErrInvalidConfig)
}

// The core package stays free of database drivers: programs that import
// only worqr must not build pgx.
func TestCoreHasNoDatabaseDependencies(t *testing.T) {
	testenv.RequireCoreWithout(t, "github.com/jackc/", "database/sql")
}

// A relay that hangs mid-move does not hold its rows for ever: Postgres
// ends its session after MoveTimeout idle in the transaction, and the
// rows move again, without a second task.
func TestPostgresEndsAHungMove(t *testing.T) {
	e := newEnv(t, "")
	r := e.relay(nil, RelayOptions{MoveTimeout: 300 * time.Millisecond})
	var hung, ended atomic.Bool
	r.afterEnqueue = func(ctx context.Context, conn *pgx.Conn) error {
		if hung.Swap(true) {
			return nil
		}
		// Hangs until Postgres has ended the session (or 30s).
		pid := conn.PgConn().PID()
		for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			var n int
			err := e.pool.QueryRow(context.WithoutCancel(ctx), "SELECT count(*) FROM pg_stat_activity WHERE pid = $1", pid).Scan(&n)
			if err == nil && n == 0 {
				ended.Store(true)
				return nil
			}
		}
		return nil
	}
	e.inTx(false, func(tx pgx.Tx) {
		_, err := e.ob.Enqueue(e.ctx, tx, "q", []byte("hung"))
		require.NoError(t, err)
	})
	require.NoError(t, r.Start(e.ctx))
	eventually(t, "the row moved", func() bool { return e.rows() == 0 })
	require.True(t, ended.Load(), "Postgres ended the hung move's session")
	require.Equal(t, []string{"hung"}, e.payloads("q"))
}
