package worqr

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/worqr/worqr/internal/store"
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

// A workflow cancelled while a child's enqueue is under way (in its
// queue, not yet marked queued in the workflow) may see that child start:
// a hand-off or a woken dequeue can take it first. The mark then finds the
// step cancelled and cancels the task in flight: its handler's context
// ends with ErrTaskCancelled, and the step ends cancelled, never
// succeeded (docs/workflows.md).
func TestWorkflowCancelledWhileItsChildIsEnqueuedCancelsItInFlight(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	require.False(t, c.core.Store.Keys().WorkflowHome("cancel-handed", "p"))
	started, ended := make(chan string, 1), make(chan error, 1)
	wk := newWorker(t, c, WorkerOptions{})
	require.NoError(t, wk.Handle(ctx, "k", func(ctx context.Context, p *Process) error {
		started <- p.TaskID()
		<-ctx.Done()
		ended <- context.Cause(ctx)
		return ctx.Err()
	}, HandleOptions{}))
	settledParking(t, c, "k", 1)

	// The release's mark of the child as queued (the first workflow call
	// after the child's enqueue) waits until the test lets it go.
	var enqueued, held atomic.Bool
	release := make(chan struct{})
	c.core.Store.SetFault(func(ctx context.Context, op store.Op, q string) error {
		switch {
		case op == store.OpEnqueue && q == "k":
			enqueued.Store(true)
		case op == store.OpWorkflow && q == "wf:cancel-handed" && enqueued.Load() && held.CompareAndSwap(false, true):
			select {
			case <-release:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	})
	t.Cleanup(func() { c.core.Store.SetFault(nil) })
	id, err := c.EnqueueWorkflow(ctx, []Step{
		{Name: "parent", Queue: "p"},
		{Name: "child", Queue: "k", After: []string{"parent"}},
	}, WorkflowOptions{ID: "cancel-handed"})
	require.NoError(t, err)
	wp := newWorker(t, c, WorkerOptions{})
	require.NoError(t, wp.StartWork(ctx, "p", Events{}))
	parent, err := wp.Dequeue(ctx, "p")
	require.NoError(t, err)
	require.NoError(t, parent.Finish(ctx))

	eventually(t, 5*time.Second, "the child enqueued", enqueued.Load)
	eventually(t, 5*time.Second, "the mark held", held.Load)
	var task string
	select {
	case task = <-started: // handed off before its mark, as this test arranges
	case <-time.After(5 * time.Second):
		t.Fatal("the child did not start before its mark as queued")
	}
	_, err = c.CancelWorkflow(ctx, id)
	require.NoError(t, err)
	close(release)
	select {
	case cause := <-ended:
		assert.ErrorIs(t, cause, ErrTaskCancelled, "the child's handler is cancelled in flight")
	case <-time.After(10 * time.Second):
		t.Fatalf("the cancelled workflow's child %s still runs", task)
	}
	info, err := c.WaitWorkflow(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, WorkflowCancelled, info.State)
	for _, s := range info.Steps {
		if s.Name == "child" {
			assert.Equal(t, StepCancelled, s.State)
		}
	}
}
