package worqr

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/worqr/worqr/internal/store"
	"github.com/worqr/worqr/internal/testsignal"
)

// cascadeSteps is a workflow whose step "top" (queue p) has ten children
// (queue k) of 250 children each: top's death cancels 2,510 descendants
// over two levels, more than one release call settles.
func cascadeSteps() []Step {
	steps := []Step{{Name: "top", Queue: "p"}}
	for i := range 10 {
		k := fmt.Sprintf("k%d", i)
		steps = append(steps, Step{Name: k, Queue: "k", After: []string{"top"}})
		for j := range 250 {
			steps = append(steps, Step{Name: fmt.Sprintf("%s.%03d", k, j), Queue: "k", After: []string{k}})
		}
	}
	return steps
}

// requireCascaded requires the workflow failed, top dead and every other
// step cancelled.
func requireCascaded(t *testing.T, c *Client, id string) {
	t.Helper()
	info, err := c.Workflow(context.Background(), id)
	require.NoError(t, err)
	assert.Equal(t, WorkflowFailed, info.State)
	states := make(map[StepState]int)
	for _, st := range info.Steps {
		states[st.State]++
	}
	assert.Equal(t, map[StepState]int{StepDead: 1, StepCancelled: 2510}, states)
}

// A death over more descendants than a release call settles ends them
// all, over several calls of one carry: the workflow fails, its notice is
// forgotten, and Check finds nothing under way.
func TestWorkflowDeathCascadesInChunks(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	id, err := c.EnqueueWorkflow(ctx, cascadeSteps(), WorkflowOptions{ID: "tree"})
	require.NoError(t, err)
	w := newWorker(t, c, WorkerOptions{})
	var releases atomic.Int32
	c.store.SetFault(func(_ context.Context, op store.Op, q string) error {
		if op == store.OpWorkflow {
			releases.Add(1)
		}
		return nil
	})
	require.NoError(t, w.StartWork(ctx, "p", Events{}))
	p, err := w.Dequeue(ctx, "p")
	require.NoError(t, err)
	require.NoError(t, p.DeadLetter(ctx, errors.New("dies")))
	wctx, cancel := context.WithTimeout(ctx, testsignal.Wait)
	defer cancel()
	_, err = c.WaitWorkflow(wctx, id)
	require.NoError(t, err)
	c.store.SetFault(nil)
	requireCascaded(t, c, id)
	assert.GreaterOrEqual(t, releases.Load(), int32(3), "three release calls at least")
	require.NoError(t, w.Close(ctx))
	notices, err := c.store.FlowNotices(ctx, "p", 0, 10)
	require.NoError(t, err)
	assert.Empty(t, notices)
	requireClean(t, c)
}

// A cascade cut short after its first call (the carrier crashed) whose
// notice is then lost: Check reports the death's release under way
// (StalledReleases) and its repair carries the death once more, from
// where its cascade stands, to the last descendant.
func TestCheckResumesACascadeWhoseNoticeIsGone(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	id, err := c.EnqueueWorkflow(ctx, cascadeSteps(), WorkflowOptions{ID: "tree"})
	require.NoError(t, err)
	w := newWorker(t, c, WorkerOptions{})
	require.NoError(t, w.StartWork(ctx, "p", Events{}))
	p, err := w.Dequeue(ctx, "p")
	require.NoError(t, err)
	var calls atomic.Int32
	crashed := make(chan struct{}, 1)
	c.store.SetFault(func(_ context.Context, op store.Op, q string) error {
		if op == store.OpWorkflow && calls.Add(1) > 1 {
			select {
			case crashed <- struct{}{}:
			default:
			}
			return errors.New("crashed after the cascade's first call")
		}
		return nil
	})
	require.NoError(t, p.DeadLetter(ctx, errors.New("dies")))
	recv(t, crashed, testsignal.Wait, "the crash")
	require.NoError(t, w.Close(ctx))
	c.store.SetFault(nil)
	notices, err := c.store.FlowNotices(ctx, "p", 0, 10)
	require.NoError(t, err)
	require.Len(t, notices, 1, "the notice stays")
	require.NoError(t, c.store.ForgetNotices(ctx, "p", notices))

	info, err := c.Workflow(ctx, id)
	require.NoError(t, err)
	require.Equal(t, WorkflowRunning, info.State)
	cancelled := 0
	for _, st := range info.Steps {
		if st.State == StepCancelled {
			cancelled++
		}
	}
	require.Equal(t, 1000, cancelled, "the first call's thousand")

	release := []WorkflowStep{{Workflow: "tree", Step: "top", Task: p.TaskID()}}
	rep := check(t, c, false)
	assert.Equal(t, release, rep.StalledReleases)
	assert.Equal(t, 1, rep.Problems(), rep.String())
	rep = check(t, c, true)
	assert.Equal(t, release, rep.Repaired.ResumedReleases)
	requireCascaded(t, c, id)
	requireClean(t, c)
}
