package worqr

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A sequence held on its dead task goes on when that dead letter is
// trimmed by the dead letters' bounds (another task's death pushes it
// out): the runtimes parked for want of work are woken for the group's
// tasks, as they are when the letter is deleted by hand. Workers never
// poll, so a release without a work event leaves the group's tasks
// waiting while the worker idles.
func TestSequenceHoldTrimmedLetterWakesWorkers(t *testing.T) {
	t.Parallel()
	b := newBackend(t)
	ctx := ctxT(t)
	c, err := New(Options{Redis: b.redis(), Prefix: b.prefix, Logger: testLogger(t), DeadLetters: DeadLetterOptions{MaxCount: 1}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	require.NoError(t, c.SetGroupConcurrency(ctx, "q", "", 1, CreateQueue()))
	require.NoError(t, c.SetSequenceHold(ctx, "q", true))

	ran := make(chan string, 10)
	w := newWorker(t, c, WorkerOptions{})
	require.NoError(t, w.Handle(ctx, "q", func(_ context.Context, p *Process) error {
		ran <- string(p.Task())
		switch string(p.Task()) {
		case "s0", "x0":
			return Permanent(errors.New("for good"))
		}
		return nil
	}, HandleOptions{Concurrency: 4}))
	waitDead := func(n int64) {
		t.Helper()
		eventually(t, 5*time.Second, "the task dead-lettered", func() bool {
			info, err := c.QueueInfo(ctx, "q")
			require.NoError(t, err)
			return info.Dead == n && info.InFlight == 0
		})
	}

	require.NoError(t, second(c.EnqueueBatch(ctx, "q", [][]byte{[]byte("s0"), []byte("s1")}, Group("seq"))))
	assert.Equal(t, "s0", recv(t, ran, 5*time.Second, "s0 run"))
	waitDead(1)
	info, err := c.QueueInfo(ctx, "q")
	require.NoError(t, err)
	require.EqualValues(t, 1, info.GroupsHeldOnDead, "seq held on s0")

	// x0's death trims s0's letter (MaxCount 1): seq is held no more.
	require.NoError(t, second(c.Enqueue(ctx, "q", []byte("x0"))))
	assert.Equal(t, "x0", recv(t, ran, 5*time.Second, "x0 run"))
	waitDead(1)
	info, err = c.QueueInfo(ctx, "q")
	require.NoError(t, err)
	require.EqualValues(t, 0, info.GroupsHeldOnDead, "s0's letter trimmed: seq released")

	select {
	case got := <-ran:
		assert.Equal(t, "s1", got)
	case <-time.After(3 * time.Second):
		t.Fatalf("s1 still waits (%d waiting) with the worker idle: the release woke no runtime", info.Waiting)
	}
}

// A sequence whose front task waits for its retry delay takes its turn
// at once when that task is cancelled (groups_emptied in
// internal/scripts/common/groups.lua): the worker idle since the retry
// must be woken for the tasks behind it, not left to look again when the
// cancelled task would have been due.
func TestSequenceCancelledRetryWakesWorkers(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	require.NoError(t, c.SetGroupConcurrency(ctx, "q", "seq", 1, CreateQueue()))
	ran := make(chan string, 10)
	w := newWorker(t, c, WorkerOptions{})
	require.NoError(t, w.Handle(ctx, "q", func(_ context.Context, p *Process) error {
		ran <- string(p.Task())
		if string(p.Task()) == "s0" {
			return RetryAfter(time.Hour, errors.New("later"))
		}
		return nil
	}, HandleOptions{Concurrency: 4}))
	ids, err := c.EnqueueBatch(ctx, "q", [][]byte{[]byte("s0"), []byte("s1")}, Group("seq"))
	require.NoError(t, err)
	assert.Equal(t, "s0", recv(t, ran, 5*time.Second, "s0 run"))
	eventually(t, 5*time.Second, "s0 back in its group, due in an hour", func() bool {
		info, err := c.QueueInfo(ctx, "q")
		require.NoError(t, err)
		return info.InFlight == 0 && info.Waiting+info.Delayed == 2
	})
	res, err := c.CancelTask(ctx, "q", ids[0])
	require.NoError(t, err)
	require.EqualValues(t, 1, res.Removed, "%+v", res)
	select {
	case got := <-ran:
		assert.Equal(t, "s1", got)
	case <-time.After(3 * time.Second):
		t.Fatal("s1 still waits with the worker idle: the cancel gave seq its turn in Redis but woke no runtime")
	}
}
