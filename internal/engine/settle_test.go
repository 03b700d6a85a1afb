package engine

// The settler on its own: a handler's outcome turned into the script
// that ends its process, what Redis holds after it, what the observer is
// told, and the writes that fail (Redis out of reach, the lease gone).

import (
	"context"
	"errors"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/worqr/worqr/internal/coalesce"
	"github.com/worqr/worqr/internal/errs"
	"github.com/worqr/worqr/internal/outage"
	"github.com/worqr/worqr/internal/proc"
	"github.com/worqr/worqr/internal/startstop"
	"github.com/worqr/worqr/internal/store"
	"github.com/worqr/worqr/internal/testsignal"
)

// settling is a worker whose processes' outcomes can be written: its Env
// has the coalescers the root's client gives it, it holds the lease on
// queue "q", and its outage takes a failure on the connection for one,
// so that a write it fails is tried again.
func settling(t *testing.T) *fakeWorker {
	t.Helper()
	w := newTestWorker(t)
	w.env.Finishes = coalesce.New(16, func(ctx context.Context, q string, ps []*Proc) ([]store.Outcome, error) {
		return FinishJoined(ctx, w.env.Store, q, ps)
	})
	w.env.Retries = coalesce.New(16, w.env.Store.Retry)
	t.Cleanup(w.env.Finishes.Close)
	t.Cleanup(w.env.Retries.Close)
	w.out = outage.New(w.env.Log, w.clk, proc.Retryable)
	w.env.DeadBounds = store.DeadBounds{MaxCount: 10, MaxAge: time.Hour}
	_, err := w.env.Store.JoinQueue(w.life, "q", testID)
	require.NoError(t, err)
	return w
}

// running is a process of a task of "q" the worker holds in Redis,
// adopted into the books of its session s.
func (w *fakeWorker) running(t *testing.T, s *Session) *Proc {
	t.Helper()
	p := w.NewProc("q", w.hold(t, "q", testID, 1)[0], w.clk.Now())
	require.True(t, s.Adopt(p))
	return p
}

// settler is a Settler whose jobs are ints, each signalled once settled.
func settler(t *testing.T) (*Settler[int], *testsignal.Signal[int]) {
	t.Helper()
	var settled testsignal.Signal[int]
	settled.Init(t)
	jobs := &startstop.Group{}
	t.Cleanup(jobs.Close)
	return &Settler[int]{
		Delay:   func(int, error) time.Duration { return time.Minute },
		Jobs:    jobs,
		Settled: settled.Signal,
	}, &settled
}

// counts is what Redis holds of queue "q": its waiting, delayed and dead
// tasks.
func (w *fakeWorker) counts(t *testing.T) (waiting, delayed, dead int64) {
	t.Helper()
	var err error
	waiting, err = w.env.Store.QueueLen(w.life, "q")
	require.NoError(t, err)
	delayed, err = w.env.Store.DelayedLen(w.life, "q")
	require.NoError(t, err)
	dead, err = w.env.Store.DeadCount(w.life, "q")
	require.NoError(t, err)
	return waiting, delayed, dead
}

// Each outcome of a handler becomes its script: nil finishes the task, a
// permanent error or the last attempt's buries it, another error retries
// it after the policy's delay, and an end by a cancel event that Redis
// does not back requeues it. The observer hears of each end once, the
// process leaves the books, and the job is settled.
func TestSettleOutcomes(t *testing.T) {
	t.Parallel()
	fail := errors.New("handler failed (test)")
	for _, c := range []struct {
		name   string
		err    error
		budget int
		cancel bool // ended by a cancel event first
		// drop is what Redis holds of the task while its handler runs,
		// the worker not having heard of it: cancelled, or its queue
		// deleted.
		drop func(t *testing.T, w *fakeWorker, p *Proc)
		want Outcome
		// what Redis holds of "q" after it
		waiting, delayed, dead int64
	}{
		{name: "succeeded", want: Succeeded},
		{name: "permanent", err: Permanent(fail), want: Dead, dead: 1},
		{name: "exhausted", err: fail, budget: 1, want: Dead, dead: 1},
		{name: "retried", err: fail, want: Retried, delayed: 1},
		{name: "cancel event unbacked", err: fail, cancel: true, want: Retried, waiting: 1},
		{name: "retried, cancelled meanwhile", err: fail, drop: cancelIt, want: Cancelled},
		{name: "retried, queue deleted meanwhile", err: fail, drop: deleteIt, want: Deleted},
		{name: "dead-lettered, cancelled meanwhile", err: Permanent(fail), drop: cancelIt, want: Cancelled},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			w := settling(t)
			s := w.handle("q", nil)
			p := w.running(t, s)
			p.Budget = c.budget
			if c.cancel {
				p.End(errs.ErrTaskCancelled, false)
			}
			if c.drop != nil {
				c.drop(t, w, p)
			}
			r, settled := settler(t)
			r.Settle(context.Background(), 7, p, c.err)

			assert.Equal(t, 7, settled.WaitOrTimeout())
			assert.Equal(t, c.want, w.ended.WaitOrTimeout())
			w.ended.RequireEmpty()
			assert.Empty(t, w.held(t, "q", testID, []store.Proc{{PID: p.ID}}), "the worker still holds the process in Redis")
			waiting, delayed, dead := w.counts(t)
			assert.Equal(t, [3]int64{c.waiting, c.delayed, c.dead}, [3]int64{waiting, delayed, dead}, "waiting, delayed, dead")
			assert.True(t, p.St.IsSettled())
			assert.Empty(t, s.Books.procs, "the process stayed in the books")
		})
	}
}

// cancelIt cancels p's task in Redis, telling no one.
func cancelIt(t *testing.T, w *fakeWorker, p *Proc) {
	_, _, err := w.env.Store.CancelID(w.life, "q", p.TaskID)
	require.NoError(t, err)
}

// deleteIt deletes p's queue in Redis, telling no one.
func deleteIt(t *testing.T, w *fakeWorker, _ *Proc) {
	_, _, err := w.env.Store.DeleteQueue(w.life, "q")
	require.NoError(t, err)
}

// A process already lost, or a handler's error while the worker shuts
// down, writes nothing: the job is settled and Redis still holds the
// task for the worker (its shutdown gives it back, or its reclaimer
// another worker's).
func TestSettleWritesNothingForALostProcessOrAShutdown(t *testing.T) {
	t.Parallel()
	for _, lost := range []bool{true, false} {
		w := settling(t)
		s := w.handle("q", nil)
		p := w.running(t, s)
		ctx := context.Background()
		if lost {
			p.Forget(errs.ErrProcessLost)
			assert.Equal(t, Lost, w.ended.WaitOrTimeout())
		} else {
			shut, cancel := context.WithCancelCause(ctx)
			cancel(errs.ErrShutdown)
			ctx = shut
		}
		r, settled := settler(t)
		r.Settle(ctx, 1, p, errors.New("handler failed (test)"))
		assert.Equal(t, 1, settled.WaitOrTimeout())
		w.ended.RequireEmpty()
		assert.Equal(t, []string{p.ID}, w.held(t, "q", testID, []store.Proc{{PID: p.ID}}), "lost: %v", lost)
	}
}

// A Finish that fails on the connection (Redis out of reach) is tried
// again on the settler's clock once Redis answers, and the job is
// settled only then; the observer hears of one success.
func TestSettleTriesAFinishAgainWhileRedisIsOut(t *testing.T) {
	t.Parallel()
	w := settling(t)
	s := w.handle("q", nil)
	p := w.running(t, s)
	var down atomic.Bool
	down.Store(true)
	fault := store.Fault(func(_ context.Context, op store.Op, _ string) error {
		if op == store.OpFinish && down.Load() {
			return errs.ErrUnavailable
		}
		return nil
	})
	w.env.Store.SetFault(fault)
	r, settled := settler(t)
	go r.Settle(context.Background(), 3, p, nil)

	ctx, cancel := context.WithTimeout(context.Background(), testsignal.Wait)
	defer cancel()
	require.NoError(t, w.clk.WaitTimers(ctx, 1), "no wait before the write's next try")
	settled.RequireEmpty()
	assert.Equal(t, map[string]int{"finish": 1}, w.out.Counts(), "the outage did not count the failed finish")
	assert.Equal(t, []string{p.ID}, w.held(t, "q", testID, []store.Proc{{PID: p.ID}}))

	down.Store(false)
	w.clk.Advance(time.Second)
	assert.Equal(t, 3, settled.WaitOrTimeout())
	assert.Equal(t, Succeeded, w.ended.WaitOrTimeout())
	w.ended.RequireEmpty()
	assert.Empty(t, w.held(t, "q", testID, []store.Proc{{PID: p.ID}}), "the finish never reached Redis")
	assert.Nil(t, w.out.Counts(), "Redis answered: the outage is over")
}

// A retry whose script finds the worker's lease on the queue gone tells
// the process's host (which fences the worker), and the process ends
// lost: the task is no longer the worker's to touch.
func TestSettleFindsTheLeaseGone(t *testing.T) {
	t.Parallel()
	w := settling(t)
	s := w.handle("q", nil)
	h := w.runningOn(t, s)
	p := &h.Proc
	w.dropLease(t)

	r, settled := settler(t)
	r.Settle(context.Background(), 5, p, errors.New("handler failed (test)"))
	assert.Equal(t, 5, settled.WaitOrTimeout())
	require.Len(t, h.lost, 1, "the host was not told of the lease lost")
	assert.ErrorIs(t, p.St.Err(), errs.ErrProcessLost)
	assert.Equal(t, []Outcome{Lost}, h.observed)
	assert.Empty(t, s.Books.procs, "the lost process stayed in the books")
}

// dropLease stands for the worker's lease on "q" running out: Redis
// holds none of the worker's leases on the queue.
func (w *fakeWorker) dropLease(t *testing.T) {
	t.Helper()
	rdb := w.env.Store.Redis()
	require.NoError(t, rdb.Do(w.life, rdb.B().Del().Key(w.env.Store.Keys().Queue("q").Leases).Build()).Error())
}

// runningOn is running's process, its host a leaseHost.
func (w *fakeWorker) runningOn(t *testing.T, s *Session) *leaseHost {
	t.Helper()
	sp := w.hold(t, "q", testID, 1)[0]
	h := &leaseHost{w: w}
	p := &h.Proc
	p.Host, p.ID, p.Seq, p.Queue, p.Owner, p.TaskID = h, sp.PID, sp.Seq(), "q", sp.Owner, sp.Task.ID
	require.True(t, s.Adopt(p))
	return h
}

// leaseHost is a process's worker side that records the leases lost and
// the ends observed.
type leaseHost struct {
	Proc
	w        *fakeWorker
	lost     []error
	observed []Outcome
}

func (h *leaseHost) Env() *Env             { return &h.w.env }
func (h *leaseHost) LeaseLost(cause error) { h.lost = append(h.lost, cause) }
func (h *leaseHost) Observe(outcome Outcome, _ string, _ error) {
	h.observed = append(h.observed, outcome)
}

// A Finish that does not wait (FinishLater) makes one allocation of its
// own, the record of its write, beyond what its batch's Then makes with
// a callback made beforehand: it runs once for every task, and each
// step of its settling as a closure would be one more.
func TestFinishLaterAllocatesOnlyItsRecord(t *testing.T) { // not parallel: AllocsPerRun
	w := newTestWorker(t)
	outs := make([]store.Outcome, 16)
	for i := range outs {
		outs[i] = store.WasActive
	}
	w.env.Finishes = coalesce.New(16, func(_ context.Context, _ string, ps []*Proc) ([]store.Outcome, error) {
		return outs[:len(ps)], nil
	})
	t.Cleanup(w.env.Finishes.Close)
	const runs = 50
	procs := make([]quietProc, 2*(runs+1))
	for i := range procs {
		procs[i].Host, procs[i].env = &procs[i], &w.env
		procs[i].Queue, procs[i].ID = "q", strconv.Itoa(i)
	}
	var settled int
	r := &Settler[int]{Jobs: &startstop.Group{}, Settled: func(int) { settled++ }}
	t.Cleanup(r.Jobs.Close)
	next := 0
	take := func() *Proc { next++; return &procs[next-1].Proc }

	noop := coalesce.Func[store.Outcome](func(store.Outcome, error) {})
	batch := testing.AllocsPerRun(runs, func() { w.env.Finishes.Then(w.life, "q", take(), noop) })
	later := testing.AllocsPerRun(runs, func() { r.FinishLater(0, take()) })
	assert.Equal(t, 1.0, later-batch, "FinishLater's allocations beyond its batch's (%v)", batch)
	assert.Equal(t, runs+1, settled, "jobs settled")
	assert.True(t, procs[len(procs)-1].St.IsSettled(), "the last process not settled")
}

// quietProc is a process whose host tells no one of its end.
type quietProc struct {
	Proc
	env *Env
}

func (h *quietProc) Env() *Env                      { return h.env }
func (h *quietProc) LeaseLost(error)                {}
func (h *quietProc) Observe(Outcome, string, error) {}

// A retry names its task as plain (store.RetryRef.Plain) when the process
// says so, so that the store sends it to retry_plain.lua.
func TestRetryRefCarriesPlain(t *testing.T) {
	cause := errors.New("boom")
	for _, plain := range []bool{true, false} {
		p := &Proc{ID: "1", Owner: "w", Kind: "k", Plain: plain}
		assert.Equal(t, store.RetryRef{ProcRef: store.ProcRef{Worker: "w", PID: "1", Kind: "k"}, Err: "boom", Plain: plain}, p.retryRef(0, cause))
	}
}
