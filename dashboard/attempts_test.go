package dashboard

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/worqr/worqr"
)

// A task's page lists its failed attempts, oldest first, with how each
// ended, its worker and its error (escaped); a task that never failed has
// no such table.
func TestTaskAttemptHistory(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Options{})
	ctx := e.ctx()
	w, err := e.c.NewWorker(ctx, worqr.WorkerOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = w.Close(e.ctx()) })
	require.NoError(t, w.StartWork(ctx, "q", worqr.Events{}))
	id, err := e.c.Enqueue(ctx, "q", []byte("flaky"), worqr.MaxAttempts(3))
	require.NoError(t, err)
	for i, fail := range []string{"first <b>failure</b>", "second failure"} {
		p, err := w.Dequeue(ctx, "q")
		require.NoError(t, err)
		require.Equal(t, id, p.TaskID(), "attempt %d", i+1)
		require.NoError(t, p.Retry(ctx, 0, errors.New(fail)))
	}
	p, err := w.Dequeue(ctx, "q")
	require.NoError(t, err)
	require.NoError(t, p.DeadLetter(ctx, errors.New("gave up")))
	plain, err := e.c.Enqueue(ctx, "q", []byte("plain"))
	require.NoError(t, err)

	code, body := e.get("/task/q/" + id)
	require.Equal(t, http.StatusOK, code)
	table := sectionOf(body, `id="attempts"`)
	require.NotEmpty(t, table)
	assert.Equal(t, 3, strings.Count(table, "<tr><td>"), "three attempts")
	first, second, last := strings.Index(table, "first &lt;b&gt;failure&lt;/b&gt;"), strings.Index(table, "second failure"), strings.Index(table, "gave up")
	assert.True(t, 0 < first && first < second && second < last, "oldest first: %d %d %d", first, second, last)
	assert.Equal(t, 2, strings.Count(table, "<td>retried</td>"))
	assert.Equal(t, 1, strings.Count(table, "<td>dead</td>"))
	assert.Contains(t, table, w.ID())

	_, body = e.get("/task/q/" + plain)
	assert.NotContains(t, body, `id="attempts"`)
}
