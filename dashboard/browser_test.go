package dashboard

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
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

	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(bin),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-background-networking", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 860),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelAlloc()
	bctx, cancelBrowser := chromedp.NewContext(actx, chromedp.WithLogf(t.Logf))
	defer cancelBrowser()
	bctx, cancelTimeout := context.WithTimeout(bctx, 90*time.Second)
	defer cancelTimeout()

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
	// until waits, in the page, for a JavaScript condition: up to 30 s,
	// for a loaded CI machine that runs the -race suites beside it.
	until := func(cond string) chromedp.Action[chromedp.Void] {
		return chromedp.Poll[chromedp.Void](cond, chromedp.WithPollingTimeout(30*time.Second))
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
