package dashboard

import (
	"fmt"
	"math"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/worqr/worqr"
)

// diamond enqueues a diamond workflow of id, its top on queue top and
// the rest on "wf": top, then left and right, then bottom.
func diamond(t *testing.T, e *env, id, top string) {
	t.Helper()
	_, err := e.c.EnqueueWorkflow(e.ctx(), []worqr.Step{
		{Name: "top", Queue: top, Task: []byte("t")},
		{Name: "left", Queue: "wf", After: []string{"top"}},
		{Name: "right", Queue: "wf", After: []string{"top"}},
		{Name: "bottom", Queue: "wf", After: []string{"left", "right"}},
	}, worqr.WorkflowOptions{ID: id})
	require.NoError(t, err)
}

// A workflow's page lists its steps in dependency order with their
// states, queues (escaped) and parents, and links each enqueued step to
// its task's page, whose page links back; unknown, bad and huge ids are
// refused without a page of another.
func TestWorkflowPage(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Options{})
	hostile := `<b>"q"&</b>`
	diamond(t, e, "diamond-1", hostile)

	code, body := e.get("/workflow/diamond-1")
	require.Equal(t, http.StatusOK, code, body)
	assert.Contains(t, body, `<dd id="workflow-state">running</dd>`)
	assert.Contains(t, body, "4; 4 not ended")
	steps := sectionOf(body, `id="steps"`)
	require.NotEmpty(t, steps)
	var order []string
	for _, row := range strings.Split(steps, "<tr><td class=\"name\">")[1:] {
		order = append(order, row[:strings.Index(row, "<")])
	}
	assert.Equal(t, []string{"top", "left", "right", "bottom"}, order, "dependency order")
	_, past := e.get("/workflow/diamond-1?from=5000")
	assert.Equal(t, 4, strings.Count(sectionOf(past, `id="steps"`), "<tr><td"), "a from past the last step: the last page")
	assert.NotContains(t, body, hostile, "the queue's name is escaped")
	assert.Contains(t, steps, templateEscape(hostile))
	assert.Contains(t, steps, `<span class="name">left</span>, <span class="name">right</span>`, "bottom's parents")
	assert.Equal(t, 3, strings.Count(steps, "not enqueued"))

	info, err := e.c.Workflow(e.ctx(), "diamond-1")
	require.NoError(t, err)
	top := info.Steps[slicesIndex(info.Steps, "top")]
	link := taskPath("/ops", top.Queue, top.TaskID) + "?wf=diamond-1&at=0"
	assert.Contains(t, steps, `href="`+strings.ReplaceAll(link, "&", "&amp;")+`"`)
	code, body = e.get(strings.TrimPrefix(taskPath("/ops", top.Queue, top.TaskID), "/ops"))
	require.Equal(t, http.StatusOK, code)
	assert.Contains(t, body, `step <span class="name">top</span> of workflow <a href="/ops/workflow/diamond-1" id="workflow-link"`, "a waiting step's page links to its workflow")
	plain, err := e.c.Enqueue(e.ctx(), "wf", []byte("plain"))
	require.NoError(t, err)
	_, body = e.get("/task/wf/" + plain)
	assert.NotContains(t, body, "workflow-link", "a plain task has no workflow")

	for path, want := range map[string]int{
		"/workflow/unknown":                             http.StatusNotFound,
		"/workflow/" + strings.Repeat("w", 65):          http.StatusBadRequest,
		"/workflow/%3Cscript%3Ealert(1)%3C%2Fscript%3E": http.StatusBadRequest,
		"/workflow/a/b":                                 http.StatusBadRequest,
		"/workflow/":                                    http.StatusBadRequest,
	} {
		code, body := e.get(path)
		assert.Equal(t, want, code, path)
		assert.NotContains(t, body, "<script>alert", path)
		assert.NotContains(t, body, `id="steps"`, path)
	}

	// Another site's image reads nothing.
	before := e.rdb.n.Load()
	code, body = e.get("/workflow/diamond-1", "Sec-Fetch-Site", "cross-site")
	assert.Equal(t, http.StatusForbidden, code)
	assert.NotContains(t, body, `id="steps"`)
	assert.Equal(t, before, e.rdb.n.Load(), "no read of Redis")

	// The lookup box goes to the page's address.
	req, err := http.NewRequest(http.MethodGet, e.url("/workflow?id=diamond-1"), nil)
	require.NoError(t, err)
	res, err := e.http.Do(req)
	require.NoError(t, err)
	res.Body.Close()
	assert.Equal(t, http.StatusSeeOther, res.StatusCode)
	assert.Equal(t, "/ops/workflow/diamond-1", res.Header.Get("Location"))
	code, _ = e.get("/workflow?id=" + strings.Repeat("w", 65))
	assert.Equal(t, http.StatusBadRequest, code)
	_, overview := e.get("/")
	assert.Contains(t, overview, `action="/ops/workflow"`, "every page has the box")
}

func slicesIndex(steps []worqr.StepInfo, name string) int {
	for i, s := range steps {
		if s.Name == name {
			return i
		}
	}
	return -1
}

// A step's task found only by its outcome links to its workflow when its
// page is reached from the workflow's (wf, checked against the
// workflow's state), and not for a workflow it is no step of.
func TestWorkflowLinkOfEndedTask(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Options{})
	ctx := e.ctx()
	diamond(t, e, "ended-1", "wf")
	_, err := e.c.EnqueueWorkflow(ctx, []worqr.Step{{Name: "other", Queue: "wf2"}}, worqr.WorkflowOptions{ID: "other-1"})
	require.NoError(t, err)
	w, err := e.c.NewWorker(ctx, worqr.WorkerOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = w.Close(e.ctx()) })
	require.NoError(t, w.StartWork(ctx, "wf", worqr.Events{}))
	p, err := w.Dequeue(ctx, "wf")
	require.NoError(t, err)
	id := p.TaskID()
	require.NoError(t, p.Finish(ctx))

	// The worker carries the step's end to the workflow after Finish.
	eventually(t, "top recorded succeeded", func() bool {
		info, err := e.c.Workflow(ctx, "ended-1")
		return err == nil && info.Steps[slicesIndex(info.Steps, "top")].State == worqr.StepSucceeded
	})
	_, body := e.get("/workflow/ended-1")
	assert.Contains(t, sectionOf(body, `id="steps"`), `<td class="state-succeeded">succeeded</td>`)
	_, body = e.get("/task/wf/" + id + "?wf=ended-1")
	assert.Contains(t, body, `<a href="/ops/workflow/ended-1" id="workflow-link"`)
	for _, wf := range []string{"", "other-1", "unknown", strings.Repeat("w", 65)} {
		_, body = e.get("/task/wf/" + id + "?" + url.Values{"wf": {wf}}.Encode())
		assert.Contains(t, body, "<dt>Outcome</dt>", wf)
		assert.NotContains(t, body, "workflow-link", wf)
	}
}

// Cancelling a workflow needs the CSRF token, then a confirmation; it
// ends the workflow cancelled, and the page then offers no cancel.
func TestWorkflowCancelAction(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Options{})
	diamond(t, e, "to-cancel", "wf")
	_, body := e.get("/workflow/to-cancel")
	assert.Contains(t, body, `data-op="cancelworkflow"`)
	form := url.Values{"op": {"cancelworkflow"}, "wf": {"to-cancel"}, "confirmed": {"yes"}}
	code, _ := e.post("/action", form, "Origin", e.srv.URL)
	assert.Equal(t, http.StatusForbidden, code, "no CSRF token")
	// The real token with its first character changed (one forged as a
	// fixed prefix would be the real one whenever it begins so).
	token := e.csrf()
	first := "0"
	if token[0] == '0' {
		first = "1"
	}
	form.Set("csrf", first+token[1:])
	code, _ = e.post("/action", form, "Origin", e.srv.URL)
	assert.Equal(t, http.StatusForbidden, code, "a forged token")
	form.Set("csrf", e.csrf())
	code, _ = e.post("/action", form, "Origin", "https://evil.example")
	assert.Equal(t, http.StatusForbidden, code, "cross-origin")
	info, err := e.c.Workflow(e.ctx(), "to-cancel")
	require.NoError(t, err)
	assert.Equal(t, worqr.WorkflowRunning, info.State, "refused, nothing done")

	form.Set("confirmed", "")
	code, _ = e.post("/action", form, "Origin", e.srv.URL)
	assert.Equal(t, http.StatusOK, code, "the confirmation page")
	info, err = e.c.Workflow(e.ctx(), "to-cancel")
	require.NoError(t, err)
	assert.Equal(t, worqr.WorkflowRunning, info.State, "not yet confirmed")

	form.Set("confirmed", "yes")
	code, loc := e.post("/action", form, "Origin", e.srv.URL)
	require.Equal(t, http.StatusSeeOther, code)
	assert.Equal(t, "/ops/workflow/to-cancel?done=workflowCancelled", loc)
	info, err = e.c.Workflow(e.ctx(), "to-cancel")
	require.NoError(t, err)
	assert.Equal(t, worqr.WorkflowCancelled, info.State)
	_, body = e.get("/workflow/to-cancel?done=workflowCancelled")
	assert.Contains(t, body, "Workflow cancelled")
	assert.NotContains(t, body, `data-op="cancelworkflow"`)
	code, loc = e.post("/action", form, "Origin", e.srv.URL)
	require.Equal(t, http.StatusSeeOther, code)
	assert.Equal(t, "/ops/workflow/to-cancel?done=workflowEnded", loc, "twice: nothing to do")

	form.Set("wf", "unknown")
	code, _ = e.post("/action", form, "Origin", e.srv.URL)
	assert.Equal(t, http.StatusNotFound, code)
	form.Set("wf", strings.Repeat("w", 65))
	code, _ = e.post("/action", form, "Origin", e.srv.URL)
	assert.Equal(t, http.StatusBadRequest, code)

	ro := newEnv(t, Options{ReadOnly: true})
	diamond(t, ro, "read-only", "wf")
	_, body = ro.get("/workflow/read-only")
	assert.NotContains(t, body, `data-op="cancelworkflow"`)
	form.Set("wf", "read-only")
	form.Set("csrf", ro.csrf())
	code, _ = ro.post("/action", form, "Origin", ro.srv.URL)
	assert.Equal(t, http.StatusForbidden, code)
}

// fanIn enqueues a workflow of id and n steps: root, then n-2 children
// of root, then summary, which waits for them all.
func fanIn(t *testing.T, e *env, id string, n int) {
	t.Helper()
	steps := []worqr.Step{{Name: "root", Queue: "fan"}}
	var all []string
	for i := range n - 2 {
		name := fmt.Sprintf("child-%05d", i)
		all = append(all, name)
		steps = append(steps, worqr.Step{Name: name, Queue: "fan", After: []string{"root"}})
	}
	steps = append(steps, worqr.Step{Name: "summary", Queue: "fan", After: all})
	_, err := e.c.EnqueueWorkflow(e.ctx(), steps, worqr.WorkflowOptions{ID: id})
	require.NoError(t, err)
}

// A workflow of 10,000 steps is a page of workflowPageSize of them, the
// others a page away: the page's size does not grow with the workflow.
func TestWorkflowPageBounded(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Options{})
	e.frozen() // its reads are slow on miniredis: not this test's budget
	const n = 10_000
	fanIn(t, e, "big", n)

	code, body := e.get("/workflow/big")
	require.Equal(t, http.StatusOK, code)
	rows := strings.Count(sectionOf(body, `id="steps"`), "<tr><td")
	assert.Equal(t, workflowPageSize, rows)
	assert.Less(t, len(body), 200<<10, "a bounded page")
	assert.Contains(t, body, "Steps 1–200 of 10000")
	assert.Contains(t, body, `href="/ops/workflow/big?from=200"`)

	code, body = e.get("/workflow/big?from=9999")
	require.Equal(t, http.StatusOK, code)
	steps9800 := sectionOf(body, `id="steps"`)
	assert.Equal(t, n-9800, strings.Count(steps9800, "<tr><td"), "the last page")
	assert.Contains(t, steps9800, "<td class=\"name\">summary</td>", "the fan-in last")
	assert.Contains(t, steps9800, fmt.Sprintf("<small>and %d more</small>", n-2-maxParentsShown), "its parents cut")
	assert.Contains(t, body, `href="/ops/workflow/big?from=9600"`)
}

// Viewing a page of a workflow costs Redis the same commands and about
// the same bytes for 1,000 steps as for 10,000: the first page, one in
// the middle and the last (with the fan-in, its parents cut).
func TestWorkflowPageCostBounded(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Options{})
	e.frozen()
	fanIn(t, e, "small", 1_000)
	fanIn(t, e, "large", 10_000)
	e.get("/workflow/small") // the script's first call loads it
	// The fewest of three views: the client's own background calls (its
	// workflow sweep, its stats) go through the same counter now and then.
	cost := func(path string) (cmds, bytes int64) {
		t.Helper()
		cmds, bytes = math.MaxInt64, math.MaxInt64
		for range 3 {
			n0, b0 := e.rdb.n.Load(), e.rdb.bytes.Load()
			code, body := e.get(path)
			require.Equal(t, http.StatusOK, code, path)
			require.Equal(t, workflowPageSize, strings.Count(sectionOf(body, `id="steps"`), "<tr><td"), path)
			cmds, bytes = min(cmds, e.rdb.n.Load()-n0), min(bytes, e.rdb.bytes.Load()-b0)
		}
		return cmds, bytes
	}
	for _, pages := range [][2]string{
		{"/workflow/small", "/workflow/large"},
		{"/workflow/small?from=400", "/workflow/large?from=5000"},
		{"/workflow/small?from=999", "/workflow/large?from=9999"},
	} {
		smallN, smallB := cost(pages[0])
		largeN, largeB := cost(pages[1])
		t.Logf("%s: %d commands, %d bytes; %s: %d commands, %d bytes", pages[0], smallN, smallB, pages[1], largeN, largeB)
		assert.Equal(t, smallN, largeN, "commands of %s and %s", pages[0], pages[1])
		assert.InEpsilon(t, smallB, largeB, 0.02, "bytes of %s and %s", pages[0], pages[1])
	}
}
