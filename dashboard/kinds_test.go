package dashboard

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/worqr/worqr"
)

// The queue's page counts its tasks by kind in each list, and a kind
// picked there shows only that kind's tasks in the waiting, delayed, in
// flight and dead lists; "(none)" picks the tasks without a kind.
func TestKindsCountedAndFiltered(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Options{})
	ctx := e.ctx()
	w, err := e.c.NewWorker(ctx, worqr.WorkerOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = w.Close(e.ctx()) })
	require.NoError(t, w.StartWork(ctx, "q", worqr.Events{}))
	mail, bill := worqr.Kind("mail.welcome"), worqr.Kind("bill.monthly")
	// One of each kind dies, one mail is in flight.
	for _, k := range []worqr.EnqueueOption{mail, bill} {
		_, err := e.c.Enqueue(ctx, "q", []byte("dies"), k)
		require.NoError(t, err)
		p, err := w.Dequeue(ctx, "q")
		require.NoError(t, err)
		require.NoError(t, p.DeadLetter(ctx, errors.New("no")))
	}
	_, err = e.c.Enqueue(ctx, "q", []byte("runs"), mail)
	require.NoError(t, err)
	running, err := w.Dequeue(ctx, "q")
	require.NoError(t, err)
	_, err = e.c.EnqueueBatch(ctx, "q", [][]byte{[]byte("mail-1"), []byte("mail-2"), []byte("mail-3")}, mail)
	require.NoError(t, err)
	_, err = e.c.EnqueueBatch(ctx, "q", [][]byte{[]byte("bill-1"), []byte("bill-2")}, bill)
	require.NoError(t, err)
	_, err = e.c.Enqueue(ctx, "q", []byte("plain-1"))
	require.NoError(t, err)
	_, err = e.c.Enqueue(ctx, "q", []byte("bill-later"), bill, worqr.In(time.Hour))
	require.NoError(t, err)

	code, body := e.get("/queue/q")
	require.Equal(t, http.StatusOK, code)
	kinds := sectionOf(body, `id="kinds"`)
	row := func(kind string) []string {
		m := regexp.MustCompile(`>` + regexp.QuoteMeta(kind) + `</a></td><td class="n">(\d+)</td><td class="n">(\d+)</td><td class="n">(\d+)</td><td class="n">(\d+)</td>`).FindStringSubmatch(kinds)
		if m == nil {
			return nil
		}
		return m[1:]
	}
	assert.Equal(t, []string{"3", "0", "1", "1"}, row("mail.welcome"), "waiting, delayed, in flight, dead")
	assert.Equal(t, []string{"2", "1", "0", "1"}, row("bill.monthly"))
	assert.Equal(t, []string{"1", "0", "0", "0"}, row("(none)"))
	assert.Less(t, strings.Index(kinds, "mail.welcome"), strings.Index(kinds, "(none)"), "most tasks first")

	_, body = e.get("/queue/q?kind=bill.monthly")
	waiting := sectionOf(body, `id="waiting"`)
	assert.Contains(t, waiting, "bill-1")
	assert.Contains(t, waiting, "bill-2")
	assert.NotContains(t, waiting, "mail-")
	assert.NotContains(t, waiting, "plain-")
	assert.Contains(t, sectionOf(body, `id="delayed"`), "bill-later")
	assert.NotContains(t, body, `id="inflight"`, "the mail in flight is not shown")
	dead := sectionOf(body, `id="dead"`)
	assert.Contains(t, dead, "bill.monthly")
	assert.NotContains(t, dead, "mail.welcome")
	assert.Contains(t, body, `<tr class="on"><td><a href="/ops/queue/q?kind=bill.monthly"`)

	_, body = e.get("/queue/q?kind=mail.welcome")
	assert.Contains(t, sectionOf(body, `id="inflight"`), running.TaskID())

	_, body = e.get("/queue/q?kind=" + url.QueryEscape(noKind))
	waiting = sectionOf(body, `id="waiting"`)
	assert.Contains(t, waiting, "plain-1")
	assert.NotContains(t, waiting, "bill-")
	assert.NotContains(t, waiting, "mail-")

	code, _ = e.get("/queue/q?kind=" + strings.Repeat("k", worqr.MaxKindLen+1))
	assert.Equal(t, http.StatusBadRequest, code)
}

// A list filtered by kind pages on from where its page stopped, and back
// only to its first page.
func TestKindFilterPages(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Options{})
	ctx := e.ctx()
	// 60 of kind a, each after one of kind b: the first page of a's ends
	// at position 99.
	for i := range 60 {
		_, err := e.c.Enqueue(ctx, "q", []byte("b"), worqr.Kind("b"))
		require.NoError(t, err)
		_, err = e.c.Enqueue(ctx, "q", []byte("a"+string(rune('0'+i%10))), worqr.Kind("a"))
		require.NoError(t, err)
	}
	_, body := e.get("/queue/q?kind=a")
	assert.Equal(t, pageSize, strings.Count(sectionOf(body, `id="waiting"`), "<tr>")-1, "a page of a's (and the header)")
	assert.Contains(t, body, `href="/ops/queue/q?kind=a&amp;wo=100">later →</a>`)
	_, body = e.get("/queue/q?kind=a&wo=100")
	assert.Equal(t, 10, strings.Count(sectionOf(body, `id="waiting"`), "<tr>")-1, "the ten left")
	assert.NotContains(t, sectionOf(body, `id="waiting"`), ">b<")
	assert.Contains(t, body, `href="/ops/queue/q?kind=a">← from the first</a>`)
	assert.NotContains(t, body, "later →")
}

// The kinds' table shows each kind's finished, retried and dead tasks per
// minute over the stats' last hour, with a row for a kind the lists no
// longer hold and one for the kinds past the stats' bound (no link: no
// task has that kind); the tasks without a kind are not rated.
func TestKindRates(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Options{})
	ctx := e.ctx()
	w, err := e.c.NewWorker(ctx, worqr.WorkerOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = w.Close(e.ctx()) })
	require.NoError(t, w.StartWork(ctx, "q", worqr.Events{}))
	end := func(kind string, how func(p *worqr.Process) error) {
		t.Helper()
		var opts []worqr.EnqueueOption
		if kind != "" {
			opts = append(opts, worqr.Kind(kind))
		}
		_, err := e.c.Enqueue(ctx, "q", []byte(kind), opts...)
		require.NoError(t, err)
		p, err := w.Dequeue(ctx, "q")
		require.NoError(t, err)
		require.NoError(t, how(p))
	}
	finish := func(p *worqr.Process) error { return p.Finish(ctx) }
	for range 6 {
		end("mail.welcome", finish)
	}
	for range 3 {
		end("mail.welcome", func(p *worqr.Process) error { return p.Retry(ctx, 0, errors.New("again")) })
		_, err := w.Dequeue(ctx, "q") // the retry, left in flight
		require.NoError(t, err)
	}
	end("bill.monthly", func(p *worqr.Process) error { return p.DeadLetter(ctx, errors.New("no")) })
	end("", finish)
	// Written now: the kinds of one write are admitted in their order.
	_, err = e.c.Stats(ctx, "q", worqr.StatsOptions{})
	require.NoError(t, err)
	for i := range worqr.StatsKinds {
		end(fmt.Sprintf("k%02d", i), finish) // the first 8 kept apart, the rest (other)
	}
	_, err = e.c.Enqueue(ctx, "q", []byte("plain, waiting"))
	require.NoError(t, err)

	_, body := e.get("/queue/q")
	kinds := sectionOf(body, `id="kinds"`)
	assert.Contains(t, kinds, `Finished/min`)
	rates := func(kind string) []string {
		m := regexp.MustCompile(regexp.QuoteMeta(kind) + `</(?:a|span)></td>(?:<td class="n">\d+</td>){4}<td class="n">([^<]+)</td><td class="n">([^<]+)</td><td class="n">([^<]+)</td>`).FindStringSubmatch(kinds)
		if m == nil {
			return nil
		}
		return m[1:]
	}
	assert.Equal(t, []string{"0.10", "0.05", "0.00"}, rates("mail.welcome"), "6 finished, 3 retried in 60 minutes")
	assert.Equal(t, []string{"0.00", "0.00", "0.02"}, rates("bill.monthly"))
	assert.Equal(t, []string{"—", "—", "—"}, rates("(none)"))
	assert.Equal(t, []string{"0.02", "0.00", "0.00"}, rates("k00"), "a kind no list holds")
	assert.Equal(t, []string{"0.03", "0.00", "0.00"}, rates(worqr.StatsOtherKind), "k08, k09")
	assert.Nil(t, rates("k09"))
	assert.NotContains(t, kinds, `kind=%28other%29`, "the other kinds filter nothing")
	assert.Less(t, strings.Index(kinds, "k07"), strings.Index(kinds, worqr.StatsOtherKind), "other last")

	_, body = e.get("/queue/q?res=h")
	assert.Contains(t, sectionOf(body, `id="kinds"`), `Finished/h`)
}
