package engine

// A process's progress reports on their own: the throttle of their
// writes and its timer, and what a write finds (the task cancelled, the
// lease gone, Redis out of reach, the process ended).

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/worqr/worqr/internal/errs"
	"github.com/worqr/worqr/internal/store"
	"github.com/worqr/worqr/internal/testsignal"
)

// reporting is settling's worker with progress writes at most once a
// second.
func reporting(t *testing.T) *fakeWorker {
	t.Helper()
	w := settling(t)
	w.env.ProgressInterval = time.Second
	return w
}

// progressIn is the report Redis holds for p, or -1 if none.
func (w *fakeWorker) progressIn(t *testing.T, p *Proc) (int, string) {
	t.Helper()
	r, ok, err := w.env.Store.Progress(w.life, "q", p.TaskID)
	require.NoError(t, err)
	if !ok {
		return -1, ""
	}
	return r.Percent, r.Note
}

// The first report is written at once; one within the interval is held
// for the throttle's timer, which writes the last report held; one made
// while that write is in flight arms the timer again.
func TestProgressThrottled(t *testing.T) {
	t.Parallel()
	w := reporting(t)
	p := w.running(t, w.handle("q", nil))
	ctx := context.Background()

	require.NoError(t, p.ReportProgress(ctx, 10, "a"))
	percent, note := w.progressIn(t, p)
	assert.Equal(t, 10, percent, "the first report was not written at once")
	assert.Equal(t, "a", note)

	require.NoError(t, p.ReportProgress(ctx, 20, "b"))
	require.NoError(t, p.ReportProgress(ctx, 30, "c"))
	percent, _ = w.progressIn(t, p)
	assert.Equal(t, 10, percent, "a report within the interval was written")
	require.Equal(t, 1, w.clk.Timers(), "no timer for the reports held")

	// The timer's write waits at the gate until a report came meanwhile.
	var entered testsignal.Signal[struct{}]
	entered.Init(t)
	release := make(chan struct{})
	w.env.Store.SetFault(func(_ context.Context, op store.Op, _ string) error {
		if op == store.OpProgress {
			entered.Signal(struct{}{})
			<-release
		}
		return nil
	})
	w.clk.Advance(time.Second)
	entered.WaitOrTimeout()
	require.NoError(t, p.ReportProgress(ctx, 40, "d")) // while the write is in flight
	w.env.Store.SetFault(nil)
	close(release)

	wait, cancel := context.WithTimeout(ctx, testsignal.Wait)
	defer cancel()
	require.NoError(t, w.clk.WaitTimers(wait, 1), "the report made during the write was not held for the timer")
	percent, note = w.progressIn(t, p)
	assert.Equal(t, 30, percent, "the timer did not write the last report held")
	assert.Equal(t, "c", note)
	p.Forget(errs.ErrProcessEnded)
	assert.Zero(t, w.clk.Timers(), "the process ended with its timer armed")
}

// A report of a task cancelled in Redis ends the process (still to be
// settled: its handler's outcome requeues it) and says so.
func TestProgressFindsTheTaskCancelled(t *testing.T) {
	t.Parallel()
	w := reporting(t)
	s := w.handle("q", nil)
	p := w.running(t, s)
	_, _, err := w.env.Store.CancelID(w.life, "q", p.TaskID)
	require.NoError(t, err)

	err = p.ReportProgress(context.Background(), 10, "")
	require.ErrorIs(t, err, errs.ErrTaskCancelled)
	assert.ErrorIs(t, p.St.Err(), errs.ErrTaskCancelled)
	assert.False(t, p.St.IsSettled(), "a cancelled process was settled: its outcome could not be written")
	assert.Len(t, s.Books.procs, 1, "the cancelled process left the books before its outcome")
}

// A report that finds the worker's lease on the queue gone tells the
// host and loses the process; one of a process already ended sends
// nothing.
func TestProgressFindsTheLeaseGone(t *testing.T) {
	t.Parallel()
	w := reporting(t)
	s := w.handle("q", nil)
	h := w.runningOn(t, s)
	w.dropLease(t)

	err := h.ReportProgress(context.Background(), 10, "")
	require.ErrorIs(t, err, errs.ErrProcessLost)
	assert.Len(t, h.lost, 1, "the host was not told of the lease lost")
	assert.Equal(t, []Outcome{Lost}, h.observed)
	assert.Empty(t, s.Books.procs, "the lost process stayed in the books")

	sent := 0
	w.env.Store.SetFault(func(_ context.Context, op store.Op, _ string) error {
		if op == store.OpProgress {
			sent++
		}
		return nil
	})
	w.clk.Advance(time.Second)
	err = h.ReportProgress(context.Background(), 20, "")
	require.ErrorIs(t, err, errs.ErrProcessLost)
	assert.Zero(t, sent, "a report of an ended process was sent")
}

// A report that fails on the connection says so and leaves the process
// running; the throttle is free again for the next report.
func TestProgressWhileRedisIsOut(t *testing.T) {
	t.Parallel()
	w := reporting(t)
	p := w.running(t, w.handle("q", nil))
	w.env.Store.SetFault(func(_ context.Context, op store.Op, _ string) error {
		if op == store.OpProgress {
			return errs.ErrUnavailable
		}
		return nil
	})
	err := p.ReportProgress(context.Background(), 10, "")
	require.ErrorIs(t, err, errs.ErrUnavailable)
	assert.NoError(t, p.St.Err(), "a report that failed on the connection ended the process")

	w.env.Store.SetFault(nil)
	w.clk.Advance(time.Second)
	require.NoError(t, p.ReportProgress(context.Background(), 20, ""))
	percent, _ := w.progressIn(t, p)
	assert.Equal(t, 20, percent, "the report after the outage was not written")
}
