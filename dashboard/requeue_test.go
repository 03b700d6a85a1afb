package dashboard

import (
	"errors"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/worqr/worqr"
)

// The requeue action takes a retained task's outcome away with its dead
// letter: the task page shows it waiting, with no outcome, and the API
// has none either.
func TestRequeueActionDropsTheOutcome(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Options{})
	ctx := e.ctx()
	id, err := e.c.Enqueue(ctx, "jobs", []byte("x"), worqr.Retain(time.Hour))
	require.NoError(t, err)
	w, err := e.c.NewWorker(ctx, worqr.WorkerOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = w.Close(e.ctx()) })
	require.NoError(t, w.StartWork(ctx, "jobs", worqr.Events{}))
	p, err := w.Dequeue(ctx, "jobs")
	require.NoError(t, err)
	require.NoError(t, p.DeadLetter(ctx, errors.New("broken")))
	_, body := e.get("/task?q=" + qx("jobs") + "&id=" + id)
	require.Contains(t, body, "<dt>Outcome</dt><dd>dead")

	code, _ := e.post("/action", url.Values{"csrf": {e.csrf()}, "op": {"requeue"}, "q": {qx("jobs")}, "id": {id}, "confirmed": {"yes"}})
	require.Equal(t, http.StatusSeeOther, code)
	_, err = e.c.TaskResult(ctx, "jobs", id)
	assert.ErrorIs(t, err, worqr.ErrNoTask)
	code, body = e.get("/task?q=" + qx("jobs") + "&id=" + id)
	require.Equal(t, http.StatusOK, code)
	assert.NotContains(t, body, "<dt>Outcome</dt>")
}
