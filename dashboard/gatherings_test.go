package dashboard

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/worqr/worqr"
)

// The queue's page lists its open gatherings, the next to flush first,
// with their tasks and bytes but no payload; a queue without gatherings
// has no such section.
func TestGatheringsSection(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Options{})
	ctx := e.ctx()
	code, body := e.get("/queue/q")
	require.Equal(t, http.StatusOK, code)
	assert.NotContains(t, body, `id="gatherings"`)

	require.NoError(t, e.c.SetAggregation(ctx, "q", worqr.AggregateSettings{MaxSize: 10, MaxDelay: time.Hour}, worqr.CreateQueue()))
	for _, key := range []string{"customer:<first>", "customer:second", "customer:<first>"} {
		_, err := e.c.Enqueue(ctx, "q", []byte("secret-payload"), worqr.Aggregate(key))
		require.NoError(t, err)
	}
	code, body = e.get("/queue/q")
	require.Equal(t, http.StatusOK, code)
	assert.Contains(t, body, "2 open, 3 tasks")
	table := sectionOf(body, `id="gatherings"`)
	require.NotEmpty(t, table)
	assert.NotContains(t, table, "secret-payload", "no payload read")
	assert.NotContains(t, table, "customer:<first>", "keys escaped")
	first, second := strings.Index(table, "customer:&lt;first&gt;"), strings.Index(table, "customer:second")
	require.Positive(t, first)
	assert.Less(t, first, second, "the next to flush first")
	assert.Contains(t, table, `<td class="n">2</td>`)
}
