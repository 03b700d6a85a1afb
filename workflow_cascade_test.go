package worqr

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

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
	c.core.Store.SetFault(func(_ context.Context, op store.Op, q string) error {
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
	c.core.Store.SetFault(nil)
	requireCascaded(t, c, id)
	assert.GreaterOrEqual(t, releases.Load(), int32(3), "three release calls at least")
	require.NoError(t, w.Close(ctx))
	notices, err := c.core.Store.FlowNotices(ctx, "p", 0, 10)
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
	crashed, heal := crashCarries(c, 1)
	require.NoError(t, p.DeadLetter(ctx, errors.New("dies")))
	recv(t, crashed, testsignal.Wait, "the crash after the cascade's first call")
	require.NoError(t, w.Close(ctx))
	heal()
	notices, err := c.core.Store.FlowNotices(ctx, "p", 0, 10)
	require.NoError(t, err)
	require.Len(t, notices, 1, "the notice stays")
	require.NoError(t, c.core.Store.ForgetNotices(ctx, "p", notices))

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

// crashCarries makes the workflow calls of c's carries fail from the
// after-th on (0: all), as if the carrier crashed there, until the
// returned func is called; the channel says a call failed.
func crashCarries(c *Client, after int32) (<-chan struct{}, func()) {
	var calls atomic.Int32
	return crashWhen(c, func(op store.Op, _ string) bool {
		return op == store.OpWorkflow && calls.Add(1) > after
	})
}

// crashWhen makes the calls of c for which crash holds (by op and queue)
// fail, as if the carrier crashed there, until the returned func is
// called; the channel says a call failed.
func crashWhen(c *Client, crash func(op store.Op, q string) bool) (<-chan struct{}, func()) {
	crashed := make(chan struct{}, 1)
	c.core.Store.SetFault(func(_ context.Context, op store.Op, q string) error {
		if crash(op, q) {
			select {
			case crashed <- struct{}{}:
			default:
			}
			return errors.New("crashed")
		}
		return nil
	})
	return crashed, func() { c.core.Store.SetFault(nil) }
}

// stepStates reads the state of a step of workflow id by name.
func stepStates(t *testing.T, c *Client, id string) func(name string) StepState {
	return func(name string) StepState {
		t.Helper()
		info, err := c.Workflow(context.Background(), id)
		require.NoError(t, err)
		for _, st := range info.Steps {
			if st.Name == name {
				return st.State
			}
		}
		t.Fatalf("no step %s", name)
		return ""
	}
}

// A revival never lets a step run before its parents while another
// death's cascade is under way. k9.000 waits for s, and for k9 whatever
// its end. top dies and its cascade is cut short before k9's children
// (its notice then lost); s dies, cancelling k9.000, and is revived:
// k9.000 waits for s again. Check's repair carries top's cascade to its
// end, which settles k9's cancellation in k9.000: nothing runs while s
// runs, and s's success releases k9.000.
func TestWorkflowReviveDuringAnotherCascade(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	steps := append(cascadeSteps(), Step{Name: "s", Queue: "s"})
	for i := range steps {
		if steps[i].Name == "k9.000" {
			steps[i].After, steps[i].AfterEnded = []string{"s"}, []string{"k9"}
		}
	}
	id, err := c.EnqueueWorkflow(ctx, steps, WorkflowOptions{ID: "tree"})
	require.NoError(t, err)
	// A lease that a loaded machine does not lose while s runs: a fenced
	// worker's process is lost.
	w := newWorker(t, c, WorkerOptions{TTL: time.Minute, RenewInterval: 20 * time.Second})
	require.NoError(t, w.StartWork(ctx, "p", Events{}))
	require.NoError(t, w.StartWork(ctx, "s", Events{}))
	require.NoError(t, w.StartWork(ctx, "k", Events{}))
	stepState := stepStates(t, c, id)

	// top dies; its carry crashes after the cascade's first call, which
	// stands before k9's children, and its notice is lost.
	crashed, heal := crashCarries(c, 1)
	top, err := w.Dequeue(ctx, "p")
	require.NoError(t, err)
	require.NoError(t, top.DeadLetter(ctx, errors.New("dies")))
	recv(t, crashed, testsignal.Wait, "the crash")
	heal()
	notices, err := c.core.Store.FlowNotices(ctx, "p", 0, 10)
	require.NoError(t, err)
	require.Len(t, notices, 1)
	require.NoError(t, c.core.Store.ForgetNotices(ctx, "p", notices))
	require.Equal(t, StepCancelled, stepState("k9"))
	require.Equal(t, StepWaiting, stepState("k9.000"))

	// s dies, its carry crashes, and a sweep carries it: k9.000 is
	// cancelled. Then s is revived: k9.000 waits for it again.
	crashed, heal = crashCarries(c, 0)
	s, err := w.Dequeue(ctx, "s")
	require.NoError(t, err)
	require.NoError(t, s.DeadLetter(ctx, errors.New("dies")))
	recv(t, crashed, testsignal.Wait, "the crash")
	heal()
	n, err := c.core.Carrier.Sweep(ctx, "s", 0)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Equal(t, StepCancelled, stepState("k9.000"))
	ok, err := c.RequeueDeadLetter(ctx, "s", s.TaskID())
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, StepWaiting, stepState("k9.000"))
	s, err = w.Dequeue(ctx, "s")
	require.NoError(t, err)

	// Check resumes top's cascade while s runs: k9.000 still waits.
	rep := check(t, c, true)
	require.Equal(t, []WorkflowStep{{Workflow: "tree", Step: "top", Task: top.TaskID()}}, rep.Repaired.ResumedReleases)
	assert.Equal(t, StepWaiting, stepState("k9.000"), "waits for s, which runs")
	_, err = w.Dequeue(ctx, "k")
	require.ErrorIs(t, err, ErrNoTask, "nothing runs before s ends")

	// s succeeds: k9.000 runs, and the workflow ends.
	crashed, heal = crashCarries(c, 0)
	require.NoError(t, s.Finish(ctx))
	recv(t, crashed, testsignal.Wait, "the crash")
	heal()
	n, err = c.core.Carrier.Sweep(ctx, "s", 0)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	k, err := w.Dequeue(ctx, "k")
	require.NoError(t, err)
	_, step := k.Workflow()
	require.Equal(t, "k9.000", step)
	require.NoError(t, k.Finish(ctx))
	wctx, cancel := context.WithTimeout(ctx, testsignal.Wait)
	defer cancel()
	info, err := c.WaitWorkflow(wctx, id)
	require.NoError(t, err)
	states := make(map[StepState]int)
	for _, st := range info.Steps {
		states[st.State]++
	}
	assert.Equal(t, map[StepState]int{StepDead: 1, StepCancelled: 2509, StepSucceeded: 2}, states)
	require.NoError(t, w.Close(ctx))
	requireClean(t, c)
}

// dieWithCarryCut enqueues steps as workflow "tree" and runs its step
// "top" (queue p) to its death, whose carry crashes after its first
// release call, before the steps it freed on queue freedOn are enqueued.
// It returns top's process and its notice, which stays.
func dieWithCarryCut(t *testing.T, c *Client, steps []Step, freedOn string) (*Process, []string) {
	t.Helper()
	ctx := context.Background()
	_, err := c.EnqueueWorkflow(ctx, steps, WorkflowOptions{ID: "tree"})
	require.NoError(t, err)
	w := newWorker(t, c, WorkerOptions{})
	require.NoError(t, w.StartWork(ctx, "p", Events{}))
	top, err := w.Dequeue(ctx, "p")
	require.NoError(t, err)
	var calls atomic.Int32
	crashed, heal := crashWhen(c, func(op store.Op, q string) bool {
		return (op == store.OpEnqueue && q == freedOn) || (op == store.OpWorkflow && calls.Add(1) > 1)
	})
	require.NoError(t, top.DeadLetter(ctx, errors.New("dies")))
	recv(t, crashed, testsignal.Wait, "the crash after the first release call")
	require.NoError(t, w.Close(ctx))
	heal()
	notices, err := c.core.Store.FlowNotices(ctx, "p", 0, 10)
	require.NoError(t, err)
	require.Len(t, notices, 1, "top's notice stays")
	return top, notices
}

// A step that a death's cascade freed is listed by the step that died,
// not by its parent (cancelled by the cascade): Check asks the dead
// step's queue for the notice that carries it. c runs whatever the end
// of k, which top's death cancels: top's carry records the cascade, which
// frees c, and crashes before enqueuing it. While top's notice is pending
// c is no finding; once that notice is lost, c is stalled, and the
// repair enqueues it, after which the workflow runs to its end.
func TestCheckTellsAStepACascadeFreedFromAStalledOne(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	const id = "tree"
	_, notices := dieWithCarryCut(t, c, []Step{
		{Name: "top", Queue: "p"},
		{Name: "k", Queue: "k", After: []string{"top"}},
		{Name: "c", Queue: "c", AfterEnded: []string{"k"}},
	}, "c")
	stepState := stepStates(t, c, id)
	require.Equal(t, StepCancelled, stepState("k"))
	require.Equal(t, StepReady, stepState("c"), "freed by the cascade, not enqueued")

	rep := check(t, c, false)
	assert.Empty(t, rep.StalledSteps, "top's notice carries c")
	assert.Zero(t, rep.Problems(), rep.String())

	// The notice lost: nothing carries c any more.
	require.NoError(t, c.core.Store.ForgetNotices(ctx, "p", notices))
	stalled := []WorkflowStep{{Workflow: id, Step: "c"}}
	rep = check(t, c, false)
	assert.Equal(t, stalled, rep.StalledSteps)
	assert.Equal(t, 1, rep.Problems(), rep.String())
	rep = check(t, c, true)
	assert.Equal(t, stalled, rep.Repaired.EnqueuedSteps)
	require.Equal(t, StepQueued, stepState("c"))

	w := newWorker(t, c, WorkerOptions{})
	require.NoError(t, w.StartWork(ctx, "c", Events{}))
	p, err := w.Dequeue(ctx, "c")
	require.NoError(t, err)
	require.NoError(t, p.Finish(ctx))
	wctx, cancel := context.WithTimeout(ctx, testsignal.Wait)
	defer cancel()
	info, err := c.WaitWorkflow(wctx, id)
	require.NoError(t, err)
	assert.Equal(t, WorkflowFailed, info.State)
	require.NoError(t, w.Close(ctx))
	requireClean(t, c)
}

// A cascade cut short after its first call had freed a step: top's
// death cancels k0 to k9 and their children, k0's first (the last met is
// settled first), and k0.000, which runs whatever k0's end, is freed in
// that call; the carry crashes there. While top's notice is pending,
// neither the release under way nor k0.000 is a finding; once it is
// lost, both are, and the repair carries the cascade to its end and
// enqueues k0.000.
func TestCheckTellsAStepACutCascadeFreedFromAStalledOne(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	const id = "tree"
	steps := cascadeSteps()
	for i := range steps {
		if steps[i].Name == "k0.000" {
			steps[i].After, steps[i].AfterEnded = nil, []string{"k0"}
		}
	}
	top, notices := dieWithCarryCut(t, c, steps, "k")
	info, err := c.Workflow(ctx, id)
	require.NoError(t, err)
	require.Equal(t, WorkflowRunning, info.State)
	states := make(map[StepState]int)
	for _, st := range info.Steps {
		states[st.State]++
	}
	require.Equal(t, map[StepState]int{StepDead: 1, StepCancelled: 999, StepReady: 1, StepWaiting: 1510}, states)

	rep := check(t, c, false)
	assert.Empty(t, rep.StalledSteps, "top's notice carries k0.000")
	assert.Zero(t, rep.Problems(), rep.String())

	require.NoError(t, c.core.Store.ForgetNotices(ctx, "p", notices))
	stalled := []WorkflowStep{{Workflow: id, Step: "k0.000"}}
	release := []WorkflowStep{{Workflow: id, Step: "top", Task: top.TaskID()}}
	rep = check(t, c, false)
	assert.Equal(t, stalled, rep.StalledSteps)
	assert.Equal(t, release, rep.StalledReleases)
	assert.Equal(t, 2, rep.Problems(), rep.String())
	rep = check(t, c, true)
	assert.Equal(t, stalled, rep.Repaired.EnqueuedSteps)
	assert.Equal(t, release, rep.Repaired.ResumedReleases)
	n, err := c.QueueLen(ctx, "k")
	require.NoError(t, err)
	assert.Equal(t, int64(1), n, "k0.000 enqueued once")
	requireClean(t, c)
}
