package main

import (
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

// bury runs a handler that fails every task of queue for good until
// want dead letters are there, then shuts it down, so that requeued tasks
// stay waiting. It returns the worker's id.
func bury(t *testing.T, c *worqr.Client, queue string, want int64) string {
	t.Helper()
	ctx := ctxT(t)
	w := newWorker(t, c)
	require.NoError(t, w.Handle(ctx, queue, func(_ context.Context, p *worqr.Process) error {
		err := errors.New("cannot import " + string(p.Task()))
		if strings.HasPrefix(string(p.Task()), "csv") {
			return worqr.WithReason("bad-input", worqr.Permanent(err))
		}
		return worqr.Permanent(err)
	}, worqr.HandleOptions{}))
	eventually(t, "the dead letters", func() bool {
		n, _ := c.DeadLetterCount(ctx, queue)
		return n == want
	})
	id := w.ID()
	require.NoError(t, w.Shutdown(ctx))
	return id
}

func TestDeadLetters(t *testing.T) {
	t.Parallel()
	b := newBackend(t)
	c, ctx := b.client(), ctxT(t)
	var ids []string
	for _, payload := range []string{"csv 1", "csv 2", "json 3", "json 4", "line\n5"} {
		id, err := c.Enqueue(ctx, "imports", []byte(payload))
		require.NoError(t, err)
		ids = append(ids, id)
		time.Sleep(2 * time.Millisecond) // distinct times of death, in order
	}
	worker := bury(t, c, "imports", 5)

	all := jsonOf[[]deadRow](b, "dead", "imports")
	require.Len(t, all, 5)
	byID := map[string]deadRow{}
	for _, d := range all {
		byID[d.ID] = d
		assert.Equal(t, "imports", d.Queue)
		assert.Equal(t, worker, d.Worker)
		assert.Equal(t, 1, d.Attempts)
		assert.Contains(t, d.Error, "cannot import "+*d.Payload)
		assert.WithinDuration(t, time.Now(), *d.DiedAt, time.Minute)
	}
	assert.Equal(t, "bad-input", byID[ids[0]].Reason)
	assert.Equal(t, "permanent", byID[ids[2]].Reason)
	assert.Equal(t, "line\n5", *byID[ids[4]].Payload)

	out := b.ok("dead", "imports").stdout
	assert.Equal(t, []string{"ID", "ATTEMPTS", "DIED", "REASON", "ERROR", "SIZE", "PAYLOAD"}, rows(out)[0])
	r := row(t, out, ids[4])
	assert.Equal(t, []string{"1"}, r[1:2])
	assert.Regexp(t, `ago$`, r[2])
	assert.Equal(t, []string{"permanent", `cannot import line\n5`, "6", `line\n5`}, r[3:])
	assert.Len(t, rows(out), 6)

	// Pages, newest first.
	page := b.ok("dead", "imports", "--limit", "2")
	assert.Len(t, rows(page.stdout), 3)
	assert.Contains(t, page.stderr, "dead letters 0 to 1 of 5, newest first (--offset 2 for the next page)")
	oldest := jsonOf[[]deadRow](b, "dead", "imports", "--offset", "4", "--limit", "2")
	require.Len(t, oldest, 1)
	assert.Equal(t, all[4].ID, oldest[0].ID)
	b.fails(exitUsage, "--limit must be positive", "dead", "imports", "--limit", "0")

	// requeue one: back in the queue with no attempts.
	out = b.ok("dead", "requeue", "imports", ids[0]).stdout
	assert.Equal(t, "requeued dead letter "+ids[0]+" in \"imports\"\n", out)
	tasks, err := c.Tasks(ctx, "imports", 0, -1)
	require.NoError(t, err)
	require.Len(t, tasks, 1)
	assert.Equal(t, ids[0], tasks[0].ID)
	assert.Equal(t, "csv 1", string(tasks[0].Payload))
	assert.Zero(t, tasks[0].Attempts)
	b.fails(exitFailure, "no dead letter "+ids[0]+` in "imports"`, "dead", "requeue", "imports", ids[0])

	// delete one.
	var done map[string]any
	require.NoError(t, json.Unmarshal([]byte(b.ok("dead", "delete", "imports", ids[1], "--json").stdout), &done))
	assert.Equal(t, map[string]any{"queue": "imports", "id": ids[1], "deleted": true}, done)
	b.fails(exitFailure, "no dead letter "+ids[1], "dead", "delete", "imports", ids[1])
	n, err := c.DeadLetterCount(ctx, "imports")
	require.NoError(t, err)
	assert.Equal(t, int64(3), n)

	// requeue all.
	b.fails(exitUsage, "give a task id, or --all", "dead", "requeue", "imports")
	b.fails(exitUsage, "not both", "dead", "requeue", "imports", ids[2], "--all")
	var requeued struct {
		Queue    string
		Requeued int64
	}
	require.NoError(t, json.Unmarshal([]byte(b.ok("dead", "requeue", "imports", "--all", "--json").stdout), &requeued))
	assert.Equal(t, int64(3), requeued.Requeued)
	tasks, err = c.Tasks(ctx, "imports", 0, -1)
	require.NoError(t, err)
	assert.Len(t, tasks, 4)
	r2 := b.ok("dead", "imports")
	assert.Empty(t, r2.stdout)
	assert.Contains(t, r2.stderr, `no dead letters in "imports"`)

	// purge asks for --yes.
	bury(t, c, "imports", 4)
	r3 := b.fails(exitUsage, "purge needs --yes", "dead", "purge", "imports")
	assert.Contains(t, r3.stderr, `would delete 4 dead letters in "imports"`)
	n, err = c.DeadLetterCount(ctx, "imports")
	require.NoError(t, err)
	assert.Equal(t, int64(4), n)
	assert.Equal(t, "deleted 4 dead letters in \"imports\"\n", b.ok("dead", "purge", "imports", "--yes").stdout)
	n, err = c.DeadLetterCount(ctx, "imports")
	require.NoError(t, err)
	assert.Zero(t, n)

	// A queue named like a subcommand is listed with "dead list".
	_, err = c.Enqueue(ctx, "purge", []byte("x"))
	require.NoError(t, err)
	bury(t, c, "purge", 1)
	assert.Len(t, jsonOf[[]deadRow](b, "dead", "list", "purge"), 1)
}

// A retained task's dead letter requeued, by id or with --all, has no
// outcome until it runs again: result finds none, and wait waits for the
// next run instead of printing the death.
func TestDeadRequeueDropsTheOutcome(t *testing.T) {
	t.Parallel()
	b := newBackend(t)
	c := b.client()
	one := b.enqueued("", "thumbs", "a", "--retain", "1h")
	all := b.enqueued("", "thumbs", "b", "--retain", "1h")
	bury(t, c, "thumbs", 2)
	for _, id := range []string{one, all} {
		assert.Equal(t, "dead", jsonOf[outcome](b, "result", "thumbs", id).Status)
	}

	b.ok("dead", "requeue", "thumbs", one)
	b.fails(exitFailure, "no outcome of task "+one, "result", "thumbs", one)
	assert.Equal(t, "dead", jsonOf[outcome](b, "result", "thumbs", all).Status, "not requeued yet")
	b.ok("dead", "requeue", "thumbs", "--all")
	for _, id := range []string{one, all} {
		b.fails(exitFailure, "no outcome of task "+id, "result", "thumbs", id)
		// Nothing runs the task: wait gives up rather than print the death.
		b.fails(exitFailure, "gave up after --timeout 100ms", "wait", "thumbs", id, "--timeout", "100ms")
	}
}
