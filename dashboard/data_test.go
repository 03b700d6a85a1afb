package dashboard

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/worqr/worqr"
)

// postBody submits an action form and returns the status and the page.
func (e *env) postBody(form url.Values) (int, string) {
	e.t.Helper()
	req, err := http.NewRequest(http.MethodPost, e.url("/action"), strings.NewReader(form.Encode()))
	require.NoError(e.t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	res, err := e.http.Do(req)
	require.NoError(e.t, err)
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	require.NoError(e.t, err)
	return res.StatusCode, string(b)
}

// The limit form refuses a limit the scripts cannot hold exactly, with a
// message that says why, and changes nothing.
func TestLimitFormRefusesALimitTooLarge(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Options{})
	ctx := e.ctx()
	_, err := e.c.Enqueue(ctx, "jobs", []byte("x"))
	require.NoError(t, err)
	require.NoError(t, e.c.SetConcurrency(ctx, "jobs", 5))
	tok := e.csrf()
	for _, n := range []string{"9223372036854775807", "9007199254740992"} {
		code, body := e.postBody(url.Values{"csrf": {tok}, "op": {"limit"}, "q": {qx("jobs")}, "n": {n}, "confirmed": {"yes"}})
		assert.Equal(t, http.StatusBadRequest, code, n)
		assert.Contains(t, body, "limit "+n+" not in 0..9007199254740991", n)
	}
	info, err := e.c.QueueInfo(ctx, "jobs")
	require.NoError(t, err)
	assert.Equal(t, 5, info.Concurrency)
	_, body := e.get("/queue?q=" + qx("jobs"))
	assert.Contains(t, body, `max="9007199254740991"`)
}

// Pause, resume and limit on a queue that does not exist say so and make
// no queue.
func TestControlActionsOnAQueueThatDoesNotExist(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Options{})
	tok := e.csrf()
	for _, op := range []string{"pause", "resume", "limit"} {
		code, body := e.postBody(url.Values{"csrf": {tok}, "op": {op}, "q": {qx("nonexistent2")}, "n": {"3"}, "confirmed": {"yes"}})
		assert.Equal(t, http.StatusNotFound, code, op)
		assert.Contains(t, body, "no such queue", op)
	}
	qs, err := e.c.Queues(e.ctx())
	require.NoError(t, err)
	assert.Empty(t, qs)
	assert.ErrorIs(t, e.c.Pause(e.ctx(), "nonexistent2"), worqr.ErrNoQueue)
}

// The pages read a bounded number of bytes from Redis whatever the
// payloads are: looking a task up by id scans the queue in Redis and gets
// back only the task, its payload cut to the preview; the queue page gets
// each row's first bytes; the workers page none. Measured as the bytes of
// the replies the dashboard's Redis client receives, with payloads of
// 1 MiB in every state.
func TestPagesReadBoundedBytes(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Options{ReadOnly: true})
	e.frozen() // its lookups are slow on miniredis: not this test's budget
	// 15 MiB through miniredis's Lua under -race, beside the package's
	// other parallel tests, takes more than e.ctx's 10 s on a loaded
	// machine.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	payload := func(i int) []byte {
		head := fmt.Sprintf("task-%d:", i)
		return append([]byte(head), bytes.Repeat([]byte("x"), 1<<20-len(head))...)
	}
	// has asserts that a page holds s, without printing the page.
	has := func(body, s, what string) {
		t.Helper()
		assert.True(t, strings.Contains(body, s), "%s: no %q", what, s)
	}
	var ids []string
	for i := range 12 {
		id, err := e.c.Enqueue(ctx, "big", payload(i))
		require.NoError(t, err)
		ids = append(ids, id)
	}
	for i := range 3 {
		_, err := e.c.Enqueue(ctx, "big", payload(100+i), worqr.In(time.Hour))
		require.NoError(t, err)
	}
	w, err := e.c.NewWorker(ctx, worqr.WorkerOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = w.Close(e.ctx()) })
	require.NoError(t, w.StartWork(ctx, "big", worqr.Events{}))
	for range 3 {
		p, err := w.Dequeue(ctx, "big")
		require.NoError(t, err)
		require.NoError(t, p.DeadLetter(ctx, errors.New("boom")))
	}
	for range 2 {
		_, err := w.Dequeue(ctx, "big")
		require.NoError(t, err)
	}
	// Now 7 tasks wait, 3 are delayed, 3 dead, 2 in flight: 15 MiB.

	read := func(path string) (int64, string) {
		t.Helper()
		before := e.rdb.bytes.Load()
		code, body := e.get(path)
		require.Less(t, code, 500, body)
		return e.rdb.bytes.Load() - before, body
	}
	const bound = 64 << 10
	q := qx("big")
	n, body := read("/task?q=" + q + "&id=ffffffffffffff")
	assert.Less(t, n, int64(bound), "an unknown id")
	has(body, "Not found", "unknown id")
	n, body = read("/task?q=" + q + "&id=" + ids[len(ids)-1])
	assert.Less(t, n, int64(taskPreview+bound), "the last waiting task")
	has(body, "at position 6", "waiting task")
	has(body, "1048576 bytes, first 64 KiB shown", "waiting task")
	has(body, "task-11:xxx", "waiting task")
	n, body = read("/task?q=" + q + "&id=" + ids[0])
	assert.Less(t, n, int64(taskPreview+bound), "a dead letter")
	has(body, "boom", "dead letter")
	n, body = read("/queue?q=" + q)
	assert.Less(t, n, int64(bound), "the queue page")
	for _, s := range []string{"task-11:xxx", "task-100:xxx", "task-3:xxx", "task-4:xxx", "task-0:xxx"} {
		has(body, s, "queue page")
	}
	n, _ = read("/workers")
	assert.Less(t, n, int64(bound), "the workers page")
}
