package flows

// The carrier on its own: a step's notice carried to its workflow, whose
// next step is enqueued and the notice forgotten; what is not worqr's
// forgotten; and the notices that stay when a carry fails.

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/worqr/worqr/internal/errs"
	"github.com/worqr/worqr/internal/store"
	"github.com/worqr/worqr/internal/workflow"
)

// workerID is a worker's id: a UUID, as the scripts read a process's
// owner by its length.
const workerID = "0190a000-0000-7000-8000-000000000001"

// finishedFirst is a store holding workflow a→b whose step a ran and
// finished, leaving its notice in "q" for the carrier; and the release
// the carrier enqueues with.
func finishedFirst(t *testing.T) (*store.Store, *Release) {
	t.Helper()
	ctx := context.Background()
	st := newStore(t)
	id, ready := createFlow(t, st, workflow.Step{Name: "a"}, workflow.Step{Name: "b", After: []string{"a"}})
	r := &Release{Store: st, Fail: fail, Enqueued: func(context.Context, string, []string) {}}
	require.Equal(t, []error{nil}, r.Enqueue(ctx, []Ready{{ID: id, Steps: ready}}))

	require.NoError(t, st.RegisterWorker(ctx, workerID, time.Minute))
	_, err := st.JoinQueue(ctx, "q", workerID)
	require.NoError(t, err)
	ps, _, _, err := st.Dequeue(ctx, "q", workerID, 1, false)
	require.NoError(t, err)
	require.Len(t, ps, 1)
	_, _, err = st.Finish(ctx, "q", []store.ProcRef{{Worker: workerID, PID: ps[0].PID, Flow: ps[0].Task.Flow}})
	require.NoError(t, err)
	require.Len(t, notices(t, st), 1, "the finish of a step left no notice")
	return st, r
}

// notices are the notices "q" holds.
func notices(t *testing.T, st *store.Store) []string {
	t.Helper()
	raw, err := st.FlowNotices(context.Background(), "q", 0, SweepLimit)
	require.NoError(t, err)
	return raw
}

// A sweep carries a step's notice to its workflow: the step it made
// ready is enqueued and the notice forgotten, with a notice that is not
// worqr's, which is not counted.
func TestCarrierSweep(t *testing.T) {
	t.Parallel()
	st, r := finishedFirst(t)
	rdb := st.Redis()
	require.NoError(t, rdb.Do(context.Background(), rdb.B().Zadd().Key(st.Keys().Queue("q").Flows).ScoreMember().ScoreMember(0, "junk").Build()).Error())
	require.Len(t, notices(t, st), 2)
	c := &Carrier{Store: st, Fail: fail, Enqueue: r.Enqueue, BatchMax: 10}

	n, err := c.Sweep(context.Background(), "q", 0)
	require.NoError(t, err)
	assert.Equal(t, 1, n, "carried")
	assert.Equal(t, []string{"b"}, waiting(t, st), "the step the end made ready")
	assert.Empty(t, notices(t, st), "a notice carried, or not worqr's, stayed")
}

// Raw carries only the notices its filter wants; the others stay.
func TestCarrierRawFilters(t *testing.T) {
	t.Parallel()
	st, r := finishedFirst(t)
	c := &Carrier{Store: st, Fail: fail, Enqueue: r.Enqueue, BatchMax: 10}
	raw := notices(t, st)

	n, err := c.Raw(context.Background(), "q", raw, func(store.Notice) bool { return false })
	require.NoError(t, err)
	assert.Zero(t, n)
	assert.Equal(t, raw, notices(t, st), "a notice passed over was forgotten")
	assert.Empty(t, waiting(t, st))
}

// A notice whose workflow's enqueue fails stays for the next sweep, and
// the sweep says why; one that reads nothing (Redis out of reach) fails
// through Fail and changes nothing. The next sweep carries it.
func TestCarrierSweepFailures(t *testing.T) {
	t.Parallel()
	st, r := finishedFirst(t)
	refused := errors.New("enqueue refused (test)")
	c := &Carrier{Store: st, Fail: fail, BatchMax: 10, Enqueue: func(_ context.Context, ready []Ready) []error {
		out := make([]error, len(ready))
		for i := range out {
			out[i] = refused
		}
		return out
	}}
	n, err := c.Sweep(context.Background(), "q", 0)
	require.ErrorIs(t, err, refused)
	assert.Zero(t, n)
	assert.Len(t, notices(t, st), 1, "the notice of a workflow whose enqueue failed was forgotten")

	st.SetFault(func(context.Context, store.Op, string) error { return errs.ErrUnavailable })
	c.Enqueue = r.Enqueue
	_, err = c.Sweep(context.Background(), "q", 0)
	st.SetFault(nil)
	require.ErrorIs(t, err, errs.ErrUnavailable)
	assert.ErrorIs(t, err, errFail, "the store's error did not go through Fail")
	assert.Len(t, notices(t, st), 1)

	n, err = c.Sweep(context.Background(), "q", 0)
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	assert.Equal(t, []string{"b"}, waiting(t, st))
	assert.Empty(t, notices(t, st))
}

// Two carries of one fan-out's notice at once (a worker's and a sweep's):
// the second settles the next thousand children and fails to enqueue
// them, keeping the notice; the first goes on with enqueued set, which
// answers only the children it settles itself, and forgets the notice.
// The first's last release, a replay, answers the second's children.
func TestCarriersOfOneReleaseLoseNoChild(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	steps := []workflow.Step{{Name: "top"}}
	for i := range 2500 {
		steps = append(steps, workflow.Step{Name: fmt.Sprintf("k%04d", i), After: []string{"top"}})
	}
	id, ready := createFlow(t, st, steps...)
	r := &Release{Store: st, Fail: fail, Enqueued: func(context.Context, string, []string) {}}
	require.Equal(t, []error{nil}, r.Enqueue(ctx, []Ready{{ID: id, Steps: ready}}))
	require.NoError(t, st.RegisterWorker(ctx, workerID, time.Minute))
	_, err := st.JoinQueue(ctx, "q", workerID)
	require.NoError(t, err)
	ps, _, _, err := st.Dequeue(ctx, "q", workerID, 1, false)
	require.NoError(t, err)
	require.Len(t, ps, 1)
	_, _, err = st.Finish(ctx, "q", []store.ProcRef{{Worker: workerID, PID: ps[0].PID, Flow: ps[0].Task.Flow}})
	require.NoError(t, err)
	raw := notices(t, st)
	require.Len(t, raw, 1)
	n, ok := store.ParseNotice(raw[0])
	require.True(t, ok)

	refused := errors.New("enqueue refused (test)")
	second := &Carrier{Store: st, Fail: fail, BatchMax: 10, Enqueue: func(_ context.Context, rs []Ready) []error {
		out := make([]error, len(rs))
		for i := range out {
			out[i] = refused
		}
		return out
	}}
	rounds := 0
	first := &Carrier{Store: st, Fail: fail, BatchMax: 10, Enqueue: func(ctx context.Context, rs []Ready) []error {
		rounds++
		if rounds == 1 {
			got, err := second.Batch(ctx, "q", []store.Notice{n})
			require.NoError(t, err)
			require.ErrorIs(t, got[0], refused)
		}
		return r.Enqueue(ctx, rs)
	}}
	got, err := first.Batch(ctx, "q", []store.Notice{n})
	require.NoError(t, err)
	require.NoError(t, got[0])
	tasks, err := st.Range(ctx, "q", 0, -1, 5000)
	require.NoError(t, err)
	assert.Equal(t, 2500, len(tasks), "a child settled by the carry that failed was not enqueued")
	assert.Empty(t, notices(t, st))
}
