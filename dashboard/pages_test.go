package dashboard

import (
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/worqr/worqr"
)

// Queue and task pages have addresses that read as the names do, for any
// bytes a name may hold, and the hex ones still work; hostile paths get
// 400, never a page of another queue.
func TestReadableURLs(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Options{})
	names := []string{"orders", "a/b c%d?e#f", "ünï😀", "..", ".", "x\xff\x00y", "<b>&'\""}
	ids := map[string]string{}
	for _, n := range names {
		id, err := e.c.Enqueue(e.ctx(), n, []byte("payload of "+n))
		require.NoError(t, err)
		ids[n] = id
	}
	_, overview := e.get("/")
	for _, n := range names {
		link := queuePath("/ops", n)
		if n != "." && n != ".." {
			assert.Equal(t, "/ops/queue/"+url.PathEscape(n), link)
		}
		assert.Contains(t, overview, `href="`+strings.ReplaceAll(link, "&", "&amp;")+`"`, "%q", n)
		code, body := e.get(strings.TrimPrefix(link, "/ops"))
		require.Equal(t, http.StatusOK, code, "%q: %s", n, link)
		assert.Contains(t, body, "payload of ", "%q", n)
		assert.Contains(t, body, "Queue <span class=\"name\">"+templateEscape(display(n)), "%q: the page is the queue's", n)

		task := taskPath("/ops", n, ids[n])
		assert.Contains(t, body, `href="`+strings.ReplaceAll(task, "&", "&amp;")+`"`, "%q: the task's link", n)
		code, body = e.get(strings.TrimPrefix(task, "/ops"))
		require.Equal(t, http.StatusOK, code, "%q: %s", n, task)
		assert.Contains(t, body, "<dt>Waiting</dt>", n)

		// The hex addresses still work.
		code, _ = e.get("/queue?q=" + qx(n))
		assert.Equal(t, http.StatusOK, code, n)
		code, _ = e.get("/task?q=" + qx(n) + "&id=" + ids[n])
		assert.Equal(t, http.StatusOK, code, n)
	}
	// An action returns to the readable address.
	code, loc := e.post("/action", pauseForm(e.csrf(), "a/b c%d?e#f"), "Origin", e.srv.URL)
	require.Equal(t, http.StatusSeeOther, code)
	assert.Equal(t, "/ops/queue/a%2Fb%20c%25d%3Fe%23f?done=paused", loc)

	long := strings.Repeat("q", worqr.MaxQueueNameLen+1)
	for _, path := range []string{
		"/queue/a/b", "/queue/" + long, "/task/orders", "/task/orders/",
		"/task/orders/a/b", "/task/orders/" + strings.Repeat("i", 65), "/task/" + long + "/x",
	} {
		code, body := e.get(path)
		assert.Equal(t, http.StatusBadRequest, code, path)
		assert.NotContains(t, body, "payload of", path)
	}
	// An unknown queue is an empty page, as with the hex address.
	code, _ = e.get("/queue/unknown")
	assert.Equal(t, http.StatusOK, code)
}

func templateEscape(s string) string {
	r := strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&#34;", "'", "&#39;")
	return r.Replace(s)
}

// The search box finds a task by id: in the queue given, or in every
// queue; within the lookup budget; hostile input gets 400.
func TestSearchByID(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Options{})
	_, err := e.c.Enqueue(e.ctx(), "alpha", []byte("a"))
	require.NoError(t, err)
	id, err := e.c.Enqueue(e.ctx(), "beta/x", []byte("b"))
	require.NoError(t, err)

	_, body := e.get("/")
	assert.Contains(t, body, `action="/ops/search"`, "a search box on the overview")
	_, body = e.get("/queue/beta%2Fx")
	assert.Contains(t, body, `name="queue" value="beta/x"`, "the queue's page fills in its queue")
	_, body = e.get("/workers")
	assert.Contains(t, body, `action="/ops/search"`)

	code, loc := e.raw2("/search?queue=beta/x&id=" + id)
	assert.Equal(t, http.StatusSeeOther, code)
	assert.Equal(t, "/ops/task/beta%2Fx/"+id, loc)

	code, loc = e.raw2("/search?id=" + id)
	assert.Equal(t, http.StatusSeeOther, code, "found in any queue")
	assert.Equal(t, "/ops/task/beta%2Fx/"+id, loc)

	code, body = e.get("/search?id=nothing-like-it")
	assert.Equal(t, http.StatusNotFound, code)
	assert.Contains(t, body, "in any of the 2 queues")

	for _, path := range []string{"/search", "/search?id=", "/search?id=" + strings.Repeat("i", 65),
		"/search?id=x&queue=" + strings.Repeat("q", worqr.MaxQueueNameLen+1)} {
		code, _ := e.get(path)
		assert.Equal(t, http.StatusBadRequest, code, path)
	}

	// A search of every queue is a lookup: the budget bounds it.
	e.h.lookups.mu.Lock()
	e.h.lookups.avail, e.h.lookups.at = 0, time.Now()
	e.h.lookups.mu.Unlock()
	before := e.rdb.n.Load()
	code, _ = e.get("/search?id=" + id)
	assert.Equal(t, http.StatusTooManyRequests, code)
	assert.Equal(t, before, e.rdb.n.Load(), "a refused search read Redis")
}

// raw2 gets a path without following redirects: its status and Location.
func (e *env) raw2(path string) (int, string) {
	e.t.Helper()
	res, err := e.http.Get(e.url(path))
	require.NoError(e.t, err)
	defer res.Body.Close()
	return res.StatusCode, res.Header.Get("Location")
}

// A JSON payload is shown indented, and escaped; other text as it is.
func TestJSONPayloadPretty(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Options{})
	id, err := e.c.Enqueue(e.ctx(), "q", []byte(`{"to":"<script>alert(1)</script>","n":[1,2]}`))
	require.NoError(t, err)
	plain, err := e.c.Enqueue(e.ctx(), "q", []byte(`{not json`))
	require.NoError(t, err)
	_, body := e.get("/task/q/" + id)
	assert.Contains(t, body, "{\n  &#34;to&#34;: &#34;&lt;script&gt;alert(1)&lt;/script&gt;&#34;,\n  &#34;n&#34;: [\n    1,\n    2\n  ]\n}")
	assert.NotContains(t, body, "<script>alert")
	assert.Contains(t, body, "JSON, indented")
	_, body = e.get("/task/q/" + plain)
	assert.Contains(t, body, "{not json")
	assert.NotContains(t, body, "JSON, indented")
}

// The overview lists queues by name; positions are positions in dequeue
// order on every page; the delayed list pages.
func TestOverviewSortedAndListsPaged(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Options{})
	for _, q := range []string{"zeta", "alpha", "mid"} {
		_, err := e.c.Enqueue(e.ctx(), q, []byte("x"))
		require.NoError(t, err)
	}
	_, body := e.get("/")
	order := regexp.MustCompile(`<td class="qname"><a href="[^"]*"[^>]*>([^<]*)</a>`).FindAllStringSubmatch(body, -1)
	require.Len(t, order, 3)
	assert.Equal(t, []string{"alpha", "mid", "zeta"}, []string{order[0][1], order[1][1], order[2][1]})

	tasks := make([][]byte, pageSize+5)
	for i := range tasks {
		tasks[i] = []byte("t")
	}
	_, err := e.c.EnqueueBatch(e.ctx(), "big", tasks)
	require.NoError(t, err)
	_, err = e.c.EnqueueBatch(e.ctx(), "big", tasks, worqr.In(time.Hour))
	require.NoError(t, err)
	positions := regexp.MustCompile(`<td class="n">(\d+)</td>\n<td class="id">`)

	_, body = e.get("/queue/big")
	p := positions.FindAllStringSubmatch(body, -1)
	require.Len(t, p, pageSize)
	assert.Equal(t, "0", p[0][1])
	assert.Equal(t, "49", p[pageSize-1][1])
	assert.Contains(t, body, `href="/ops/queue/big?wo=50"`)
	assert.Contains(t, body, `href="/ops/queue/big?lo=50"`, "the delayed list pages")
	assert.Equal(t, pageSize, strings.Count(sectionOf(body, `id="delayed"`), "<tr>")-1)

	_, body = e.get("/queue/big?wo=50&lo=50")
	p = positions.FindAllStringSubmatch(body, -1)
	require.Len(t, p, 5)
	assert.Equal(t, "50", p[0][1], "the position, not the row")
	assert.Equal(t, "54", p[4][1])
	assert.Equal(t, 5, strings.Count(sectionOf(body, `id="delayed"`), "<tr>")-1)
	assert.Contains(t, body, `href="/ops/queue/big?wo=50"`, "sooner: the waiting list stays")
	assert.Contains(t, body, `href="/ops/queue/big?lo=50"`, "earlier: the delayed list stays")
}

// sectionOf is the table that starts at marker, to its end.
func sectionOf(body, marker string) string {
	i := strings.Index(body, marker)
	if i < 0 {
		return ""
	}
	s := body[i:]
	if j := strings.Index(s, "</table>"); j >= 0 {
		s = s[:j]
	}
	return s
}

// The workers page: each worker's host, process id and start as it
// registered them (escaped; "—" for a worker registered without), its
// queues with the tasks it holds there and their limits, and what it
// runs, linked.
func TestWorkersPage(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Options{})
	_, inFlight := fill(t, e, "emails")
	require.NoError(t, e.c.SetConcurrency(e.ctx(), "emails", 8))

	code, body := e.get("/workers")
	require.Equal(t, http.StatusOK, code)
	host, _ := os.Hostname()
	assert.Contains(t, body, ">"+templateEscape(host)+"<")
	assert.Contains(t, body, ">"+strconv.Itoa(os.Getpid())+"<")
	assert.Contains(t, body, `<a href="/ops/queue/emails">emails</a> <small>1/8</small>`)
	assert.Contains(t, body, `<a href="/ops/task/emails/`+inFlight+`">`+inFlight+`</a> <small>emails, attempt 1, 35%</small>`)
	assert.Regexp(t, regexp.MustCompile(`<td>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}Z</td>`), body, "the start")

	// What a worker says of itself is shown as text; one without is "—".
	var info string
	for _, k := range e.m.Keys() {
		if strings.HasSuffix(k, ":{r}:winfo") {
			info = k
		}
	}
	require.NotEmpty(t, info)
	ws, err := e.c.Workers(e.ctx())
	require.NoError(t, err)
	require.Len(t, ws, 1)
	e.m.HSet(info, ws[0].ID, "1\n2\n<script>alert(1)</script>")
	_, body = e.get("/workers")
	assert.NotContains(t, body, "<script>alert")
	assert.Contains(t, body, "&lt;script&gt;alert(1)&lt;/script&gt;")
	e.m.HDel(info, ws[0].ID)
	_, body = e.get("/workers")
	assert.Contains(t, body, `<td class="qname">—</td>`+"\n"+`<td class="n">—</td>`+"\n<td>—</td>", "no host, pid or start")
}

// The periodic page lists every queue's schedules with their last tick,
// its task, linked, and the next tick when Redis knows it; names are shown
// as text.
func TestPeriodicPage(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Options{})
	id, err := e.c.Enqueue(e.ctx(), "maintenance", []byte("cleanup"))
	require.NoError(t, err)
	_, err = e.c.Enqueue(e.ctx(), "reports", []byte("x"))
	require.NoError(t, err)
	var periodic, ticks string
	for _, k := range e.m.Keys() {
		switch {
		case strings.HasSuffix(k, "{q:maintenance}:meta"):
			periodic = strings.TrimSuffix(k, "meta") + "periodic"
			ticks = strings.TrimSuffix(k, "meta") + "ticks"
		}
	}
	require.NotEmpty(t, periodic)
	e.m.HSet(periodic, "nightly-cleanup", "1700000000000", "<script>x</script>", "1700000001000")
	e.m.HSet(ticks, "nightly-cleanup", id+",1700086400000")

	code, body := e.get("/periodic")
	require.Equal(t, http.StatusOK, code)
	rows := sectionOf(body, `id="periodic"`)
	assert.Contains(t, rows, "nightly-cleanup")
	assert.Contains(t, rows, "2023-11-14 22:13:20.000Z")
	assert.Contains(t, rows, "2023-11-15 22:13:20.000Z", "the next tick")
	assert.Contains(t, rows, `href="/ops/task/maintenance/`+id+`"`)
	assert.Contains(t, rows, "&lt;script&gt;x&lt;/script&gt;")
	assert.NotContains(t, body, "<script>x")
	assert.Less(t, strings.Index(rows, "&lt;script"), strings.Index(rows, "nightly"), "by name")
	assert.Contains(t, body, `href="/ops/periodic" class="on"`)
}

// A search of payloads lists the tasks, waiting, delayed or dead, whose
// payload's first KiB holds the text, escaped; bad input gets 400 and the
// lookup budget bounds it.
func TestSearchPayloads(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Options{})
	ctx := e.ctx()
	waiting, err := e.c.Enqueue(ctx, "q", []byte(`{"order":"<b>42</b>"}`))
	require.NoError(t, err)
	_, err = e.c.Enqueue(ctx, "q", []byte(`{"order":"43"}`))
	require.NoError(t, err)
	delayed, err := e.c.Enqueue(ctx, "q", []byte(`later <b>42</b>`), worqr.In(time.Hour))
	require.NoError(t, err)
	_, err = e.c.Enqueue(ctx, "q", append(make([]byte, 2000), []byte("<b>42</b>")...)) // past the first KiB
	require.NoError(t, err)

	_, body := e.get("/queue/q")
	assert.Contains(t, body, `name="payload"`, "the queue page has the search")
	code, body := e.get("/search?queue=q&payload=" + url.QueryEscape("<b>42</b>"))
	require.Equal(t, http.StatusOK, code)
	rows := sectionOf(body, `id="found"`)
	assert.Contains(t, rows, `href="/ops/task/q/`+waiting+`"`)
	assert.Contains(t, rows, `href="/ops/task/q/`+delayed+`"`)
	assert.Equal(t, 2, strings.Count(rows, "<tr>")-1, "the one past the first KiB is not read")
	assert.Contains(t, rows, "<td>delayed</td>")
	assert.Contains(t, body, `<span class="name">&#34;&lt;b&gt;42&lt;/b&gt;&#34;</span>`, "the text shown quoted, escaped")
	assert.NotContains(t, body, "<b>42")
	assert.Contains(t, body, "Read 4 tasks")

	for _, path := range []string{"/search?payload=x", "/search?queue=q&payload=", "/search?queue=q&payload=" + strings.Repeat("x", 257)} {
		code, _ := e.get(path)
		assert.Equal(t, http.StatusBadRequest, code, path)
	}
	e.h.lookups.mu.Lock()
	e.h.lookups.avail, e.h.lookups.at = 0, time.Now()
	e.h.lookups.mu.Unlock()
	before := e.rdb.n.Load()
	code, _ = e.get("/search?queue=q&payload=42")
	assert.Equal(t, http.StatusTooManyRequests, code)
	assert.Equal(t, before, e.rdb.n.Load())
}
