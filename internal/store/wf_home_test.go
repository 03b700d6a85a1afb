package store

import (
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// homeWorkflow is a new workflow id that shares queue q's slot, whose
// keys the dumps include (see workflow).
func (e *scriptEnv) homeWorkflow() string {
	e.t.Helper()
	require.Empty(e.t, e.flow, "a second workflow in one test")
	e.flow = e.s.Keys().HomeWorkflowID(uuid.NewString()[:8], "q")
	require.True(e.t, e.s.Keys().WorkflowHome(e.flow, "q"))
	return e.flow
}

// finish.lua records in their workflow (at home in the queue's slot) the
// ends of several parents of one child finished together, the child's
// count of parents left lowered by all of them (three parents, two
// finished: one left); and declines, leaving notices and recording
// nothing, a batch whose ends free the child (the last two parents of it
// together), which the carry enqueues.
func TestFinishRecordsParentsOfOneChildScript(t *testing.T) {
	t.Parallel()
	e := newScriptEnv(t, "finish.lua")
	id := e.homeWorkflow()
	_, _, err := e.s.CreateWorkflow(e.ctx, id, "sum", time.Minute, []WorkflowStep{
		{Name: "a", Spec: "S-a", Kids: []string{"all"}},
		{Name: "b", Spec: "S-b", Kids: []string{"all"}},
		{Name: "c", Spec: "S-c", Kids: []string{"all"}},
		{Name: "all", Spec: "S-all", Parents: []string{"a", "b", "c"}, Place: 1},
	})
	require.NoError(t, err)
	w := e.worker()
	e.seed(keyState{
		"meta":   hash{"name": "q", "seq": "9"},
		"leases": zset{w: float64(e.clockMs() + hour)},
		"procs": hash{
			"1": "a" + w + "31,F" + id + ".a,R1:x",
			"2": "a" + w + "32,F" + id + ".b,R1:y",
			"3": "a" + w + "33,F" + id + ".c,R1:z",
		},
	})
	out, _, err := e.s.Finish(e.ctx, "q", []ProcRef{
		{Worker: w, PID: "1", Result: "A", Flow: id + ".a"},
		{Worker: w, PID: "2", Result: "B", Flow: id + ".b"},
	})
	require.NoError(t, err)
	assert.Equal(t, []Outcome{WasReleased, WasReleased}, out)
	got := e.dump()
	assert.NotContains(t, got, "flows", "no notice")
	assert.Equal(t, "1", got["wf.left"].(hash)["all"], "all's parents left")
	assert.Equal(t, hash{"a": "A", "b": "B"}, got["wf.results"])
	assert.Equal(t, "ok", got["wf.steps"].(hash)["a"])
	assert.Equal(t, "ok", got["wf.steps"].(hash)["b"])
	assert.Equal(t, "w", got["wf.steps"].(hash)["all"])
}

// The last two parents of a child finished together free it: finish.lua
// declines, and both leave notices.
func TestFinishDeclinesParentsThatFreeAChildScript(t *testing.T) {
	t.Parallel()
	e := newScriptEnv(t, "finish.lua")
	id := e.homeWorkflow()
	_, _, err := e.s.CreateWorkflow(e.ctx, id, "sum", time.Minute, []WorkflowStep{
		{Name: "a", Spec: "S-a", Kids: []string{"both"}},
		{Name: "b", Spec: "S-b", Kids: []string{"both"}},
		{Name: "both", Spec: "S-both", Parents: []string{"a", "b"}, Place: 1},
	})
	require.NoError(t, err)
	before := e.dump()
	w := e.worker()
	e.seed(keyState{
		"meta":   hash{"name": "q", "seq": "9"},
		"leases": zset{w: float64(e.clockMs() + hour)},
		"procs": hash{
			"1": "a" + w + "31,F" + id + ".a,R1:x",
			"2": "a" + w + "32,F" + id + ".b,R1:y",
		},
	})
	out, _, err := e.s.Finish(e.ctx, "q", []ProcRef{
		{Worker: w, PID: "1", Result: "A", Flow: id + ".a"},
		{Worker: w, PID: "2", Result: "B", Flow: id + ".b"},
	})
	require.NoError(t, err)
	assert.Equal(t, []Outcome{WasActive, WasActive}, out)
	got := e.dump()
	require.Contains(t, got, "flows")
	flows := got["flows"].(zset)
	assert.Contains(t, flows, id+".a,31,ok")
	assert.Contains(t, flows, id+".b,32,ok")
	for _, k := range []string{"wf.flow", "wf.steps", "wf.left", "wf.results", "wf.seen"} {
		assert.Equal(t, before[k], got[k], k)
	}
}

// flow_enqueue.lua, for the steps of a workflow at home in the queue's
// slot: a ready step is enqueued with no unique key and marked queued
// with its task's id in the same call; a step twice in the call, or
// again in a later call (a replay of its release), adds nothing and
// answers that id; a step cancelled or still waiting adds nothing.
func TestFlowEnqueueHomeStepsScript(t *testing.T) {
	t.Parallel()
	e := newScriptEnv(t, "flow_enqueue.lua")
	id := e.homeWorkflow()
	_, _, err := e.s.CreateWorkflow(e.ctx, id, "sum", time.Minute, []WorkflowStep{
		{Name: "p", Spec: "S-p", Kids: []string{"k"}},
		{Name: "x", Spec: "S-x", Place: 1},
		{Name: "k", Spec: "S-k", Parents: []string{"p"}, Place: 2},
	})
	require.NoError(t, err)
	e.seed(keyState{"wf.steps": hash{"x": "x"}}) // x cancelled
	step := func(name string) EnqueueOne {
		return EnqueueOne{Queue: "q", Payload: []byte(name), Args: EnqueueArgs{Unique: "wf/" + name, UniqueTTL: time.Hour, Flow: id + "." + name}}
	}
	require.True(t, e.s.MarkedOnEnqueue(step("p")))
	before := e.dump()
	ids, errs := e.s.EnqueueSteps(e.ctx, []EnqueueOne{step("p"), step("x"), step("k"), step("p")})
	require.NoError(t, errs[0])
	assert.ErrorIs(t, errs[1], ErrStepNotReady)
	assert.ErrorIs(t, errs[2], ErrStepNotReady)
	assert.ErrorIs(t, errs[3], ErrDuplicate)
	assert.Equal(t, ids[0], ids[3], "the second answers the first's id")
	got := e.dump()
	want := func() keyState {
		w := keyState{}
		for k, v := range before {
			w[k] = v
		}
		w["wf.steps"] = hash{"p": "q", "x": "x", "k": "w"}
		w["wf.ids"] = hash{"p": ids[0]}
		w["waiting"] = list{ids[0] + ",F" + id + ".p:p"}
		w["meta"] = got["meta"] // the queue's name and last id, as any enqueue's
		w["queues"] = set{"q"}  // registered, as any enqueue's
		return w
	}()
	e.same(want, got, "first release")
	n, err := strconv.ParseInt(ids[0], 16, 64)
	require.NoError(t, err)
	assert.Equal(t, strconv.FormatInt(n, 10), got["meta"].(hash)["tid"], "the last id given")

	again, errs := e.s.EnqueueSteps(e.ctx, []EnqueueOne{step("p")})
	assert.ErrorIs(t, errs[0], ErrDuplicate)
	assert.Equal(t, ids[:1], again)
	e.expect(want)
}

// A home step whose release an older client began, enqueueing its task
// under the step's unique key (flow_enqueue.lua without the workflow's
// keys) and stopping before it marked the step queued: a release of it
// again (a replay, or a carry of the same notice) finds the key's holder
// the step's task, adds nothing, and marks the step queued with that id.
// A key whose holder is older than the workflow (a workflow of the same
// id before it, whose keys expired before the key) is not the step's:
// that step is enqueued.
func TestFlowEnqueueHomeStepHeldByAnOlderReleaseScript(t *testing.T) {
	t.Parallel()
	e := newScriptEnv(t, "flow_enqueue.lua")
	id := e.homeWorkflow()
	_, _, err := e.s.CreateWorkflow(e.ctx, id, "sum", time.Minute, []WorkflowStep{
		{Name: "p", Spec: "S-p"},
		{Name: "s", Spec: "S-s", Place: 1},
	})
	require.NoError(t, err)
	created, err := strconv.ParseInt(e.dump()["wf.flow"].(hash)["created"], 10, 64)
	require.NoError(t, err)
	held := strconv.FormatInt(created*1000+5, 16)  // enqueued after the workflow was made
	stale := strconv.FormatInt(created*1000-5, 16) // before
	p, s := uniqueSum("wf/p"), uniqueSum("wf/s")
	e.seed(keyState{
		"meta":      hash{"name": "q", "tid": "98", "registered": "1"},
		"waiting":   list{held + ",F" + id + ".p:p"},
		"unique":    hash{p: held, s: stale},
		"uniquettl": zset{p: float64(e.clockMs() + hour), s: float64(e.clockMs() + hour)},
	})
	before := e.dump()
	step := func(name string) EnqueueOne {
		return EnqueueOne{Queue: "q", Payload: []byte(name), Args: EnqueueArgs{Unique: "wf/" + name, UniqueTTL: time.Hour, Flow: id + "." + name}}
	}
	ids, errs := e.s.EnqueueSteps(e.ctx, []EnqueueOne{step("p"), step("s")})
	assert.ErrorIs(t, errs[0], ErrDuplicate)
	require.NoError(t, errs[1])
	assert.Equal(t, held, ids[0])
	got := e.dump()
	want := keyState{}
	for k, v := range before {
		want[k] = v
	}
	want["wf.steps"] = hash{"p": "q", "s": "q"}
	want["wf.ids"] = hash{"p": held, "s": ids[1]}
	want["waiting"] = list{ids[1] + ",F" + id + ".s:s", held + ",F" + id + ".p:p"}
	want["meta"] = got["meta"] // the last id given, as any enqueue's
	e.same(want, got, "release")
}

// finish.lua records in its workflow the end of a parent of a thousand
// children that it makes no step ready (each waits for another parent
// too), and declines one of a thousand and one, which leaves a notice:
// its release is settled over several calls (wf_release.lua).
func TestFinishDeclinesAFanOutScript(t *testing.T) {
	t.Parallel()
	for _, n := range []int{1000, 1001} {
		t.Run(strconv.Itoa(n), func(t *testing.T) {
			t.Parallel()
			e := newScriptEnv(t, "finish.lua")
			id := e.homeWorkflow()
			steps := []WorkflowStep{{Name: "top", Spec: "S-top"}, {Name: "other", Spec: "S-other", Place: 1}}
			for i := range n {
				k := "k" + strconv.Itoa(i)
				steps[0].Kids = append(steps[0].Kids, k)
				steps[1].Kids = append(steps[1].Kids, k)
				steps = append(steps, WorkflowStep{Name: k, Spec: "S-" + k, Parents: []string{"top", "other"}, Place: 2 + i})
			}
			_, _, err := e.s.CreateWorkflow(e.ctx, id, "sum", time.Minute, steps)
			require.NoError(t, err)
			w := e.worker()
			e.seed(keyState{
				"meta":   hash{"name": "q", "seq": "9"},
				"leases": zset{w: float64(e.clockMs() + hour)},
				"procs":  hash{"1": "a" + w + "31,F" + id + ".top,R1:x"},
			})
			out, _, err := e.s.Finish(e.ctx, "q", []ProcRef{{Worker: w, PID: "1", Result: "T", Flow: id + ".top"}})
			require.NoError(t, err)
			got := e.dump()
			if n == 1000 {
				assert.Equal(t, []Outcome{WasReleased}, out)
				_, noticed := got["flows"]
				assert.False(t, noticed, "no notice")
				assert.Equal(t, "ok", got["wf.steps"].(hash)["top"])
				assert.Equal(t, "1", got["wf.left"].(hash)["k999"])
			} else {
				assert.Equal(t, []Outcome{WasActive}, out)
				flows, _ := got["flows"].(zset)
				_, noticed := flows[id+".top,31,ok"]
				assert.True(t, noticed, "a notice")
				assert.Equal(t, "r", got["wf.steps"].(hash)["top"], "recorded by the carry")
				assert.Equal(t, "2", got["wf.left"].(hash)["k1000"])
			}
		})
	}
}

// A step a death's cascade freed is noted in freed ('^<step>') while it
// is ready, and the note goes when it leaves that state: marked queued by
// flow_enqueue.lua (home), or ended before its mark (wf_release.lua, a
// success in bulk, a death one notice after another).
func TestCascadeNoteGoesWhenItsStepLeavesReadyScript(t *testing.T) {
	t.Parallel()
	e := newScriptEnv(t, "flow_enqueue.lua", "wf_release.lua")
	id := e.homeWorkflow()
	_, _, err := e.s.CreateWorkflow(e.ctx, id, "sum", time.Minute, []WorkflowStep{
		{Name: "top", Spec: "S-top"},
		{Name: "c", Spec: "S-c", Place: 1},
		{Name: "d", Spec: "S-d", Place: 2},
		{Name: "e", Spec: "S-e", Place: 3},
	})
	require.NoError(t, err)
	e.seed(keyState{
		"wf.steps": hash{"c": "r", "d": "r", "e": "r"},
		"wf.freed": hash{"top": "c,d,e", "^c": "top", "^d": "top", "^e": "top"},
	})
	step := EnqueueOne{Queue: "q", Payload: []byte("c"), Args: EnqueueArgs{Unique: "wf/c", UniqueTTL: time.Hour, Flow: id + ".c"}}
	_, errs := e.s.EnqueueSteps(e.ctx, []EnqueueOne{step})
	require.NoError(t, errs[0])
	got := e.dump()
	assert.Equal(t, "q", got["wf.steps"].(hash)["c"])
	assert.Equal(t, hash{"top": "c,d,e", "^d": "top", "^e": "top"}, got["wf.freed"], "c's note gone")

	_, err = e.s.ReleaseStep(e.ctx, id, "d", "1f", "ok", "D", 5)
	require.NoError(t, err)
	got = e.dump()
	assert.Equal(t, "ok", got["wf.steps"].(hash)["d"])
	assert.Equal(t, hash{"top": "c,d,e", "^e": "top"}, got["wf.freed"], "d's note gone")

	_, err = e.s.ReleaseStep(e.ctx, id, "e", "2f", "dead", "", 6)
	require.NoError(t, err)
	got = e.dump()
	assert.Equal(t, "dead", got["wf.steps"].(hash)["e"])
	assert.Equal(t, hash{"top": "c,d,e"}, got["wf.freed"], "e's note gone")
}
