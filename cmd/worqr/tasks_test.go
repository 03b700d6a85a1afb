package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/worqr/worqr"
)

// enqueued runs worqr enqueue and returns the id it printed.
func (b *backend) enqueued(stdin string, args ...string) string {
	b.t.Helper()
	r := b.runIn(stdin, append([]string{"enqueue"}, args...)...)
	require.Equal(b.t, 0, r.code, "%s", r)
	id := strings.TrimSpace(r.stdout)
	require.Regexp(b.t, `^[0-9a-f]+$`, id)
	return id
}

func TestEnqueue(t *testing.T) {
	t.Parallel()
	b := newBackend(t)
	c, ctx := b.client(), ctxT(t)

	plain := b.enqueued("", "jobs", "hello world")
	binary := "line1\nline2\x00\xff"
	fromStdin := b.enqueued(binary, "jobs", "-")
	dashed := b.enqueued("", "jobs", "--", "-x")
	negative := b.enqueued("", "jobs", "-5")
	front := b.enqueued("", "jobs", "first", "--front", "--max-attempts", "2")
	tasks, err := c.Tasks(ctx, "jobs", 0, -1)
	require.NoError(t, err)
	require.Len(t, tasks, 5)
	want := []struct{ id, payload string }{{front, "first"}, {plain, "hello world"}, {fromStdin, binary}, {dashed, "-x"}, {negative, "-5"}}
	for i, w := range want {
		assert.Equal(t, w.id, tasks[i].ID)
		assert.Equal(t, w.payload, string(tasks[i].Payload))
	}
	assert.Equal(t, 2, tasks[0].MaxAttempts)

	in := b.enqueued("", "jobs", "in an hour", "--in", "1h")
	at := time.Now().Add(3 * time.Hour).Truncate(time.Millisecond)
	atID := b.enqueued("", "--at", at.Format(time.RFC3339Nano), "jobs", "at three")
	delayed, err := c.Delayed(ctx, "jobs", 0, -1)
	require.NoError(t, err)
	require.Len(t, delayed, 2)
	assert.Equal(t, in, delayed[0].ID)
	assert.WithinDuration(t, time.Now().Add(time.Hour), delayed[0].DueAt, time.Minute)
	assert.Equal(t, atID, delayed[1].ID)
	assert.True(t, at.Equal(delayed[1].DueAt), "due %v, want %v", delayed[1].DueAt, at)

	var doc struct{ Queue, ID string }
	r := b.ok("enqueue", "jobs", "x", "--json", "--retain", "1h", "--task-timeout", "5s")
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &doc))
	assert.Equal(t, "jobs", doc.Queue)
	n, err := c.QueueLen(ctx, "jobs")
	require.NoError(t, err)
	assert.Equal(t, int64(6), n)

	for _, bad := range []struct {
		msg  string
		args []string
	}{
		{"missing arguments", []string{"enqueue", "jobs"}},
		{"too many arguments", []string{"enqueue", "jobs", "a", "b"}},
		{"negative duration", []string{"enqueue", "jobs", "x", "--in", "-1s"}},
		{"not a duration", []string{"enqueue", "jobs", "x", "--retain", "soon"}},
		{"not both", []string{"enqueue", "jobs", "x", "--in", "1m", "--at", "2030-01-01T00:00:00Z"}},
		{"not an RFC 3339 time", []string{"enqueue", "jobs", "x", "--at", "tomorrow"}},
		{"--front does not apply", []string{"enqueue", "jobs", "x", "--front", "--in", "1m"}},
		{"--max-attempts 0 is not a budget", []string{"enqueue", "jobs", "x", "--max-attempts", "0"}},
		{"queue name must be", []string{"enqueue", "", "x"}},
	} {
		b.fails(exitUsage, bad.msg, bad.args...)
	}
	// A payload on stdin over the limit is refused with its size, not
	// the size read up to the limit.
	r = b.runIn(strings.Repeat("x", 5_000_000), "enqueue", "jobs", "-")
	assert.Equal(t, exitFailure, r.code)
	assert.Contains(t, r.stderr, "worqr enqueue: the payload on stdin is 5000000 bytes, over the limit of 1048576 bytes (1 MiB)")
	n, err = c.QueueLen(ctx, "jobs")
	require.NoError(t, err)
	assert.Equal(t, int64(6), n, "a refused enqueue adds nothing")
}

// --max-attempts says a budget or, negative, no limit, as
// worqr.MaxAttempts does; 0, which would silently mean the queue's
// budget, is refused (above).
func TestEnqueueWithNoAttemptLimit(t *testing.T) {
	t.Parallel()
	b := newBackend(t)
	c, ctx := b.client(), ctxT(t)
	id := b.enqueued("", "jobs", "forever", "--max-attempts", "-1")
	tasks, err := c.Tasks(ctx, "jobs", 0, -1)
	require.NoError(t, err)
	require.Len(t, tasks, 1)
	assert.Equal(t, id, tasks[0].ID)
	assert.Equal(t, -1, tasks[0].MaxAttempts)
	rs := rows(b.ok("peek", "jobs").stdout)
	require.Len(t, rs, 2)
	assert.Equal(t, []string{"0", id, "0/∞"}, rs[1][:3])
}

func TestCancelAndDelete(t *testing.T) {
	t.Parallel()
	b := newBackend(t)
	c, ctx := b.client(), ctxT(t)
	ids, err := c.EnqueueBatch(ctx, "q", [][]byte{[]byte("a"), []byte("b"), []byte("b")})
	require.NoError(t, err)
	later, err := c.Enqueue(ctx, "q", []byte("c"), worqr.In(time.Hour))
	require.NoError(t, err)

	out := b.ok("cancel", "q", ids[0]).stdout
	assert.Equal(t, "cancelled in \"q\": 1 removed (waiting or delayed), 0 marked in flight\n", out)
	b.fails(exitFailure, "no task "+ids[0]+" waiting, delayed or in flight in \"q\"", "cancel", "q", ids[0])

	var res struct {
		Queue           string
		Removed, Marked int64
	}
	require.NoError(t, json.Unmarshal([]byte(b.runIn("b", "cancel", "--payload", "q", "-", "--json").stdout), &res))
	assert.Equal(t, int64(2), res.Removed)
	b.fails(exitFailure, "has that payload", "cancel", "--payload", "q", "b")
	b.ok("cancel", "q", later)
	n, err := c.DelayedLen(ctx, "q")
	require.NoError(t, err)
	assert.Zero(t, n)

	// A task in flight is marked, and its holder hears of it.
	w := newWorker(t, c)
	require.NoError(t, w.StartWork(ctx, "q", worqr.Events{}))
	held, err := c.Enqueue(ctx, "q", []byte("d"))
	require.NoError(t, err)
	p, err := w.Dequeue(ctx, "q")
	require.NoError(t, err)
	require.Equal(t, held, p.TaskID())
	res.Removed, res.Marked = 0, 0
	require.NoError(t, json.Unmarshal([]byte(b.ok("cancel", "q", held, "--json").stdout), &res))
	assert.Equal(t, int64(1), res.Marked)
	select {
	case <-p.Done():
		assert.ErrorIs(t, p.Err(), worqr.ErrTaskCancelled)
	case <-time.After(10 * time.Second):
		t.Fatal("the holder did not hear of the cancel")
	}
	require.NoError(t, p.Finish(ctx)) // lets go of it
	procs, err := c.Processes(ctx, "q")
	require.NoError(t, err)
	require.Empty(t, procs)

	// delete asks for --yes and changes nothing without it.
	_, err = c.EnqueueBatch(ctx, "q", [][]byte{[]byte("e"), []byte("f")})
	require.NoError(t, err)
	r := b.fails(exitUsage, "delete needs --yes", "delete", "q")
	assert.Contains(t, r.stderr, `would delete queue "q": 2 waiting, 0 delayed, 0 dead letters`)
	n, err = c.QueueLen(ctx, "q")
	require.NoError(t, err)
	assert.Equal(t, int64(2), n)

	var del struct {
		Queue                   string
		Dropped, Dead, InFlight int64
	}
	require.NoError(t, json.Unmarshal([]byte(b.ok("delete", "q", "--yes", "--json").stdout), &del))
	assert.Equal(t, int64(2), del.Dropped)
	queues, err := c.Queues(ctx)
	require.NoError(t, err)
	assert.NotContains(t, queues, "q")
	n, err = c.QueueLen(ctx, "q")
	require.NoError(t, err)
	assert.Zero(t, n)
	b.fails(exitFailure, `no queue "q"`, "delete", "q", "--yes")
}

// outcome is worqr result's and wait's JSON.
type outcome struct {
	ID, Queue, Status                         string
	Attempts                                  int
	EnqueuedAt, StartedAt, EndedAt, ExpiresAt *time.Time
	Result                                    *string
	ResultBase64                              string
	Error, Reason                             string
}

func TestResultAndWait(t *testing.T) {
	t.Parallel()
	b := newBackend(t)
	c, ctx := b.client(), ctxT(t)

	id := b.enqueued("", "thumbs", "cat.png", "--retain", "1h")
	boom := b.enqueued("", "thumbs", "boom", "--retain", "1h")
	b.fails(exitFailure, "no outcome of task "+id+` in "thumbs"`, "result", "thumbs", id)
	b.fails(exitFailure, "gave up after --timeout 200ms", "wait", "thumbs", id, "--timeout", "200ms")

	// A wait that starts before the task runs ends when it does.
	waiting := b.command("wait", "thumbs", id, "--json")
	var stdout, stderr bytes.Buffer
	waiting.Stdout, waiting.Stderr = &stdout, &stderr
	require.NoError(t, waiting.Start())
	done := make(chan error, 1)
	go func() { done <- waiting.Wait() }()
	time.Sleep(300 * time.Millisecond) // time to subscribe; the wait reads again after it does anyway
	select {
	case err := <-done:
		t.Fatalf("wait ended before the task ran: %v\n%s%s", err, stdout.String(), stderr.String())
	default:
	}

	w := newWorker(t, c)
	require.NoError(t, w.Handle(ctx, "thumbs", func(_ context.Context, p *worqr.Process) error {
		if string(p.Task()) == "boom" {
			return worqr.WithReason("bad-image", worqr.Permanent(errors.New("cannot decode boom")))
		}
		p.SetResult([]byte("thumb of " + string(p.Task())))
		return nil
	}, worqr.HandleOptions{}))
	select {
	case err := <-done:
		require.NoError(t, err, "%s%s", stdout.String(), stderr.String())
	case <-time.After(20 * time.Second):
		_ = waiting.Process.Kill()
		t.Fatal("wait did not end")
	}
	var o outcome
	require.NoError(t, json.Unmarshal(stdout.Bytes(), &o))
	assert.Equal(t, id, o.ID)
	assert.Equal(t, "succeeded", o.Status)
	assert.Equal(t, "thumb of cat.png", *o.Result)
	assert.Equal(t, 1, o.Attempts)
	assert.WithinDuration(t, time.Now().Add(time.Hour), *o.ExpiresAt, time.Minute)
	assert.False(t, o.EndedAt.Before(*o.StartedAt))

	out := b.ok("result", "thumbs", id).stdout
	assert.Contains(t, out, "status:    succeeded\n")
	assert.Contains(t, out, "result:    thumb of cat.png (16 bytes)\n")

	o = jsonOf[outcome](b, "wait", "thumbs", boom)
	assert.Equal(t, "dead", o.Status)
	assert.Equal(t, "bad-image", o.Reason)
	assert.Contains(t, o.Error, "cannot decode boom")
	assert.Nil(t, o.Result)
	out = b.ok("result", "thumbs", boom).stdout
	assert.Contains(t, out, "reason:    bad-image\n")
}

// wait exits 1 at once, saying why, for a task that will have no outcome:
// one enqueued without --retain, an unknown id, a cancelled task.
func TestWaitWithNoOutcomeToCome(t *testing.T) {
	t.Parallel()
	b := newBackend(t)
	c, ctx := b.client(), ctxT(t)
	plain := b.enqueued("", "q", "plain")
	// --timeout only bounds a wait that would hang: each must end at once.
	b.fails(exitFailure, "task "+plain+` in "q" was not enqueued with --retain`, "wait", "q", plain, "--timeout", "20s")
	b.fails(exitFailure, `no task ffff in "q" and no outcome of it`, "wait", "q", "ffff", "--timeout", "20s")

	held := b.enqueued("", "q", "held", "--retain", "1h")
	w := newWorker(t, c)
	require.NoError(t, w.StartWork(ctx, "q", worqr.Events{}))
	p, err := w.Dequeue(ctx, "q")
	require.NoError(t, err)
	require.Equal(t, plain, p.TaskID())
	p, err = w.Dequeue(ctx, "q")
	require.NoError(t, err)
	require.Equal(t, held, p.TaskID())
	b.ok("cancel", "q", held)
	b.fails(exitFailure, "task "+held+` in "q" was cancelled`, "wait", "q", held, "--timeout", "20s")
}
