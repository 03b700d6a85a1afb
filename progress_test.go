package worqr

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/worqr/worqr/internal/store"
)

// progressReports is how many progress records a queue holds.
func progressReports(t *testing.T, c *Client, queue string) int64 {
	t.Helper()
	rdb := c.core.Store.Redis()
	n, err := rdb.Do(context.Background(), rdb.B().Hlen().Key(c.core.Store.Keys().Queue(queue).Progress).Build()).AsInt64()
	require.NoError(t, err)
	return n
}

// A handler's report is readable by task id and in Processes while it
// runs, and gone once the task finished.
func TestProgressIsReadableWhileTheTaskRuns(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	w := newWorker(t, c, WorkerOptions{})
	reported, release := make(chan error, 1), make(chan struct{})
	require.NoError(t, w.Handle(ctx, "q", func(ctx context.Context, p *Process) error {
		reported <- p.ReportProgress(ctx, 40, "row 400 of 1000")
		<-release
		return nil
	}, HandleOptions{}))
	id, err := c.Enqueue(ctx, "q", []byte("import"))
	require.NoError(t, err)
	require.NoError(t, recv(t, reported, 5*time.Second, "reported"))

	got, err := c.TaskProgress(ctx, "q", id)
	require.NoError(t, err)
	assert.Equal(t, id, got.TaskID)
	assert.Equal(t, 40, got.Percent)
	assert.Equal(t, "row 400 of 1000", got.Note)
	assert.WithinDuration(t, time.Now(), got.At, time.Minute)
	procs, err := c.Processes(ctx, "q")
	require.NoError(t, err)
	require.Len(t, procs, 1)
	require.NotNil(t, procs[0].Progress)
	assert.Equal(t, procs[0].ID, procs[0].Progress.ProcessID)
	assert.Equal(t, 40, procs[0].Progress.Percent)

	close(release)
	eventually(t, 5*time.Second, "finished", func() bool { return progressReports(t, c, "q") == 0 })
	_, err = c.TaskProgress(ctx, "q", id)
	assert.ErrorIs(t, err, ErrNoTask)
	_, err = c.TaskProgress(ctx, "q", "")
	assert.ErrorIs(t, err, ErrInvalidOptions)
}

// Every way a process ends takes its report with it.
func TestEveryEndRemovesTheReport(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	w := newWorker(t, c, WorkerOptions{})
	require.NoError(t, w.StartWork(ctx, "q", Events{}))
	ends := map[string]func(p *Process) error{
		"finish":      func(p *Process) error { return p.Finish(ctx) },
		"retry":       func(p *Process) error { return p.Retry(ctx, 0, errors.New("again")) },
		"retry later": func(p *Process) error { return p.Retry(ctx, time.Hour, errors.New("later")) },
		"dead-letter": func(p *Process) error { return p.DeadLetter(ctx, errors.New("dead")) },
		"requeue":     func(p *Process) error { return p.Requeue(ctx) },
		"give back":   func(p *Process) error { return w.StopWork(ctx, p.Queue()) },
	}
	for name, end := range ends {
		q := "q-" + name
		require.NoError(t, w.StartWork(ctx, q, Events{}), name)
		_, err := c.Enqueue(ctx, q, []byte(name))
		require.NoError(t, err)
		p := dequeueAll(t, w, q, 1)[0]
		require.NoError(t, p.ReportProgress(ctx, 10, name))
		require.EqualValues(t, 1, progressReports(t, c, q), name)
		require.NoError(t, end(p), name)
		require.EqualValues(t, 0, progressReports(t, c, q), name)
	}

	// Deleting the queue drops the reports of its processes in flight, and
	// nothing is written for them after: not a first report (sent at once,
	// refused by the script or, if the delete event came first, locally),
	// not one held by the throttle, not one made after the event.
	require.NoError(t, w.StartWork(ctx, "d", Events{}))
	_, err := c.EnqueueBatch(ctx, "d", [][]byte{[]byte("x"), []byte("y")})
	require.NoError(t, err)
	ps := dequeueAll(t, w, "d", 2)
	require.NoError(t, ps[0].ReportProgress(ctx, 10, "before"))
	_, err = c.DeleteQueue(ctx, "d")
	require.NoError(t, err)
	assert.EqualValues(t, 0, progressReports(t, c, "d"))
	assert.ErrorIs(t, ps[1].ReportProgress(ctx, 20, "first, after"), ErrQueueDeleted)
	_ = ps[0].ReportProgress(ctx, 30, "held, or refused") // held by the throttle unless the event came
	recv(t, ps[0].Done(), 5*time.Second, "the delete event")
	assert.ErrorIs(t, ps[0].ReportProgress(ctx, 40, "after the event"), ErrQueueDeleted)
	assert.False(t, ps[0].rec.St.ProgressArmed(), "the event disarmed the throttle: the held report is never sent")
	assert.EqualValues(t, 0, progressReports(t, c, "d"), "nothing written for a deleted queue")
}

// A report for a cancelled task, or from a process this worker no longer
// holds, is refused and writes nothing.
func TestProgressIsOwnerChecked(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	w1, w2 := newWorker(t, c, WorkerOptions{}), newWorker(t, c, WorkerOptions{})
	ids, err := c.EnqueueBatch(ctx, "q", [][]byte{[]byte("a"), []byte("b")})
	require.NoError(t, err)
	for _, w := range []*Worker{w1, w2} {
		require.NoError(t, w.StartWork(ctx, "q", Events{}))
	}
	p1 := dequeueAll(t, w1, "q", 1)[0]
	p2 := dequeueAll(t, w2, "q", 1)[0]
	// w1 claims w2's process: the script finds it is not w1's.
	stolen := newProcess(w1, "q", store.Proc{PID: p2.ID(), Owner: w1.ID(), Task: store.Task{ID: p2.TaskID()}})
	assert.ErrorIs(t, stolen.ReportProgress(ctx, 50, "mine?"), ErrProcessLost)
	assert.EqualValues(t, 0, progressReports(t, c, "q"))

	_, err = c.CancelTask(ctx, "q", ids[0])
	require.NoError(t, err)
	assert.ErrorIs(t, p1.ReportProgress(ctx, 50, "cancelled"), ErrTaskCancelled)
	assert.EqualValues(t, 0, progressReports(t, c, "q"))

	assert.ErrorIs(t, p1.ReportProgress(ctx, 101, ""), ErrInvalidOptions)
	assert.ErrorIs(t, p1.ReportProgress(ctx, -1, ""), ErrInvalidOptions)
	require.NoError(t, p2.Finish(ctx))
	assert.ErrorIs(t, p2.ReportProgress(ctx, 50, "after the end"), ErrProcessLost)
}

// A zombie whose lease ran out, and whose task a peer took, cannot
// report for it; the peer's report stands.
func TestZombieCannotReportProgress(t *testing.T) {
	t.Parallel()
	k := setupTimed(t, nil)
	c, ctx := k.c, k.ctx
	zombie := newWorker(t, c, fast)
	require.NoError(t, zombie.StartWork(ctx, "q", Events{}))
	id, err := c.Enqueue(ctx, "q", []byte("x"))
	require.NoError(t, err)
	held := dequeueAll(t, zombie, "q", 1)[0]
	require.NoError(t, held.ReportProgress(ctx, 30, "zombie"))
	freeze(zombie)
	k.idle(fast.TTL + time.Millisecond)
	require.True(t, leasesExpired(t, c, zombie.ID(), "q"), "zombie leases expire")

	// A peer's first look, as it joins, finds the expired lease.
	pc := k.client()
	pc.core.Signals.Looked.Init(t)
	peer := newWorker(t, pc, fast)
	reclaimed(t, 1, pc)
	require.NoError(t, peer.StartWork(ctx, "q", Events{}))
	taken, err := peer.Dequeue(ctx, "q")
	require.NoError(t, err, "peer takes the reclaimed task")
	_, err = c.TaskProgress(ctx, "q", id)
	assert.ErrorIs(t, err, ErrNoTask, "the reclaim dropped the zombie's report")
	require.NoError(t, taken.ReportProgress(ctx, 5, "peer"))
	assert.ErrorIs(t, held.ReportProgress(ctx, 90, "zombie again"), ErrProcessLost)
	got, err := c.TaskProgress(ctx, "q", id)
	require.NoError(t, err)
	assert.Equal(t, TaskProgress{TaskID: id, ProcessID: taken.ID(), Percent: 5, Note: "peer", At: got.At}, got)
	require.NoError(t, taken.Finish(ctx))
}

// progressWrites sets up one task in flight on a worker of a fresh client
// whose progress writes to Redis are counted.
func progressWrites(t *testing.T) (c *Client, ctx context.Context, id string, p *Process, writes *atomic.Int64) {
	t.Helper()
	_, c, ctx = setup(t)
	writes = countCalls(c, store.OpProgress)
	w := newWorker(t, c, WorkerOptions{})
	require.NoError(t, w.StartWork(ctx, "q", Events{}))
	id, err := c.Enqueue(ctx, "q", []byte("x"))
	require.NoError(t, err)
	return c, ctx, id, dequeueAll(t, w, "q", 1)[0], writes
}

// Reports faster than ProgressInterval are coalesced: few writes, and the
// last report is written in the end.
func TestProgressWritesAreThrottled(t *testing.T) {
	t.Parallel()
	c, ctx, id, p, writes := progressWrites(t)
	start := time.Now()
	for pct := 0; pct <= 100; pct++ {
		require.NoError(t, p.ReportProgress(ctx, pct, "step"))
	}
	elapsed := time.Since(start)
	eventually(t, 5*time.Second, "the last report written", func() bool {
		got, err := c.TaskProgress(ctx, "q", id)
		return err == nil && got.Percent == 100
	})
	// One write at once, then at most one per interval begun.
	assert.LessOrEqual(t, writes.Load(), int64(elapsed/ProgressInterval)+2, "101 reports in %v", elapsed)
	pct, note, ok := p.Progress()
	assert.True(t, ok)
	assert.Equal(t, 100, pct)
	assert.Equal(t, "step", note)
	require.NoError(t, p.Finish(ctx))
	assert.EqualValues(t, 0, progressReports(t, c, "q"))
}

// A report held by the throttle is not written once its process ended.
func TestHeldReportDiesWithItsProcess(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	w := newWorker(t, c, WorkerOptions{})
	require.NoError(t, w.StartWork(ctx, "q", Events{}))
	_, err := c.Enqueue(ctx, "q", []byte("x"))
	require.NoError(t, err)
	p := dequeueAll(t, w, "q", 1)[0]
	require.NoError(t, p.ReportProgress(ctx, 1, "written"))
	require.NoError(t, p.ReportProgress(ctx, 2, "held"))
	require.NoError(t, p.Finish(ctx))
	assert.False(t, p.rec.St.ProgressArmed(), "the end disarmed the throttle")
	assert.EqualValues(t, 0, progressReports(t, c, "q"))
}

// WaitWithProgress hears the reports as they are made, then returns the
// outcome; Wait keeps working beside it.
func TestWaitWithProgress(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	w := newWorker(t, c, WorkerOptions{})
	step, done := make(chan int), make(chan struct{})
	require.NoError(t, w.Handle(ctx, "q", func(ctx context.Context, p *Process) error {
		for pct := range step {
			if err := p.ReportProgress(ctx, pct, "at "+string(rune('0'+pct/10))); err != nil {
				return err
			}
		}
		<-done
		p.SetResult([]byte("ok"))
		return nil
	}, HandleOptions{}))
	id, err := c.Enqueue(ctx, "q", []byte("x"), Retain(time.Minute))
	require.NoError(t, err)

	var mu sync.Mutex
	var seen []TaskProgress
	outcome := make(chan TaskOutcome, 1)
	go func() {
		o, err := c.WaitWithProgress(ctx, "q", id, func(tp TaskProgress) {
			mu.Lock()
			seen = append(seen, tp)
			mu.Unlock()
		})
		assert.NoError(t, err)
		outcome <- o
	}()
	last := func() int {
		mu.Lock()
		defer mu.Unlock()
		if len(seen) == 0 {
			return -1
		}
		return seen[len(seen)-1].Percent
	}
	for _, pct := range []int{10, 50, 90} {
		step <- pct
		eventually(t, 5*time.Second, "report heard", func() bool { return last() == pct })
	}
	close(step)
	close(done)
	o := recv(t, outcome, 5*time.Second, "outcome")
	assert.Equal(t, OutcomeSucceeded, o.Status)
	assert.Equal(t, "ok", string(o.Result))
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, "at 9", seen[len(seen)-1].Note)
	for i := 1; i < len(seen); i++ {
		assert.Less(t, seen[i-1].Percent, seen[i].Percent, "in order, each once")
	}
}

// A detached process keeps its report; nothing touches Redis.
func TestDetachedProcessKeepsItsProgress(t *testing.T) {
	p := NewDetachedProcess([]byte("x"), DetachedOptions{})
	_, _, ok := p.Progress()
	assert.False(t, ok)
	require.NoError(t, p.ReportProgress(context.Background(), 70, string(make([]byte, 2*MaxProgressNote))))
	pct, note, ok := p.Progress()
	assert.True(t, ok)
	assert.Equal(t, 70, pct)
	assert.Len(t, note, MaxProgressNote)
}

// The check removes a report whose process is gone.
func TestCheckRepairDropsStrayProgress(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	_, err := c.Enqueue(ctx, "q", []byte("x"))
	require.NoError(t, err)
	rdb := c.core.Store.Redis()
	require.NoError(t, rdb.Do(ctx, rdb.B().Hset().Key(c.core.Store.Keys().Queue("q").Progress).FieldValue().FieldValue("1f", "5a,10,1:stray").Build()).Error())
	rep, err := c.Check(ctx, CheckOptions{})
	require.NoError(t, err)
	assert.EqualValues(t, 1, rep.StaleProgress)
	assert.EqualValues(t, 1, progressReports(t, c, "q"), "a check alone changes nothing")
	_, err = c.Check(ctx, CheckOptions{Repair: true})
	require.NoError(t, err)
	assert.EqualValues(t, 0, progressReports(t, c, "q"))
	rep, err = c.Check(ctx, CheckOptions{})
	require.NoError(t, err)
	assert.Zero(t, rep.Problems())
}

// Reports from several goroutines at once are throttled as one stream, and
// the last one made is the one kept.
func TestConcurrentReportsAreThrottledTogether(t *testing.T) {
	t.Parallel()
	c, ctx, id, p, writes := progressWrites(t)
	start := time.Now()
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 25 {
				assert.NoError(t, p.ReportProgress(ctx, g*25+i, "g"))
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	want, _, _ := p.Progress()
	eventually(t, 5*time.Second, "the last report written", func() bool {
		got, err := c.TaskProgress(ctx, "q", id)
		return err == nil && got.Percent == want
	})
	assert.LessOrEqual(t, writes.Load(), int64(elapsed/ProgressInterval)+2, "100 reports in %v", elapsed)
	require.NoError(t, p.Finish(ctx))
}
