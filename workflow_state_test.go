package worqr

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/worqr/worqr/internal/store"
	"github.com/worqr/worqr/internal/testsignal"
)

// wholeState is a workflow's steps read whole from its hashes, with
// HGETALL: the reference a paged read is compared with, by step.
func wholeState(t *testing.T, c *Client, id string) map[string]store.StepRecord {
	t.Helper()
	k := c.core.Store.Keys().Workflow(id)
	all := func(key string) map[string]string {
		m, err := c.core.Redis.Do(context.Background(), c.core.Redis.B().Hgetall().Key(key).Build()).AsStrMap()
		require.NoError(t, err)
		return m
	}
	ids, parents, specs := all(k.IDs), all(k.Parents), all(k.Spec)
	out := make(map[string]store.StepRecord)
	for step, state := range all(k.Steps) {
		st := store.StepRecord{Name: step, State: state, TaskID: ids[step], Spec: specs[step]}
		if parents[step] != "" {
			st.Parents = strings.Split(parents[step], ",")
		}
		out[step] = st
	}
	return out
}

// byName is a record's steps by name; each step is read once.
func byName(t *testing.T, rec store.WorkflowRecord) map[string]store.StepRecord {
	t.Helper()
	out := make(map[string]store.StepRecord, len(rec.Steps))
	for _, st := range rec.Steps {
		_, twice := out[st.Name]
		require.False(t, twice, "step %s read twice", st.Name)
		out[st.Name] = st
	}
	return out
}

// wideSteps is a workflow of n+1 steps: "a" (queue p), then n steps
// (queue k), each after a and, every third, after the step before too,
// with payloads of their own: pages of steps with parents, ids and specs
// of every kind.
func wideSteps(n int) []Step {
	steps := []Step{{Name: "a", Queue: "p", Task: []byte("root")}}
	for i := range n {
		st := Step{Name: fmt.Sprintf("k%04d", i), Queue: "k", Task: []byte(fmt.Sprintf("payload %d", i)), After: []string{"a"}}
		if i%3 == 2 {
			st.After = append(st.After, fmt.Sprintf("k%04d", i-1))
		}
		steps = append(steps, st)
	}
	return steps
}

// wideFlow enqueues a workflow of wideSteps(n), "wide", on a backend of
// its own.
func wideFlow(t *testing.T, n int) (*Client, context.Context, string) {
	t.Helper()
	_, c, ctx := setup(t)
	id, err := c.EnqueueWorkflow(ctx, wideSteps(n), WorkflowOptions{ID: "wide"})
	require.NoError(t, err)
	return c, ctx, id
}

// A workflow of more than two pages reads, a page a call, every step as
// its hashes hold it: while it runs, with steps waiting, ready (k0101,
// whose parent k0100's end is recorded with no enqueue after it), queued
// and ended; and one created before the order of its steps was kept (its
// order key gone), paged over its steps' hash.
func TestWorkflowStateReadInPagesIsTheWhole(t *testing.T) {
	t.Parallel()
	c, ctx, id := wideFlow(t, 1233)
	w := newWorker(t, c, WorkerOptions{})
	require.NoError(t, w.StartWork(ctx, "p", Events{}))
	require.NoError(t, w.StartWork(ctx, "k", Events{}))
	a, err := w.Dequeue(ctx, "p")
	require.NoError(t, err)
	a.SetResult([]byte("a's"))
	require.NoError(t, a.Finish(ctx))
	carried := func() bool {
		for _, q := range []string{"p", "k"} {
			notices, err := c.core.Store.FlowNotices(ctx, q, 0, 10)
			require.NoError(t, err)
			if len(notices) > 0 {
				return false
			}
		}
		return true
	}
	eventually(t, testsignal.Wait, "a's end carried", carried)
	for range 5 {
		p, err := w.Dequeue(ctx, "k")
		require.NoError(t, err)
		require.NoError(t, p.Finish(ctx))
	}
	eventually(t, testsignal.Wait, "the children's ends carried", carried)
	require.NoError(t, w.Close(ctx))
	k0100 := wholeState(t, c, id)["k0100"]
	require.Equal(t, "q", k0100.State)
	_, err = c.core.Store.ReleaseStep(ctx, id, "k0100", k0100.TaskID, "ok", "", 1)
	require.NoError(t, err)
	require.Equal(t, "r", wholeState(t, c, id)["k0101"].State)

	for _, order := range []bool{true, false} {
		if !order {
			do(t, c, c.core.Redis.B().Del().Key(c.core.Store.Keys().Workflow(id).Order).Build())
		}
		rec, ok, err := c.core.Store.WorkflowState(ctx, id)
		require.NoError(t, err)
		require.True(t, ok)
		assert.Equal(t, "running", rec.State)
		got, want := byName(t, rec), wholeState(t, c, id)
		require.Len(t, want, 1234)
		states := make(map[string]int)
		for step, st := range want {
			assert.Equal(t, st, got[step], "step %s (order kept: %v)", step, order)
			states[st.State]++
		}
		assert.Len(t, got, len(want), "order kept: %v", order)
		assert.Greater(t, states["ok"], 1, "steps of every state: %v", states)
		assert.Greater(t, states["q"], 1, "steps of every state: %v", states)
		assert.Greater(t, states["w"], 1, "steps of every state: %v", states)
		assert.Equal(t, 1, states["r"], "steps of every state: %v", states)
	}
}

// readStateWith reads workflow id's state with change called at the
// start of its second page's call.
func readStateWith(t *testing.T, c *Client, id string, change func()) store.WorkflowRecord {
	t.Helper()
	var calls atomic.Int32
	c.core.Store.SetFault(func(_ context.Context, op store.Op, q string) error {
		if op == store.OpWorkflow && q == "wf:"+id && calls.Add(1) == 2 {
			change()
		}
		return nil
	})
	defer c.core.Store.SetFault(nil)
	rec, ok, err := c.core.Store.WorkflowState(context.Background(), id)
	require.NoError(t, err)
	require.True(t, ok)
	require.Greater(t, calls.Load(), int32(2), "read in pages")
	return rec
}

// A step that ends between the pages of its workflow's read is read
// after the children its end released: no child reads released (ready or
// past it) while that parent reads waiting or queued. Here a's success
// frees its children after the first page was read.
func TestWorkflowStateReadWhileAStepEnds(t *testing.T) {
	t.Parallel()
	c, ctx, id := wideFlow(t, 1200)
	info, err := c.Workflow(ctx, id)
	require.NoError(t, err)
	a := info.Steps[0]
	require.Equal(t, "a", a.Name)
	rec := readStateWith(t, c, id, func() {
		_, err := c.core.Store.ReleaseStep(ctx, id, "a", a.TaskID, "ok", "", 100)
		require.NoError(t, err)
	})
	steps := byName(t, rec)
	require.Len(t, steps, 1201)
	states := make(map[string]int)
	for _, st := range rec.Steps {
		states[st.State]++
		if st.State == "w" || st.State == "x" {
			continue
		}
		for _, p := range st.Parents {
			assert.Contains(t, []string{"ok", "dead", "x"}, steps[p].State, "%s reads %s, its parent %s %s", st.Name, st.State, p, steps[p].State)
		}
	}
	assert.Equal(t, "ok", steps["a"].State, "a read after its children")
	assert.Positive(t, states["r"], "children read after a's end: %v", states)
}

// A workflow that ends between the pages of its read is read again: an
// ended workflow reads with its steps as they ended.
func TestWorkflowStateReadWhileItEnds(t *testing.T) {
	t.Parallel()
	c, ctx, id := wideFlow(t, 1200)
	rec := readStateWith(t, c, id, func() {
		_, err := c.CancelWorkflow(ctx, id)
		require.NoError(t, err)
	})
	assert.Equal(t, "cancelled", rec.State)
	states := make(map[string]int)
	for _, st := range rec.Steps {
		states[st.State]++
	}
	assert.Equal(t, map[string]int{"x": 1201}, states)
	assert.True(t, slices.ContainsFunc(rec.Steps, func(st store.StepRecord) bool { return st.Name == "a" }))
}

// A step revived between the pages of its workflow's read, the workflow
// running throughout (z keeps it running): the read is made again, so no
// child of a reads cancelled (read before the revival) while a, its only
// parent, reads queued (read after it), a state that never was.
func TestWorkflowStateReadWhileAStepIsRevived(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	steps := []Step{{Name: "a", Queue: "p"}, {Name: "z", Queue: "p"}}
	for i := range 1200 {
		steps = append(steps, Step{Name: fmt.Sprintf("k%04d", i), Queue: "k", After: []string{"a"}})
	}
	id, err := c.EnqueueWorkflow(ctx, steps, WorkflowOptions{ID: "rv"})
	require.NoError(t, err)
	task := wholeState(t, c, id)["a"].TaskID
	_, err = c.core.Store.ReleaseStep(ctx, id, "a", task, "dead", "", 100)
	require.NoError(t, err)
	rec := readStateWith(t, c, id, func() {
		_, err := c.core.Store.ReleaseStep(ctx, id, "a", task, "revived", "", 200)
		require.NoError(t, err)
	})
	require.Equal(t, "running", rec.State)
	got := byName(t, rec)
	require.Equal(t, "q", got["a"].State, "a read revived")
	states := make(map[string]int)
	for _, st := range rec.Steps {
		states[st.State]++
	}
	assert.Equal(t, map[string]int{"q": 2, "w": 1200}, states, "a and z queued, a's children waiting again")
}

// A death whose cascade frees steps notes each in the freed hash
// ('^<step>', for Check) only while it is ready: once the freed steps
// are marked queued (wf_enqueued.lua) the hash holds what it would
// without the notes: top's list.
func TestWorkflowCascadeNotesGoOnceQueued(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	steps := []Step{{Name: "top", Queue: "p"}, {Name: "z", Queue: "p"}, {Name: "k", Queue: "k", After: []string{"top"}}}
	for i := range 300 {
		steps = append(steps, Step{Name: fmt.Sprintf("c%04d", i), Queue: "k", AfterEnded: []string{"k"}})
	}
	id, err := c.EnqueueWorkflow(ctx, steps, WorkflowOptions{ID: "caret"})
	require.NoError(t, err)
	task := wholeState(t, c, id)["top"].TaskID
	freed, err := c.core.Store.ReleaseStep(ctx, id, "top", task, "dead", "", 100)
	require.NoError(t, err)
	require.Len(t, freed, 300)
	fields := func() []string {
		keys, err := c.core.Redis.Do(ctx, c.core.Redis.B().Hkeys().Key(c.core.Store.Keys().Workflow(id).Freed).Build()).AsStrSlice()
		require.NoError(t, err)
		slices.Sort(keys)
		return keys
	}
	require.Len(t, fields(), 301, "top's list and a note per step freed")
	queued := make([]store.QueuedStep, 0, len(freed))
	for i, f := range freed {
		queued = append(queued, store.QueuedStep{Name: f.Name, TaskID: fmt.Sprintf("%x", i+1)})
	}
	_, err = c.core.Store.StepsEnqueued(ctx, id, queued)
	require.NoError(t, err)
	assert.Equal(t, []string{"top"}, fields(), "top's list only")
}
