package worqr

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A task that fails twice and dies on its third attempt has a history of
// three attempts, oldest first, each with the worker, the error and how it
// ended; a task that never failed has none.
func TestAttemptHistory(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	w, runs := dying(t, c, "q")
	before := time.Now().Add(-time.Minute) // the Redis clock may lag the test's
	id := die(t, c, "q", "flaky-3", MaxAttempts(3))
	for range 3 {
		recv(t, runs, 5*time.Second, "a start")
	}
	l, err := c.FindTask(ctx, "q", id)
	require.NoError(t, err)
	require.NotNil(t, l.Dead)
	require.Len(t, l.History, 3)
	for i, want := range []AttemptEnd{AttemptRetried, AttemptRetried, AttemptDead} {
		a := l.History[i]
		assert.Equal(t, want, a.End, "attempt %d", i+1)
		assert.Equal(t, w.ID(), a.Worker, "attempt %d", i+1)
		assert.Equal(t, "flaky: flaky-3", a.Error, "attempt %d", i+1)
		assert.True(t, a.EndedAt.After(before), "attempt %d ended at %v", i+1, a.EndedAt)
		if i > 0 {
			assert.False(t, a.EndedAt.Before(l.History[i-1].EndedAt), "attempt %d in order", i+1)
		}
	}

	// A task that fails once, then finishes, leaves no history behind.
	w2 := newWorker(t, c, WorkerOptions{})
	seen := make(chan Attempt, 1)
	require.NoError(t, w2.Handle(ctx, "q2", func(ctx context.Context, p *Process) error {
		if p.Attempt() == 1 {
			return errors.New("once")
		}
		l, err := c.FindTask(ctx, "q2", p.TaskID())
		if err == nil && len(l.History) == 1 {
			seen <- l.History[0]
		}
		return nil
	}, HandleOptions{Retry: RetryPolicy{Backoff: func(int, error) time.Duration { return 0 }}}))
	second, err := c.Enqueue(ctx, "q2", []byte("fails once"), Retain(time.Hour))
	require.NoError(t, err)
	_, err = c.Wait(ctx, "q2", second)
	require.NoError(t, err)
	a := recv(t, seen, 5*time.Second, "the history while it runs again")
	assert.Equal(t, AttemptRetried, a.End)
	assert.Equal(t, "once", a.Error)
	assert.Empty(t, hashFields(t, c, "q2"), "the finished task's history is gone")

	deleted, err := c.DeleteDeadLetter(ctx, "q", id)
	require.NoError(t, err)
	require.True(t, deleted)
	l, err = c.FindTask(ctx, "q", id)
	require.NoError(t, err)
	assert.Nil(t, l.History, "the history goes with the dead letter")
}

// hashFields lists the fields of a queue's errors hash.
func hashFields(t *testing.T, c *Client, queue string) []string {
	t.Helper()
	fields, err := c.core.Redis.Do(ctxT(t), c.core.Redis.B().Hkeys().Key(c.core.Store.Keys().Queue(queue).Errors).Build()).AsStrSlice()
	require.NoError(t, err)
	return fields
}

// A task whose worker died holding it is reclaimed by a peer, and its
// history notes the attempt as reclaimed, on the dead worker, with no
// error.
func TestAttemptHistoryReclaimed(t *testing.T) {
	t.Parallel()
	k := setupClocked(t)
	c, ctx := k.c, k.ctx
	dead := newWorker(t, c, fast)
	pc := k.client()
	pc.core.Signals.Looked.Init(t)
	newWorker(t, pc, WorkerOptions{TTL: 3 * time.Minute, RenewInterval: time.Minute})
	require.Zero(t, pc.core.Signals.Looked.WaitOrTimeout(), "the peer's first pass")
	require.NoError(t, dead.StartWork(ctx, "q", Events{}))
	id, err := c.Enqueue(ctx, "q", []byte("x"))
	require.NoError(t, err)
	dequeueAll(t, dead, "q", 1)
	crash(dead)
	k.advance(fast.TTL + 10*time.Millisecond)
	require.Equal(t, int64(1), pc.core.Signals.Looked.WaitOrTimeout(), "the peer reclaimed the task at the expiry")
	l, err := c.FindTask(ctx, "q", id)
	require.NoError(t, err)
	require.NotNil(t, l.Waiting, "back to wait")
	require.Len(t, l.History, 1)
	assert.Equal(t, AttemptReclaimed, l.History[0].End)
	assert.Equal(t, dead.ID(), l.History[0].Worker)
	assert.Empty(t, l.History[0].Error)
}

// A task reclaimed from a dead worker, then retried by its next holder,
// keeps both attempts in its history: the retry adds to the reclaim's
// record, though the task's header counts no attempt yet (a reclaim counts
// none).
func TestAttemptHistoryReclaimedThenRetried(t *testing.T) {
	t.Parallel()
	k := setupClocked(t)
	c, ctx := k.c, k.ctx
	dead := newWorker(t, c, fast)
	pc := k.client()
	pc.core.Signals.Looked.Init(t)
	peer := newWorker(t, pc, WorkerOptions{TTL: 3 * time.Minute, RenewInterval: time.Minute})
	require.Zero(t, pc.core.Signals.Looked.WaitOrTimeout(), "the peer's first pass")
	require.NoError(t, dead.StartWork(ctx, "q", Events{}))
	id, err := c.Enqueue(ctx, "q", []byte("x"))
	require.NoError(t, err)
	dequeueAll(t, dead, "q", 1)
	crash(dead)
	k.advance(fast.TTL + 10*time.Millisecond)
	require.Equal(t, int64(1), pc.core.Signals.Looked.WaitOrTimeout(), "the peer reclaimed the task at the expiry")

	require.NoError(t, peer.StartWork(ctx, "q", Events{}))
	p := dequeueAll(t, peer, "q", 1)[0]
	require.Equal(t, id, p.TaskID())
	require.NoError(t, p.Retry(ctx, 0, errors.New("boom")))
	l, err := c.FindTask(ctx, "q", id)
	require.NoError(t, err)
	require.Len(t, l.History, 2, "the reclaim's record and the retry's")
	assert.Equal(t, AttemptReclaimed, l.History[0].End)
	assert.Equal(t, dead.ID(), l.History[0].Worker)
	assert.Equal(t, AttemptRetried, l.History[1].End)
	assert.Equal(t, "boom", l.History[1].Error)
}

// A task's last error and history live through every way back to waiting:
// retried, then reclaimed from a dead worker (which keeps the error before
// it), retried again, then dead, each attempt seeing the error before it
// and the history growing; a dead letter requeued starts afresh, as a new
// task (its error and history gone with the dead letter).
func TestLastErrorAndHistoryAcrossRetryReclaimDeathRequeue(t *testing.T) {
	t.Parallel()
	k := setupTimed(t, nil)
	c, ctx := k.c, k.ctx
	dead := newWorker(t, c, fast)
	pc, peer := k.reclaimingPeer()
	require.NoError(t, peer.StartWork(ctx, "q", Events{}))
	require.NoError(t, dead.StartWork(ctx, "q", Events{}))
	id, err := c.Enqueue(ctx, "q", []byte("x"))
	require.NoError(t, err)
	history := func(want ...AttemptEnd) []Attempt {
		t.Helper()
		l, err := c.FindTask(ctx, "q", id)
		require.NoError(t, err)
		require.Len(t, l.History, len(want))
		for i, end := range want {
			assert.Equal(t, end, l.History[i].End, "attempt %d", i+1)
		}
		return l.History
	}
	// start is the task's next start, by w: its attempt and last error.
	start := func(w *Worker, attempt int, lastErr string) *Process {
		t.Helper()
		p := dequeueAll(t, w, "q", 1)[0]
		require.Equal(t, id, p.TaskID())
		assert.Equal(t, attempt, p.Attempt())
		assert.Equal(t, lastErr, p.LastError(), "attempt %d", attempt)
		return p
	}

	p := start(peer, 1, "")
	require.NoError(t, p.Retry(ctx, 0, errors.New("first")))
	h := history(AttemptRetried)
	assert.Equal(t, "first", h[0].Error)
	assert.Equal(t, peer.ID(), h[0].Worker)

	start(dead, 2, "first")
	crash(dead)
	k.run(fast.TTL + fast.RenewInterval)
	reclaimed(t, 1, pc)
	h = history(AttemptRetried, AttemptReclaimed)
	assert.Equal(t, dead.ID(), h[1].Worker)
	assert.Empty(t, h[1].Error)

	p = start(peer, 3, "first")
	require.NoError(t, p.Retry(ctx, 0, errors.New("second: a, b")))
	h = history(AttemptRetried, AttemptReclaimed, AttemptRetried)
	assert.Equal(t, "second: a, b", h[2].Error)

	p = start(peer, 4, "second: a, b")
	require.NoError(t, p.DeadLetter(ctx, errors.New("third")))
	h = history(AttemptRetried, AttemptReclaimed, AttemptRetried, AttemptDead)
	assert.Equal(t, []string{"first", "", "second: a, b", "third"}, []string{h[0].Error, h[1].Error, h[2].Error, h[3].Error})
	dl, err := c.DeadLetters(ctx, "q", 0, 10)
	require.NoError(t, err)
	require.Len(t, dl, 1)
	assert.Equal(t, "third", dl[0].Error)
	assert.Equal(t, 4, dl[0].Attempts)

	ok, err := c.RequeueDeadLetter(ctx, "q", id)
	require.NoError(t, err)
	require.True(t, ok)
	history()
	p = start(peer, 1, "")
	require.NoError(t, p.Retry(ctx, 0, errors.New("again")))
	p = start(peer, 2, "again")
	assert.Equal(t, "again", history(AttemptRetried)[0].Error)
	require.NoError(t, p.Finish(ctx))
	assert.Empty(t, hashFields(t, c, "q"), "nothing left in the errors hash")
}
