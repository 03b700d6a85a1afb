package worqroutbox

import (
	"context"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/worqr/worqr"
)

// A row's group reaches its task, and rows of different groups (or none)
// do not share a batch call: each task keeps its own group.
func TestGroupReachesWorqr(t *testing.T) {
	e := newEnv(t, "")
	e.inTx(false, func(tx pgx.Tx) {
		for _, g := range []string{"a", "a", "b", "", "a"} {
			var opts []Option
			if g != "" {
				opts = append(opts, Group(g))
			}
			_, err := e.ob.Enqueue(e.ctx, tx, "q", []byte(g), opts...)
			require.NoError(t, err)
		}
	})
	e.start(e.relay(nil, RelayOptions{}))
	require.Zero(t, e.rows())
	tasks, err := e.client.Tasks(e.ctx, "q", 0, -1)
	require.NoError(t, err)
	require.Len(t, tasks, 5)
	perGroup := map[string]int{}
	for _, task := range tasks {
		require.Equal(t, string(task.Payload), task.Group, "the task's group is its row's")
		perGroup[task.Group]++
	}
	require.Equal(t, map[string]int{"a": 3, "b": 1, "": 1}, perGroup)
	report, err := e.client.Groups(e.ctx, "q", 10)
	require.NoError(t, err)
	waiting := map[string]int64{}
	for _, g := range report.TopWaiting {
		waiting[g.Key] = g.Waiting
	}
	require.Equal(t, int64(3), waiting["a"])
	require.Equal(t, int64(1), waiting["b"])
}

// Grouped rows moved again (their relay died before the delete) add no
// second task: the row's id stays the task's unique key with a group.
func TestGroupedRowsMovedTwiceAreOneTaskEach(t *testing.T) {
	e := newEnv(t, "")
	const n = 20
	e.inTx(false, func(tx pgx.Tx) {
		for i := range n {
			_, err := e.ob.Enqueue(e.ctx, tx, "q", []byte(strconv.Itoa(i)), Group("g"+strconv.Itoa(i%3)))
			require.NoError(t, err)
		}
	})
	dying := e.relay(e.newClient(), RelayOptions{})
	var died atomic.Int32
	dying.afterEnqueue = func(ctx context.Context, conn *pgx.Conn) error {
		died.Add(1)
		return conn.PgConn().Close(ctx) // no rollback sent, as a dead process's
	}
	require.NoError(t, dying.Start(e.ctx))
	eventually(t, "the relay enqueued the batch and died", func() bool { return died.Load() > 0 })
	dying.Stop()
	require.Equal(t, n, e.rows(), "the rows stayed")

	e.start(e.relay(e.newClient(), RelayOptions{}))
	require.Zero(t, e.rows())
	tasks, err := e.client.Tasks(e.ctx, "q", 0, -1)
	require.NoError(t, err)
	require.Len(t, tasks, n, "one task per row")
	for _, task := range tasks {
		i, err := strconv.Atoi(string(task.Payload))
		require.NoError(t, err)
		require.Equal(t, "g"+strconv.Itoa(i%3), task.Group)
	}
}

// A table of the previous version, with rows in it, is brought to the
// current one by Migrate: its rows keep their options and move, and rows
// with a group insert and move beside them. Migrate runs again as a
// no-op.
func TestMigrateFromVersionOneWithRows(t *testing.T) {
	e := newEnv(t, "")
	_, err := e.pool.Exec(e.ctx, "DROP SCHEMA "+pgx.Identifier{e.schema}.Sanitize()+" CASCADE")
	require.NoError(t, err)
	ms, err := e.ob.Migrations()
	require.NoError(t, err)
	_, err = e.pool.Exec(e.ctx, ms[0].SQL)
	require.NoError(t, err)
	// A version-1 producer's rows: its insert names only version 1's columns.
	for i, p := range []string{"old-1", "old-2"} {
		_, err := e.pool.Exec(e.ctx, `INSERT INTO `+e.ob.Table()+` (id, queue, payload, kind, max_attempts) VALUES ($1, 'q', $2, 'k', $3)`,
			uuid.Must(uuid.NewV7()).String(), []byte(p), 3+i)
		require.NoError(t, err)
	}
	_, err = e.ob.Enqueue(e.ctx, e.pool, "q", []byte("new"), Group("g"))
	require.Error(t, err, "version 1 has no group column")

	require.NoError(t, e.ob.Migrate(e.ctx, e.pool))
	require.NoError(t, e.ob.Migrate(e.ctx, e.pool), "again: a no-op")
	require.Equal(t, 2, e.rows(), "the rows are kept")
	_, err = e.ob.Enqueue(e.ctx, e.pool, "q", []byte("new"), Group("g"))
	require.NoError(t, err)

	e.start(e.relay(nil, RelayOptions{}))
	require.Zero(t, e.rows())
	tasks, err := e.client.Tasks(e.ctx, "q", 0, -1)
	require.NoError(t, err)
	got := map[string]worqr.TaskInfo{}
	for _, task := range tasks {
		got[string(task.Payload)] = task
	}
	require.Len(t, got, 3)
	require.Equal(t, "k", got["old-1"].Kind)
	require.Equal(t, 4, got["old-2"].MaxAttempts)
	require.Empty(t, got["old-1"].Group)
	require.Equal(t, "g", got["new"].Group)
}

// The migrations are numbered from 1 by their files, and Migrate's script
// is all of them in that order, under one lock.
func TestMigrationsAreVersioned(t *testing.T) {
	ob, err := New(Config{Schema: "s", Table: "t"})
	require.NoError(t, err)
	ms, err := ob.Migrations()
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(ms), 2)
	script, err := ob.MigrationSQL()
	require.NoError(t, err)
	require.Equal(t, 1, strings.Count(script, "pg_advisory_xact_lock"), "one lock for the whole script")
	at := 0
	for i, m := range ms {
		require.Equal(t, i+1, m.Version)
		require.True(t, strings.HasPrefix(m.SQL, "SELECT pg_advisory_xact_lock("), "each migration takes the lock: %s", m.Name)
		k := strings.Index(script, "-- "+m.Name+"\n")
		require.Greater(t, k, at, "%s in order", m.Name)
		at = k
	}
	require.Contains(t, ms[1].SQL, `ALTER TABLE "s"."t" ADD COLUMN IF NOT EXISTS group_key`)
}
