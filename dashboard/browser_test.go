package dashboard

import (
	"context"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/worqr/worqr"
)

// chromium finds a Chromium binary. Without one the browser test is
// skipped, unless WORQR_TEST_BROWSER=1 (CI) makes that a failure.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "headless-shell"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("WORQR_TEST_BROWSER") == "1" {
		t.Fatal("WORQR_TEST_BROWSER=1 but no chromium binary on PATH (apt-get install chromium)")
	}
	t.Skip("no chromium binary on PATH; set WORQR_TEST_BROWSER=1 to require one")
	return ""
}

// browser starts a headless Chromium, with these extra flags, for the
// rest of the test, and returns its context: 90 s at most.
func browser(t *testing.T, bin string, flags ...chromedp.ExecAllocatorOption) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(bin),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-background-networking", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 860),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), append(opts, flags...)...)
	t.Cleanup(cancelAlloc)
	bctx, cancelBrowser := chromedp.NewContext(actx, chromedp.WithLogf(t.Logf))
	t.Cleanup(cancelBrowser)
	bctx, cancelTimeout := context.WithTimeout(bctx, 90*time.Second)
	t.Cleanup(cancelTimeout)
	return bctx
}

// until waits, in the page, for a JavaScript condition: up to 30 s, for a
// loaded CI machine that runs the -race suites beside it.
func until(cond string) chromedp.Action[chromedp.Void] {
	return chromedp.Poll[chromedp.Void](cond, chromedp.WithPollingTimeout(30*time.Second))
}

// TestBrowser drives the dashboard in a real headless Chromium: pages
// load, live counts change as tasks are enqueued, an action (pause, its
// confirm() accepted) changes Redis, a finished task shows in the queue
// page's stats, and each page is saved as a PNG in $WORQR_ARTIFACTS
// (default a temporary directory).
func TestBrowser(t *testing.T) {
	bin := chromium(t)
	artifacts := os.Getenv("WORQR_ARTIFACTS")
	if artifacts == "" {
		artifacts = t.TempDir()
	}
	require.NoError(t, os.MkdirAll(artifacts, 0o755))

	e := newEnv(t, Options{PollInterval: 100 * time.Millisecond})
	dead, _ := fill(t, e, "emails")
	// As long as the browser's: e.ctx() gives 10 s, which a loaded
	// machine can use up before the end.
	ctx, cancelCtx := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancelCtx()
	_, err := e.c.Enqueue(ctx, "thumbnails", []byte(`{"image":"cat.png","size":[128,128]}`))
	require.NoError(t, err)

	bctx := browser(t, bin)

	var dialogs []string
	var mu sync.Mutex
	opened := chromedp.Events(bctx, page.JavascriptDialogOpening)
	go func() {
		for ev, err := range opened {
			if err != nil {
				return
			}
			mu.Lock()
			dialogs = append(dialogs, ev.Message)
			mu.Unlock()
			_, _ = chromedp.Call(bctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: true})
		}
	}()

	shot := func(name string) chromedp.Action[chromedp.Void] {
		return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			png, err := chromedp.FullScreenshot(100)(ctx, tg) // 100: PNG
			if err != nil {
				return err
			}
			path := filepath.Join(artifacts, name+".png")
			t.Logf("screenshot: %s", path)
			return os.WriteFile(path, png, 0o644)
		})
	}
	cell := func(queue, field string) chromedp.CSS {
		return chromedp.CSS(fmt.Sprintf(`[data-k="%s"][data-f="%s"]`, qx(queue), field))
	}
	textIs := func(sel chromedp.CSS, want string) chromedp.Action[chromedp.Void] {
		return until(fmt.Sprintf(`(function(){var el=document.querySelector(%q); return !!el && el.textContent.trim()===%q})()`, string(sel), want))
	}
	css := func(s string) chromedp.CSS { return chromedp.CSS(s) }

	// The overview: counts as rendered, then live.
	require.NoError(t, chromedp.Do(bctx,
		chromedp.Navigate(e.url("/")),
		chromedp.WaitVisible(css(`#queues`)),
	))
	waiting, err := chromedp.Run(bctx, chromedp.Text(cell("emails", "waiting")))
	require.NoError(t, err)
	assert.Equal(t, "2", waiting)
	require.NoError(t, chromedp.Do(bctx, chromedp.WaitReady(css(`#live[data-at]`)))) // the event stream is up

	_, err = e.c.EnqueueBatch(ctx, "emails", [][]byte{[]byte("a"), []byte("b"), []byte("c")})
	require.NoError(t, err)
	_, err = e.c.Enqueue(ctx, "reports", []byte("weekly"))
	require.NoError(t, err)
	require.NoError(t, chromedp.Do(bctx,
		textIs(cell("emails", "waiting"), "5"),
		textIs(cell("reports", "waiting"), "1"), // a new queue's row appears
		shot("overview"),
	), "the counts change as tasks are enqueued")

	// Tasks taken by a worker move to in flight.
	w, err := e.c.NewWorker(ctx, worqr.WorkerOptions{})
	require.NoError(t, err)
	defer func() { _ = w.Close(e.ctx()) }()
	require.NoError(t, w.StartWork(ctx, "thumbnails", worqr.Events{}))
	held, err := w.Dequeue(ctx, "thumbnails")
	require.NoError(t, err)
	require.NoError(t, chromedp.Do(bctx,
		textIs(cell("thumbnails", "waiting"), "0"),
		textIs(cell("thumbnails", "inFlight"), "1"),
	))

	// The queue page, and pause through its form and confirm().
	require.NoError(t, chromedp.Do(bctx,
		chromedp.Navigate(e.url("/queue?q="+qx("emails"))),
		chromedp.WaitVisible(css(`#waiting`)),
		chromedp.WaitVisible(css(`#dead`)),
		chromedp.WaitReady(css(`#live[data-at]`)),
		chromedp.Click(css(`button[data-op="pause"]`), chromedp.NodeVisible),
		chromedp.WaitVisible(css(`.notice`)), // the page after the redirect
		textIs(`.notice`, "Queue paused."),
		textIs(`#paused`, "paused"),
		chromedp.WaitVisible(css(`button[data-op="resume"]`)),
		shot("queue"),
	))
	mu.Lock()
	require.Len(t, dialogs, 1)
	assert.Equal(t, "Pause queue emails?", dialogs[0])
	mu.Unlock()
	qi, err := e.c.QueueInfo(ctx, "emails")
	require.NoError(t, err)
	assert.True(t, qi.Paused, "the click paused the queue in Redis")

	// Requeue the dead letter from its task page.
	require.NoError(t, chromedp.Do(bctx,
		chromedp.Navigate(e.url("/task?q="+qx("emails")+"&id="+dead)),
		chromedp.WaitVisible(css(`#payload`)),
		shot("task"),
		chromedp.Click(css(`button[data-op="requeue"]`), chromedp.NodeVisible),
		chromedp.WaitVisible(css(`.notice`)),
		textIs(`.notice`, "Dead letter requeued."),
	))
	n, err := e.c.DeadLetterCount(ctx, "emails")
	require.NoError(t, err)
	assert.Zero(t, n)

	// A queue page's stats: the task finished shows in its totals and
	// chart, and the live finished/s card gets numbers.
	require.NoError(t, held.Finish(ctx))
	require.NoError(t, chromedp.Do(bctx,
		chromedp.Navigate(e.url("/queue?q="+qx("thumbnails"))),
		chromedp.WaitVisible(css(`#statschart`)),
	))
	stats, err := chromedp.Run(bctx, chromedp.Text(css(`#stats`)))
	require.NoError(t, err)
	require.NoError(t, chromedp.Do(bctx,
		textIs(`#stat-finished`, "1"),
		textIs(`#stat-started`, "1"),
	), "totals: %s", stats)
	require.NoError(t, chromedp.Do(bctx,
		// One bar per minute with data: the start and the finish are
		// written when their client carries them, which may fall in two
		// minutes.
		until(`document.querySelectorAll("#statschart g.bar").length >= 1`),
	), "a bar in the chart")
	require.NoError(t, chromedp.Do(bctx,
		until(`(function(){var el=document.querySelector('#live[data-at]') && document.querySelector('[data-f="rate"]'); return !!el && /^[0-9]+\.[0-9]$/.test(el.textContent.trim())})()`),
		shot("queue-stats"),
	), "the live finished/s")

	require.NoError(t, chromedp.Do(bctx,
		chromedp.Navigate(e.url("/workers")),
		chromedp.WaitVisible(css(`#workers`)),
		shot("workers"),
	))
	workers, err := chromedp.Run(bctx, chromedp.Text(css(`#workers tbody`)))
	require.NoError(t, err)
	assert.True(t, strings.Contains(workers, "thumbnails"), workers)
}

// attackPage is a page on another port of the dashboard's host that sets
// the dashboard's CSRF cookie to a value of its own, with a longer path
// so that the browser sends it first, and at once posts a form with that
// value that pauses queue.
const attackPage = `<!doctype html><title>prize</title>
<form id="f" method="post" action="{{.Action}}">
<input type="hidden" name="csrf" value="{{.Forged}}">
<input type="hidden" name="op" value="pause">
<input type="hidden" name="q" value="{{.Queue}}">
<input type="hidden" name="back" value="queue">
<input type="hidden" name="confirmed" value="yes">
</form>
<script>
document.cookie = "{{.Cookie}}={{.Forged}}; path={{.Path}}";
document.getElementById("f").submit();
</script>`

// TestBrowserCrossPortForgery: a page served from another port of the
// same host cannot act on the dashboard, open or behind a token with the
// victim signed in, though the browser shares the cookies across ports
// and sends them with the page's form (SameSite does not tell ports
// apart).
func TestBrowserCrossPortForgery(t *testing.T) {
	bin := chromium(t)
	for _, token := range []string{"", testToken} {
		t.Run(map[string]string{"": "open", testToken: "token"}[token], func(t *testing.T) {
			e := newEnv(t, Options{Token: token, PollInterval: 100 * time.Millisecond})
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			_, err := e.c.Enqueue(ctx, "emails", []byte("x"))
			require.NoError(t, err)

			forged := strings.Repeat("a", 64)
			tmpl := template.Must(template.New("attack").Parse(attackPage))
			attacker := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/html; charset=utf-8")
				_ = tmpl.Execute(w, map[string]string{
					"Action": e.url("/action"), "Forged": forged, "Queue": qx("emails"),
					"Cookie": csrfCookie, "Path": e.prefix + "/action",
				})
			}))
			defer attacker.Close()
			require.Equal(t, strings.Split(e.srv.URL, ":")[1], strings.Split(attacker.URL, ":")[1], "the same host")
			require.NotEqual(t, e.srv.URL, attacker.URL, "another port")

			bctx := browser(t, bin)
			css := func(s string) chromedp.CSS { return chromedp.CSS(s) }
			opened := chromedp.Events(bctx, page.JavascriptDialogOpening)
			go func() { // accepts the confirm() of the dashboard's forms
				for _, err := range opened {
					if err != nil {
						return
					}
					_, _ = chromedp.Call(bctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: true})
				}
			}()
			// The victim uses the dashboard: signed in, or with its CSRF
			// cookie set by a page.
			if token != "" {
				require.NoError(t, chromedp.Do(bctx,
					chromedp.Navigate(e.url("/login")),
					chromedp.SendKeys(css(`input[name="token"]`), token, chromedp.NodeVisible),
					chromedp.Submit(css(`form.login`)),
					chromedp.WaitVisible(css(`#signout`)),
				))
			}
			require.NoError(t, chromedp.Do(bctx,
				chromedp.Navigate(e.url("/queue?q="+qx("emails"))),
				chromedp.WaitVisible(css(`button[data-op="pause"]`)),
			))

			// The attack: its form lands on the dashboard, which refuses it.
			require.NoError(t, chromedp.Do(bctx,
				chromedp.Navigate(attacker.URL+"/"),
				until(fmt.Sprintf(`location.href.indexOf(%q) === 0 && document.readyState === "complete"`, e.url("/"))),
			), "the attack page's form reached the dashboard")
			text, err := chromedp.Run(bctx, chromedp.Text(css(`body`)))
			require.NoError(t, err)
			t.Logf("the dashboard answered the forged form: %s", strings.TrimSpace(text))
			qi, err := e.c.QueueInfo(ctx, "emails")
			require.NoError(t, err)
			assert.False(t, qi.Paused, "a page on another port paused the queue")
			assert.Contains(t, text, "forbidden")

			// The victim's own pages still act; and sign out.
			require.NoError(t, chromedp.Do(bctx,
				chromedp.Navigate(e.url("/queue?q="+qx("emails"))),
				chromedp.Click(css(`button[data-op="pause"]`), chromedp.NodeVisible),
				chromedp.WaitVisible(css(`.notice`)), // the page after the redirect
				until(`!!document.querySelector(".notice") && document.querySelector(".notice").textContent.trim() === "Queue paused."`),
			))
			qi, err = e.c.QueueInfo(ctx, "emails")
			require.NoError(t, err)
			assert.True(t, qi.Paused, "the dashboard's own form")
			if token != "" {
				require.NoError(t, chromedp.Do(bctx,
					chromedp.Click(css(`#signout`), chromedp.NodeVisible),
					chromedp.WaitVisible(css(`input[name="token"]`)),
					chromedp.Navigate(e.url("/workers")),
					chromedp.WaitVisible(css(`input[name="token"]`)),
				), "signed out")
			}
		})
	}
}

// TestBrowserRebinding: a name that resolves to 127.0.0.1 (as an
// attacker's would once rebound) gets nothing from a dashboard without a
// token, while 127.0.0.1 and localhost work.
func TestBrowserRebinding(t *testing.T) {
	bin := chromium(t)
	e := newEnv(t, Options{})
	_, err := e.c.Enqueue(e.ctx(), "emails", []byte("x"))
	require.NoError(t, err)
	port := e.srv.URL[strings.LastIndex(e.srv.URL, ":"):]
	bctx := browser(t, bin, chromedp.Flag("host-resolver-rules", "MAP rebind.attacker.example 127.0.0.1"))
	text := func(u string) string {
		t.Helper()
		require.NoError(t, chromedp.Do(bctx, chromedp.Navigate(u), chromedp.WaitReady(chromedp.CSS(`body`))))
		s, err := chromedp.Run(bctx, chromedp.Text(chromedp.CSS(`body`)))
		require.NoError(t, err)
		return s
	}
	for _, path := range []string{"/", "/queue?q=" + qx("emails"), "/static/app.js"} {
		body := text("http://rebind.attacker.example" + port + e.prefix + path)
		assert.Contains(t, body, "does not answer to that host name", path)
		assert.NotContains(t, body, "emails", path)
	}
	assert.Contains(t, text("http://localhost"+port+e.prefix+"/"), "emails")
	assert.Contains(t, text(e.url("/")), "emails")
}

// crossSitePage is another site's page: images of the dashboard's task
// page (unknown ids, each a scan of the queue), and a link to one.
const crossSitePage = `<!doctype html><title>loading</title>
<script>var left = {{len .Images}}; function one() { if (--left === 0) document.title = "loaded"; }</script>
{{range .Images}}<img src="{{.}}" onerror="one()" onload="one()">{{end}}
<a id="link" href="{{.Link}}">a task</a>`

// TestBrowserCrossSiteGET: another site's images of the task page make
// the dashboard read nothing from Redis, and a link from it reaches the
// task page through one more click.
func TestBrowserCrossSiteGET(t *testing.T) {
	bin := chromium(t)
	e := newEnv(t, Options{})
	_, err := e.c.Enqueue(e.ctx(), "emails", []byte("x"))
	require.NoError(t, err)
	task := func(id string) string { return e.url("/task?q=" + qx("emails") + "&id=" + id) }
	var images []string
	for i := range 20 {
		images = append(images, task(fmt.Sprintf("unknown-%d", i)))
	}
	tmpl := template.Must(template.New("attack").Parse(crossSitePage))
	attacker := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_ = tmpl.Execute(w, map[string]any{"Images": images, "Link": task("unknown-link")})
	}))
	defer attacker.Close()
	port := attacker.URL[strings.LastIndex(attacker.URL, ":"):]
	bctx := browser(t, bin, chromedp.Flag("host-resolver-rules", "MAP attacker.example 127.0.0.1"))

	looked := func() bool { // whether a lookup began
		e.h.lookups.mu.Lock()
		defer e.h.lookups.mu.Unlock()
		return !e.h.lookups.at.IsZero()
	}
	require.NoError(t, chromedp.Do(bctx,
		chromedp.Navigate("http://attacker.example"+port+"/"),
		until(`document.title === "loaded"`),
	))
	assert.False(t, looked(), "another site's images looked tasks up")

	require.NoError(t, chromedp.Do(bctx, chromedp.Click(chromedp.CSS(`#link`), chromedp.NodeVisible)))
	bodyOnceLoaded(t, bctx, "Open this page?")
	assert.False(t, looked(), "a link from another site looked a task up")
	clickUntil(t, bctx, `main a`, "Not found: not waiting")
	assert.True(t, looked(), "the dashboard's own link")
}

// clickUntil clicks the first element css selects, in the page's own
// script (so a node the page replaced meanwhile is not clicked through a
// stale id), until the body holds want: a click that found no element, or
// whose page change was lost, is made again.
func clickUntil(t *testing.T, bctx context.Context, css, want string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	click := fmt.Sprintf(`(() => { const a = document.querySelector(%q); if (a) a.click(); return !!a; })()`, css)
	for {
		clicked, err := chromedp.Run(bctx, chromedp.Evaluate[bool](click))
		for range 20 {
			text, terr, ok := bodyHas(bctx, want)
			if ok {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("clicking %s never led to %q (click: %v, %v; last: %v, %q)", css, want, clicked, err, terr, text)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// bodyOnceLoaded waits until the page's body holds want, across the page
// change a click started: a read of the page being left fails, or finds
// the old text, and is made again in the new one.
func bodyOnceLoaded(t *testing.T, bctx context.Context, want string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		text, err, ok := bodyHas(bctx, want)
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the page never showed %q (last: %v, %q)", want, err, text)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// bodyHas reads the page's body once and reports whether it holds want;
// a read of a page being left fails, or finds the old text.
func bodyHas(bctx context.Context, want string) (text string, err error, ok bool) {
	text, err = chromedp.Run(bctx, chromedp.Text(chromedp.CSS(`body`)))
	return text, err, err == nil && strings.Contains(text, want)
}

// TestBrowserNarrow: at 420 px wide, with a queue name far longer than
// the window, no page is wider than the window (tables scroll in their
// own box, names wrap); the search box finds a task by id from the
// overview and lands on its readable address.
func TestBrowserNarrow(t *testing.T) {
	bin := chromium(t)
	artifacts := os.Getenv("WORQR_ARTIFACTS")
	if artifacts == "" {
		artifacts = t.TempDir()
	}
	require.NoError(t, os.MkdirAll(artifacts, 0o755))
	e := newEnv(t, Options{PollInterval: 100 * time.Millisecond})
	long := "tenant-" + strings.Repeat("averyveryverylongsegment-", 8) + "orders"
	dead, _ := fill(t, e, long)
	id, err := e.c.Enqueue(e.ctx(), "emails", []byte(`{"to":"ann@example.com","template":"welcome","vars":{"name":"Ann","plan":"pro"}}`))
	require.NoError(t, err)

	bctx := browser(t, bin, chromedp.WindowSize(420, 860))
	require.NoError(t, chromedp.Do(bctx, chromedp.EmulateViewport(420, 860)))
	css := func(s string) chromedp.CSS { return chromedp.CSS(s) }
	fits := until(`document.documentElement.scrollWidth <= window.innerWidth`)
	shot := func(name string) chromedp.Action[chromedp.Void] {
		return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			png, err := chromedp.FullScreenshot(100)(ctx, tg)
			if err != nil {
				return err
			}
			return os.WriteFile(filepath.Join(artifacts, name+".png"), png, 0o644)
		})
	}
	for _, p := range []struct{ name, path, sel string }{
		{"narrow-overview", "/", `#queues`},
		{"narrow-queue", queuePath("", long), `#waiting`},
		{"narrow-task", taskPath("", long, dead), `#payload`},
	} {
		require.NoError(t, chromedp.Do(bctx,
			chromedp.Navigate(e.url(p.path)),
			chromedp.WaitVisible(css(p.sel)),
			fits,
			shot(p.name),
		), "%s fits in 420 px", p.path)
	}

	// The search box, from the overview, without a queue.
	require.NoError(t, chromedp.Do(bctx,
		chromedp.Navigate(e.url("/")),
		chromedp.SendKeys(css(`form.search input[name="id"]`), id, chromedp.NodeVisible),
		chromedp.Submit(css(`form.search`)),
		chromedp.WaitVisible(css(`#payload`)),
	))
	loc, err := chromedp.Run(bctx, chromedp.Location())
	require.NoError(t, err)
	assert.Equal(t, e.url("/task/emails/"+id), loc, "the readable address")
	payload, err := chromedp.Run(bctx, chromedp.Text(css(`#payload`)))
	require.NoError(t, err)
	assert.Contains(t, payload, "\n  \"vars\": {\n    \"name\": \"Ann\",", "pretty-printed")
}

// TestBrowserBulk: on a queue page, two waiting tasks ticked and "Cancel
// selected" clicked (its own confirm() accepted) cancel those two; the
// dead letters with an error chosen from the list are requeued.
func TestBrowserBulk(t *testing.T) {
	bin := chromium(t)
	e := newEnv(t, Options{PollInterval: 100 * time.Millisecond})
	ctx := e.ctx()
	ids, err := e.c.EnqueueBatch(ctx, "orders", [][]byte{[]byte(`{"n":1}`), []byte(`{"n":2}`), []byte(`{"n":3}`)}, worqr.Kind("order.paid"))
	require.NoError(t, err)
	w, err := e.c.NewWorker(ctx, worqr.WorkerOptions{})
	require.NoError(t, err)
	defer func() { _ = w.Close(e.ctx()) }()
	require.NoError(t, w.StartWork(ctx, "failing", worqr.Events{}))
	bury(t, e, w, "failing", "order.refund", "card declined")
	bury(t, e, w, "failing", "order.refund", "card declined")
	bury(t, e, w, "failing", "order.refund", "timeout")

	bctx := browser(t, bin)
	var dialogs []string
	var mu sync.Mutex
	opened := chromedp.Events(bctx, page.JavascriptDialogOpening)
	go func() {
		for ev, err := range opened {
			if err != nil {
				return
			}
			mu.Lock()
			dialogs = append(dialogs, ev.Message)
			mu.Unlock()
			_, _ = chromedp.Call(bctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: true})
		}
	}()
	css := func(s string) chromedp.CSS { return chromedp.CSS(s) }
	notice := func(want string) chromedp.Action[chromedp.Void] {
		return until(fmt.Sprintf(`!!document.querySelector(".notice") && document.querySelector(".notice").textContent.trim() === %q`, want))
	}
	require.NoError(t, chromedp.Do(bctx,
		chromedp.Navigate(e.url("/queue/orders")),
		chromedp.Click(css(fmt.Sprintf(`input[value="%s"]`, ids[0])), chromedp.NodeVisible),
		chromedp.Click(css(fmt.Sprintf(`input[value="%s"]`, ids[2])), chromedp.NodeVisible),
		chromedp.Click(css(`button[value="waiting-cancel-selected"]`), chromedp.NodeVisible),
		chromedp.WaitVisible(css(`.notice`)), // the page after the redirect
		notice("2 waiting tasks cancelled."),
	))
	ts, err := e.c.Tasks(ctx, "orders", 0, -1)
	require.NoError(t, err)
	require.Len(t, ts, 1)
	assert.Equal(t, ids[1], ts[0].ID)

	require.NoError(t, chromedp.Do(bctx,
		chromedp.Navigate(e.url("/queue/failing")),
		chromedp.SetValue(css(`select[name="errx"]`), qx("card declined"), chromedp.NodeVisible),
		chromedp.Click(css(`button[value="dead-requeue-error"]`), chromedp.NodeVisible),
		chromedp.WaitVisible(css(`.notice`)),
		notice("2 dead letters requeued."),
	))
	n, err := e.c.DeadLetterCount(ctx, "failing")
	require.NoError(t, err)
	assert.EqualValues(t, 1, n)
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, []string{"Cancel the selected waiting tasks of queue orders?", "Requeue the dead letters with that error (among the newest 1000) of queue failing?"}, dialogs)
}

// TestBrowserPages drives every page over a queue with tasks in each
// state (waiting with kinds, scheduled, a retry, in flight with
// progress, dead, finished), a worker and a periodic schedule, checks
// what each shows, and saves each as a PNG in $WORQR_ARTIFACTS: the
// screenshots in docs/dashboard are made by
//
//	WORQR_ARTIFACTS=$PWD/docs/dashboard go test -run 'TestBrowserPages|TestBrowserNarrow' ./dashboard
func TestBrowserPages(t *testing.T) {
	bin := chromium(t)
	artifacts := os.Getenv("WORQR_ARTIFACTS")
	if artifacts == "" {
		artifacts = t.TempDir()
	}
	require.NoError(t, os.MkdirAll(artifacts, 0o755))
	e := newEnv(t, Options{PollInterval: 200 * time.Millisecond})
	ctx, cancelCtx := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancelCtx()

	w, err := e.c.NewWorker(ctx, worqr.WorkerOptions{})
	require.NoError(t, err)
	defer func() { _ = w.Close(e.ctx()) }()
	require.NoError(t, w.StartWork(ctx, "orders", worqr.Events{}))
	// Finished: one succeeded, one dead, retained; a dead letter each
	// of two errors; a retry; one in flight.
	run := func(payload string, end func(p *worqr.Process) error, opts ...worqr.EnqueueOption) string {
		id, err := e.c.Enqueue(ctx, "orders", []byte(payload), opts...)
		require.NoError(t, err)
		p, err := w.Dequeue(ctx, "orders")
		require.NoError(t, err)
		require.Equal(t, id, p.TaskID())
		if end != nil {
			require.NoError(t, end(p))
		}
		return id
	}
	paid := worqr.Kind("order.paid")
	run(`{"order":1001,"total":"12.50"}`, func(p *worqr.Process) error {
		p.SetResult([]byte(`{"invoice":"INV-1001","sent":true}`))
		return p.Finish(ctx)
	}, paid, worqr.Retain(time.Hour))
	run(`{"order":1002,"total":"99.00"}`, func(p *worqr.Process) error {
		return p.DeadLetter(ctx, errors.New("card declined: insufficient funds"))
	}, paid, worqr.Retain(time.Hour))
	run(`{"order":1003,"total":"5.00"}`, func(p *worqr.Process) error {
		return p.DeadLetter(ctx, errors.New("card declined: insufficient funds"))
	}, paid)
	run(`{"order":1004,"refund":"5.00"}`, func(p *worqr.Process) error {
		return p.DeadLetter(ctx, errors.New("gateway timeout after 30s"))
	}, worqr.Kind("order.refund"))
	// The retry fails twice: its page shows the two attempts.
	retry := run(`{"order":1005,"total":"42.00"}`, func(p *worqr.Process) error {
		if err := p.Retry(ctx, 0, errors.New("connection reset by peer")); err != nil {
			return err
		}
		again, err := w.Dequeue(ctx, "orders")
		if err != nil {
			return err
		}
		return again.Retry(ctx, time.Hour, errors.New("upstream answered 503"))
	}, paid)
	inFlight := run(`{"order":1006,"total":"7.25"}`, func(p *worqr.Process) error { return p.ReportProgress(ctx, 60, "charging") }, paid)
	var waiting []string
	for i := range 6 {
		id, err := e.c.Enqueue(ctx, "orders", fmt.Appendf(nil, `{"order":%d,"total":"%d.00","items":[{"sku":"A-%d","qty":1}]}`, 1010+i, 10+i, i), paid)
		require.NoError(t, err)
		waiting = append(waiting, id)
	}
	for i, tenant := range []string{"tenant-acme", "tenant-acme", "tenant-zeta"} {
		_, err := e.c.Enqueue(ctx, "orders", fmt.Appendf(nil, `{"order":%d,"total":"3.00"}`, 1020+i), paid, worqr.Group(tenant))
		require.NoError(t, err)
	}
	_, err = e.c.Enqueue(ctx, "orders", []byte(`{"report":"daily"}`), worqr.Kind("order.report"), worqr.In(2*time.Hour))
	require.NoError(t, err)
	_, err = e.c.EnqueueBatch(ctx, "emails", [][]byte{[]byte(`{"to":"ann@example.com"}`), []byte(`{"to":"bob@example.com"}`)})
	require.NoError(t, err)
	_, err = e.c.Enqueue(ctx, "tenant-acme-corporation-international-holdings-eu-west-1-invoices-reminders", []byte("x"))
	require.NoError(t, err)
	require.NoError(t, w.Periodic(ctx, "heartbeat", "maintenance", worqr.Every(time.Second), []byte("beat"), worqr.PeriodicOptions{}))
	// A worker with a pool of 4 handlers serves the ticks: the workers
	// page shows its pool.
	pooled, err := e.c.NewWorker(ctx, worqr.WorkerOptions{})
	require.NoError(t, err)
	defer func() { _ = pooled.Close(e.ctx()) }()
	require.NoError(t, pooled.Handle(ctx, "maintenance", func(context.Context, *worqr.Process) error { return nil }, worqr.HandleOptions{Concurrency: 4}))
	eventually(t, "a periodic tick", func() bool {
		ss, err := e.c.Schedules(ctx, "maintenance")
		return err == nil && len(ss) == 1 && ss[0].TaskID != ""
	})

	bctx := browser(t, bin)
	opened := chromedp.Events(bctx, page.JavascriptDialogOpening)
	go func() {
		for _, err := range opened {
			if err != nil {
				return
			}
			_, _ = chromedp.Call(bctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: true})
		}
	}()
	css := func(s string) chromedp.CSS { return chromedp.CSS(s) }
	shot := func(name string) chromedp.Action[chromedp.Void] {
		return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			png, err := chromedp.FullScreenshot(100)(ctx, tg)
			if err != nil {
				return err
			}
			return os.WriteFile(filepath.Join(artifacts, name+".png"), png, 0o644)
		})
	}
	fits := until(`document.documentElement.scrollWidth <= window.innerWidth`)
	text := func(sel string) string {
		t.Helper()
		s, err := chromedp.Run(bctx, chromedp.Text(css(sel)))
		require.NoError(t, err)
		return s
	}

	require.NoError(t, chromedp.Do(bctx,
		chromedp.Navigate(e.url("/")),
		chromedp.WaitVisible(css(`#queues`)),
		chromedp.WaitReady(css(`#live[data-at]`)),
		fits,
		shot("overview"),
	))
	names := text(`#queues tbody`)
	assert.Regexp(t, `(?s)emails.*maintenance.*orders.*tenant-acme`, names, "by name")

	// The charts: dead and retried stacked on finished, and the
	// percentiles (the stats may come a flush later: reload until then).
	require.NoError(t, chromedp.Do(bctx,
		chromedp.Navigate(e.url("/queue/orders")),
		chromedp.WaitVisible(css(`#finished`)),
	))
	deadline := time.Now().Add(30 * time.Second)
	for {
		n, err := chromedp.Run(bctx, chromedp.Evaluate[int](`document.querySelectorAll("#statschart rect.dead").length + document.querySelectorAll("#statschart rect.retried").length + (document.querySelector("#latchart polyline.run") && document.querySelector("#latchart polyline.run").getAttribute("points") ? 1 : 0)`))
		require.NoError(t, err)
		if n >= 3 {
			break
		}
		require.False(t, time.Now().After(deadline), "the charts never showed dead, retried and run times")
		require.NoError(t, chromedp.Do(bctx, chromedp.Reload(), chromedp.WaitVisible(css(`#finished`))))
	}
	require.NoError(t, chromedp.Do(bctx,
		chromedp.WaitReady(css(`#live[data-at]`)),
		fits,
		shot("queue"),
	))
	assert.Contains(t, text(`#delayed`), "retry")
	assert.Contains(t, text(`#finished`), "INV-1001")
	assert.Contains(t, text(`#dead`), "gateway timeout")
	assert.Contains(t, text(`#kinds`), "order.refund")
	assert.Regexp(t, `(?s)tenant-acme.*2.*tenant-zeta.*1`, text(`#groups tbody`), "the groups, most waiting first")

	// Pick a kind: the lists show only its tasks.
	clickUntil(t, bctx, `#kinds a[href*="kind=order.refund"]`, "of kind order.refund")
	require.NoError(t, chromedp.Do(bctx, chromedp.WaitVisible(css(`#dead`)), fits, shot("queue-kind")))
	assert.Contains(t, text(`#dead`), "gateway timeout")
	assert.NotContains(t, text(`#dead`), "card declined")
	assert.NotContains(t, text(`body`), waiting[0], "the waiting tasks are of another kind")
	require.NoError(t, chromedp.Do(bctx, chromedp.Navigate(e.url("/queue/orders")), chromedp.WaitVisible(css(`#finished`))))

	// Search the payloads from the queue's page.
	require.NoError(t, chromedp.Do(bctx,
		chromedp.SendKeys(css(`form.payload-search input[name="payload"]`), `"A-2"`, chromedp.NodeVisible),
		chromedp.Submit(css(`form.payload-search`)),
		chromedp.WaitVisible(css(`#found`)),
		shot("search-payloads"),
	))
	found := text(`#found tbody`)
	assert.Contains(t, found, waiting[2])
	assert.NotContains(t, found, waiting[1])

	require.NoError(t, chromedp.Do(bctx,
		chromedp.Navigate(e.url("/queue/orders?only=retries")),
		chromedp.WaitVisible(css(`#delayed`)),
	))
	assert.Contains(t, text(`#delayed`), retry)
	assert.NotContains(t, text(`#delayed`), "scheduled")

	require.NoError(t, chromedp.Do(bctx,
		chromedp.Navigate(e.url("/task/orders/"+waiting[0])),
		chromedp.WaitVisible(css(`#payload`)),
		fits,
		shot("task"),
	))
	assert.Contains(t, text(`#payload`), "\"items\": [\n    {\n      \"sku\": \"A-0\",")

	require.NoError(t, chromedp.Do(bctx,
		chromedp.Navigate(e.url("/task/orders/"+retry)),
		chromedp.WaitVisible(css(`button[data-op="runnow"]`)),
		chromedp.WaitVisible(css(`#attempts`)),
		shot("task-retry"),
		chromedp.Click(css(`button[data-op="runnow"]`), chromedp.NodeVisible),
		chromedp.WaitVisible(css(`.notice`)),
		until(`document.querySelector(".notice").textContent.indexOf("run now") >= 0`),
	))
	history := text(`#attempts tbody`)
	assert.Regexp(t, `(?s)1.*retried.*connection reset by peer.*2.*retried.*upstream answered 503`, history, "the attempts, oldest first")
	assert.Contains(t, text(`#where`), "Waiting", "run now")

	require.NoError(t, chromedp.Do(bctx,
		chromedp.Navigate(e.url("/workers")),
		chromedp.WaitVisible(css(`#workers`)),
		fits,
		shot("workers"),
	))
	ws := text(`#workers tbody`)
	assert.Contains(t, ws, inFlight)
	assert.Contains(t, ws, strconv.Itoa(os.Getpid()))
	assert.Regexp(t, `maintenance [0-4]/4`, ws, "the pool's concurrency")

	require.NoError(t, chromedp.Do(bctx,
		chromedp.Navigate(e.url("/periodic")),
		chromedp.WaitVisible(css(`#periodic`)),
		fits,
		shot("periodic"),
	))
	assert.Contains(t, text(`#periodic tbody`), "heartbeat")
}

// TestBrowserWorkflow: a diamond workflow, its top and one side done,
// the other side waiting in its queue: the lookup box opens its page,
// which lists the 4 steps in dependency order with their states; a
// step's link leads to its task's page, which links back; Cancel
// workflow, its confirm() accepted, ends it. The page is saved as
// workflow.png in $WORQR_ARTIFACTS.
func TestBrowserWorkflow(t *testing.T) {
	bin := chromium(t)
	artifacts := os.Getenv("WORQR_ARTIFACTS")
	if artifacts == "" {
		artifacts = t.TempDir()
	}
	require.NoError(t, os.MkdirAll(artifacts, 0o755))
	e := newEnv(t, Options{PollInterval: 200 * time.Millisecond})
	ctx, cancelCtx := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancelCtx()
	w, err := e.c.NewWorker(ctx, worqr.WorkerOptions{})
	require.NoError(t, err)
	defer func() { _ = w.Close(e.ctx()) }()
	require.NoError(t, w.Handle(ctx, "etl", func(_ context.Context, p *worqr.Process) error {
		p.SetResult([]byte(`{"rows":1200}`))
		return nil
	}, worqr.HandleOptions{}))
	_, err = e.c.EnqueueWorkflow(ctx, []worqr.Step{
		{Name: "extract", Queue: "etl", Task: []byte(`{"source":"s3://bucket/day.csv"}`)},
		{Name: "clean", Queue: "etl", After: []string{"extract"}},
		{Name: "enrich", Queue: "geo", After: []string{"extract"}},
		{Name: "load", Queue: "etl", After: []string{"clean", "enrich"}},
	}, worqr.WorkflowOptions{ID: "nightly-2026-11-27"})
	require.NoError(t, err)
	// No one serves geo: enrich waits in its queue, load for it.
	eventually(t, "extract and clean done", func() bool {
		info, err := e.c.Workflow(ctx, "nightly-2026-11-27")
		if err != nil {
			return false
		}
		states := map[string]worqr.StepState{}
		for _, st := range info.Steps {
			states[st.Name] = st.State
		}
		return states["extract"] == worqr.StepSucceeded && states["clean"] == worqr.StepSucceeded && states["enrich"] == worqr.StepQueued
	})

	bctx := browser(t, bin)
	var dialogs []string
	var mu sync.Mutex
	opened := chromedp.Events(bctx, page.JavascriptDialogOpening)
	go func() {
		for ev, err := range opened {
			if err != nil {
				return
			}
			mu.Lock()
			dialogs = append(dialogs, ev.Message)
			mu.Unlock()
			_, _ = chromedp.Call(bctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: true})
		}
	}()
	css := func(s string) chromedp.CSS { return chromedp.CSS(s) }
	text := func(sel string) string {
		t.Helper()
		s, err := chromedp.Run(bctx, chromedp.Text(css(sel)))
		require.NoError(t, err)
		return s
	}

	// The lookup box, from the overview.
	require.NoError(t, chromedp.Do(bctx,
		chromedp.Navigate(e.url("/")),
		chromedp.WaitVisible(css(`#queues`)),
		chromedp.SendKeys(css(`input[name="id"][aria-label="workflow id"]`), "nightly-2026-11-27", chromedp.NodeVisible),
	))
	clickUntil(t, bctx, `#findwf`, "In dependency order")
	require.NoError(t, chromedp.Do(bctx,
		chromedp.WaitVisible(css(`#steps`)),
		until(`document.documentElement.scrollWidth <= window.innerWidth`),
		chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			png, err := chromedp.FullScreenshot(100)(ctx, tg)
			if err != nil {
				return err
			}
			return os.WriteFile(filepath.Join(artifacts, "workflow.png"), png, 0o644)
		}),
	))
	assert.Equal(t, "running", text(`#workflow-state`))
	rows := text(`#steps tbody`)
	assert.Regexp(t, `(?s)extract\s+succeeded.*clean\s+succeeded.*enrich\s+queued.*load\s+waiting`, rows, "4 steps, in dependency order, with their states")

	// Follow enrich's task link: its task's page, which links back.
	clickUntil(t, bctx, `#steps a[href*="/task/geo/"]`, "Waiting")
	assert.Contains(t, text(`#where`), "step enrich of workflow nightly-2026-11-27")
	clickUntil(t, bctx, `#workflow-link`, "In dependency order")

	// A finished step's task page links back too.
	clickUntil(t, bctx, `#steps a[href*="/task/etl/"]`, "Outcome")
	assert.Contains(t, text(`#where`), "step extract of workflow")
	clickUntil(t, bctx, `#workflow-link`, "In dependency order")

	require.NoError(t, chromedp.Do(bctx,
		chromedp.Click(css(`button[data-op="cancelworkflow"]`), chromedp.NodeVisible),
		chromedp.WaitVisible(css(`.notice`)),
		until(`document.querySelector(".notice").textContent.indexOf("Workflow cancelled") >= 0`),
	))
	assert.Equal(t, "cancelled", text(`#workflow-state`))
	mu.Lock()
	assert.Contains(t, strings.Join(dialogs, "\n"), "Cancel workflow nightly-2026-11-27?")
	mu.Unlock()
	info, err := e.c.Workflow(ctx, "nightly-2026-11-27")
	require.NoError(t, err)
	assert.Equal(t, worqr.WorkflowCancelled, info.State)
}

// TestBrowserBulkByErrorOfAnyText: the dead letters whose error is
// chosen from the list are requeued whatever the error's text: several
// lines (a browser sends a form value's line breaks as CRLF), or bytes
// that are not UTF-8 (which a page cannot carry as they are).
func TestBrowserBulkByErrorOfAnyText(t *testing.T) {
	bin := chromium(t)
	e := newEnv(t, Options{})
	ctx := e.ctx()
	w, err := e.c.NewWorker(ctx, worqr.WorkerOptions{})
	require.NoError(t, err)
	defer func() { _ = w.Close(e.ctx()) }()
	require.NoError(t, w.StartWork(ctx, "failing", worqr.Events{}))
	errs := []string{"panic: boom\n\ngoroutine 1 [running]:\nmain.main()", "bad byte \xff\x00 here", "tab\tand\r\nCRLF"}
	for _, msg := range errs {
		bury(t, e, w, "failing", "", msg)
		bury(t, e, w, "failing", "", msg)
	}
	bctx := browser(t, bin)
	require.NoError(t, chromedp.Do(bctx, chromedp.Navigate(e.url("/queue/failing"))))
	for i := range errs {
		require.NoError(t, chromedp.Do(bctx,
			chromedp.Navigate(e.url("/queue/failing")),
			chromedp.WaitVisible(chromedp.CSS(`select[name="errx"]`)),
		))
		n, err := chromedp.Run(bctx, chromedp.Evaluate[int](`document.querySelector('select[name="errx"]').options.length`))
		require.NoError(t, err)
		require.Equal(t, len(errs)-i, n, "the errors left to choose from")
		_, err = chromedp.Run(bctx, chromedp.Evaluate[int](`window.confirm = () => true; document.querySelector('select[name="errx"]').selectedIndex = 0; 0`))
		require.NoError(t, err)
		require.NoError(t, chromedp.Do(bctx,
			chromedp.Click(chromedp.CSS(`button[value="dead-requeue-error"]`), chromedp.NodeVisible),
			chromedp.WaitVisible(chromedp.CSS(`.notice`)),
		))
		notice, err := chromedp.Run(bctx, chromedp.Text(chromedp.CSS(`.notice`)))
		require.NoError(t, err)
		assert.Equal(t, "2 dead letters requeued.", notice, fmt.Sprintf("choice %d", i))
	}
	n, err := e.c.DeadLetterCount(ctx, "failing")
	require.NoError(t, err)
	assert.EqualValues(t, 0, n)
}

// TestBrowserStreamRefused: a page whose live stream is refused (too
// many open) says it has no live counts: the browser closed the stream
// (a 503 is not retried), where a dropped one says it reconnects.
func TestBrowserStreamRefused(t *testing.T) {
	bin := chromium(t)
	e := newEnv(t, Options{MaxStreams: 1, PollInterval: 100 * time.Millisecond})
	_, err := e.c.Enqueue(e.ctx(), "emails", []byte("x"))
	require.NoError(t, err)
	other := e.watch() // the one stream allowed
	bctx := browser(t, bin)
	require.NoError(t, chromedp.Do(bctx, chromedp.Navigate(e.url("/")),
		until(`document.getElementById("live").textContent === "no live counts: reload later"`)))
	other.close()
}
