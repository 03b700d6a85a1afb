package worqr

import (
	"testing"

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
