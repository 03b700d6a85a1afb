package dashboard

import (
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/worqr/worqr"
)

// bury enqueues a task of this kind and makes it a dead letter with this
// error; it returns its id.
func bury(t *testing.T, e *env, w *worqr.Worker, queue, kind, msg string) string {
	t.Helper()
	ctx := e.ctx()
	var opts []worqr.EnqueueOption
	if kind != "" {
		opts = append(opts, worqr.Kind(kind))
	}
	_, err := e.c.Enqueue(ctx, queue, []byte("dies"), opts...)
	require.NoError(t, err)
	p, err := w.Dequeue(ctx, queue)
	require.NoError(t, err)
	require.NoError(t, p.DeadLetter(ctx, errors.New(msg)))
	return p.TaskID()
}

func bulkPost(tok, queue, by string, extra ...string) url.Values {
	f := url.Values{"csrf": {tok}, "op": {"bulk"}, "q": {qx(queue)}, "by": {by}, "confirmed": {"yes"}}
	for i := 0; i+1 < len(extra); i += 2 {
		f.Add(extra[i], extra[i+1])
	}
	return f
}

// The bulk actions: cancel waiting tasks selected, of a kind or all;
// requeue or delete dead letters selected, of a kind, with an error, or
// requeue them all; each behind a confirmation, with a count after.
func TestBulkActions(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Options{})
	ctx := e.ctx()
	tok := e.csrf()
	mail, err := e.c.EnqueueBatch(ctx, "q", [][]byte{[]byte("m1"), []byte("m2"), []byte("m3")}, worqr.Kind("mail"))
	require.NoError(t, err)
	_, err = e.c.EnqueueBatch(ctx, "q", [][]byte{[]byte("s1"), []byte("s2")}, worqr.Kind("sms"))
	require.NoError(t, err)
	waiting := func() int64 {
		n, err := e.c.QueueLen(ctx, "q")
		require.NoError(t, err)
		return n
	}

	// The queue page offers them.
	_, body := e.get("/queue/q")
	for _, s := range []string{`id="bulk-waiting"`, `value="waiting-cancel-selected"`, `form="bulk-waiting"`, `<option value="mail">`, `<option value="sms">`} {
		assert.Contains(t, body, s)
	}

	// Unconfirmed: a confirmation page that says what, and nothing done.
	f := bulkPost(tok, "q", "waiting-cancel-selected", "ids", mail[0], "ids", mail[1])
	f.Set("confirmed", "")
	code, _ := e.post("/action", f)
	assert.Equal(t, http.StatusOK, code)
	res := e.raw("/action", f, "Cookie", csrfCookie+"="+e.jarCookie(csrfCookie))
	assert.Contains(t, res.body, "Cancel the 2 selected waiting tasks of queue <span class=\"name\">q</span>?")
	assert.Contains(t, res.body, `<input type="hidden" name="ids" value="`+mail[1]+`">`)
	assert.EqualValues(t, 5, waiting())

	code, loc := e.post("/action", bulkPost(tok, "q", "waiting-cancel-selected", "ids", mail[0], "ids", mail[1]))
	require.Equal(t, http.StatusSeeOther, code)
	assert.Equal(t, "/ops/queue/q?done=bulkCancelled&n=2", loc)
	_, body = e.get(strings.TrimPrefix(loc, "/ops"))
	assert.Contains(t, body, "2 waiting tasks cancelled.")
	assert.EqualValues(t, 3, waiting())

	_, loc = e.post("/action", bulkPost(tok, "q", "waiting-cancel-kind", "kind", "sms"))
	assert.Contains(t, loc, "n=2")
	ts, err := e.c.Tasks(ctx, "q", 0, -1)
	require.NoError(t, err)
	require.Len(t, ts, 1)
	assert.Equal(t, mail[2], ts[0].ID)
	_, loc = e.post("/action", bulkPost(tok, "q", "waiting-cancel-all"))
	assert.Contains(t, loc, "n=1")
	assert.Zero(t, waiting())

	// Dead letters.
	w, err := e.c.NewWorker(ctx, worqr.WorkerOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = w.Close(e.ctx()) })
	require.NoError(t, w.StartWork(ctx, "d", worqr.Events{}))
	a1 := bury(t, e, w, "d", "a", "timeout <x>")
	a2 := bury(t, e, w, "d", "a", "refused")
	b1 := bury(t, e, w, "d", "b", "timeout <x>")
	none := bury(t, e, w, "d", "", "refused")
	dead := func() []string {
		ds, err := e.c.DeadLetters(ctx, "d", 0, 100)
		require.NoError(t, err)
		var ids []string
		for _, d := range ds {
			ids = append(ids, d.ID)
		}
		return ids
	}
	_, body = e.get("/queue/d")
	assert.Contains(t, body, `<option value="`+qx("timeout <x>")+`">timeout &lt;x&gt;</option>`, "the errors to choose from, in hex, labelled escaped")
	assert.Contains(t, body, `form="bulk-dead"`)

	f = bulkPost(tok, "d", "dead-delete-error", "err", "timeout <x>")
	f.Set("confirmed", "")
	res = e.raw("/action", f, "Cookie", csrfCookie+"="+e.jarCookie(csrfCookie))
	assert.Contains(t, res.body, `<pre class="err" id="bulk-error">timeout &lt;x&gt;</pre>`)

	_, loc = e.post("/action", bulkPost(tok, "d", "dead-delete-error", "err", "timeout <x>"))
	assert.Contains(t, loc, "done=bulkDeleted&n=2")
	assert.ElementsMatch(t, []string{a2, none}, dead())
	_, loc = e.post("/action", bulkPost(tok, "d", "dead-requeue-kind", "kind", "a"))
	assert.Contains(t, loc, "done=bulkRequeued&n=1")
	assert.Equal(t, []string{none}, dead())
	_, loc = e.post("/action", bulkPost(tok, "d", "dead-requeue-selected", "ids", none, "ids", b1))
	assert.Contains(t, loc, "n=1", "b1 is gone already")
	assert.Empty(t, dead())
	for range 2 {
		bury(t, e, w, "d", "", "again")
	}
	_, loc = e.post("/action", bulkPost(tok, "d", "dead-requeue-all"))
	assert.Contains(t, loc, "n=2")
	assert.Empty(t, dead())
	_ = a1
}

// A dead letter's error is chosen from the queue page's list by its
// bytes in hex (errx), as queue names are: a browser sends a value's line
// breaks as CRLF, and a page carries no byte that is not UTF-8, so that
// an error of several lines (a panic's stack) or of any bytes sent as
// text would match nothing. The confirmation passes it on the same way.
func TestBulkByErrorOfAnyText(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Options{})
	ctx := e.ctx()
	w, err := e.c.NewWorker(ctx, worqr.WorkerOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = w.Close(e.ctx()) })
	require.NoError(t, w.StartWork(ctx, "d", worqr.Events{}))
	errs := []string{"panic: boom\n\ngoroutine 1 [running]:\nmain.main()", "bad byte \xff\x00 <here>"}
	for _, msg := range errs {
		bury(t, e, w, "d", "", msg)
		bury(t, e, w, "d", "", msg)
	}
	keep := bury(t, e, w, "d", "", "panic: boom\r\n\r\ngoroutine 1 [running]:\r\nmain.main()")
	tok := e.csrf()
	_, body := e.get("/queue/d")
	for _, msg := range errs {
		require.Contains(t, body, `<option value="`+qx(msg)+`">`, "%q offered by its bytes", msg)

		f := bulkPost(tok, "d", "dead-requeue-error", "errx", qx(msg))
		f.Set("confirmed", "")
		res := e.raw("/action", f, "Cookie", csrfCookie+"="+e.jarCookie(csrfCookie))
		require.Equal(t, http.StatusOK, res.code, res.body)
		require.Contains(t, res.body, `<input type="hidden" name="errx" value="`+qx(msg)+`">`, "the confirmation passes it on")

		_, loc := e.post("/action", bulkPost(tok, "d", "dead-requeue-error", "errx", qx(msg)))
		assert.Contains(t, loc, "done=bulkRequeued&n=2", "%q", msg)
	}
	ds, err := e.c.DeadLetters(ctx, "d", 0, 100)
	require.NoError(t, err)
	require.Len(t, ds, 1, "the error with CRLF is another error")
	assert.Equal(t, keep, ds[0].ID)

	for _, bad := range []string{"zz", "abc", strings.Repeat("65", maxErrorLen+1)} {
		code, _ := e.post("/action", bulkPost(tok, "d", "dead-delete-error", "errx", bad))
		assert.Equal(t, http.StatusBadRequest, code, "errx %.20q", bad)
	}
	ds, err = e.c.DeadLetters(ctx, "d", 0, 100)
	require.NoError(t, err)
	assert.Len(t, ds, 1, "nothing deleted")
}

// Bulk actions refused: no CSRF token, another origin, a foreign Host, a
// read-only dashboard, and malformed or oversized input; none changes
// anything.
func TestBulkActionsRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Options{})
	ctx := e.ctx()
	ids, err := e.c.EnqueueBatch(ctx, "q", [][]byte{[]byte("a"), []byte("b")}, worqr.Kind("k"))
	require.NoError(t, err)
	tok := e.csrf()
	cookie := csrfCookie + "=" + e.jarCookie(csrfCookie)
	left := func() int64 {
		n, err := e.c.QueueLen(ctx, "q")
		require.NoError(t, err)
		return n
	}
	all := bulkPost(tok, "q", "waiting-cancel-all")

	assert.Equal(t, http.StatusForbidden, e.raw("/action", bulkPost("", "q", "waiting-cancel-all"), "Cookie", cookie).code, "no token")
	assert.Equal(t, http.StatusForbidden, e.raw("/action", bulkPost(strings.Repeat("0", 64), "q", "waiting-cancel-all"), "Cookie", cookie).code, "a wrong token")
	assert.Equal(t, http.StatusForbidden, e.raw("/action", all).code, "the token without its cookie (another site's form)")
	assert.Equal(t, http.StatusForbidden, e.raw("/action", all, "Cookie", cookie, "Origin", "https://evil.example", "Sec-Fetch-Site", "cross-site").code, "another origin")
	port := e.srv.URL[strings.LastIndex(e.srv.URL, ":"):]
	assert.Equal(t, http.StatusForbidden, e.raw("/action", all, "Cookie", cookie, "Host", "rebind.attacker.example"+port).code, "a foreign Host")

	long := strings.Repeat("i", 65)
	tooMany := make([]string, 0, 2*(maxBulkIDs+1))
	for i := range maxBulkIDs + 1 {
		tooMany = append(tooMany, "ids", strconv.Itoa(i))
	}
	for name, f := range map[string]url.Values{
		"unknown by":        bulkPost(tok, "q", "waiting-drop-everything"),
		"no by":             bulkPost(tok, "q", ""),
		"no queue":          bulkPost(tok, "", "waiting-cancel-all"),
		"bad queue hex":     {"csrf": {tok}, "op": {"bulk"}, "q": {"zz"}, "by": {"waiting-cancel-all"}, "confirmed": {"yes"}},
		"nothing selected":  bulkPost(tok, "q", "waiting-cancel-selected"),
		"an empty id":       bulkPost(tok, "q", "waiting-cancel-selected", "ids", ""),
		"a long id":         bulkPost(tok, "q", "waiting-cancel-selected", "ids", long),
		"too many ids":      bulkPost(tok, "q", "dead-requeue-selected", tooMany...),
		"no kind":           bulkPost(tok, "q", "waiting-cancel-kind"),
		"a long kind":       bulkPost(tok, "q", "waiting-cancel-kind", "kind", strings.Repeat("k", 65)),
		"a hostile kind":    bulkPost(tok, "q", "waiting-cancel-kind", "kind", "k,pall:x"),
		"no error":          bulkPost(tok, "q", "dead-requeue-error"),
		"a long error":      bulkPost(tok, "q", "dead-requeue-error", "err", strings.Repeat("e", maxErrorLen+1)),
		"a body over 64KiB": bulkPost(tok, "q", "dead-requeue-error", "err", strings.Repeat("e", 70<<10)),
	} {
		code := e.raw("/action", f, "Cookie", cookie).code
		assert.Equal(t, http.StatusBadRequest, code, name)
		assert.EqualValues(t, 2, left(), name)
	}

	ro := newEnv(t, Options{ReadOnly: true})
	_, err = ro.c.Enqueue(ro.ctx(), "q", []byte("x"))
	require.NoError(t, err)
	rtok := ro.csrf()
	_, body := ro.get("/queue/q")
	assert.NotContains(t, body, "bulk-waiting", "no bulk forms when read-only")
	assert.NotContains(t, body, `type="checkbox"`)
	code, _ := ro.post("/action", bulkPost(rtok, "q", "waiting-cancel-all"))
	assert.Equal(t, http.StatusForbidden, code)
	n, err := ro.c.QueueLen(ro.ctx(), "q")
	require.NoError(t, err)
	assert.EqualValues(t, 1, n)

	// Still works with the right token, cookie and origin.
	code = e.raw("/action", bulkPost(tok, "q", "waiting-cancel-selected", "ids", ids[0]), "Cookie", cookie, "Origin", e.srv.URL).code
	assert.Equal(t, http.StatusSeeOther, code)
	assert.EqualValues(t, 1, left())
}
