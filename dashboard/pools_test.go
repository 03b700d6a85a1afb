package dashboard

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/worqr/worqr"
)

// The workers page shows the handler pools of the workers of the
// dashboard's own client, busy and their concurrency; another process's
// worker, whose pools' use Redis does not know, shows "—" there, but the
// slots it recorded per queue show for both.
func TestWorkersPagePools(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Options{})
	ctx := e.ctx()
	own, err := e.c.NewWorker(ctx, worqr.WorkerOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = own.Close(e.ctx()) })
	require.NoError(t, own.Handle(ctx, "jobs", func(context.Context, *worqr.Process) error { return nil }, worqr.HandleOptions{Concurrency: 4}))

	rdb, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{e.m.Addr()}, DisableCache: true, AlwaysRESP2: true, ForceSingleClient: true})
	require.NoError(t, err)
	t.Cleanup(rdb.Close)
	other, err := worqr.New(worqr.Options{Redis: rdb, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	require.NoError(t, err)
	t.Cleanup(func() { _ = other.Close(context.Background()) })
	elsewhere, err := other.NewWorker(ctx, worqr.WorkerOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = elsewhere.Close(e.ctx()) })
	require.NoError(t, elsewhere.Handle(ctx, "jobs", func(context.Context, *worqr.Process) error { return nil }, worqr.HandleOptions{Concurrency: 7}))

	_, body := e.get("/workers")
	rowOf := func(id string) string {
		i := strings.Index(body, `title="`+id+`"`)
		require.GreaterOrEqual(t, i, 0, "worker %s listed", id)
		row := body[i:]
		return row[:strings.Index(row, "</tr>")]
	}
	assert.Contains(t, rowOf(own.ID()), `<td class="qname">jobs <small>0/4</small></td>`)
	assert.Contains(t, rowOf(elsewhere.ID()), `<td class="qname">—</td>`+"\n"+`<td class="running">`)
	assert.NotContains(t, body, "0/7")
	assert.Contains(t, rowOf(own.ID()), `jobs</a> <small>0/∞ · 4 slots</small>`)
	assert.Contains(t, rowOf(elsewhere.ID()), `jobs</a> <small>0/∞ · 7 slots</small>`, "another process's worker's slots, from Redis")
}
