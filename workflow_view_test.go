package worqr

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// InOrder lists each step after all its parents, ties by name: a chain
// given in any order reads first to last, a diamond top, left, right,
// bottom.
func TestWorkflowInOrder(t *testing.T) {
	t.Parallel()
	names := func(ss []StepInfo) []string {
		out := make([]string, len(ss))
		for i, s := range ss {
			out[i] = s.Name
		}
		return out
	}
	chain := WorkflowInfo{Steps: []StepInfo{
		{Name: "a-load", Parents: []string{"b-transform"}},
		{Name: "b-transform", Parents: []string{"c-extract"}},
		{Name: "c-extract"},
	}}
	assert.Equal(t, []string{"c-extract", "b-transform", "a-load"}, names(chain.InOrder()))
	diamond := WorkflowInfo{Steps: []StepInfo{
		{Name: "bottom", Parents: []string{"left", "right"}},
		{Name: "left", Parents: []string{"top"}},
		{Name: "right", Parents: []string{"top"}},
		{Name: "top"},
	}}
	assert.Equal(t, []string{"top", "left", "right", "bottom"}, names(diamond.InOrder()))
	assert.Empty(t, WorkflowInfo{}.InOrder())
}

// A workflow step's task says, wherever it is inspected, which workflow
// and step it is; a plain task says none.
func TestTaskInfoWorkflow(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	id, err := c.EnqueueWorkflow(ctx, []Step{
		{Name: "first", Queue: "wfq", Task: []byte("1")},
		{Name: "second", Queue: "wfq", After: []string{"first"}},
	}, WorkflowOptions{ID: "inspected"})
	require.NoError(t, err)
	plain, err := c.Enqueue(ctx, "wfq", []byte("plain"))
	require.NoError(t, err)
	info, err := c.Workflow(ctx, id)
	require.NoError(t, err)
	first := info.Steps[0]
	require.Equal(t, "first", first.Name)

	l, err := c.FindTask(ctx, "wfq", first.TaskID)
	require.NoError(t, err)
	require.NotNil(t, l.Waiting)
	assert.Equal(t, "inspected", l.Waiting.Workflow)
	assert.Equal(t, "first", l.Waiting.Step)
	l, err = c.FindTask(ctx, "wfq", plain)
	require.NoError(t, err)
	require.NotNil(t, l.Waiting)
	assert.Empty(t, l.Waiting.Workflow+l.Waiting.Step)

	w := newWorker(t, c, WorkerOptions{})
	require.NoError(t, w.StartWork(ctx, "wfq", Events{}))
	ps, err := w.DequeueN(ctx, "wfq", 1)
	require.NoError(t, err)
	require.Len(t, ps, 1)
	procs, err := c.Processes(ctx, "wfq")
	require.NoError(t, err)
	require.Len(t, procs, 1)
	assert.Equal(t, "inspected", procs[0].Workflow)
	assert.Equal(t, "first", procs[0].Step)
}

// WorkflowSteps reads any part of a workflow's steps in the order InOrder
// lists them in (steps given in any order), each with its first
// MaxPageParents parents and the rest counted, with the workflow's
// counts; the same for a workflow created before the order was kept
// (read whole); a step's end moves the counts; bad bounds and unknown
// workflows are refused.
func TestWorkflowSteps(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	var fanIn []string
	// Names whose order is not the dependency order.
	steps := []Step{{Name: "a-report", Queue: "wfs"}}
	for i := range 15 {
		name := fmt.Sprintf("m-%02d", 14-i)
		fanIn = append(fanIn, name)
		steps = append(steps, Step{Name: name, Queue: "wfs", After: []string{"fetch"}})
	}
	steps[0].After = fanIn
	steps = append(steps, Step{Name: "fetch", Queue: "wfs", After: []string{"start"}}, Step{Name: "start", Queue: "wfs"},
		Step{Name: "side", Queue: "wfs", AfterEnded: []string{"start"}})
	id, err := c.EnqueueWorkflow(ctx, steps, WorkflowOptions{ID: "paged"})
	require.NoError(t, err)

	check := func(what string) {
		t.Helper()
		whole, err := c.Workflow(ctx, id)
		require.NoError(t, err)
		want := whole.InOrder()
		require.Len(t, want, len(steps))
		open, dead := 0, 0
		for _, st := range want {
			switch st.State {
			case StepWaiting, StepReady, StepQueued:
				open++
			case StepDead:
				dead++
			}
		}
		for _, bounds := range [][2]int{{0, 1}, {0, 18}, {0, MaxPageSteps}, {3, 5}, {17, 4}, {18, 3}, {19, 1}, {40, 1}} {
			from, limit := bounds[0], bounds[1]
			page, err := c.WorkflowSteps(ctx, id, from, limit)
			require.NoError(t, err)
			var part []StepInfo
			for _, st := range want[min(from, len(want)):min(from+limit, len(want))] {
				if len(st.Parents) > MaxPageParents {
					st.Parents, st.MoreParents = st.Parents[:MaxPageParents], len(st.Parents)-MaxPageParents
				}
				part = append(part, st)
			}
			assert.Equal(t, WorkflowPage{ID: id, State: whole.State, Created: whole.Created, Ended: whole.Ended,
				Total: len(steps), Open: open, Dead: dead, From: from, Steps: part}, page, "%s: from %d, limit %d", what, from, limit)
		}
	}
	check("kept order")
	page, err := c.WorkflowSteps(ctx, id, 0, 3)
	require.NoError(t, err)
	require.Equal(t, []string{"start", "fetch", "m-00"}, []string{page.Steps[0].Name, page.Steps[1].Name, page.Steps[2].Name})
	last, err := c.WorkflowSteps(ctx, id, 17, 2)
	require.NoError(t, err)
	require.Equal(t, []string{"a-report", "side"}, []string{last.Steps[0].Name, last.Steps[1].Name})
	assert.Equal(t, 5, last.Steps[0].MoreParents, "the fan-in's parents cut")

	// start dies: the counts move.
	w := newWorker(t, c, WorkerOptions{})
	require.NoError(t, w.StartWork(ctx, "wfs", Events{}))
	ps, err := w.DequeueN(ctx, "wfs", 1)
	require.NoError(t, err)
	require.Len(t, ps, 1)
	require.NoError(t, ps[0].DeadLetter(ctx, errors.New("gave up")))
	require.Eventually(t, func() bool { // side, which runs whatever start's end, queued: settled
		p, err := c.WorkflowSteps(ctx, id, 18, 1)
		return err == nil && p.Steps[0].State == StepQueued && p.Dead == 1
	}, 5*time.Second, 10*time.Millisecond)
	check("a step dead")

	// A workflow created before the order was kept is read whole.
	rdb := c.core.Store.Redis()
	require.NoError(t, rdb.Do(ctx, rdb.B().Del().Key(c.core.Store.Keys().Workflow(id).Order).Build()).Error())
	check("no order kept")

	for _, bounds := range [][2]int{{-1, 10}, {0, 0}, {0, MaxPageSteps + 1}} {
		_, err := c.WorkflowSteps(ctx, id, bounds[0], bounds[1])
		assert.ErrorIs(t, err, ErrInvalidOptions, "from %d, limit %d", bounds[0], bounds[1])
	}
	_, err = c.WorkflowSteps(ctx, "unknown", 0, 10)
	assert.ErrorIs(t, err, ErrNoWorkflow)
	_, err = c.WorkflowSteps(ctx, "bad id!", 0, 10)
	assert.ErrorIs(t, err, ErrInvalidOptions)
}
