package worqr

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/worqr/worqr/internal/clock"
	"github.com/worqr/worqr/internal/store"
	"github.com/worqr/worqr/internal/testsignal"
)

// stepLog records which steps ran, in order, and what each read of its
// parents' results.
type stepLog struct {
	mu      sync.Mutex
	ran     []string
	parents map[string]map[string]string
}

func (l *stepLog) add(step string, parents map[string][]byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ran = append(l.ran, step)
	if l.parents == nil {
		l.parents = make(map[string]map[string]string)
	}
	m := make(map[string]string, len(parents))
	for k, v := range parents {
		m[k] = string(v)
	}
	l.parents[step] = m
}

func (l *stepLog) order() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.ran)
}

func (l *stepLog) parentsOf(step string) map[string]string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.parents[step]
}

// flowHandler runs workflow steps: each records itself and its parents'
// results, sets the result "<step>-done", and fails permanently when its
// payload is "fail".
func flowHandler(t *testing.T, log *stepLog) Handler {
	return func(ctx context.Context, p *Process) error {
		parents, err := p.ParentResults(ctx)
		if !assert.NoError(t, err) {
			return err
		}
		_, step := p.Workflow()
		log.add(step, parents)
		if string(p.Task()) == "fail" {
			return Permanent(errors.New("step failed"))
		}
		p.SetResult([]byte(step + "-done"))
		return nil
	}
}

// A chain runs in order, each step after its parent succeeded, and reads
// its parent's result; the workflow ends succeeded, waited for by event.
func TestWorkflowChain(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	w := newWorker(t, c, WorkerOptions{})
	log := &stepLog{}
	require.NoError(t, w.Handle(ctx, "etl", flowHandler(t, log), HandleOptions{Concurrency: 4}))
	id, err := c.EnqueueWorkflow(ctx, []Step{
		{Name: "load", Queue: "etl", Task: []byte("l"), After: []string{"transform"}},
		{Name: "extract", Queue: "etl", Task: []byte("e")},
		{Name: "transform", Queue: "etl", Task: []byte("t"), After: []string{"extract"}},
	}, WorkflowOptions{})
	require.NoError(t, err)
	info, err := c.WaitWorkflow(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, WorkflowSucceeded, info.State)
	assert.Equal(t, []string{"extract", "transform", "load"}, log.order())
	assert.Equal(t, map[string]string{}, log.parentsOf("extract"))
	assert.Equal(t, map[string]string{"extract": "extract-done"}, log.parentsOf("transform"))
	assert.Equal(t, map[string]string{"transform": "transform-done"}, log.parentsOf("load"))
	require.Len(t, info.Steps, 3)
	for _, st := range info.Steps {
		assert.Equal(t, StepSucceeded, st.State, st.Name)
		assert.Equal(t, "etl", st.Queue)
		assert.NotEmpty(t, st.TaskID, st.Name)
		o, err := c.TaskResult(ctx, "etl", st.TaskID)
		require.NoError(t, err, st.Name)
		assert.Equal(t, st.Name+"-done", string(o.Result))
	}
	assert.Equal(t, "load", info.Steps[1].Name, "sorted by name")
	assert.Equal(t, []string{"transform"}, info.Steps[1].Parents)
}

// A diamond's last step waits for both its parents, on other queues, and
// reads both results.
func TestWorkflowDiamond(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	w := newWorker(t, c, WorkerOptions{})
	log := &stepLog{}
	for _, q := range []string{"a", "b", "c"} {
		require.NoError(t, w.Handle(ctx, q, flowHandler(t, log), HandleOptions{Concurrency: 2}))
	}
	id, err := c.EnqueueWorkflow(ctx, []Step{
		{Name: "top", Queue: "a"},
		{Name: "left", Queue: "b", After: []string{"top"}},
		{Name: "right", Queue: "c", After: []string{"top"}},
		{Name: "bottom", Queue: "a", After: []string{"left", "right"}},
	}, WorkflowOptions{ID: "diamond-1"})
	require.NoError(t, err)
	assert.Equal(t, "diamond-1", id)
	info, err := c.WaitWorkflow(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, WorkflowSucceeded, info.State)
	order := log.order()
	require.Len(t, order, 4)
	assert.Equal(t, "top", order[0])
	assert.Equal(t, "bottom", order[3])
	assert.Equal(t, map[string]string{"left": "left-done", "right": "right-done"}, log.parentsOf("bottom"))

	// The same call again adds nothing; other steps under the id are refused.
	again, err := c.EnqueueWorkflow(ctx, []Step{
		{Name: "top", Queue: "a"},
		{Name: "left", Queue: "b", After: []string{"top"}},
		{Name: "right", Queue: "c", After: []string{"top"}},
		{Name: "bottom", Queue: "a", After: []string{"left", "right"}},
	}, WorkflowOptions{ID: "diamond-1"})
	require.NoError(t, err)
	assert.Equal(t, id, again)
	_, err = c.EnqueueWorkflow(ctx, []Step{{Name: "other", Queue: "a"}}, WorkflowOptions{ID: "diamond-1"})
	assert.ErrorIs(t, err, ErrWorkflowExists)
	assert.Len(t, log.order(), 4, "nothing ran again")
}

// A fan-out of 100 steps and a fan-in: the summary runs once, after all
// of them, and reads every result.
func TestWorkflowFanOutFanIn(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	w := newWorker(t, c, WorkerOptions{})
	log := &stepLog{}
	require.NoError(t, w.Handle(ctx, "files", flowHandler(t, log), HandleOptions{Concurrency: 16}))
	require.NoError(t, w.Handle(ctx, "summary", flowHandler(t, log), HandleOptions{}))
	steps := []Step{{Name: "list", Queue: "files"}}
	var parts []string
	for i := range 100 {
		name := fmt.Sprintf("file-%03d", i)
		parts = append(parts, name)
		steps = append(steps, Step{Name: name, Queue: "files", After: []string{"list"}})
	}
	steps = append(steps, Step{Name: "summary", Queue: "summary", After: parts})
	id, err := c.EnqueueWorkflow(ctx, steps, WorkflowOptions{})
	require.NoError(t, err)
	info, err := c.WaitWorkflow(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, WorkflowSucceeded, info.State)
	order := log.order()
	require.Len(t, order, 102, "every step once")
	assert.Equal(t, "list", order[0])
	assert.Equal(t, "summary", order[101])
	got := log.parentsOf("summary")
	assert.Len(t, got, 100)
	for _, p := range parts {
		assert.Equal(t, p+"-done", got[p])
	}
}

// A wide fan-out and its fan-in, served by two clients' workers whose
// carries run at once and in batches (the releases in bulk): every child
// starts once and only after its parent's handler returned, and the
// fan-in starts once, after every child's handler returned. One child,
// c0000, holds on until the others have returned and then for a second
// more, unless the fan-in starts (too early) meanwhile: a fan-in
// released before its last parent's end starts within that second.
//
// Not parallel: its five hundred handler starts under -race would starve
// the parallel tests' lease renewals on a 2-core machine.
func TestWorkflowWideFanOutFanIn(t *testing.T) {
	b, c, ctx := setup(t)
	const n = 500
	var (
		mu                     sync.Mutex
		starts                 = make(map[string]int)
		early                  []string // steps started before their parents ended
		parentDone, childrenIn atomic.Int64
		othersIn               = make(chan struct{}) // every child but c0000 returned
		summaryIn              = make(chan struct{})
	)
	handler := func(ctx context.Context, p *Process) error {
		_, step := p.Workflow()
		mu.Lock()
		starts[step]++
		switch {
		case step == "parent":
		case step == "summary":
			if childrenIn.Load() != n {
				early = append(early, fmt.Sprintf("summary after %d children", childrenIn.Load()))
			}
			if starts[step] == 1 {
				close(summaryIn)
			}
		case parentDone.Load() == 0:
			early = append(early, step)
		}
		mu.Unlock()
		switch step {
		case "parent":
			parentDone.Store(1)
		case "summary":
		case "c0000":
			select {
			case <-othersIn:
			case <-ctx.Done():
				return ctx.Err()
			}
			select {
			case <-summaryIn:
			case <-time.After(time.Second):
			}
			childrenIn.Add(1)
		default:
			if childrenIn.Add(1) == n-1 {
				close(othersIn)
			}
		}
		return nil
	}
	for _, cl := range []*Client{c, b.client()} {
		w := newWorker(t, cl, WorkerOptions{})
		require.NoError(t, w.Handle(ctx, "wide", handler, HandleOptions{Concurrency: 16}))
	}
	steps := []Step{{Name: "parent", Queue: "wide"}}
	parts := make([]string, n)
	for i := range parts {
		parts[i] = fmt.Sprintf("c%04d", i)
		steps = append(steps, Step{Name: parts[i], Queue: "wide", After: []string{"parent"}})
	}
	steps = append(steps, Step{Name: "summary", Queue: "wide", After: parts})
	id, err := c.EnqueueWorkflow(ctx, steps, WorkflowOptions{})
	require.NoError(t, err)
	info, err := c.WaitWorkflow(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, WorkflowSucceeded, info.State)
	mu.Lock()
	defer mu.Unlock()
	assert.Empty(t, early, "started before their parents ended")
	assert.Len(t, starts, n+2)
	for step, k := range starts {
		if k != 1 {
			t.Errorf("%s started %d times", step, k)
		}
	}
	for _, st := range info.Steps {
		assert.Equal(t, StepSucceeded, st.State, st.Name)
	}
}

// Cycles, unknown parents and duplicate names are refused at enqueue, and
// nothing is written.
func TestWorkflowRefused(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	for _, tc := range []struct {
		name  string
		steps []Step
		want  error
	}{
		{"cycle", []Step{
			{Name: "a", Queue: "q", After: []string{"c"}},
			{Name: "b", Queue: "q", After: []string{"a"}},
			{Name: "c", Queue: "q", After: []string{"b"}},
			{Name: "d", Queue: "q"},
		}, ErrWorkflowCycle},
		{"self", []Step{{Name: "a", Queue: "q", After: []string{"a"}}}, ErrWorkflowCycle},
		{"unknown", []Step{{Name: "a", Queue: "q", After: []string{"nope"}}}, ErrUnknownStep},
		{"duplicate", []Step{{Name: "a", Queue: "q"}, {Name: "a", Queue: "q"}}, ErrDuplicateStep},
		{"unique", []Step{{Name: "a", Queue: "q", Options: []EnqueueOption{Unique("k")}}}, ErrInvalidOptions},
		{"name", []Step{{Name: "a,b", Queue: "q"}}, ErrInvalidOptions},
		{"empty", nil, ErrInvalidOptions},
	} {
		_, err := c.EnqueueWorkflow(ctx, tc.steps, WorkflowOptions{ID: "refused-" + tc.name})
		assert.ErrorIs(t, err, tc.want, tc.name)
		_, err = c.Workflow(ctx, "refused-"+tc.name)
		assert.ErrorIs(t, err, ErrNoWorkflow, tc.name)
	}
	n, err := c.QueueLen(ctx, "q")
	require.NoError(t, err)
	assert.Zero(t, n)
	_, err = c.EnqueueWorkflow(ctx, []Step{{Name: "a", Queue: "q"}}, WorkflowOptions{ID: "no{tag}"})
	assert.ErrorIs(t, err, ErrInvalidOptions)
}

// A parent dead-lettered cancels its descendants, which never run, but
// not a step that waits for it whatever its end; the workflow fails.
func TestWorkflowParentDeadCancelsDescendants(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	w := newWorker(t, c, WorkerOptions{})
	log := &stepLog{}
	require.NoError(t, w.Handle(ctx, "q", flowHandler(t, log), HandleOptions{Concurrency: 4}))
	id, err := c.EnqueueWorkflow(ctx, []Step{
		{Name: "root", Queue: "q"},
		{Name: "bad", Queue: "q", Task: []byte("fail"), After: []string{"root"}},
		{Name: "child", Queue: "q", After: []string{"bad"}},
		{Name: "grandchild", Queue: "q", After: []string{"child", "root"}},
		{Name: "cleanup", Queue: "q", AfterEnded: []string{"bad"}},
		{Name: "after-cleanup", Queue: "q", After: []string{"cleanup"}},
	}, WorkflowOptions{})
	require.NoError(t, err)
	info, err := c.WaitWorkflow(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, WorkflowFailed, info.State)
	states := map[string]StepState{}
	for _, st := range info.Steps {
		states[st.Name] = st.State
	}
	assert.Equal(t, map[string]StepState{
		"root": StepSucceeded, "bad": StepDead, "child": StepCancelled, "grandchild": StepCancelled,
		"cleanup": StepSucceeded, "after-cleanup": StepSucceeded,
	}, states)
	ran := log.order()
	sort.Strings(ran)
	assert.Equal(t, []string{"after-cleanup", "bad", "cleanup", "root"}, ran)
	assert.Equal(t, map[string]string{}, log.parentsOf("cleanup"), "a dead parent passes no result")
	dead, err := c.DeadLetters(ctx, "q", 0, 10)
	require.NoError(t, err)
	require.Len(t, dead, 1)
}

// With RunAfterFailure every step runs once its parents have ended.
func TestWorkflowRunAfterFailure(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	w := newWorker(t, c, WorkerOptions{})
	log := &stepLog{}
	require.NoError(t, w.Handle(ctx, "q", flowHandler(t, log), HandleOptions{}))
	id, err := c.EnqueueWorkflow(ctx, []Step{
		{Name: "bad", Queue: "q", Task: []byte("fail")},
		{Name: "next", Queue: "q", After: []string{"bad"}},
	}, WorkflowOptions{RunAfterFailure: true})
	require.NoError(t, err)
	info, err := c.WaitWorkflow(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, WorkflowFailed, info.State)
	assert.Equal(t, []string{"bad", "next"}, log.order())
}

// CancelWorkflow cancels the steps not ended: a queued one is taken out of
// its queue and one waiting for parents never runs; the workflow ends
// cancelled, and its waiter hears it.
func TestWorkflowCancel(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	id, err := c.EnqueueWorkflow(ctx, []Step{
		{Name: "first", Queue: "q"},
		{Name: "second", Queue: "q", After: []string{"first"}},
	}, WorkflowOptions{})
	require.NoError(t, err)
	info, err := c.Workflow(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, WorkflowRunning, info.State)
	assert.Equal(t, StepQueued, info.Steps[0].State)
	assert.Equal(t, StepWaiting, info.Steps[1].State)
	n, err := c.QueueLen(ctx, "q")
	require.NoError(t, err)
	assert.Equal(t, int64(1), n)

	waited := make(chan WorkflowInfo, 1)
	go func() {
		info, err := c.WaitWorkflow(ctx, id)
		assert.NoError(t, err)
		waited <- info
	}()
	ok, err := c.CancelWorkflow(ctx, id)
	require.NoError(t, err)
	assert.True(t, ok)
	info = recv(t, waited, testsignal.Wait, "the workflow's end")
	assert.Equal(t, WorkflowCancelled, info.State)
	for _, st := range info.Steps {
		assert.Equal(t, StepCancelled, st.State, st.Name)
	}
	n, err = c.QueueLen(ctx, "q")
	require.NoError(t, err)
	assert.Zero(t, n, "the queued step's task is gone")
	ok, err = c.CancelWorkflow(ctx, id)
	require.NoError(t, err)
	assert.False(t, ok, "ended already")
	_, err = c.CancelWorkflow(ctx, "unknown")
	assert.ErrorIs(t, err, ErrNoWorkflow)
	_, err = c.WaitWorkflow(ctx, "unknown")
	assert.ErrorIs(t, err, ErrNoWorkflow)
}

// A crash between a task's finish and its workflow's release leaves the
// notice; the sweep carries it, and a second carry (or a sweep that finds
// the step enqueued but not marked) adds no child twice.
func TestWorkflowCrashBetweenFinishAndRelease(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	id, err := c.EnqueueWorkflow(ctx, []Step{
		{Name: "parent", Queue: "p"},
		{Name: "child", Queue: "k", After: []string{"parent"}},
	}, WorkflowOptions{})
	require.NoError(t, err)
	// A worker by hand: it dequeues and finishes the parent, and its
	// carry of the notice fails, as if it died right after the finish.
	w := newWorker(t, c, WorkerOptions{})
	tried := make(chan struct{}, 1)
	c.core.Store.SetFault(func(_ context.Context, op store.Op, _ string) error {
		if op == store.OpWorkflow {
			tried <- struct{}{}
			return errors.New("crashed before the release")
		}
		return nil
	})
	require.NoError(t, w.StartWork(ctx, "p", Events{}))
	p, err := w.Dequeue(ctx, "p")
	require.NoError(t, err)
	p.SetResult([]byte("parent's result"))
	require.NoError(t, p.Finish(ctx))
	recv(t, tried, testsignal.Wait, "the carry's try")
	c.core.Store.SetFault(nil)

	n, err := c.QueueLen(ctx, "k")
	require.NoError(t, err)
	assert.Zero(t, n, "not released yet")
	notices, err := c.core.Store.FlowNotices(ctx, "p", 0, 10)
	require.NoError(t, err)
	require.Len(t, notices, 1, "the notice stays")

	// The sweep carries it; crash again after the child's enqueue, before
	// it is marked queued and the notice removed.
	var enqueues int
	c.core.Store.SetFault(func(_ context.Context, op store.Op, q string) error {
		if op == store.OpEnqueue && q == "k" {
			enqueues++
		}
		if op == store.OpWorkflow && enqueues > 0 {
			return errors.New("crashed after the enqueue")
		}
		return nil
	})
	_, err = c.core.Carrier.Sweep(ctx, "p", 0)
	require.Error(t, err)
	c.core.Store.SetFault(nil)
	n, err = c.QueueLen(ctx, "k")
	require.NoError(t, err)
	assert.Equal(t, int64(1), n, "the child is enqueued")

	// Two sweeps more: the child is not enqueued again.
	for range 2 {
		_, err = c.core.Carrier.Sweep(ctx, "p", 0)
		require.NoError(t, err)
	}
	n, err = c.QueueLen(ctx, "k")
	require.NoError(t, err)
	assert.Equal(t, int64(1), n, "no child doubled")
	notices, err = c.core.Store.FlowNotices(ctx, "p", 0, 10)
	require.NoError(t, err)
	assert.Empty(t, notices)
	info, err := c.Workflow(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, StepSucceeded, info.Steps[1].State, info.Steps) // parent
	assert.Equal(t, StepQueued, info.Steps[0].State)                // child
	tasks, err := c.Tasks(ctx, "k", 0, -1)
	require.NoError(t, err)
	require.Len(t, tasks, 1)
	assert.Equal(t, info.Steps[0].TaskID, tasks[0].ID)

	// The child runs and reads the parent's result, which the release
	// copied into the workflow.
	w2 := newWorker(t, c, WorkerOptions{})
	require.NoError(t, w2.StartWork(ctx, "k", Events{}))
	child, err := w2.Dequeue(ctx, "k")
	require.NoError(t, err)
	got, err := child.ParentResults(ctx)
	require.NoError(t, err)
	assert.Equal(t, map[string][]byte{"parent": []byte("parent's result")}, got)
	require.NoError(t, child.Finish(ctx))
	info, err = c.WaitWorkflow(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, WorkflowSucceeded, info.State)
}

// A typed step sets its result with a codec, and its child decodes it.
func TestWorkflowTypedResults(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	w := newWorker(t, c, WorkerOptions{})
	type rows struct{ Count int }
	got := make(chan rows, 1)
	require.NoError(t, w.Handle(ctx, "q", func(ctx context.Context, p *Process) error {
		switch _, step := p.Workflow(); step {
		case "count":
			return SetResultWith(p, JSON[rows]{}, rows{Count: 42})
		case "report":
			v, ok, err := ParentResult(ctx, p, JSON[rows]{}, "count")
			assert.True(t, ok)
			_, none, err2 := ParentResult(ctx, p, JSON[rows]{}, "nope")
			assert.False(t, none)
			assert.NoError(t, err2)
			got <- v
			return err
		}
		return nil
	}, HandleOptions{}))
	id, err := c.EnqueueWorkflow(ctx, []Step{
		{Name: "count", Queue: "q"},
		{Name: "report", Queue: "q", After: []string{"count"}},
	}, WorkflowOptions{})
	require.NoError(t, err)
	assert.Equal(t, rows{Count: 42}, recv(t, got, testsignal.Wait, "the report"))
	info, err := c.WaitWorkflow(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, WorkflowSucceeded, info.State)

	// A task of no workflow has no parents to read.
	_, err = c.Enqueue(ctx, "plain", []byte("x"))
	require.NoError(t, err)
	require.NoError(t, w.StartWork(ctx, "plain", Events{}))
	p, err := w.Dequeue(ctx, "plain")
	require.NoError(t, err)
	_, err = p.ParentResults(ctx)
	assert.ErrorIs(t, err, ErrNoWorkflow)
	require.NoError(t, p.Finish(ctx))
}

// A dead step requeued from the dead letters runs again, and its workflow,
// which had failed, carries on: the child its death cancelled runs.
func TestWorkflowDeadStepRequeued(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	w := newWorker(t, c, WorkerOptions{})
	var broken atomic.Bool
	broken.Store(true)
	log := &stepLog{}
	inner := flowHandler(t, log)
	require.NoError(t, w.Handle(ctx, "q", func(ctx context.Context, p *Process) error {
		if _, step := p.Workflow(); step == "flaky" && broken.Load() {
			return Permanent(errors.New("broken for now"))
		}
		return inner(ctx, p)
	}, HandleOptions{}))
	id, err := c.EnqueueWorkflow(ctx, []Step{
		{Name: "flaky", Queue: "q"},
		{Name: "child", Queue: "q", After: []string{"flaky"}},
	}, WorkflowOptions{})
	require.NoError(t, err)
	info, err := c.WaitWorkflow(ctx, id)
	require.NoError(t, err)
	require.Equal(t, WorkflowFailed, info.State)
	assert.Equal(t, StepCancelled, info.Steps[0].State) // child
	assert.Empty(t, log.order())

	broken.Store(false)
	ok, err := c.RequeueDeadLetter(ctx, "q", info.Steps[1].TaskID)
	require.NoError(t, err)
	require.True(t, ok)
	info, err = c.WaitWorkflow(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, WorkflowSucceeded, info.State)
	assert.Equal(t, []string{"flaky", "child"}, log.order())
	assert.Equal(t, map[string]string{"flaky": "flaky-done"}, log.parentsOf("child"))
}

// leaveNotice finishes the parent of a two-step workflow on queue p while
// its carry fails, as if the worker died right after the finish: the
// notice stays and the child is not released. It returns the workflow's
// id.
func leaveNotice(t *testing.T, c *Client, ctx context.Context, w *Worker) string {
	t.Helper()
	id, err := c.EnqueueWorkflow(ctx, []Step{
		{Name: "parent", Queue: "p"},
		{Name: "child", Queue: "k", After: []string{"parent"}},
	}, WorkflowOptions{})
	require.NoError(t, err)
	tried := make(chan struct{}, 1)
	c.core.Store.SetFault(func(_ context.Context, op store.Op, _ string) error {
		if op == store.OpWorkflow {
			select {
			case tried <- struct{}{}:
			default:
			}
			return errors.New("crashed before the release")
		}
		return nil
	})
	p, err := w.Dequeue(ctx, "p")
	require.NoError(t, err)
	require.NoError(t, p.Finish(ctx))
	recv(t, tried, testsignal.Wait, "the carry's try")
	c.core.Store.SetFault(nil)
	return id
}

// A worker that starts serving a queue sweeps it for notices a crash
// left, and its client sweeps again every FlowSweepEvery.
func TestWorkflowSweeps(t *testing.T) {
	t.Parallel()
	b, c, ctx := setup(t)
	w := newWorker(t, c, WorkerOptions{})
	require.NoError(t, w.StartWork(ctx, "p", Events{}))
	first := leaveNotice(t, c, ctx, w)

	fake := clock.NewFake(time.Now())
	c2, err := New(Options{Redis: b.redis(), Prefix: b.prefix, Logger: testLogger(t), clock: fake})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c2.Close(context.Background()) })
	c2.core.Flows.SetAge(0)
	c2.core.Signals.Swept.Init(t)
	w2 := newWorker(t, c2, WorkerOptions{})
	require.NoError(t, w2.StartWork(ctx, "p", Events{}))
	assert.Equal(t, 1, c2.core.Signals.Swept.WaitOrTimeout(), "the join's sweep carried the notice")
	info, err := c.Workflow(ctx, first)
	require.NoError(t, err)
	assert.Equal(t, StepQueued, info.Steps[0].State) // child

	second := leaveNotice(t, c, ctx, w)
	c2.core.Signals.Swept.RequireEmpty()
	fake.Advance(FlowSweepEvery)
	assert.Equal(t, 1, c2.core.Signals.Swept.WaitOrTimeout(), "the periodic sweep carried the notice")
	info, err = c.Workflow(ctx, second)
	require.NoError(t, err)
	assert.Equal(t, StepQueued, info.Steps[0].State)
	n, err := c.QueueLen(ctx, "k")
	require.NoError(t, err)
	assert.Equal(t, int64(2), n, "each child once")
}

// Notices carried together: one release per workflow for all of them,
// one enqueue of the steps they freed and one mark; a notice of a step
// carried already (its removal lost to a crash) frees nothing twice.
// The workflow's id is the test's, whose slot is not its queues': every
// end leaves a notice (one of a random id would share p's slot, and b's
// end would be recorded in its finish).
func TestWorkflowBatchedCarry(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	require.False(t, c.core.Store.Keys().WorkflowHome("batched-carry", "p"))
	id, err := c.EnqueueWorkflow(ctx, []Step{
		{Name: "a", Queue: "p"},
		{Name: "b", Queue: "p"},
		{Name: "both", Queue: "k", After: []string{"a", "b"}},
		{Name: "after-a", Queue: "k", After: []string{"a"}},
	}, WorkflowOptions{ID: "batched-carry"})
	require.NoError(t, err)

	// A worker by hand ends a and b, and each carry fails: the notices
	// stay.
	w := newWorker(t, c, WorkerOptions{})
	tried := make(chan struct{}, 2)
	c.core.Store.SetFault(func(_ context.Context, op store.Op, _ string) error {
		if op == store.OpWorkflow {
			tried <- struct{}{}
			return errors.New("no release")
		}
		return nil
	})
	require.NoError(t, w.StartWork(ctx, "p", Events{}))
	for range 2 {
		p, err := w.Dequeue(ctx, "p")
		require.NoError(t, err)
		require.NoError(t, p.Finish(ctx))
		recv(t, tried, testsignal.Wait, "the carry's try")
	}
	c.core.Store.SetFault(nil)
	notices := func() map[string]store.Notice {
		raw, err := c.core.Store.FlowNotices(ctx, "p", 0, 10)
		require.NoError(t, err)
		out := make(map[string]store.Notice)
		for _, r := range raw {
			n, ok := store.ParseNotice(r)
			require.True(t, ok, r)
			out[n.Step] = n
		}
		return out
	}
	left := notices()
	require.Len(t, left, 2)

	// a's notice is carried alone, and the crash comes after after-a's
	// enqueue, before it is marked queued: the notice stays, and its
	// replay frees after-a again.
	enqueued := false
	c.core.Store.SetFault(func(_ context.Context, op store.Op, q string) error {
		if op == store.OpEnqueue && q == "k" {
			enqueued = true
		}
		if op == store.OpWorkflow && enqueued {
			return errors.New("crashed after the enqueue")
		}
		return nil
	})
	errs, err := c.core.Carrier.Batch(ctx, "p", []store.Notice{left["a"]})
	require.NoError(t, err)
	require.Len(t, errs, 1)
	require.Error(t, errs[0])
	n, err := c.QueueLen(ctx, "k")
	require.NoError(t, err)
	require.Equal(t, int64(1), n, "after-a is enqueued")
	require.Len(t, notices(), 2)

	// Both notices in one batch: one release and one mark for the
	// workflow, one enqueue for the queue; both is enqueued, after-a not
	// again.
	var mu sync.Mutex
	calls := make(map[store.Op]int)
	c.core.Store.SetFault(func(_ context.Context, op store.Op, _ string) error {
		mu.Lock()
		defer mu.Unlock()
		calls[op]++
		return nil
	})
	errs, err = c.core.Carrier.Batch(ctx, "p", []store.Notice{left["a"], left["b"]})
	c.core.Store.SetFault(nil)
	require.NoError(t, err)
	assert.Equal(t, []error{nil, nil}, errs)
	mu.Lock()
	assert.Equal(t, 2, calls[store.OpWorkflow], "wf_release.lua and wf_enqueued.lua, once each")
	assert.Equal(t, 1, calls[store.OpEnqueue], "one flow_enqueue.lua")
	mu.Unlock()
	n, err = c.QueueLen(ctx, "k")
	require.NoError(t, err)
	assert.Equal(t, int64(2), n, "no step doubled")
	assert.Empty(t, notices())
	info, err := c.Workflow(ctx, id)
	require.NoError(t, err)
	got := make(map[string]StepState)
	for _, st := range info.Steps {
		got[st.Name] = st.State
	}
	assert.Equal(t, map[string]StepState{"a": StepSucceeded, "b": StepSucceeded, "both": StepQueued, "after-a": StepQueued}, got)
}

// A step released alone to a paused queue is not handed off: it waits in
// the queue, as a dequeue would leave it, though a runtime is parked.
func TestWorkflowReleasedStepIsNotHandedOffOnAPausedQueue(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	require.False(t, c.core.Store.Keys().WorkflowHome("paused-child", "p"))
	wk := newWorker(t, c, WorkerOptions{})
	hold := make(chan struct{}) // a child started stays in flight
	t.Cleanup(func() { close(hold) })
	require.NoError(t, wk.Handle(ctx, "k", func(context.Context, *Process) error { <-hold; return nil }, HandleOptions{}))
	settledParking(t, c, "k", 1)
	require.NoError(t, c.Pause(ctx, "k"))
	_, err := c.EnqueueWorkflow(ctx, []Step{
		{Name: "parent", Queue: "p"},
		{Name: "child", Queue: "k", After: []string{"parent"}},
	}, WorkflowOptions{ID: "paused-child"})
	require.NoError(t, err)
	wp := newWorker(t, c, WorkerOptions{})
	require.NoError(t, wp.StartWork(ctx, "p", Events{}))
	parent, err := wp.Dequeue(ctx, "p")
	require.NoError(t, err)
	require.NoError(t, parent.Finish(ctx))

	// The release's enqueue is one script: once the child is in k, it
	// went where it stays.
	var info QueueInfo
	eventually(t, 5*time.Second, "the child in k", func() bool {
		info, err = c.QueueInfo(ctx, "k")
		require.NoError(t, err)
		return info.Waiting+info.InFlight == 1
	})
	assert.Equal(t, [2]int64{1, 0}, [2]int64{info.Waiting, info.InFlight}, "waiting, in flight")
}

// The result a finish's carry passes on is the one the finish retained:
// a SetResult while the finish is in flight changes neither.
func TestWorkflowFinishCarriesTheRetainedResult(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	id, err := c.EnqueueWorkflow(ctx, []Step{
		{Name: "parent", Queue: "p"},
		{Name: "child", Queue: "k", After: []string{"parent"}},
	}, WorkflowOptions{ID: "retained-carry"})
	require.NoError(t, err)
	w := newWorker(t, c, WorkerOptions{})
	require.NoError(t, w.StartWork(ctx, "p", Events{}))
	p, err := w.Dequeue(ctx, "p")
	require.NoError(t, err)

	// The finish has taken the result when its call goes out; a later
	// one is not the retained one.
	var once sync.Once
	c.core.Store.SetFault(func(_ context.Context, op store.Op, q string) error {
		if op == store.OpFinish && q == "p" {
			once.Do(func() { p.SetResult([]byte("set late")) })
		}
		return nil
	})
	t.Cleanup(func() { c.core.Store.SetFault(nil) })
	got := make(chan map[string][]byte, 1)
	require.NoError(t, w.Handle(ctx, "k", func(ctx context.Context, p *Process) error {
		parents, err := p.ParentResults(ctx)
		if err == nil {
			got <- parents
		}
		return err
	}, HandleOptions{Concurrency: 1}))
	p.SetResult([]byte("retained"))
	require.NoError(t, p.Finish(ctx))
	assert.Equal(t, map[string][]byte{"parent": []byte("retained")}, recv(t, got, testsignal.Wait, "the child's start"))
	info, err := c.WaitWorkflow(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, WorkflowSucceeded, info.State)
}

// The worker that finishes a step carries its notice without reading it
// back: the finish answered when it wrote it, and the worker holds the
// result. The child is released with that result, while every read of
// the queue fails.
func TestWorkflowFinishCarriesItsNoticeUnread(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	require.False(t, c.core.Store.Keys().WorkflowHome("unread-carry", "p"))
	id, err := c.EnqueueWorkflow(ctx, []Step{
		{Name: "parent", Queue: "p"},
		{Name: "child", Queue: "k", After: []string{"parent"}},
	}, WorkflowOptions{ID: "unread-carry"})
	require.NoError(t, err)
	w := newWorker(t, c, WorkerOptions{})
	require.NoError(t, w.StartWork(ctx, "p", Events{}))
	p, err := w.Dequeue(ctx, "p")
	require.NoError(t, err)

	// Every read of p fails from now on: a carry that reads the notice
	// fails, and leaves it for a sweep.
	c.core.Store.SetFault(func(_ context.Context, op store.Op, q string) error {
		if op == store.OpRead && q == "p" {
			return errors.New("no reads of p")
		}
		return nil
	})
	t.Cleanup(func() { c.core.Store.SetFault(nil) })
	got := make(chan map[string][]byte, 1)
	require.NoError(t, w.Handle(ctx, "k", func(ctx context.Context, p *Process) error {
		parents, err := p.ParentResults(ctx)
		if err == nil {
			got <- parents
		}
		return err
	}, HandleOptions{Concurrency: 1}))
	p.SetResult([]byte("parent's result"))
	require.NoError(t, p.Finish(ctx))
	assert.Equal(t, map[string][]byte{"parent": []byte("parent's result")}, recv(t, got, testsignal.Wait, "the child's start"))
	info, err := c.WaitWorkflow(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, WorkflowSucceeded, info.State)
}

// A step released alone (a chain's next) is handed to an idle runtime
// in the release's event, as an enqueue of one task is: the child's
// handler starts while every dequeue of its worker is held back.
func TestWorkflowReleasedStepIsHandedOff(t *testing.T) {
	t.Parallel()
	b, c, ctx := setup(t)
	require.False(t, c.core.Store.Keys().WorkflowHome("handed-child", "p"))
	started := make(chan *Process, 1)
	wk := newWorker(t, c, WorkerOptions{})
	require.NoError(t, wk.Handle(ctx, "k", func(_ context.Context, p *Process) error {
		started <- p
		return nil
	}, HandleOptions{}))
	settledParking(t, c, "k", 1)
	held := make(chan struct{})
	c.core.Store.SetFault(func(ctx context.Context, op store.Op, queue string) error {
		if op == store.OpDequeue && queue == "k" {
			select {
			case <-held:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	})
	t.Cleanup(func() { c.core.Store.SetFault(nil) })
	defer close(held)
	id, err := c.EnqueueWorkflow(ctx, []Step{
		{Name: "parent", Queue: "p"},
		{Name: "child", Queue: "k", Task: []byte("c"), After: []string{"parent"}},
	}, WorkflowOptions{ID: "handed-child"})
	require.NoError(t, err)
	events := b.listen(c.core.Store.Keys().Queue("k").Channel)
	wp := newWorker(t, c, WorkerOptions{})
	require.NoError(t, wp.StartWork(ctx, "p", Events{}))
	parent, err := wp.Dequeue(ctx, "p")
	require.NoError(t, err)
	require.NoError(t, parent.Finish(ctx))

	m := expectPrefix(t, events, "h")
	assert.True(t, strings.HasPrefix(m, "h"+wk.ID()+","), "the event names the worker: %q", m)
	child := recv(t, started, testsignal.Wait, "the child's start with every dequeue held back")
	assert.Equal(t, "c", string(child.Task()))
	flow, step := child.Workflow()
	assert.Equal(t, [2]string{id, "child"}, [2]string{flow, step})
	info, err := c.WaitWorkflow(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, WorkflowSucceeded, info.State)
}

// A step's death frees a child that runs whatever its end, and crashes
// keep that child from being enqueued (by the death's carry and by the
// revival's); the step, requeued, succeeds and frees another. The sweep
// of the notices the crashes left enqueues the child all the same.
func TestWorkflowCrashAfterDeathThenRevived(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	id, err := c.EnqueueWorkflow(ctx, []Step{
		{Name: "flaky", Queue: "p"},
		{Name: "next", Queue: "b", After: []string{"flaky"}},
		{Name: "cleanup", Queue: "k", AfterEnded: []string{"flaky"}},
	}, WorkflowOptions{})
	require.NoError(t, err)
	w := newWorker(t, c, WorkerOptions{})
	require.NoError(t, w.StartWork(ctx, "p", Events{}))
	tried := make(chan struct{}, 2)
	c.core.Store.SetFault(func(_ context.Context, op store.Op, q string) error {
		if op == store.OpEnqueue && q == "k" {
			select {
			case tried <- struct{}{}:
			default:
			}
			return errors.New("crashed before cleanup's enqueue")
		}
		return nil
	})
	p, err := w.Dequeue(ctx, "p")
	require.NoError(t, err)
	require.NoError(t, p.DeadLetter(ctx, errors.New("broken for now")))
	recv(t, tried, testsignal.Wait, "the death's carry")
	ok, err := c.RequeueDeadLetter(ctx, "p", p.TaskID())
	require.NoError(t, err)
	require.True(t, ok)
	recv(t, tried, testsignal.Wait, "the revival's carry")

	// The crashes hold until the success's release is done and next
	// enqueued: no carry enqueues cleanup before.
	p, err = w.Dequeue(ctx, "p")
	require.NoError(t, err)
	require.NoError(t, p.Finish(ctx))
	eventually(t, testsignal.Wait, "next enqueued", func() bool {
		n, err := c.QueueLen(ctx, "b")
		return err == nil && n == 1
	})
	c.core.Store.SetFault(nil)
	_, err = c.core.Carrier.Sweep(ctx, "p", 0)
	require.NoError(t, err)
	n, err := c.QueueLen(ctx, "k")
	require.NoError(t, err)
	assert.Equal(t, int64(1), n, "cleanup enqueued")
	info, err := c.Workflow(ctx, id)
	require.NoError(t, err)
	for _, st := range info.Steps {
		if st.Name == "cleanup" {
			assert.Equal(t, StepQueued, st.State)
		}
	}
}

// A workflow of a random id shares the slot of its queue, and the finish
// of a step's task there records the step's end itself: no notice is
// left and no carry runs, and the workflow has the end (and the result)
// by the time Finish returns; the task's outcome is retained as any
// step's. An end that makes a child ready leaves its notice, carried as
// any other, and the last step's finish ends the workflow.
func TestWorkflowStepEndRecordedByItsFinish(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	id, err := c.EnqueueWorkflow(ctx, []Step{
		{Name: "a", Queue: "p"},
		{Name: "b", Queue: "p"},
		{Name: "both", Queue: "p", After: []string{"a", "b"}},
	}, WorkflowOptions{})
	require.NoError(t, err)
	require.True(t, c.core.Store.Keys().WorkflowHome(id, "p"), "a random id shares its queue's slot")

	// Carries fail while a ends: a notice it left would stay.
	w := newWorker(t, c, WorkerOptions{})
	c.core.Store.SetFault(func(_ context.Context, op store.Op, _ string) error {
		if op == store.OpWorkflow {
			return errors.New("no carry")
		}
		return nil
	})
	require.NoError(t, w.StartWork(ctx, "p", Events{}))
	a, err := w.Dequeue(ctx, "p")
	require.NoError(t, err)
	_, step := a.Workflow()
	require.Equal(t, "a", step)
	a.SetResult([]byte("a-done"))
	require.NoError(t, a.Finish(ctx))
	raw, err := c.core.Store.FlowNotices(ctx, "p", 0, 10)
	require.NoError(t, err)
	assert.Empty(t, raw, "a's end left no notice")
	c.core.Store.SetFault(nil)
	info, err := c.Workflow(ctx, id)
	require.NoError(t, err)
	states := map[string]StepState{}
	for _, st := range info.Steps {
		states[st.Name] = st.State
	}
	assert.Equal(t, map[string]StepState{"a": StepSucceeded, "b": StepQueued, "both": StepWaiting}, states)
	o, err := c.TaskResult(ctx, "p", a.TaskID())
	require.NoError(t, err)
	assert.Equal(t, "a-done", string(o.Result))

	// b's end makes both ready: its notice is carried (here by a sweep,
	// or by the carry its finish started), and both is queued.
	b, err := w.Dequeue(ctx, "p")
	require.NoError(t, err)
	require.NoError(t, b.Finish(ctx))
	_, err = c.core.Carrier.Sweep(ctx, "p", 0)
	require.NoError(t, err)
	last, err := w.Dequeue(ctx, "p")
	require.NoError(t, err)
	_, step = last.Workflow()
	require.Equal(t, "both", step)
	parents, err := last.ParentResults(ctx)
	require.NoError(t, err)
	assert.Equal(t, "a-done", string(parents["a"]))
	require.NoError(t, last.Finish(ctx))
	info, err = c.WaitWorkflow(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, WorkflowSucceeded, info.State)
}

// A workflow at home in its queue's slot has its released steps enqueued
// and marked queued in one script, with no unique key: of two carries of
// one notice that both had the child answered ready (a sweep that ran
// while the carry a finish started was between its release and its
// enqueue), the later enqueue finds the child queued and adds nothing.
func TestWorkflowHomeReleaseRaced(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	id, err := c.EnqueueWorkflow(ctx, []Step{
		{Name: "a", Queue: "p"},
		{Name: "b", Queue: "p", After: []string{"a"}},
	}, WorkflowOptions{})
	require.NoError(t, err)
	require.True(t, c.core.Store.Keys().WorkflowHome(id, "p"))

	w := newWorker(t, c, WorkerOptions{})
	require.NoError(t, w.StartWork(ctx, "p", Events{}))
	a, err := w.Dequeue(ctx, "p")
	require.NoError(t, err)
	// The carry that a's finish starts, about to enqueue b, lets a sweep
	// carry the same notice first.
	var fired atomic.Bool
	swept := make(chan error, 1)
	c.core.Store.SetFault(func(_ context.Context, op store.Op, _ string) error {
		if op == store.OpEnqueue && fired.CompareAndSwap(false, true) {
			_, err := c.core.Carrier.Sweep(ctx, "p", 0) // its own enqueue passes
			swept <- err
		}
		return nil
	})
	require.NoError(t, a.Finish(ctx))
	require.NoError(t, recv(t, swept, testsignal.Wait, "the sweep"))
	b, err := w.Dequeue(ctx, "p")
	require.NoError(t, err)
	_, step := b.Workflow()
	require.Equal(t, "b", step)
	require.NoError(t, b.Finish(ctx))
	info, err := c.WaitWorkflow(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, WorkflowSucceeded, info.State)
	c.core.Store.SetFault(nil)
	for _, st := range info.Steps {
		if st.Name == "b" {
			assert.Equal(t, b.TaskID(), st.TaskID, "b's task id, noted with its mark")
		}
	}
	n, err := c.QueueLen(ctx, "p")
	require.NoError(t, err)
	assert.Zero(t, n, "b was enqueued once")
	raw, err := c.core.Store.FlowNotices(ctx, "p", 0, 10)
	require.NoError(t, err)
	assert.Empty(t, raw, "a's notice removed")
}

// A fan-out's release goes a thousand children a call, its notice kept
// until the last: a crash between two of them (here, right after the
// first thousand's enqueue, before they are marked queued) leaves the
// notice and the release under way. Check then finds nothing wrong and
// repairs nothing; the sweep goes on from where the release stands, and
// every child is enqueued, and marked queued, once.
func TestWorkflowCrashBetweenReleaseChunks(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	const n = 2500
	steps := []Step{{Name: "parent", Queue: "p"}}
	for i := range n {
		steps = append(steps, Step{Name: fmt.Sprintf("k%04d", i), Queue: "k", After: []string{"parent"}})
	}
	// An id of the caller's: its keys are not in k's slot, so its
	// children are marked queued apart from their enqueue.
	id, err := c.EnqueueWorkflow(ctx, steps, WorkflowOptions{ID: "fan"})
	require.NoError(t, err)
	w := newWorker(t, c, WorkerOptions{})
	var enqueued atomic.Bool
	crashed := make(chan struct{}, 1)
	c.core.Store.SetFault(func(_ context.Context, op store.Op, q string) error {
		if op == store.OpEnqueue && q == "k" {
			enqueued.Store(true)
		}
		if op == store.OpWorkflow && enqueued.Load() {
			select {
			case crashed <- struct{}{}:
			default:
			}
			return errors.New("crashed after the first thousand's enqueue")
		}
		return nil
	})
	require.NoError(t, w.StartWork(ctx, "p", Events{}))
	p, err := w.Dequeue(ctx, "p")
	require.NoError(t, err)
	require.NoError(t, p.Finish(ctx))
	recv(t, crashed, testsignal.Wait, "the crash")
	c.core.Store.SetFault(nil)

	count := func() (int64, map[StepState]int) {
		t.Helper()
		l, err := c.QueueLen(ctx, "k")
		require.NoError(t, err)
		info, err := c.Workflow(ctx, id)
		require.NoError(t, err)
		states := make(map[StepState]int)
		for _, st := range info.Steps {
			states[st.State]++
		}
		return l, states
	}
	l, states := count()
	assert.Equal(t, int64(1000), l, "the first thousand enqueued")
	assert.Equal(t, 1000, states[StepReady], "released, not marked queued")
	assert.Equal(t, n-1000, states[StepWaiting], "not released yet")
	notices, err := c.core.Store.FlowNotices(ctx, "p", 0, 10)
	require.NoError(t, err)
	require.Len(t, notices, 1, "the notice stays")

	rep := check(t, c, true)
	assert.Zero(t, rep.Problems(), rep.String())
	assert.NotContains(t, rep.String(), "; repaired:", "Check repaired something")
	_, after := count()
	assert.Equal(t, states, after, "Check changed no step")

	carried, err := c.core.Carrier.Sweep(ctx, "p", 0)
	require.NoError(t, err)
	assert.Equal(t, 1, carried)
	l, states = count()
	assert.Equal(t, int64(n), l, "every child enqueued once")
	assert.Equal(t, map[StepState]int{StepSucceeded: 1, StepQueued: n}, states)
	notices, err = c.core.Store.FlowNotices(ctx, "p", 0, 10)
	require.NoError(t, err)
	assert.Empty(t, notices)
	requireClean(t, c)
}

// A fan-out's release under way whose notice is gone (deleted by hand, or
// lost in a failover) after its first thousand children: no carry or
// sweep goes on with it, so Check reports it (beside the thousand
// released and not marked queued), and its repair carries the parent's
// end once more: every child is enqueued, and marked queued, once.
func TestCheckResumesAReleaseWhoseNoticeIsGone(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	const n = 2500
	steps := []Step{{Name: "parent", Queue: "p"}}
	for i := range n {
		steps = append(steps, Step{Name: fmt.Sprintf("k%04d", i), Queue: "k", After: []string{"parent"}})
	}
	id, err := c.EnqueueWorkflow(ctx, steps, WorkflowOptions{ID: "fan"})
	require.NoError(t, err)
	w := newWorker(t, c, WorkerOptions{})
	var enqueued atomic.Bool
	crashed := make(chan struct{}, 1)
	c.core.Store.SetFault(func(_ context.Context, op store.Op, q string) error {
		if op == store.OpEnqueue && q == "k" {
			enqueued.Store(true)
		}
		if op == store.OpWorkflow && enqueued.Load() {
			select {
			case crashed <- struct{}{}:
			default:
			}
			return errors.New("crashed after the first thousand's enqueue")
		}
		return nil
	})
	require.NoError(t, w.StartWork(ctx, "p", Events{}))
	p, err := w.Dequeue(ctx, "p")
	require.NoError(t, err)
	require.NoError(t, p.Finish(ctx))
	recv(t, crashed, testsignal.Wait, "the crash")
	c.core.Store.SetFault(nil)
	notices, err := c.core.Store.FlowNotices(ctx, "p", 0, 10)
	require.NoError(t, err)
	require.Len(t, notices, 1, "the notice stays")
	require.NoError(t, c.core.Store.ForgetNotices(ctx, "p", notices))

	count := func() (int64, map[StepState]int) {
		t.Helper()
		l, err := c.QueueLen(ctx, "k")
		require.NoError(t, err)
		info, err := c.Workflow(ctx, id)
		require.NoError(t, err)
		states := make(map[StepState]int)
		for _, st := range info.Steps {
			states[st.State]++
		}
		return l, states
	}
	l, states := count()
	require.Equal(t, int64(1000), l, "the first thousand enqueued")
	require.Equal(t, map[StepState]int{StepSucceeded: 1, StepReady: 1000, StepWaiting: n - 1000}, states)

	release := []WorkflowStep{{Workflow: "fan", Step: "parent", Task: p.TaskID()}}
	rep := check(t, c, false)
	assert.Equal(t, release, rep.StalledReleases)
	assert.Len(t, rep.StalledSteps, 1000, "the first thousand, released and not marked queued")
	assert.Equal(t, 1001, rep.Problems(), rep.String())
	_, after := count()
	assert.Equal(t, states, after, "Check without Repair changed no step")

	rep = check(t, c, true)
	assert.Equal(t, release, rep.StalledReleases)
	assert.Equal(t, release, rep.Repaired.ResumedReleases)
	l, states = count()
	assert.Equal(t, int64(n), l, "every child enqueued once")
	assert.Equal(t, map[StepState]int{StepSucceeded: 1, StepQueued: n}, states)
	requireClean(t, c)
}
