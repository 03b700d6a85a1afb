package worqroutbox

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/worqr/worqr"
)

// A handler that commits its work with FinishTx and then fails (as when
// its worker dies before worqr records the finish) is not run again: the
// next attempt finds the record and finishes the task. A handler whose
// transaction rolled back left no record, and runs again.
func TestFinishTxCommitsWithTheWork(t *testing.T) {
	e := newEnv(t, "")
	work := pgx.Identifier{e.schema, "work"}.Sanitize()
	_, err := e.pool.Exec(e.ctx, "CREATE TABLE "+work+" (task_id text)")
	require.NoError(t, err)

	w, err := e.client.NewWorker(e.ctx, worqr.WorkerOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = w.Close(context.Background()) })
	var runs atomic.Int32
	lost := errors.New("the worker died after the commit")
	handler := func(ctx context.Context, p *worqr.Process) error {
		n := runs.Add(1)
		err := pgx.BeginFunc(ctx, e.pool, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, "INSERT INTO "+work+" VALUES ($1)", p.TaskID()); err != nil {
				return err
			}
			if err := e.ob.FinishTx(ctx, tx, p); err != nil {
				return err
			}
			if string(p.Task()) == "rollback" && n == 1 {
				return errors.New("the transaction rolls back")
			}
			return nil
		})
		if err != nil {
			return err
		}
		return lost // the finish never reaches worqr: the task is retried
	}
	require.NoError(t, w.Handle(e.ctx, "q", handler, worqr.HandleOptions{
		Middleware: []worqr.Middleware{e.ob.SkipFinished(e.pool)},
		Retry:      worqr.RetryPolicy{MaxAttempts: 5, Backoff: func(int, error) time.Duration { return 0 }},
	}))

	for _, tc := range []struct {
		payload string
		runs    int32
	}{{"commit", 1}, {"rollback", 2}} {
		runs.Store(0)
		id, err := e.client.Enqueue(e.ctx, "q", []byte(tc.payload), worqr.Retain(time.Hour))
		require.NoError(t, err)
		out, err := e.client.Wait(e.ctx, "q", id)
		require.NoError(t, err)
		require.Equal(t, worqr.OutcomeSucceeded, out.Status, tc.payload)
		require.Equal(t, tc.runs, runs.Load(), "%s: handler runs", tc.payload)
		var n int
		require.NoError(t, e.pool.QueryRow(e.ctx, "SELECT count(*) FROM "+work+" WHERE task_id = $1", id).Scan(&n))
		require.Equal(t, 1, n, "%s: the work is done once", tc.payload)
	}
}

// Finished and PruneFinished read and delete the records by age;
// recording a finish twice is no error.
func TestFinishedRecordsArePruned(t *testing.T) {
	e := newEnv(t, "")
	p := worqr.NewDetachedProcess(nil, worqr.DetachedOptions{Queue: "q", TaskID: "t1"})
	old := worqr.NewDetachedProcess(nil, worqr.DetachedOptions{Queue: "q", TaskID: "t0"})
	for range 2 {
		e.inTx(false, func(tx pgx.Tx) {
			require.NoError(t, e.ob.FinishTx(e.ctx, tx, p))
			require.NoError(t, e.ob.FinishTx(e.ctx, tx, old))
		})
	}
	_, err := e.pool.Exec(e.ctx, "UPDATE "+e.ob.qFinished+" SET finished_at = now() - interval '2 days' WHERE task_id = 't0'")
	require.NoError(t, err)
	other := worqr.NewDetachedProcess(nil, worqr.DetachedOptions{Queue: "other", TaskID: "t1"})
	for _, c := range []struct {
		p    *worqr.Process
		want bool
	}{{p, true}, {old, true}, {other, false}} {
		got, err := e.ob.Finished(e.ctx, e.pool, c.p)
		require.NoError(t, err)
		require.Equal(t, c.want, got, "%s/%s", c.p.Queue(), c.p.TaskID())
	}
	n, err := e.ob.PruneFinished(e.ctx, e.pool, 24*time.Hour)
	require.NoError(t, err)
	require.EqualValues(t, 1, n)
	got, err := e.ob.Finished(e.ctx, e.pool, old)
	require.NoError(t, err)
	require.False(t, got, "pruned")
	got, err = e.ob.Finished(e.ctx, e.pool, p)
	require.NoError(t, err)
	require.True(t, got, "kept")
}

// A table name that would make the finished table's index name run past
// Postgres's 63 bytes is refused, as the other names over the limit.
func TestNewRefusesATableNameThatWouldBeCut(t *testing.T) {
	long := "t23456789012345678901234567890123456789012345678901"
	require.Len(t, long, 51)
	_, err := New(Config{Table: long})
	require.NoError(t, err)
	_, err = New(Config{Table: long + "x"})
	require.ErrorIs(t, err, ErrInvalidConfig)
}

// A relay prunes the records older than KeepFinished at its sweep.
func TestRelaySweepPrunesFinishedRecords(t *testing.T) {
	e := newEnv(t, "")
	p := worqr.NewDetachedProcess(nil, worqr.DetachedOptions{Queue: "q", TaskID: "t0"})
	e.inTx(false, func(tx pgx.Tx) { require.NoError(t, e.ob.FinishTx(e.ctx, tx, p)) })
	_, err := e.pool.Exec(e.ctx, "UPDATE "+e.ob.qFinished+" SET finished_at = now() - interval '2 days'")
	require.NoError(t, err)
	r := e.relay(nil, RelayOptions{Sweep: 50 * time.Millisecond, KeepFinished: 24 * time.Hour})
	e.start(r)
	r.idle.WaitOrTimeout() // a sweep's prune comes before its move, and the move's end signals
	got, err := e.ob.Finished(e.ctx, e.pool, p)
	require.NoError(t, err)
	require.False(t, got)
}
