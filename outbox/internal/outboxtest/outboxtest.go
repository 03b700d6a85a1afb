// Package outboxtest gives a test an outbox migrated in a Postgres schema
// of its own, for the outbox module's packages outside worqroutbox.
package outboxtest

import (
	"context"
	"os"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	worqroutbox "github.com/worqr/worqr/outbox"
)

// New migrates an outbox in a schema of its own (named from prefix),
// dropped at the test's end, on the Postgres WORQR_TEST_POSTGRES names,
// or skips the test.
func New(t *testing.T, prefix string) (*worqroutbox.Outbox, *pgxpool.Pool) {
	t.Helper()
	dsn := os.Getenv("WORQR_TEST_POSTGRES")
	if dsn == "" {
		t.Skip("WORQR_TEST_POSTGRES is not set: this test needs a Postgres (.ci/postgres start prints a DSN for it)")
	}
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, dsn)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	schema := prefix + uuid.NewString()[:8]
	t.Cleanup(func() {
		_, err := pool.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
		require.NoError(t, err)
	})
	ob, err := worqroutbox.New(worqroutbox.Config{Schema: schema})
	require.NoError(t, err)
	require.NoError(t, ob.Migrate(ctx, pool))
	return ob, pool
}
