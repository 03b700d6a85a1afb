package worqr

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/worqr/worqr/internal/testsignal"
)

// cancelChain enqueues a chain first -> second -> third in queue q and
// returns its id and the task id of its first step, queued.
func cancelChain(t *testing.T, c *Client, ctx context.Context, q string) (string, string) {
	t.Helper()
	id, err := c.EnqueueWorkflow(ctx, []Step{
		{Name: "first", Queue: q, Task: []byte("first")},
		{Name: "second", Queue: q, After: []string{"first"}},
		{Name: "third", Queue: q, After: []string{"second"}},
	}, WorkflowOptions{})
	require.NoError(t, err)
	info, err := c.Workflow(ctx, id)
	require.NoError(t, err)
	require.Equal(t, StepQueued, info.Steps[0].State)
	require.NotEmpty(t, info.Steps[0].TaskID)
	return id, info.Steps[0].TaskID
}

// waitCancelled waits for workflow id to end, and checks that it failed
// with every step cancelled: the first's task, the others with it.
func waitCancelled(t *testing.T, c *Client, ctx context.Context, id string) {
	t.Helper()
	waited := make(chan WorkflowInfo, 1)
	go func() {
		info, err := c.WaitWorkflow(ctx, id)
		assert.NoError(t, err)
		waited <- info
	}()
	info := recv(t, waited, testsignal.Wait, "the workflow's end")
	assert.Equal(t, WorkflowFailed, info.State)
	require.Len(t, info.Steps, 3)
	for _, st := range info.Steps {
		assert.Equal(t, StepCancelled, st.State, st.Name)
	}
}

// A step's task cancelled while it waits (CancelTask, Cancel by payload,
// or the bulk CancelWaiting) ends the step cancelled: its descendants are
// cancelled and the workflow fails, and its waiter hears it.
func TestWorkflowStepCancelledWaiting(t *testing.T) {
	t.Parallel()
	cases := map[string]func(c *Client, ctx context.Context, q, task string) error{
		"by id": func(c *Client, ctx context.Context, q, task string) error {
			n, err := c.CancelTask(ctx, q, task)
			assert.Equal(t, CancelResult{Removed: 1}, n)
			return err
		},
		"by payload": func(c *Client, ctx context.Context, q, _ string) error {
			n, err := c.Cancel(ctx, q, []byte("first"))
			assert.Equal(t, CancelResult{Removed: 1}, n)
			return err
		},
		"in bulk": func(c *Client, ctx context.Context, q, _ string) error {
			n, more, err := c.CancelWaiting(ctx, q, WaitingSelection{})
			assert.Equal(t, int64(1), n)
			assert.False(t, more)
			return err
		},
	}
	for name, cancel := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, c, ctx := setup(t)
			id, task := cancelChain(t, c, ctx, "q")
			require.NoError(t, cancel(c, ctx, "q", task))
			waitCancelled(t, c, ctx, id)
			n, err := c.QueueLen(ctx, "q")
			require.NoError(t, err)
			assert.Zero(t, n, "no step was enqueued after the cancel")
		})
	}
}

// A step's task cancelled in flight: the handler sees ErrTaskCancelled,
// and the workflow ends failed with the step and its descendants
// cancelled, whichever way the handler ends.
func TestWorkflowStepCancelledInFlight(t *testing.T) {
	t.Parallel()
	for name, end := range map[string]func(ctx context.Context, p *Process) error{
		"returns":  func(context.Context, *Process) error { return nil },
		"requeues": func(ctx context.Context, p *Process) error { return p.Requeue(ctx) },
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, c, ctx := setup(t)
			started := make(chan struct{}, 1)
			cancelled := make(chan error, 1)
			w := newWorker(t, c, WorkerOptions{})
			require.NoError(t, w.Handle(ctx, "q", func(hctx context.Context, p *Process) error {
				started <- struct{}{}
				<-hctx.Done()
				cancelled <- context.Cause(hctx)
				return end(ctx, p)
			}, HandleOptions{}))
			id, task := cancelChain(t, c, ctx, "q")
			recv(t, started, testsignal.Wait, "the first step runs")
			n, err := c.CancelTask(ctx, "q", task)
			require.NoError(t, err)
			assert.Equal(t, CancelResult{Marked: 1}, n)
			assert.ErrorIs(t, recv(t, cancelled, testsignal.Wait, "the cancel reaches the handler"), ErrTaskCancelled)
			waitCancelled(t, c, ctx, id)
		})
	}
}

// DeleteQueue with a step's task waiting, and another's in flight in a
// second queue deleted next: each ends cancelled, told by its delete,
// their child with them, and the workflow fails.
func TestWorkflowStepQueueDeleted(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	started := make(chan struct{}, 1)
	w := newWorker(t, c, WorkerOptions{})
	require.NoError(t, w.Handle(ctx, "busy", func(hctx context.Context, p *Process) error {
		started <- struct{}{}
		<-hctx.Done()
		return nil
	}, HandleOptions{}))
	id, err := c.EnqueueWorkflow(ctx, []Step{
		{Name: "held", Queue: "busy"},
		{Name: "idle", Queue: "q"},
		{Name: "after", Queue: "q", After: []string{"held", "idle"}},
	}, WorkflowOptions{})
	require.NoError(t, err)
	recv(t, started, testsignal.Wait, "the held step runs")
	dropped, err := c.DeleteQueue(ctx, "q")
	require.NoError(t, err)
	assert.Equal(t, int64(1), dropped)
	info, err := c.Workflow(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, WorkflowRunning, info.State, "the held step still runs")
	_, err = c.DeleteQueue(ctx, "busy")
	require.NoError(t, err)

	waited := make(chan WorkflowInfo, 1)
	go func() {
		info, err := c.WaitWorkflow(ctx, id)
		assert.NoError(t, err)
		waited <- info
	}()
	info = recv(t, waited, testsignal.Wait, "the workflow's end")
	assert.Equal(t, WorkflowFailed, info.State)
	states := map[string]StepState{}
	for _, st := range info.Steps {
		states[st.Name] = st.State
	}
	assert.Equal(t, map[string]StepState{"held": StepCancelled, "idle": StepCancelled, "after": StepCancelled}, states)
}
