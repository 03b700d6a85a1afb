package worqr

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/worqr/worqr/internal/store"
)

// FindTask finds a task wherever it is, with where and what, and nothing
// for an id that is nowhere.
func TestFindTask(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	low, err := c.Enqueue(ctx, "q", []byte("low-task"), LowPriority())
	require.NoError(t, err)
	ids, err := c.EnqueueBatch(ctx, "q", [][]byte{[]byte("runs"), []byte("normal-1"), []byte("normal-2"), []byte("normal-3")})
	require.NoError(t, err)
	high, err := c.Enqueue(ctx, "q", []byte("high-task"), HighPriority())
	require.NoError(t, err)
	delayed, err := c.Enqueue(ctx, "q", []byte("later"), In(time.Hour))
	require.NoError(t, err)
	w := newWorker(t, c, WorkerOptions{})
	require.NoError(t, w.StartWork(ctx, "q", Events{}))
	dies := dequeueOne(t, w, "q")
	require.Equal(t, high, dies.TaskID(), "high priority first")
	require.NoError(t, dies.DeadLetter(ctx, errors.New("boom")))
	runs := dequeueOne(t, w, "q")
	require.Equal(t, ids[0], runs.TaskID())
	require.NoError(t, runs.ReportProgress(ctx, 40, "half"))
	// Waiting now, in dequeue order: runs' batch-mates ids[1..3], then low.

	where := func(id string, opts ...InspectOption) TaskLocation {
		t.Helper()
		l, err := c.FindTask(ctx, "q", id, opts...)
		require.NoError(t, err)
		assert.False(t, l.Partial, id)
		return l
	}
	l := where(ids[2])
	require.NotNil(t, l.Waiting)
	assert.Nil(t, l.Delayed)
	assert.Nil(t, l.Process)
	assert.Nil(t, l.Dead)
	assert.Equal(t, "normal-2", string(l.Waiting.Payload))
	assert.Equal(t, 8, l.Waiting.Size)
	assert.EqualValues(t, 1, l.Position)
	tasks, err := c.Tasks(ctx, "q", 0, -1)
	require.NoError(t, err)
	require.Len(t, tasks, 4)
	for i, task := range tasks {
		assert.EqualValues(t, i, where(task.ID).Position, "the position Tasks lists it at")
	}
	assert.Equal(t, low, tasks[3].ID)

	l = where(delayed)
	require.NotNil(t, l.Delayed)
	assert.Nil(t, l.Waiting)
	assert.Equal(t, "later", string(l.Delayed.Payload))
	assert.WithinDuration(t, time.Now().Add(time.Hour), l.Delayed.DueAt, time.Minute)

	l = where(runs.TaskID(), PayloadPrefix(2))
	require.NotNil(t, l.Process)
	assert.Equal(t, runs.ID(), l.Process.ID)
	assert.Equal(t, w.ID(), l.Process.Owner)
	assert.Equal(t, "ru", string(l.Process.Task))
	assert.Equal(t, 4, l.Process.TaskSize)
	require.NotNil(t, l.Process.Progress)
	assert.Equal(t, 40, l.Process.Progress.Percent)

	l = where(high)
	require.NotNil(t, l.Dead)
	assert.Equal(t, "high-task", string(l.Dead.Payload))
	assert.Equal(t, "boom", l.Dead.Error)
	assert.Equal(t, ReasonManual, l.Dead.Reason)

	for _, id := range []string{"ffffffffffffff", ids[0][:len(ids[0])-1], "*", ids[2] + ","} {
		assert.False(t, where(id).Found(), id)
	}
	_, err = c.FindTask(ctx, "q", "")
	assert.ErrorIs(t, err, ErrInvalidOptions)
	_, err = c.FindTask(ctx, "q", ids[1], PayloadPrefix(-1))
	assert.ErrorIs(t, err, ErrInvalidOptions)
}

// The search stops at its bounds, and says so: a bound of entries for
// each kind of place, and of bytes read for the processes and the waiting
// tasks.
func TestFindTaskStopsAtItsBounds(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	var payloads [][]byte
	for range 100 {
		payloads = append(payloads, []byte(strings.Repeat("p", 1000)))
	}
	ids, err := c.EnqueueBatch(ctx, "q", payloads)
	require.NoError(t, err)
	last := ids[len(ids)-1]
	find := func(id string, b store.FindBounds) store.Found {
		t.Helper()
		f, err := c.core.Store.FindTask(ctx, "q", id, 0, b)
		require.NoError(t, err)
		return f
	}
	f := find(last, store.FindBounds{Limit: 100, Budget: 1 << 20})
	require.NotNil(t, f.Waiting)
	assert.EqualValues(t, 99, f.Position)
	assert.Empty(t, f.Waiting.Payload, "cut to 0 bytes")
	assert.Equal(t, 1000, f.Waiting.Size)
	assert.False(t, f.Partial)

	f = find(last, store.FindBounds{Limit: 64, Budget: 1 << 20})
	assert.Nil(t, f.Waiting)
	assert.True(t, f.Partial, "stopped after 64 entries")
	f = find(last, store.FindBounds{Limit: 1000, Budget: 40_000})
	assert.Nil(t, f.Waiting)
	assert.True(t, f.Partial, "stopped after 40 kB")
	f = find(ids[10], store.FindBounds{Limit: 1000, Budget: 40_000})
	assert.NotNil(t, f.Waiting, "found before the bound")
	f = find("ffffffff", store.FindBounds{Limit: 100, Budget: 1 << 20})
	assert.False(t, f.Partial, "searched everything")
}

// PayloadPrefix cuts payloads in Redis and keeps everything else: the
// same tasks, in the same order, with their whole sizes.
func TestListingsCutPayloads(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	var payloads [][]byte
	for i := range 70 { // more than a script reads at once
		payloads = append(payloads, []byte(strings.Repeat(string(rune('a'+i%26)), 10+i)))
	}
	_, err := c.EnqueueBatch(ctx, "q", payloads[:60])
	require.NoError(t, err)
	_, err = c.EnqueueBatch(ctx, "q", payloads[60:65], HighPriority())
	require.NoError(t, err)
	_, err = c.EnqueueBatch(ctx, "q", payloads[65:], LowPriority())
	require.NoError(t, err)
	_, err = c.EnqueueBatch(ctx, "q", payloads[:40], In(time.Hour))
	require.NoError(t, err)
	w := newWorker(t, c, WorkerOptions{})
	require.NoError(t, w.StartWork(ctx, "q", Events{}))
	for range 3 {
		require.NoError(t, dequeueOne(t, w, "q").DeadLetter(ctx, errors.New("boom")))
	}
	for range 35 {
		dequeueOne(t, w, "q")
	}

	type ranged struct{ start, stop int64 }
	for _, r := range []ranged{{0, -1}, {0, 0}, {3, 40}, {-5, -1}, {25, 1000}, {-1000, 2}, {5, 2}} {
		whole, err := c.Tasks(ctx, "q", r.start, r.stop)
		require.NoError(t, err)
		cut, err := c.Tasks(ctx, "q", r.start, r.stop, PayloadPrefix(3))
		require.NoError(t, err)
		requireCut(t, whole, cut, 3)
		dw, err := c.Delayed(ctx, "q", r.start, r.stop)
		require.NoError(t, err)
		dc, err := c.Delayed(ctx, "q", r.start, r.stop, PayloadPrefix(3))
		require.NoError(t, err)
		requireCut(t, dw, dc, 3)
		for i := range dw {
			assert.Equal(t, dw[i].DueAt, dc[i].DueAt)
		}
	}
	whole, err := c.Processes(ctx, "q")
	require.NoError(t, err)
	require.Len(t, whole, 35)
	cut, err := c.Processes(ctx, "q", PayloadPrefix(0))
	require.NoError(t, err)
	require.Len(t, cut, len(whole))
	for i := range whole {
		assert.Empty(t, cut[i].Task)
		assert.Equal(t, len(whole[i].Task), cut[i].TaskSize)
		cut[i].Task, cut[i].TaskSize = whole[i].Task, whole[i].TaskSize
		assert.Equal(t, whole[i], cut[i])
	}
	dead, err := c.DeadLetters(ctx, "q", 0, 10)
	require.NoError(t, err)
	require.Len(t, dead, 3)
	deadCut, err := c.DeadLetters(ctx, "q", 1, 10, PayloadPrefix(4))
	require.NoError(t, err)
	require.Len(t, deadCut, 2)
	for i, d := range deadCut {
		assert.Equal(t, dead[i+1].Payload[:4], d.Payload)
		assert.Equal(t, len(dead[i+1].Payload), d.Size)
		assert.Equal(t, "boom", d.Error)
		assert.Equal(t, dead[i+1].ID, d.ID)
	}
	_, err = c.Tasks(ctx, "q", 0, 1, PayloadPrefix(-1))
	assert.ErrorIs(t, err, ErrInvalidOptions)
}

// requireCut checks that cut lists the tasks of whole, each payload cut
// to its first n bytes, with its whole size.
func requireCut(t *testing.T, whole, cut []TaskInfo, n int) {
	t.Helper()
	require.Len(t, cut, len(whole))
	for i := range whole {
		w, c := whole[i], cut[i]
		assert.Equal(t, len(w.Payload), w.Size)
		assert.Equal(t, w.Payload[:min(n, len(w.Payload))], c.Payload)
		assert.Equal(t, w.Size, c.Size)
		c.Payload = w.Payload
		assert.Equal(t, w, c)
	}
}
