package dashboard

import (
	"encoding/hex"
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

func qx(name string) string { return hex.EncodeToString([]byte(name)) }

// fill makes a queue with waiting, delayed, in-flight and dead tasks, and
// returns the dead task's id and the in-flight one's.
func fill(t *testing.T, e *env, queue string) (dead, inFlight string) {
	ctx := e.ctx()
	_, err := e.c.EnqueueBatch(ctx, queue, [][]byte{[]byte("to-die"), []byte("to-run"), []byte("waits-1"), []byte("waits-2")})
	require.NoError(t, err)
	_, err = e.c.Enqueue(ctx, queue, []byte("later"), worqr.In(time.Hour))
	require.NoError(t, err)
	w, err := e.c.NewWorker(ctx, worqr.WorkerOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = w.Close(e.ctx()) })
	require.NoError(t, w.StartWork(ctx, queue, worqr.Events{}))
	p, err := w.Dequeue(ctx, queue)
	require.NoError(t, err)
	require.NoError(t, p.DeadLetter(ctx, errors.New("boom: <b>bad</b>")))
	p2, err := w.Dequeue(ctx, queue)
	require.NoError(t, err)
	require.NoError(t, p2.ReportProgress(ctx, 35, "chunk <7>"))
	return p.TaskID(), p2.TaskID()
}

func TestPagesRender(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Options{})
	dead, inFlight := fill(t, e, "emails")

	code, body := e.get("/")
	require.Equal(t, http.StatusOK, code, body)
	assert.Contains(t, body, `href="/ops/queue/emails"`, "links carry the mount prefix, and the name as it is")
	assert.Contains(t, body, `src="/ops/static/app.js"`)
	assert.Regexp(t, `data-f="waiting">2<`, body)
	assert.Regexp(t, `data-f="delayed">1<`, body)
	assert.Regexp(t, `data-f="inFlight">1<`, body)
	assert.Regexp(t, `data-f="dead">1<`, body)

	code, body = e.get("/queue?q=" + qx("emails"))
	require.Equal(t, http.StatusOK, code, body)
	for _, s := range []string{"waits-1", "waits-2", "later", "to-run", "to-die", "boom: &lt;b&gt;bad&lt;/b&gt;", worqr.ReasonManual, inFlight, dead, `value="pause"`, `name="n"`} {
		assert.Contains(t, body, s)
	}

	code, body = e.get("/task?q=" + qx("emails") + "&id=" + dead)
	require.Equal(t, http.StatusOK, code, body)
	assert.Contains(t, body, "<dt>Dead</dt>")
	assert.Contains(t, body, "boom: &lt;b&gt;bad&lt;/b&gt;")
	assert.Contains(t, body, "to-die")
	assert.Contains(t, body, `value="requeue"`)

	code, body = e.get("/task?q=" + qx("emails") + "&id=" + inFlight)
	require.Equal(t, http.StatusOK, code)
	assert.Contains(t, body, "<dt>In flight</dt>")
	assert.Contains(t, body, "35%: chunk &lt;7&gt;", "the progress report, escaped")

	code, _ = e.get("/task?q=" + qx("emails") + "&id=ffff")
	assert.Equal(t, http.StatusNotFound, code)

	// A task's own budget, or its having no limit.
	capped, err := e.c.Enqueue(e.ctx(), "budgets", []byte("capped"), worqr.MaxAttempts(3))
	require.NoError(t, err)
	unlimited, err := e.c.Enqueue(e.ctx(), "budgets", []byte("unlimited"), worqr.MaxAttempts(-1))
	require.NoError(t, err)
	_, body = e.get("/task?q=" + qx("budgets") + "&id=" + capped)
	assert.Contains(t, body, "0 attempts so far of 3</dd>")
	_, body = e.get("/task?q=" + qx("budgets") + "&id=" + unlimited)
	assert.Contains(t, body, "0 attempts so far, no attempt limit</dd>")

	code, body = e.get("/workers")
	require.Equal(t, http.StatusOK, code)
	assert.Contains(t, body, `<td class="n">1</td>`, "one task in flight")

	code, body = e.get("/static/app.js")
	require.Equal(t, http.StatusOK, code)
	assert.Contains(t, body, "EventSource")

	code, _ = e.get("/nope")
	assert.Equal(t, http.StatusNotFound, code)
	code, _ = e.get("/queue?q=zz")
	assert.Equal(t, http.StatusBadRequest, code)
}

func TestEscaping(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Options{})
	nasty := "<script>alert(1)</script>\"'&\xff\x00q"
	payload := []byte(`<img src=x onerror=alert(2)>"'`)
	ctx := e.ctx()
	id, err := e.c.Enqueue(ctx, nasty, payload)
	require.NoError(t, err)
	_, err = e.c.Enqueue(ctx, nasty, []byte("\xff\xfe<script>binary"))
	require.NoError(t, err)

	for _, path := range []string{"/", "/queue?q=" + qx(nasty), "/task?q=" + qx(nasty) + "&id=" + id} {
		code, body := e.get(path)
		require.Equal(t, http.StatusOK, code, path)
		assert.NotContains(t, body, "<script>alert", path)
		assert.NotContains(t, body, "<img src=x", path)
		assert.NotContains(t, body, "<script>binary", path)
		assert.NotContains(t, body, "\x00", path)
		assert.Contains(t, body, `&lt;script&gt;alert(1)&lt;/script&gt;`, path)
	}
	_, body := e.get("/task?q=" + qx(nasty) + "&id=" + id)
	assert.Contains(t, body, "&lt;img src=x onerror=alert(2)&gt;&#34;&#39;")
}

func TestActions(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Options{})
	dead, _ := fill(t, e, "jobs")
	ctx := e.ctx()
	tok := e.csrf()
	require.NotEmpty(t, tok)
	act := func(op string, extra ...string) (int, string) {
		f := url.Values{"csrf": {tok}, "op": {op}, "q": {qx("jobs")}, "confirmed": {"yes"}, "back": {"queue"}}
		for i := 0; i+1 < len(extra); i += 2 {
			f.Set(extra[i], extra[i+1])
		}
		return e.post("/action", f)
	}
	info := func() worqr.QueueInfo {
		qi, err := e.c.QueueInfo(ctx, "jobs")
		require.NoError(t, err)
		return qi
	}

	// Without confirmed=yes, the server asks and changes nothing.
	code, _ := act("pause", "confirmed", "")
	assert.Equal(t, http.StatusOK, code)
	assert.False(t, info().Paused)

	code, loc := act("pause")
	require.Equal(t, http.StatusSeeOther, code)
	assert.Equal(t, "/ops/queue/jobs?done=paused", loc)
	assert.True(t, info().Paused)
	_, body := e.get(strings.TrimPrefix(loc, "/ops"))
	assert.Contains(t, body, "Queue paused.")

	act("resume")
	assert.False(t, info().Paused)
	act("limit", "n", "3")
	assert.Equal(t, 3, info().Concurrency)
	code, _ = act("limit", "n", "-1")
	assert.Equal(t, http.StatusBadRequest, code)

	tasks, err := e.c.Tasks(ctx, "jobs", 0, 0)
	require.NoError(t, err)
	act("cancel", "id", tasks[0].ID)
	assert.EqualValues(t, 1, info().Waiting)

	act("requeue", "id", dead)
	assert.EqualValues(t, 0, info().Dead)
	assert.EqualValues(t, 2, info().Waiting)

	_, loc = act("deletedead", "id", dead)
	assert.Contains(t, loc, "done=nothing", "gone already")

	code, loc = act("deletequeue")
	require.Equal(t, http.StatusSeeOther, code)
	assert.Equal(t, "/ops/?done=deleted", loc)
	qs, err := e.c.Queues(ctx)
	require.NoError(t, err)
	assert.NotContains(t, qs, "jobs")
}

func TestPurgeAndDeleteDeadLetter(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Options{})
	dead, _ := fill(t, e, "a")
	fill(t, e, "b")
	ctx := e.ctx()
	tok := e.csrf()
	code, _ := e.post("/action", url.Values{"csrf": {tok}, "op": {"deletedead"}, "q": {qx("a")}, "id": {dead}, "confirmed": {"yes"}})
	require.Equal(t, http.StatusSeeOther, code)
	n, err := e.c.DeadLetterCount(ctx, "a")
	require.NoError(t, err)
	assert.Zero(t, n)
	code, _ = e.post("/action", url.Values{"csrf": {tok}, "op": {"purge"}, "q": {qx("b")}, "confirmed": {"yes"}})
	require.Equal(t, http.StatusSeeOther, code)
	n, err = e.c.DeadLetterCount(ctx, "b")
	require.NoError(t, err)
	assert.Zero(t, n)
}

func TestActionsRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Options{})
	_, err := e.c.Enqueue(e.ctx(), "q", []byte("x"))
	require.NoError(t, err)
	tok := e.csrf()
	form := func(csrf string) url.Values {
		return url.Values{"csrf": {csrf}, "op": {"pause"}, "q": {qx("q")}, "confirmed": {"yes"}}
	}
	code, _ := e.post("/action", form(""))
	assert.Equal(t, http.StatusForbidden, code, "no CSRF token")
	code, _ = e.post("/action", form(strings.Repeat("0", 64)))
	assert.Equal(t, http.StatusForbidden, code, "wrong CSRF token")

	// A form from another site carries the field but not the cookie.
	bare := &http.Client{CheckRedirect: e.http.CheckRedirect}
	res, err := bare.PostForm(e.url("/action"), form(tok))
	require.NoError(t, err)
	res.Body.Close()
	assert.Equal(t, http.StatusForbidden, res.StatusCode, "no CSRF cookie")

	qi, err := e.c.QueueInfo(e.ctx(), "q")
	require.NoError(t, err)
	assert.False(t, qi.Paused)

	ro := newEnv(t, Options{ReadOnly: true})
	_, err = ro.c.Enqueue(ro.ctx(), "q", []byte("x"))
	require.NoError(t, err)
	_, body := ro.get("/queue?q=" + qx("q"))
	assert.NotContains(t, body, `value="pause"`, "no forms when read-only")
	assert.Contains(t, body, "read-only")
	code, _ = ro.post("/action", url.Values{"csrf": {ro.csrf()}, "op": {"pause"}, "q": {qx("q")}, "confirmed": {"yes"}})
	assert.Equal(t, http.StatusForbidden, code)
	qi, err = ro.c.QueueInfo(ro.ctx(), "q")
	require.NoError(t, err)
	assert.False(t, qi.Paused)
}

func TestCookiesAreStrict(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Options{})
	res, err := e.http.Get(e.url("/"))
	require.NoError(t, err)
	res.Body.Close()
	cs := res.Cookies()
	require.Len(t, cs, 1)
	assert.Equal(t, csrfCookie, cs[0].Name)
	assert.Equal(t, http.SameSiteStrictMode, cs[0].SameSite)
	assert.True(t, cs[0].HttpOnly)
	assert.Equal(t, "/ops/", cs[0].Path)
	assert.Contains(t, res.Header.Get("Content-Security-Policy"), "script-src 'self'")
}

func TestToken(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Options{Token: testToken})
	code, body := e.get("/")
	assert.Equal(t, http.StatusUnauthorized, code)
	assert.Contains(t, body, `name="token"`, "the login form")
	assert.NotContains(t, body, `href="/ops/workers"`)
	code, _ = e.get("/events")
	assert.Equal(t, http.StatusUnauthorized, code)
	code, _ = e.get("/", "Authorization", "Bearer wrong")
	assert.Equal(t, http.StatusUnauthorized, code)
	code, _ = e.get("/", "Authorization", "Bearer "+testToken)
	assert.Equal(t, http.StatusOK, code)
	code, _ = e.post("/action", url.Values{"op": {"pause"}})
	assert.Equal(t, http.StatusUnauthorized, code)

	code, _ = e.post("/login", url.Values{"token": {"nope"}})
	assert.Equal(t, http.StatusUnauthorized, code)
	code, loc := e.post("/login", url.Values{"token": {testToken}})
	assert.Equal(t, http.StatusSeeOther, code)
	assert.Equal(t, "/ops/", loc)
	code, _ = e.get("/workers")
	assert.Equal(t, http.StatusOK, code, "the session cookie lets the browser in")

	b := newEnv(t, Options{BasicAuthUser: "ops", BasicAuthPassword: "pw"})
	code, _ = b.get("/")
	assert.Equal(t, http.StatusUnauthorized, code)
	req, err := http.NewRequest(http.MethodGet, b.url("/"), nil)
	require.NoError(t, err)
	req.SetBasicAuth("ops", "pw")
	res, err := b.http.Do(req)
	require.NoError(t, err)
	res.Body.Close()
	assert.Equal(t, http.StatusOK, res.StatusCode)
}

// A weighted task's slots show on the queue page, live in the counts
// event, and on its task page.
func TestWeightsShown(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Options{})
	ctx := e.ctx()
	require.NoError(t, e.c.SetConcurrency(ctx, "heavy", 10, worqr.CreateQueue()))
	_, err := e.c.Enqueue(ctx, "heavy", []byte("big"), worqr.Weight(3))
	require.NoError(t, err)
	w, err := e.c.NewWorker(ctx, worqr.WorkerOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = w.Close(e.ctx()) })
	require.NoError(t, w.StartWork(ctx, "heavy", worqr.Events{}))
	p, err := w.Dequeue(ctx, "heavy")
	require.NoError(t, err)

	code, body := e.get("/queue?q=" + qx("heavy"))
	require.Equal(t, http.StatusOK, code, body)
	assert.Regexp(t, `data-f="inFlight">1<`, body)
	assert.Regexp(t, `data-f="weight">3<`, body)
	code, body = e.get("/task?q=" + qx("heavy") + "&id=" + p.TaskID())
	require.Equal(t, http.StatusOK, code, body)
	assert.Contains(t, body, "weight 3")

	v := e.watch()
	deadline := time.Now().Add(10 * time.Second)
	for {
		v.mu.Lock()
		var got int64 = -1
		for _, q := range v.last.Queues {
			if q.Name == "heavy" {
				got = q.Weight
			}
		}
		v.mu.Unlock()
		if got == 3 {
			break
		}
		require.True(t, time.Now().Before(deadline), "no counts event with weight 3 (last %d)", got)
		time.Sleep(10 * time.Millisecond)
	}
}
