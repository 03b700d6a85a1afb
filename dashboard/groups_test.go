package dashboard

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/worqr/worqr"
)

// Tasks waiting in groups are listed on their queue's page, after the
// tasks without a group, with their group; a grouped task's page finds it
// waiting and names its group.
func TestGroupedTasksShown(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Options{})
	id, err := e.c.Enqueue(e.ctx(), "q", []byte("grouped-payload"), worqr.Group("tenant-7"))
	require.NoError(t, err)
	plain, err := e.c.Enqueue(e.ctx(), "q", []byte("plain-payload"))
	require.NoError(t, err)

	code, body := e.get("/queue/q")
	require.Equal(t, http.StatusOK, code)
	waiting := sectionOf(body, `id="waiting"`)
	assert.Contains(t, waiting, "grouped-payload")
	assert.Contains(t, waiting, "group tenant-7")
	require.Contains(t, waiting, plain)
	assert.Less(t, strings.Index(waiting, plain), strings.Index(waiting, id), "the task without a group first")

	code, body = e.get("/task/q/" + id)
	require.Equal(t, http.StatusOK, code)
	assert.Contains(t, body, "<dt>Waiting</dt>")
	assert.Contains(t, body, "tenant-7")
}

// The queue's page lists its groups with the most tasks waiting, and
// those held back at their limit apart; a queue without groups has no
// such section.
func TestGroupsSection(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Options{})
	ctx := e.ctx()
	require.NoError(t, e.c.SetGroupConcurrency(ctx, "q", "", 1, worqr.CreateQueue()))
	_, err := e.c.EnqueueBatch(ctx, "q", [][]byte{[]byte("h1"), []byte("h2")}, worqr.Group("tenant-held"))
	require.NoError(t, err)
	w, err := e.c.NewWorker(ctx, worqr.WorkerOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = w.Close(e.ctx()) })
	require.NoError(t, w.StartWork(ctx, "q", worqr.Events{}))
	ps, err := w.DequeueN(ctx, "q", 1)
	require.NoError(t, err)
	require.Len(t, ps, 1)
	_, err = e.c.EnqueueBatch(ctx, "q", [][]byte{[]byte("b1"), []byte("b2"), []byte("b3")}, worqr.Group("tenant-<big>"))
	require.NoError(t, err)

	code, body := e.get("/queue/q")
	require.Equal(t, http.StatusOK, code)
	assert.Contains(t, body, "2 with tasks waiting or in flight, 1 ready, 1 running · default limit 1")
	top := sectionOf(body, `id="groups"`)
	big, held := strings.Index(top, "tenant-&lt;big&gt;"), strings.Index(top, "tenant-held")
	assert.True(t, big > 0 && held > big, "most waiting first: %d %d", big, held)
	assert.Contains(t, top, `<td class="n">3</td><td class="n">0</td><td class="n">1</td><td>ready</td>`)
	heldRows := sectionOf(body, `id="groups-held"`)
	assert.Contains(t, heldRows, "tenant-held")
	assert.NotContains(t, heldRows, "big")
	assert.Contains(t, heldRows, "held back")

	_, err = e.c.Enqueue(ctx, "plain", []byte("x"))
	require.NoError(t, err)
	_, body = e.get("/queue/plain")
	assert.NotContains(t, body, `id="groups"`)
}
