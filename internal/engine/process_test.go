package engine

// A process's record on its own: what Status finds in Redis and what it
// does to the process, and the states script's answers as errors.

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/worqr/worqr/internal/errs"
	"github.com/worqr/worqr/internal/store"
)

// Status answers nil for an active process of the worker's; for a task
// cancelled, or its queue deleted, it ends the process (still to be
// settled, and in the books); for a process Redis no longer holds for
// the worker it loses the process.
func TestProcStatus(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		// change is what happens to the process in Redis
		change  func(t *testing.T, w *fakeWorker, p *Proc)
		want    error
		settled bool
	}{
		{name: "active", change: func(*testing.T, *fakeWorker, *Proc) {}},
		{name: "cancelled", want: errs.ErrTaskCancelled, change: func(t *testing.T, w *fakeWorker, p *Proc) {
			_, _, err := w.env.Store.CancelID(w.life, "q", p.TaskID)
			require.NoError(t, err)
		}},
		{name: "queue deleted", want: errs.ErrQueueDeleted, change: func(t *testing.T, w *fakeWorker, _ *Proc) {
			_, _, err := w.env.Store.DeleteQueue(w.life, "q")
			require.NoError(t, err)
		}},
		{name: "gone", want: errs.ErrProcessLost, settled: true, change: func(t *testing.T, w *fakeWorker, p *Proc) {
			_, _, err := w.env.Store.Finish(w.life, "q", []store.ProcRef{{Worker: p.Owner, PID: p.ID}})
			require.NoError(t, err)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			w := settling(t)
			s := w.handle("q", nil)
			h := w.runningOn(t, s)
			p := &h.Proc
			c.change(t, w, p)

			err := p.Status(context.Background())
			if c.want == nil {
				require.NoError(t, err)
				assert.NoError(t, p.St.Err())
			} else {
				require.ErrorIs(t, err, c.want)
				assert.ErrorIs(t, p.St.Err(), c.want)
			}
			assert.Equal(t, c.settled, p.St.IsSettled())
			if c.settled {
				assert.Empty(t, s.Books.procs, "a lost process stayed in the books")
				assert.Equal(t, []Outcome{Lost}, h.observed)
			} else {
				assert.Len(t, s.Books.procs, 1, "a process still to be settled left the books")
				assert.Empty(t, h.observed)
			}
		})
	}
}

// Status sends nothing for a process already ended, or a call the
// client refuses (closed, or its context done); one that fails on the
// connection says so and leaves the process running.
func TestProcStatusFailures(t *testing.T) {
	t.Parallel()
	w := settling(t)
	p := w.running(t, w.handle("q", nil))
	sent := 0
	down := false
	w.env.Store.SetFault(func(_ context.Context, op store.Op, _ string) error {
		if op != store.OpStates {
			return nil
		}
		sent++
		if down {
			return errs.ErrUnavailable
		}
		return nil
	})

	down = true
	require.ErrorIs(t, p.Status(context.Background()), errs.ErrUnavailable)
	assert.NoError(t, p.St.Err(), "a status that failed on the connection ended the process")
	assert.Equal(t, 1, sent)

	w.mu.Lock()
	w.refuse = errRefused
	w.mu.Unlock()
	require.ErrorIs(t, p.Status(context.Background()), errRefused)
	assert.Equal(t, 1, sent, "a refused call was sent")
	w.mu.Lock()
	w.refuse = nil
	w.mu.Unlock()

	p.Forget(errs.ErrProcessEnded)
	require.ErrorIs(t, p.Status(context.Background()), errs.ErrProcessLost)
	assert.Equal(t, 1, sent, "the status of an ended process was sent")
}

// The states script's answers: active is no error, and lost, or any
// state the engine does not know of, is a process lost.
func TestStateErr(t *testing.T) {
	t.Parallel()
	assert.NoError(t, StateErr(store.Active))
	assert.ErrorIs(t, StateErr(store.Cancelled), errs.ErrTaskCancelled)
	assert.ErrorIs(t, StateErr(store.Deleted), errs.ErrQueueDeleted)
	assert.ErrorIs(t, StateErr(store.Lost), errs.ErrProcessLost)
	assert.ErrorIs(t, StateErr(store.State('x')), errs.ErrProcessLost)
}
