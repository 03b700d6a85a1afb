package worqr

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/worqr/worqr/internal/reclaim"
)

// poisonSetupTimed is a client with the given poison limit whose logs are
// kept, a fast worker that reclaims dead peers (the guard's window is
// twice its TTL: 2 s), and one task enqueued on "q", on a Fake clock (on
// miniredis) which the test moves with run: the guard's window and the
// leases pass without waiting for them. The client's looked signal is on
// (untilLooked).
func poisonSetupTimed(t *testing.T, limit int) (*clocked, *logRecorder) {
	t.Helper()
	log, logs := recordLogs(t)
	k := setupTimed(t, func(o *Options) { o.Logger, o.PoisonLimit = log, limit })
	k.beats()
	k.c.core.Signals.Looked.Init(t)
	newWorker(t, k.c, fast)
	require.NoError(t, second(k.c.Enqueue(k.ctx, "q", []byte("task"))))
	return k, logs
}

// matureWorkers makes n fast workers and runs k's clock until each has
// been up for longer than the guard's window: their deaths soon after
// starting a task tell something about the task.
func (k *clocked) matureWorkers(n int) []*Worker {
	k.t.Helper()
	ws := make([]*Worker, n)
	for i := range ws {
		ws[i] = newWorker(k.t, k.c, fast)
	}
	k.run(poisonWindow + 100*time.Millisecond)
	return ws
}

// expire runs the clock until a worker that stopped renewing now has
// lost its leases, and its peers have had the time to reclaim it.
func (k *clocked) expire() {
	k.t.Helper()
	k.run(fast.TTL + fast.RenewInterval)
}

// reclaimsOf are the lines logged for the reclaim of the dead worker id.
func reclaimsOf(logs *logRecorder, id string) []logged {
	return logs.where(func(l logged) bool {
		return strings.Contains(l.msg, "reclaimed dead worker") && l.attrs["dead"].String() == id
	})
}

// burials are the lines logged for tasks buried as poison.
func burials(logs *logRecorder) []logged {
	return logs.where(func(l logged) bool { return strings.Contains(l.msg, "buried as poison") })
}

// poisonWindow is the guard's window for the fast workers.
const poisonWindow = 2 * time.Second

// takeTask has w take the one task of "q" once it is back in the queue.
func takeTask(t *testing.T, ctx context.Context, w *Worker) *Process {
	t.Helper()
	require.NoError(t, w.StartWork(ctx, "q", Events{}))
	var p *Process
	eventually(t, 10*time.Second, "the task is back to be taken", func() bool {
		ps, err := w.DequeueN(ctx, "q", 1)
		if err == nil {
			p = ps[0]
		}
		return err == nil
	})
	return p
}

// waitingEntry is the one task waiting in "q", header and payload, once
// the dead worker's tasks are back.
func waitingEntry(t *testing.T, c *Client) string {
	t.Helper()
	var vals []string
	eventually(t, 10*time.Second, "the task is back in the queue", func() bool {
		var err error
		vals, err = c.core.Redis.Do(context.Background(), c.core.Redis.B().Lrange().Key(c.core.Store.Keys().Queue("q").Waiting).Start(0).Stop(-1).Build()).AsStrSlice()
		require.NoError(t, err)
		return len(vals) == 1
	})
	return vals[0]
}

// A task whose holders die soon after starting it goes to the dead letters
// (reason poison) once that happened PoisonLimit times in a row, logged at
// WARN with its id. A holder that itself had just joined may die of its
// own (a restart, a crash loop): its death counts only once a holder that
// had been up for long died of the task, so that a fleet of one worker,
// restarted after each death, still buries a pill.
func TestPoisonPill(t *testing.T) {
	t.Parallel()
	log, logs := recordLogs(t)
	k := setupTimed(t, func(o *Options) { o.Logger, o.PoisonLimit = log, 2 })
	k.beats()
	c, ctx := k.c, k.ctx
	c.core.Signals.Looked.Init(t)
	newWorker(t, c, fast)
	require.NoError(t, second(c.Enqueue(ctx, "q", []byte("task"))))
	k.run(2 * poisonWindow) // the fleet has been up for long: the young holder joins late
	young := newWorker(t, c, fast)
	takeTask(t, ctx, young)
	crash(young)
	k.expire()
	untilLooked(t, c, "the young holder is reclaimed", func() bool { return len(reclaimsOf(logs, young.ID())) == 1 })
	assert.NotContains(t, waitingEntry(t, c), ",r", "a young holder's death alone counts nothing")

	ws := k.matureWorkers(1)
	takeTask(t, ctx, ws[0])
	crash(ws[0])
	k.expire()
	assert.Contains(t, waitingEntry(t, c), ",r1", "a mature holder's death counts")
	assert.Empty(t, deadPayloads(t, c, "q"))

	restarted := newWorker(t, c, fast)
	p := takeTask(t, ctx, restarted)
	id := p.TaskID()
	crash(restarted)
	k.expire()
	// The look's script buries the task before its reclaimer logs it: wait
	// for both, as a look of another reclaimer can show the burial first.
	untilLooked(t, c, "dead-lettered as poison, and logged", func() bool {
		return len(deadPayloads(t, c, "q")) == 1 && len(reclaimsOf(logs, restarted.ID())) == 1
	})
	assert.Empty(t, waiting(t, c, "q"))
	ds, err := c.DeadLetters(ctx, "q", 0, 1)
	require.NoError(t, err)
	require.Len(t, ds, 1)
	assert.Equal(t, ReasonPoison, ds[0].Reason)
	assert.Contains(t, ds[0].Error, "2 times")
	assert.Equal(t, 3, ds[0].Attempts)

	require.Len(t, reclaimsOf(logs, restarted.ID()), 1, "the reclaim is logged once")
	reclaimed := reclaimsOf(logs, restarted.ID())[0]
	assert.EqualValues(t, 0, reclaimed.attrs["requeued"].Int64())
	assert.EqualValues(t, 1, reclaimed.attrs["poison"].Int64())
	buried := burials(logs)
	require.Len(t, buried, 1)
	assert.Equal(t, slog.LevelWarn, buried[0].level)
	assert.Equal(t, id, buried[0].attrs["task"].String())
	assert.Equal(t, "q", buried[0].attrs["queue"].String())
}

// A task that was once held for longer than the guard's window ran
// healthy, as a persistent task does: however often its holders die soon
// after taking it afterwards, it is never taken for a poison pill. The
// holder that held it long is frozen (its process alive, its lease run
// out), as a stalled VM or a long GC pause would.
func TestPersistentTaskIsNeverPoison(t *testing.T) {
	t.Parallel()
	k, logs := poisonSetupTimed(t, 2)
	c, ctx := k.c, k.ctx
	ws := k.matureWorkers(4)

	takeTask(t, ctx, ws[0])
	k.run(poisonWindow + 100*time.Millisecond) // held past the window
	freeze(ws[0])
	k.expire()
	entry := waitingEntry(t, c)
	assert.Contains(t, entry, ",h1", "marked as held healthy")

	for _, w := range ws[1:] {
		takeTask(t, ctx, w)
		crash(w)
		k.expire()
		untilLooked(t, c, "the holder is reclaimed", func() bool { return len(reclaimsOf(logs, w.ID())) == 1 })
		entry := waitingEntry(t, c)
		assert.NotContains(t, entry, ",r", "no death is counted")
	}
	assert.Empty(t, deadPayloads(t, c, "q"), "a persistent task is not poison")
	assert.Empty(t, burials(logs))
}

// A task enqueued as Persistent is never taken for a poison pill, even
// when no holder ever kept it for the guard's window: holders up for long
// die soon after taking it, again and again, and no death is counted.
func TestPersistentOptionIsNeverPoison(t *testing.T) {
	t.Parallel()
	log, logs := recordLogs(t)
	k := setupTimed(t, func(o *Options) { o.Logger, o.PoisonLimit = log, 2 })
	k.beats()
	c, ctx := k.c, k.ctx
	c.core.Signals.Looked.Init(t)
	newWorker(t, c, fast)
	require.NoError(t, second(c.Enqueue(ctx, "q", []byte("task"), Persistent())))
	ws := k.matureWorkers(3)
	for _, w := range ws {
		takeTask(t, ctx, w)
		crash(w)
		k.expire()
		untilLooked(t, c, "the holder is reclaimed", func() bool { return len(reclaimsOf(logs, w.ID())) == 1 })
		assert.NotContains(t, waitingEntry(t, c), ",r", "no death is counted")
	}
	assert.Empty(t, deadPayloads(t, c, "q"), "a persistent task is not poison")
	assert.Empty(t, burials(logs))
}

// A worker that gives back a task it held longer than the poison-pill
// window (StopWork, a shutdown, a fence) marks it as held healthy and
// clears its count of deaths.
func TestHealthyHandBackMarksTheTask(t *testing.T) {
	t.Parallel()
	k, _ := poisonSetupTimed(t, 2)
	c, ctx := k.c, k.ctx
	ws := k.matureWorkers(3)

	takeTask(t, ctx, ws[0])
	crash(ws[0])
	k.expire()
	require.Contains(t, waitingEntry(t, c), ",r1", "the death is counted")

	takeTask(t, ctx, ws[1])
	k.run(poisonWindow + 100*time.Millisecond) // held past the window
	require.NoError(t, ws[1].StopWork(ctx, "q"))
	entry := waitingEntry(t, c)
	assert.NotContains(t, entry, ",r", "the count is cleared")
	assert.Contains(t, entry, ",h1", "marked as held healthy")

	takeTask(t, ctx, ws[2])
	crash(ws[2])
	k.expire()
	assert.NotContains(t, waitingEntry(t, c), ",r", "no death is counted")
	assert.Empty(t, deadPayloads(t, c, "q"))
}

// A dead letter requeued is as if it had never run: the mark of a healthy
// hold goes with its counts.
func TestRequeuedDeadLetterForgetsItsHealthyHold(t *testing.T) {
	t.Parallel()
	k, _ := poisonSetupTimed(t, 2)
	c, ctx := k.c, k.ctx
	ws := k.matureWorkers(1)
	takeTask(t, ctx, ws[0])
	k.run(poisonWindow + 100*time.Millisecond) // held past the window
	require.NoError(t, ws[0].StopWork(ctx, "q"))
	require.Contains(t, waitingEntry(t, c), ",h1")

	require.NoError(t, ws[0].StartWork(ctx, "q", Events{}))
	ps, err := ws[0].DequeueN(ctx, "q", 1)
	require.NoError(t, err)
	require.NoError(t, ps[0].DeadLetter(ctx, errors.New("by hand")))
	require.NoError(t, second(c.RequeueDeadLetter(ctx, "q", ps[0].TaskID())))
	assert.NotContains(t, waitingEntry(t, c), ",h")
}

// In an outage (several workers dead at once) the guard counts no death,
// but a task held for a window is still marked as held healthy: an outage
// must not leave a persistent task open to later deaths.
func TestOutageReclaimMarksButDoesNotCount(t *testing.T) {
	t.Parallel()
	k := setupTimed(t, func(o *Options) { o.PoisonLimit = 1 })
	k.beats()
	c, ctx := k.c, k.ctx
	require.NoError(t, second(c.Enqueue(ctx, "q", []byte("long"))))
	ws := k.matureWorkers(2)
	takeTask(t, ctx, ws[0])
	k.run(poisonWindow + 100*time.Millisecond) // held past the window
	require.NoError(t, second(c.Enqueue(ctx, "q", []byte("young"))))
	takeTask(t, ctx, ws[1])
	freeze(ws[0])
	freeze(ws[1])
	k.idle(fast.TTL + fast.RenewInterval)
	require.True(t, leasesExpired(t, c, ws[0].ID(), "q") && leasesExpired(t, c, ws[1].ID(), "q"), "both leases ran out")

	pass, err := c.core.Reclaimers.Dead(ctx, c.core.Log, reclaim.Pass{Window: poisonWindow, Claim: time.Second})
	require.NoError(t, err)
	require.EqualValues(t, 2, pass.Tasks, "both tasks are back")
	entries, err := c.core.Redis.Do(ctx, c.core.Redis.B().Lrange().Key(c.core.Store.Keys().Queue("q").Waiting).Start(0).Stop(-1).Build()).AsStrSlice()
	require.NoError(t, err)
	require.Len(t, entries, 2)
	for _, e := range entries {
		assert.NotContains(t, e, ",r", "no death is counted in an outage")
		if strings.HasSuffix(e, ":long") {
			assert.Contains(t, e, ",h1", "the task held long is marked")
		}
	}
	assert.Empty(t, deadPayloads(t, c, "q"))
}
