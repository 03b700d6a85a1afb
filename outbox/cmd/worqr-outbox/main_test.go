package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	worqroutbox "github.com/worqr/worqr/outbox"
)

func TestStatsAndFailed(t *testing.T) {
	dsn := os.Getenv("WORQR_TEST_POSTGRES")
	if dsn == "" {
		t.Skip("WORQR_TEST_POSTGRES is not set: this test needs a Postgres (.ci/postgres start prints a DSN for it)")
	}
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, dsn)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	schema := "worqr_outbox_cli_" + uuid.NewString()[:8]
	t.Cleanup(func() {
		_, err := pool.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
		require.NoError(t, err)
	})
	ob, err := worqroutbox.New(worqroutbox.Config{Schema: schema})
	require.NoError(t, err)
	require.NoError(t, ob.Migrate(ctx, pool))
	_, err = ob.Enqueue(ctx, pool, "q", []byte("x"))
	require.NoError(t, err)

	cli := func(args ...string) (string, error) {
		var out bytes.Buffer
		err := run(ctx, append([]string{"-postgres", dsn, "-schema", schema}, args...), &out)
		return out.String(), err
	}
	out, err := cli("failed")
	require.NoError(t, err)
	require.Equal(t, "no failed rows\n", out)

	id := uuid.Must(uuid.NewV7()).String()
	_, err = pool.Exec(ctx, "INSERT INTO "+ob.Table()+" (id, queue, payload, error, failed_at) VALUES ($1, 'big', 'y', 'task too large', now())", id)
	require.NoError(t, err)
	out, err = cli("stats")
	require.NoError(t, err)
	require.Contains(t, out, "backlog  1\n")
	require.Contains(t, out, "failed   1\n")
	out, err = cli("failed", "-n", "5")
	require.NoError(t, err)
	require.Contains(t, out, id)
	require.Contains(t, out, `big  "task too large"`)

	for _, bad := range [][]string{{}, {"nope"}, {"stats", "extra"}, {"failed", "-n", "0"}} {
		_, err := cli(bad...)
		require.True(t, errors.Is(err, errUsage), "%q: %v", bad, err)
	}
}
