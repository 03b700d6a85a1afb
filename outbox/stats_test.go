package worqroutbox

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/worqr/worqr"
)

// Stats counts the rows waiting and those refused, and ages the oldest
// waiting one by Postgres's clock; a refused row is not the oldest, and
// an empty table reads as zeros.
func TestStatsCountTheBacklogAgeAndFailedRows(t *testing.T) {
	e := newEnv(t, "")
	s, err := e.ob.Stats(e.ctx, e.pool)
	require.NoError(t, err)
	require.Equal(t, Stats{}, s, "an empty outbox")

	var ids []string
	e.inTx(false, func(tx pgx.Tx) {
		for _, p := range []string{"far too large", "a", "b"} {
			id, err := e.ob.Enqueue(e.ctx, tx, "q", []byte(p))
			require.NoError(t, err)
			ids = append(ids, id)
		}
	})
	// The first row was made two hours ago and the second one hour ago:
	// the ages are then far from any clock's noise.
	for i, ago := range []string{"2 hours", "1 hour"} {
		_, err := e.pool.Exec(e.ctx, "UPDATE "+e.ob.Table()+" SET created_at = now() - $2::interval WHERE id = $1::uuid", ids[i], ago)
		require.NoError(t, err)
	}
	s, err = e.ob.Stats(e.ctx, e.pool)
	require.NoError(t, err)
	require.EqualValues(t, 3, s.Backlog)
	require.Zero(t, s.Failed)
	require.GreaterOrEqual(t, s.Age, 2*time.Hour)
	require.Less(t, s.Age, 2*time.Hour+time.Minute)
	require.WithinDuration(t, time.Now().Add(-2*time.Hour), s.Oldest, time.Minute)

	// A relay whose client refuses the first row marks it failed and moves
	// the others: the backlog is empty, and the failed row counts apart.
	small, err := worqr.New(worqr.Options{Redis: e.rdb, Prefix: e.prefix, MaxTaskSize: 4, Logger: discard()})
	require.NoError(t, err)
	t.Cleanup(func() { _ = small.Close(context.Background()) })
	r := e.relay(small, RelayOptions{})
	e.start(r)
	s, err = e.ob.Stats(e.ctx, e.pool)
	require.NoError(t, err)
	require.Equal(t, Stats{Failed: 1}, s)

	// A row waiting behind the failed one is the oldest (the relay is
	// stopped first, or it would move the row).
	r.Stop()
	_, err = e.pool.Exec(e.ctx, "INSERT INTO "+e.ob.Table()+" (id, queue, payload, created_at) VALUES ('00000000-0000-7000-8000-000000000001', 'q', 'x', now() - interval '30 minutes')")
	require.NoError(t, err)
	s, err = e.ob.Stats(e.ctx, e.pool)
	require.NoError(t, err)
	require.EqualValues(t, 1, s.Backlog)
	require.EqualValues(t, 1, s.Failed)
	require.GreaterOrEqual(t, s.Age, 30*time.Minute)
	require.Less(t, s.Age, time.Hour)
}

// Stats wraps the database's error and says which outbox it read.
func TestStatsOfAMissingTable(t *testing.T) {
	e := newEnv(t, "")
	ob, err := New(Config{Schema: e.schema, Table: "never_migrated"})
	require.NoError(t, err)
	_, err = ob.Stats(e.ctx, e.pool)
	require.ErrorContains(t, err, "never_migrated")
}
