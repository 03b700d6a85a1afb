package dashboard

import (
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/worqr/worqr"
)

// Delayed tasks that are retries are told apart from those scheduled,
// and each list pages on its own; "run now" moves one to its queue, behind
// a confirmation and CSRF like every action.
func TestRetriesAndRunNow(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Options{})
	ctx := e.ctx()
	scheduled := make([][]byte, pageSize+10)
	for i := range scheduled {
		scheduled[i] = []byte("later")
	}
	_, err := e.c.EnqueueBatch(ctx, "q", scheduled, worqr.In(time.Hour))
	require.NoError(t, err)
	w, err := e.c.NewWorker(ctx, worqr.WorkerOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = w.Close(e.ctx()) })
	require.NoError(t, w.StartWork(ctx, "q", worqr.Events{}))
	var retries []string
	for range 2 {
		id, err := e.c.Enqueue(ctx, "q", []byte("flaky"))
		require.NoError(t, err)
		p, err := w.Dequeue(ctx, "q")
		require.NoError(t, err)
		require.Equal(t, id, p.TaskID())
		require.NoError(t, p.Retry(ctx, 2*time.Hour, errors.New("flaky")))
		retries = append(retries, id)
	}

	_, body := e.get("/queue/q?only=retries")
	rows := sectionOf(body, `id="delayed"`)
	assert.Equal(t, 2, strings.Count(rows, `<span class="tag retry">retry</span>`))
	assert.NotContains(t, rows, ">scheduled<")
	assert.Contains(t, rows, retries[0])
	assert.NotContains(t, body, `id="delayed-pager"><a`, "no further page")
	assert.Contains(t, body, `<b>retries</b>`)

	_, body = e.get("/queue/q?only=scheduled")
	rows = sectionOf(body, `id="delayed"`)
	assert.Equal(t, pageSize, strings.Count(rows, `<span class="tag">scheduled</span>`))
	assert.NotContains(t, rows, "retry")
	assert.Contains(t, body, `href="/ops/queue/q?lo=50&amp;only=scheduled"`)
	_, body = e.get("/queue/q?only=scheduled&lo=50")
	assert.Equal(t, 10, strings.Count(sectionOf(body, `id="delayed"`), `<span class="tag">scheduled</span>`))
	assert.Contains(t, body, `href="/ops/queue/q?only=scheduled">← from the first</a>`)

	_, body = e.get("/task/q/" + retries[0])
	assert.Contains(t, body, "<dt>Retrying</dt>")
	assert.Contains(t, body, `value="runnow"`)

	// Run one now.
	tok := e.csrf()
	form := func(tok, id string) url.Values {
		return url.Values{"csrf": {tok}, "op": {"runnow"}, "q": {qx("q")}, "id": {id}, "back": {"task"}, "confirmed": {"yes"}}
	}
	unconfirmed := form(tok, retries[0])
	unconfirmed.Set("confirmed", "")
	code, _ := e.post("/action", unconfirmed)
	assert.Equal(t, http.StatusOK, code, "asks first")
	cookie := csrfCookie + "=" + e.jarCookie(csrfCookie)
	assert.Equal(t, http.StatusForbidden, e.raw("/action", form("", retries[0]), "Cookie", cookie).code)
	assert.Equal(t, http.StatusForbidden, e.raw("/action", form(tok, retries[0]), "Cookie", cookie, "Origin", "https://evil.example").code)
	assert.Equal(t, http.StatusBadRequest, e.raw("/action", form(tok, strings.Repeat("1", 65)), "Cookie", cookie).code)
	n, err := e.c.QueueLen(ctx, "q")
	require.NoError(t, err)
	require.Zero(t, n, "nothing ran yet")

	code, loc := e.post("/action", form(tok, retries[0]))
	require.Equal(t, http.StatusSeeOther, code)
	assert.Equal(t, "/ops/task/q/"+retries[0]+"?done=ranNow", loc)
	n, err = e.c.QueueLen(ctx, "q")
	require.NoError(t, err)
	assert.EqualValues(t, 1, n)
	_, body = e.get(strings.TrimPrefix(loc, "/ops"))
	assert.Contains(t, body, "<dt>Waiting</dt>")
	_, loc = e.post("/action", form(tok, retries[0]))
	assert.Contains(t, loc, "done=nothing", "waiting already")
}

// The queue page lists the kept outcomes: succeeded with their result,
// dead with their reason and error, escaped and cut; tasks not retained
// are not listed.
func TestFinishedListed(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Options{})
	ctx := e.ctx()
	w, err := e.c.NewWorker(ctx, worqr.WorkerOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = w.Close(e.ctx()) })
	require.NoError(t, w.StartWork(ctx, "q", worqr.Events{}))
	ok, err := e.c.Enqueue(ctx, "q", []byte("a"), worqr.Retain(time.Hour))
	require.NoError(t, err)
	bad, err := e.c.Enqueue(ctx, "q", []byte("b"), worqr.Retain(2*time.Hour))
	require.NoError(t, err)
	plain, err := e.c.Enqueue(ctx, "q", []byte("c"))
	require.NoError(t, err)
	for range 3 {
		p, err := w.Dequeue(ctx, "q")
		require.NoError(t, err)
		if p.TaskID() == bad {
			require.NoError(t, p.DeadLetter(ctx, errors.New("<script>alert(1)</script>")))
			continue
		}
		p.SetResult([]byte(`<img src=x onerror=alert(2)>` + strings.Repeat("r", 200)))
		require.NoError(t, p.Finish(ctx))
	}
	_, body := e.get("/queue/q")
	rows := sectionOf(body, `id="finished"`)
	assert.Contains(t, rows, ok)
	assert.Contains(t, rows, bad)
	assert.NotContains(t, rows, plain)
	assert.Less(t, strings.Index(rows, bad), strings.Index(rows, ok), "latest to expire first")
	kept, err := e.c.Outcomes(ctx, "q", 0, 10)
	require.NoError(t, err)
	require.Len(t, kept, 2)
	assert.Contains(t, rows, "<td>"+when(kept[0].ExpiresAt)+"</td>", "kept until")
	assert.Greater(t, kept[0].ExpiresAt.Sub(kept[0].EndedAt), 110*time.Minute)
	assert.Contains(t, rows, "&lt;script&gt;alert(1)&lt;/script&gt;")
	assert.Contains(t, rows, "&lt;img src=x onerror=alert(2)&gt;rrr")
	assert.NotContains(t, rows, strings.Repeat("r", 100), "cut")
	assert.NotContains(t, body, "<script>alert")
	assert.NotContains(t, body, "<img src=x")
}
