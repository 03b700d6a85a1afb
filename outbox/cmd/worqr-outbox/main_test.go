package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	worqroutbox "github.com/worqr/worqr/outbox"
	"github.com/worqr/worqr/outbox/internal/outboxtest"
)

func TestStatsAndFailed(t *testing.T) {
	ob, pool := outboxtest.New(t, "worqr_outbox_cli_")
	ctx := context.Background()
	dsn, schema := os.Getenv("WORQR_TEST_POSTGRES"), strings.TrimSuffix(ob.Name(), "."+worqroutbox.DefaultTable)
	_, err := ob.Enqueue(ctx, pool, "q", []byte("x"))
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
