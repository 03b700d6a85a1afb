package flows

// The release on its own: a workflow's ready steps enqueued to their
// queues once each, told to the observer, and what a failed enqueue and
// a cancel of steps make of it.

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/worqr/worqr/internal/errs"
	"github.com/worqr/worqr/internal/store"
	"github.com/worqr/worqr/internal/workflow"
)

// newStore is a store on a fresh miniredis.
func newStore(t *testing.T) *store.Store {
	t.Helper()
	m := miniredis.RunT(t)
	rdb, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{m.Addr()}, DisableCache: true, AlwaysRESP2: true, ForceSingleClient: true})
	require.NoError(t, err)
	t.Cleanup(rdb.Close)
	return store.New(rdb, "flowstest", false, false)
}

// errFail is what a release's Fail wraps a store error in.
var errFail = errors.New("store call failed (test)")

func fail(op, queue string, err error) error {
	return errors.Join(errFail, errors.New(op+" "+queue), err)
}

// createFlow creates a workflow of steps, each in queue "q", and returns
// its id and the steps ready at once.
func createFlow(t *testing.T, st *store.Store, steps ...workflow.Step) (string, []store.ReadyStep) {
	t.Helper()
	for i := range steps {
		steps[i].Queue = "q"
		steps[i].Task = []byte(steps[i].Name)
	}
	plan, err := workflow.Plan(steps, time.Hour, false, 1<<20, func(string) error { return nil })
	require.NoError(t, err)
	id := workflow.NewID()
	what, ready, err := st.CreateWorkflow(context.Background(), id, workflow.Digest(plan, time.Hour), time.Hour, plan)
	require.NoError(t, err)
	require.Equal(t, store.WorkflowNew, what)
	return id, ready
}

// waiting is the payloads of the tasks waiting in "q", in order.
func waiting(t *testing.T, st *store.Store) []string {
	t.Helper()
	tasks, err := st.Range(context.Background(), "q", 0, -1, 100)
	require.NoError(t, err)
	var out []string
	for _, task := range tasks {
		out = append(out, string(task.Payload))
	}
	return out
}

// A workflow's ready steps are enqueued, each once however often its
// release runs, and the observer is told of the tasks added; a step that
// waits for another is not.
func TestReleaseEnqueuesTheReadyStepsOnce(t *testing.T) {
	t.Parallel()
	st := newStore(t)
	id, ready := createFlow(t, st, workflow.Step{Name: "a"}, workflow.Step{Name: "b", After: []string{"a"}})
	require.Equal(t, []string{"a"}, stepNames(ready))
	var told []string
	r := &Release{Store: st, Fail: fail, Enqueued: func(_ context.Context, queue string, ids []string) {
		assert.Equal(t, "q", queue)
		told = append(told, ids...)
	}}

	require.Equal(t, []error{nil}, r.Enqueue(context.Background(), []Ready{{ID: id, Steps: ready}}))
	assert.Equal(t, []string{"a"}, waiting(t, st))
	assert.Len(t, told, 1, "the observer was not told of the task added")

	require.Equal(t, []error{nil}, r.Enqueue(context.Background(), []Ready{{ID: id, Steps: ready}}), "a release run again failed")
	assert.Equal(t, []string{"a"}, waiting(t, st), "a release run again enqueued the step twice")
	assert.Len(t, told, 1, "the observer was told of a task not added")
}

// An enqueue that fails (Redis out of reach) is the workflow's error,
// through Fail, and adds nothing; a step whose spec cannot be read is
// its workflow's error too, and the other workflows' steps go.
func TestReleaseEnqueueFailures(t *testing.T) {
	t.Parallel()
	st := newStore(t)
	id, ready := createFlow(t, st, workflow.Step{Name: "a"})
	r := &Release{Store: st, Fail: fail, Enqueued: func(context.Context, string, []string) {
		t.Error("the observer was told of a task not added")
	}}

	st.SetFault(func(context.Context, store.Op, string) error { return errs.ErrUnavailable })
	got := r.Enqueue(context.Background(), []Ready{{ID: id, Steps: ready}})
	st.SetFault(nil)
	require.Len(t, got, 1)
	assert.ErrorIs(t, got[0], errs.ErrUnavailable)
	assert.ErrorIs(t, got[0], errFail, "the store's error did not go through Fail")
	assert.Empty(t, waiting(t, st))

	other, readyOther := createFlow(t, st, workflow.Step{Name: "c"})
	r.Enqueued = func(context.Context, string, []string) {}
	got = r.Enqueue(context.Background(), []Ready{
		{ID: id, Steps: []store.ReadyStep{{Name: "a", Spec: "{not json"}}},
		{ID: other, Steps: readyOther},
	})
	require.Len(t, got, 2)
	assert.Error(t, got[0], "a spec that cannot be read was enqueued")
	assert.NoError(t, got[1], "one workflow's bad step failed another's")
	assert.Equal(t, []string{"c"}, waiting(t, st))
}

// CancelSteps cancels each step's task in the queue its spec names,
// passes over a step with no task or a spec it cannot read, and joins
// the cancels' errors.
func TestReleaseCancelSteps(t *testing.T) {
	t.Parallel()
	type cancel struct{ queue, id string }
	var cancelled []cancel
	refused := errors.New("cancel refused (test)")
	r := &Release{Cancel: func(_ context.Context, queue, id string) error {
		cancelled = append(cancelled, cancel{queue, id})
		if id == "2" {
			return refused
		}
		return nil
	}}
	err := r.CancelSteps(context.Background(), []store.QueuedStep{
		{Name: "a", TaskID: "1", Spec: `{"q":"x"}`},
		{Name: "b", TaskID: "", Spec: `{"q":"x"}`},
		{Name: "c", TaskID: "3", Spec: "{not json"},
		{Name: "d", TaskID: "2", Spec: `{"q":"y"}`},
	})
	require.ErrorIs(t, err, refused)
	assert.Equal(t, []cancel{{"x", "1"}, {"y", "2"}}, cancelled)
}

func stepNames(rs []store.ReadyStep) []string {
	var names []string
	for _, r := range rs {
		names = append(names, r.Name)
	}
	return names
}
