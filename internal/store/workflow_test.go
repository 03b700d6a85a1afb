package store

import (
	"crypto/sha1"
	"encoding/hex"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// finish.lua and bury.lua: a workflow task's end leaves a notice in the
// queue's flows set, in the same script, scored by when; a task of no
// workflow leaves none.
func TestFlowNoticeScripts(t *testing.T) {
	t.Parallel()
	e := newScriptEnv(t, "finish.lua", "bury.lua", "flow_notices.lua", "flow_forget.lua")
	w := e.worker()
	lease := float64(e.clockMs() + hour)
	e.seed(keyState{
		"meta":   hash{"name": "q", "seq": "9"},
		"leases": zset{w: lease},
		"procs": hash{
			"1": "a" + w + "31,Fwf1.extract:x",
			"2": "a" + w + "32:y",
			"3": "a" + w + "33,Fwf1.load:z",
		},
	})
	before := e.clock()
	out, at, err := e.s.Finish(e.ctx, "q", []ProcRef{{Worker: w, PID: "1"}, {Worker: w, PID: "2"}})
	require.NoError(t, err)
	assert.Equal(t, []Outcome{WasActive, WasActive}, out)
	got, err := e.s.Bury(e.ctx, "q", ProcRef{Worker: w, PID: "3"}, "permanent", "bad", DeadBounds{MaxCount: 10, MaxAge: time.Hour})
	require.NoError(t, err)
	assert.Equal(t, WasActive, got)
	after := e.clock()
	state := e.dump()
	flows := state["flows"].(zset)
	require.Len(t, flows, 2)
	for m, at := range flows {
		e.within(int64(at), before, after, m)
	}
	assert.Contains(t, flows, "wf1.extract,31,ok")
	assert.Equal(t, float64(at), flows["wf1.extract,31,ok"], "the finish answers its notice's stamp")
	assert.Contains(t, flows, "wf1.load,33,dead")
	assert.NotContains(t, state, "procs")

	// flow_notices.lua lists them once old enough; flow_forget.lua removes.
	old, err := e.s.FlowNotices(e.ctx, "q", 0, 10)
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{"wf1.extract,31,ok", "wf1.load,33,dead"}, old)
	young, err := e.s.FlowNotices(e.ctx, "q", 3_600_000_000_000, 10)
	require.NoError(t, err)
	assert.Empty(t, young)
	require.NoError(t, e.s.ForgetNotices(e.ctx, "q", []string{"wf1.extract,31,ok"}))
	assert.Equal(t, zset{"wf1.load,33,dead": flows["wf1.load,33,dead"]}, e.dump()["flows"])
	n, ok := ParseNotice("wf1.load,33,dead")
	assert.True(t, ok)
	assert.Equal(t, Notice{Raw: "wf1.load,33,dead", Workflow: "wf1", Step: "load", Task: "33", Status: "dead"}, n)
	_, ok = ParseNotice("wf1,33,dead")
	assert.False(t, ok)
}

// A diamond: top, then left and right, then bottom (after both), and
// cleanup, which runs whatever left's end.
func diamond() []WorkflowStep {
	return []WorkflowStep{
		{Name: "top", Spec: "S-top", Kids: []string{"left", "right"}},
		{Name: "left", Spec: "S-left", Parents: []string{"top"}, Kids: []string{"bottom", "+cleanup"}, Place: 1},
		{Name: "right", Spec: "S-right", Parents: []string{"top"}, Kids: []string{"bottom"}, Place: 3},
		{Name: "bottom", Spec: "S-bottom", Parents: []string{"left", "right"}, Place: 4},
		{Name: "cleanup", Spec: "S-cleanup", Parents: []string{"left"}, Place: 2},
	}
}

// wf_create.lua writes the workflow's keys (each step's place in
// order) and answers the steps without
// parents; again with the same checksum it answers those still ready and
// writes nothing, with another it refuses.
func TestWorkflowCreateScript(t *testing.T) {
	t.Parallel()
	e := newScriptEnv(t, "wf_create.lua")
	id := e.workflow()
	before := e.clockMs()
	did, ready, err := e.s.CreateWorkflow(e.ctx, id, "sum1", time.Minute, diamond())
	require.NoError(t, err)
	assert.Equal(t, WorkflowNew, did)
	assert.Equal(t, []ReadyStep{{Name: "top", Spec: "S-top"}}, ready)
	got := e.dump()
	created := got["wf.flow"].(hash)["created"]
	at, err := strconv.ParseInt(created, 10, 64)
	require.NoError(t, err)
	e.within(at, before, e.clockMs(), "created")
	want := keyState{
		"wf.flow":    hash{"state": "running", "open": "5", "keep": "60000", "sum": "sum1", "created": created},
		"wf.steps":   hash{"top": "r", "left": "w", "right": "w", "bottom": "w", "cleanup": "w"},
		"wf.left":    hash{"left": "1", "right": "1", "bottom": "2", "cleanup": "1"},
		"wf.kids":    hash{"top": "left,right", "left": "bottom,+cleanup", "right": "bottom"},
		"wf.parents": hash{"left": "top", "right": "top", "bottom": "left,right", "cleanup": "left"},
		"wf.spec":    hash{"top": "S-top", "left": "S-left", "right": "S-right", "bottom": "S-bottom", "cleanup": "S-cleanup"},
		"wf.order":   zset{"top": 0, "left": 1, "cleanup": 2, "right": 3, "bottom": 4},
	}
	require.Equal(t, want, got)

	did, ready, err = e.s.CreateWorkflow(e.ctx, id, "sum1", time.Minute, diamond())
	require.NoError(t, err)
	assert.Equal(t, WorkflowSame, did)
	assert.Equal(t, []ReadyStep{{Name: "top", Spec: "S-top"}}, ready)
	did, ready, err = e.s.CreateWorkflow(e.ctx, id, "sum2", time.Minute, diamond()[:1])
	require.NoError(t, err)
	assert.Equal(t, WorkflowTaken, did)
	assert.Empty(t, ready)
	e.expect(want)
}

// wf_release.lua and wf_enqueued.lua through a diamond whose left step
// dies: the top's end frees left and right (again on a replay, until they
// are marked queued); left's death cancels bottom but frees cleanup; the
// last end closes the workflow, failed, its keys set to expire.
func TestWorkflowReleaseScript(t *testing.T) {
	t.Parallel()
	e := newScriptEnv(t, "wf_release.lua")
	id := e.workflow()
	_, _, err := e.s.CreateWorkflow(e.ctx, id, "sum", time.Minute, diamond())
	require.NoError(t, err)
	cancelled, err := e.s.StepsEnqueued(e.ctx, id, []QueuedStep{{Name: "top", TaskID: "t1"}})
	require.NoError(t, err)
	assert.Empty(t, cancelled)

	ready, err := e.s.ReleaseStep(e.ctx, id, "top", "t-"+"top", "ok", "top's result", 10)
	require.NoError(t, err)
	assert.Equal(t, []ReadyStep{{Name: "left", Spec: "S-left"}, {Name: "right", Spec: "S-right"}}, ready)
	once := e.dump()
	assert.Equal(t, hash{"top": "ok", "left": "r", "right": "r", "bottom": "w", "cleanup": "w"}, once["wf.steps"])
	assert.Equal(t, hash{"left": "0", "right": "0", "bottom": "2", "cleanup": "1"}, once["wf.left"])
	assert.Equal(t, hash{"top": "left,right"}, once["wf.freed"])
	assert.Equal(t, hash{"top": "top's result"}, once["wf.results"])
	assert.Equal(t, "4", once["wf.flow"].(hash)["open"])

	again, err := e.s.ReleaseStep(e.ctx, id, "top", "t-"+"top", "ok", "another result", 10)
	require.NoError(t, err)
	assert.Equal(t, ready, again, "a replay (the same notice) answers the freed steps still ready")
	e.expect(once)

	cancelled, err = e.s.StepsEnqueued(e.ctx, id, []QueuedStep{{Name: "left", TaskID: "t2"}, {Name: "right", TaskID: "t3"}})
	require.NoError(t, err)
	assert.Empty(t, cancelled)
	again, err = e.s.ReleaseStep(e.ctx, id, "top", "t-"+"top", "ok", "", 10)
	require.NoError(t, err)
	assert.Empty(t, again, "queued: not answered again")

	ready, err = e.s.ReleaseStep(e.ctx, id, "left", "t-"+"left", "dead", "", 40)
	require.NoError(t, err)
	assert.Equal(t, []ReadyStep{{Name: "cleanup", Spec: "S-cleanup"}}, ready)
	_, err = e.s.StepsEnqueued(e.ctx, id, []QueuedStep{{Name: "cleanup", TaskID: "t4"}})
	require.NoError(t, err)
	ready, err = e.s.ReleaseStep(e.ctx, id, "right", "t-"+"right", "ok", "r", 50)
	require.NoError(t, err)
	assert.Empty(t, ready, "bottom was cancelled with left's death")
	got := e.dump()
	assert.Equal(t, hash{"top": "ok", "left": "dead", "right": "ok", "bottom": "x", "cleanup": "q"}, got["wf.steps"])
	assert.Equal(t, hash{"top": "t1", "left": "t2", "right": "t3", "cleanup": "t4"}, got["wf.ids"])
	assert.Equal(t, "1", got["wf.flow"].(hash)["open"])
	assert.Equal(t, "running", got["wf.flow"].(hash)["state"])

	_, err = e.s.ReleaseStep(e.ctx, id, "cleanup", "t-"+"cleanup", "ok", "c", 60)
	require.NoError(t, err)
	rec, ok, err := e.s.WorkflowState(e.ctx, id)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, "failed", rec.State)
	assert.NotZero(t, rec.Ended)
	assert.Len(t, rec.Steps, 5)
	for _, key := range e.s.Keys().Workflow(id).all() {
		ttl, err := e.rdb.Do(e.ctx, e.rdb.B().Pttl().Key(key).Build()).AsInt64()
		require.NoError(t, err)
		assert.True(t, ttl > 0 && ttl <= 60_000, "%s expires with the keep: %d", key, ttl)
	}
	results, found, err := e.s.StepResults(e.ctx, id, "bottom")
	require.NoError(t, err)
	assert.True(t, found)
	assert.Equal(t, map[string][]byte{"right": []byte("r")}, results, "a dead parent has no result")
	_, found, err = e.s.StepResults(e.ctx, id, "nope")
	require.NoError(t, err)
	assert.False(t, found)
}

// wf_cancel.lua cancels the steps not ended, answers the queued ones and
// closes the workflow; a step whose enqueue was under way is answered by
// wf_enqueued.lua, to be cancelled in its queue.
func TestWorkflowCancelScript(t *testing.T) {
	t.Parallel()
	e := newScriptEnv(t, "wf_cancel.lua")
	id := e.workflow()
	_, _, err := e.s.CreateWorkflow(e.ctx, id, "sum", time.Minute, diamond())
	require.NoError(t, err)
	_, err = e.s.StepsEnqueued(e.ctx, id, []QueuedStep{{Name: "top", TaskID: "t1"}})
	require.NoError(t, err)
	_, err = e.s.ReleaseStep(e.ctx, id, "top", "t-"+"top", "ok", "", 70)
	require.NoError(t, err)
	_, err = e.s.StepsEnqueued(e.ctx, id, []QueuedStep{{Name: "left", TaskID: "t2"}})
	require.NoError(t, err)
	// right is ready, its enqueue under way.
	was, queued, err := e.s.CancelWorkflow(e.ctx, id)
	require.NoError(t, err)
	assert.Equal(t, "running", was)
	assert.Equal(t, []QueuedStep{{Name: "left", TaskID: "t2", Spec: "S-left"}}, queued)
	got := e.dump()
	assert.Equal(t, hash{"top": "ok", "left": "x", "right": "x", "bottom": "x", "cleanup": "x"}, got["wf.steps"])
	assert.Equal(t, "cancelled", got["wf.flow"].(hash)["state"])
	assert.Equal(t, "0", got["wf.flow"].(hash)["open"])

	cancelled, err := e.s.StepsEnqueued(e.ctx, id, []QueuedStep{{Name: "right", TaskID: "t3"}})
	require.NoError(t, err)
	assert.Equal(t, []QueuedStep{{Name: "right", TaskID: "t3", Spec: "S-right"}}, cancelled)
	ready, err := e.s.ReleaseStep(e.ctx, id, "left", "t-"+"left", "ok", "late", 80)
	require.NoError(t, err)
	assert.Empty(t, ready)
	assert.NotContains(t, e.dump()["wf.results"], "left", "an end after the cancel records nothing")

	was, queued, err = e.s.CancelWorkflow(e.ctx, id)
	require.NoError(t, err)
	assert.Equal(t, "cancelled", was)
	assert.Empty(t, queued)
	was, _, err = e.s.CancelWorkflow(e.ctx, "unknown")
	require.NoError(t, err)
	assert.Equal(t, "", was)
}

// wf_release.lua's 'revived': a dead step requeued from the dead letters
// runs again, the descendants its death cancelled wait again, and a
// workflow that had failed runs again, its keys kept; an older notice
// carried late changes nothing.
func TestWorkflowReviveScript(t *testing.T) {
	t.Parallel()
	e := newScriptEnv(t, "wf_release.lua")
	id := e.workflow()
	_, _, err := e.s.CreateWorkflow(e.ctx, id, "sum", time.Minute, diamond())
	require.NoError(t, err)
	step := func(name, status string, at int64) []ReadyStep {
		t.Helper()
		ready, err := e.s.ReleaseStep(e.ctx, id, name, "t-"+name, status, name+"'s result", at)
		require.NoError(t, err)
		var q []QueuedStep
		for _, r := range ready {
			q = append(q, QueuedStep{Name: r.Name, TaskID: "t-" + r.Name})
		}
		_, err = e.s.StepsEnqueued(e.ctx, id, q)
		require.NoError(t, err)
		return ready
	}
	step("top", "ok", 10)
	step("left", "dead", 20)
	step("right", "ok", 30)
	step("cleanup", "ok", 40)
	rec, _, err := e.s.WorkflowState(e.ctx, id)
	require.NoError(t, err)
	assert.Equal(t, "failed", rec.State)

	assert.Empty(t, step("left", "revived", 50))
	got := e.dump()
	assert.Equal(t, hash{"top": "ok", "left": "q", "right": "ok", "bottom": "w", "cleanup": "ok"}, got["wf.steps"])
	assert.Equal(t, "1", got["wf.left"].(hash)["bottom"], "bottom waits for left alone")
	assert.Equal(t, "running", got["wf.flow"].(hash)["state"])
	assert.Equal(t, "2", got["wf.flow"].(hash)["open"])
	assert.Equal(t, "0", got["wf.flow"].(hash)["dead"])
	assert.NotContains(t, got["wf.flow"].(hash), "ended")
	for _, key := range e.s.Keys().Workflow(id).all() {
		ttl, err := e.rdb.Do(e.ctx, e.rdb.B().Pttl().Key(key).Build()).AsInt64()
		require.NoError(t, err)
		assert.Less(t, ttl, int64(0), "%s is kept again", key)
	}

	step("left", "dead", 20) // the old death, carried late
	e.expect(got)

	assert.Equal(t, []ReadyStep{{Name: "bottom", Spec: "S-bottom"}}, step("left", "ok", 60))
	step("bottom", "ok", 70)
	rec, _, err = e.s.WorkflowState(e.ctx, id)
	require.NoError(t, err)
	assert.Equal(t, "succeeded", rec.State)
}

// A revived step's end carried before the notice of its revival revives
// it all the same; the revival, carried late, changes nothing.
func TestWorkflowReviveOutOfOrderScript(t *testing.T) {
	t.Parallel()
	e := newScriptEnv(t, "wf_release.lua")
	id := e.workflow()
	_, _, err := e.s.CreateWorkflow(e.ctx, id, "sum", time.Minute, []WorkflowStep{
		{Name: "a", Spec: "S-a", Kids: []string{"b"}},
		{Name: "b", Spec: "S-b", Parents: []string{"a"}},
	})
	require.NoError(t, err)
	_, err = e.s.ReleaseStep(e.ctx, id, "a", "t-"+"a", "dead", "", 10)
	require.NoError(t, err)
	rec, _, err := e.s.WorkflowState(e.ctx, id)
	require.NoError(t, err)
	require.Equal(t, "failed", rec.State)
	ready, err := e.s.ReleaseStep(e.ctx, id, "a", "t-"+"a", "ok", "a's result", 30)
	require.NoError(t, err)
	assert.Equal(t, []ReadyStep{{Name: "b", Spec: "S-b"}}, ready)
	before := e.dump()
	ready, err = e.s.ReleaseStep(e.ctx, id, "a", "t-"+"a", "revived", "", 20)
	require.NoError(t, err)
	assert.Equal(t, []ReadyStep{{Name: "b", Spec: "S-b"}}, ready)
	e.expect(before)
	assert.Equal(t, hash{"a": "ok", "b": "r"}, before["wf.steps"])
	assert.Equal(t, "running", before["wf.flow"].(hash)["state"])
}

// A step whose task ends before it is marked queued (its enqueue's caller
// slow) has its task's id recorded by its end all the same; the mark
// after changes nothing.
func TestWorkflowEndBeforeMarkScript(t *testing.T) {
	t.Parallel()
	e := newScriptEnv(t, "wf_enqueued.lua")
	id := e.workflow()
	_, _, err := e.s.CreateWorkflow(e.ctx, id, "sum", time.Minute, []WorkflowStep{{Name: "a", Spec: "S-a"}})
	require.NoError(t, err)
	_, err = e.s.ReleaseStep(e.ctx, id, "a", "t-a", "ok", "done", 10)
	require.NoError(t, err)
	rec, _, err := e.s.WorkflowState(e.ctx, id)
	require.NoError(t, err)
	assert.Equal(t, "succeeded", rec.State)
	assert.Equal(t, []StepRecord{{Name: "a", State: "ok", TaskID: "t-a", Spec: "S-a"}}, rec.Steps)
	cancelled, err := e.s.StepsEnqueued(e.ctx, id, []QueuedStep{{Name: "a", TaskID: "t-a"}})
	require.NoError(t, err)
	assert.Empty(t, cancelled)
	assert.Equal(t, hash{"a": "ok"}, e.dump()["wf.steps"])
}

// wf_release.lua records several ends in one call, in order, as separate
// calls would, and answers each step freed once: a step freed by one end
// of the batch and named again by a replayed one is not answered twice.
// flow_enqueue.lua enqueues them, and a second time adds nothing.
func TestWorkflowReleaseBatch(t *testing.T) {
	t.Parallel()
	e := newScriptEnv(t, "flow_enqueue.lua")
	id := e.workflow()
	_, _, err := e.s.CreateWorkflow(e.ctx, id, "sum", time.Minute, diamond())
	require.NoError(t, err)
	ready, err := e.s.ReleaseSteps(e.ctx, id, []StepEnd{
		{Step: "top", Task: "t-top", Status: "ok", Result: "top's result", At: 10},
		{Step: "top", Task: "t-top", Status: "ok", Result: "again", At: 10},
		{Step: "right", Task: "t-right", Status: "ok", Result: "r", At: 20},
	})
	require.NoError(t, err)
	assert.Equal(t, []ReadyStep{{Name: "left", Spec: "S-left"}}, ready, "right ended: not ready")
	state := e.dump()
	assert.Equal(t, hash{"top": "ok", "left": "r", "right": "ok", "bottom": "w", "cleanup": "w"}, state["wf.steps"])
	assert.Equal(t, hash{"top": "top's result", "right": "r"}, state["wf.results"])
	assert.Equal(t, hash{"left": "0", "right": "0", "bottom": "1", "cleanup": "1"}, state["wf.left"])

	tasks := []EnqueueOne{
		{Queue: "q", Payload: []byte("L"), Args: EnqueueArgs{Unique: "wf/left", UniqueTTL: time.Hour, Flow: id + ".left"}},
		{Queue: "q", Payload: []byte("C"), Args: EnqueueArgs{Unique: "wf/cleanup", UniqueTTL: time.Hour, Flow: id + ".cleanup"}},
	}
	ids, errs := e.s.EnqueueSteps(e.ctx, tasks)
	assert.Equal(t, []error{nil, nil}, errs)
	again, errs := e.s.EnqueueSteps(e.ctx, tasks[:1])
	assert.ErrorIs(t, errs[0], ErrDuplicate)
	assert.Equal(t, ids[:1], again, "the holder's id")
	waiting := e.dump()["waiting"].(list)
	require.Len(t, waiting, 2)
	assert.Equal(t, ids[0]+",F"+id+".left:L", waiting[len(waiting)-1], "the first released comes out first")
}

// A child that runs whatever its parent's end, freed by the parent's
// death and never enqueued (a crash between the release and the enqueue),
// is answered still once the parent, revived, succeeds and frees others:
// by that success's release, and by a replay of the death or the revival
// (the sweep of the notices the crash left), until it is marked queued.
func TestWorkflowReviveKeepsFreedScript(t *testing.T) {
	t.Parallel()
	e := newScriptEnv(t, "wf_release.lua")
	id := e.workflow()
	_, _, err := e.s.CreateWorkflow(e.ctx, id, "sum", time.Minute, diamond())
	require.NoError(t, err)
	carry := func(ends ...StepEnd) []string {
		t.Helper()
		ready, err := e.s.ReleaseSteps(e.ctx, id, ends)
		require.NoError(t, err)
		var names []string
		for _, r := range ready {
			names = append(names, r.Name)
		}
		return names
	}
	enqueued := func(names []string) {
		t.Helper()
		var q []QueuedStep
		for _, n := range names {
			q = append(q, QueuedStep{Name: n, TaskID: "t-" + n})
		}
		_, err := e.s.StepsEnqueued(e.ctx, id, q)
		require.NoError(t, err)
	}
	enqueued(carry(StepEnd{Step: "top", Task: "t-top", Status: "ok", At: 10}))
	enqueued(carry(StepEnd{Step: "right", Task: "t-right", Status: "ok", At: 15}))
	// left dies; its release frees cleanup, and the carry crashes before
	// cleanup's enqueue: the notice stays.
	dead := StepEnd{Step: "left", Task: "t-left", Status: "dead", At: 20}
	require.Equal(t, []string{"cleanup"}, carry(dead))
	// left is requeued from the dead letters and succeeds; its end is
	// carried before the notice of its revival (any order), and frees
	// bottom.
	revived := StepEnd{Step: "left", Task: "t-left", Status: "revived", At: 30}
	ok := StepEnd{Step: "left", Task: "t-left", Status: "ok", Result: "left's result", At: 40}
	answered := carry(ok)
	assert.Contains(t, answered, "bottom")
	assert.Contains(t, answered, "cleanup", "the success's release answers the step the death freed, still ready")
	assert.Equal(t, hash{"top": "left,right", "left": "cleanup,bottom"}, e.dump()["wf.freed"], "left's success adds to what its death freed")
	// Crash again before any enqueue: the sweep replays all three.
	assert.ElementsMatch(t, []string{"bottom", "cleanup"}, carry(dead, revived, ok))
	// Bottom alone is enqueued (and the success's notice removed): the
	// death's and the revival's notices, replayed, answer cleanup.
	enqueued([]string{"bottom"})
	assert.Equal(t, []string{"cleanup"}, carry(dead), "a replay of the death answers the step it freed")
	assert.Equal(t, []string{"cleanup"}, carry(revived))
	enqueued([]string{"cleanup"})
	assert.Empty(t, carry(dead, revived, ok))
	enqueued(carry(StepEnd{Step: "bottom", Task: "t-bottom", Status: "ok", At: 50}))
	enqueued(carry(StepEnd{Step: "cleanup", Task: "t-cleanup", Status: "ok", At: 60}))
	rec, _, err := e.s.WorkflowState(e.ctx, id)
	require.NoError(t, err)
	assert.Equal(t, "succeeded", rec.State)
}

// A child that runs whatever one parent's end waits for its other parents
// still: that parent's death, then its revival and success, count as one
// end, not two, so the child is not freed while another parent runs.
func TestWorkflowReviveCountsOneEndScript(t *testing.T) {
	t.Parallel()
	e := newScriptEnv(t, "wf_release.lua")
	id := e.workflow()
	_, _, err := e.s.CreateWorkflow(e.ctx, id, "sum", time.Minute, []WorkflowStep{
		{Name: "a", Spec: "S-a", Kids: []string{"+c"}},
		{Name: "b", Spec: "S-b", Kids: []string{"c"}},
		{Name: "c", Spec: "S-c", Parents: []string{"a", "b"}},
	})
	require.NoError(t, err)
	release := func(step, status string, at int64) []ReadyStep {
		t.Helper()
		ready, err := e.s.ReleaseStep(e.ctx, id, step, "t-"+step, status, "", at)
		require.NoError(t, err)
		return ready
	}
	assert.Empty(t, release("a", "dead", 10))
	assert.Equal(t, "1", e.dump()["wf.left"].(hash)["c"], "c waits for b")
	assert.Empty(t, release("a", "revived", 20))
	assert.Empty(t, release("a", "ok", 30), "c waits for b still")
	got := e.dump()
	assert.Equal(t, hash{"a": "ok", "b": "r", "c": "w"}, got["wf.steps"])
	assert.Equal(t, "1", got["wf.left"].(hash)["c"])
	assert.Equal(t, []ReadyStep{{Name: "c", Spec: "S-c"}}, release("b", "ok", 40))
}

// A revival counts the parents left of the steps that wait again once
// all of them wait: a step that waits for another one that waits again
// (by a dependency that runs whatever that one's end) counts it, whichever
// was found first.
func TestWorkflowReviveCountsLateParentsScript(t *testing.T) {
	t.Parallel()
	e := newScriptEnv(t, "wf_release.lua")
	id := e.workflow()
	_, _, err := e.s.CreateWorkflow(e.ctx, id, "sum", time.Minute, []WorkflowStep{
		{Name: "s", Spec: "S-s", Kids: []string{"g", "k"}},
		{Name: "k", Spec: "S-k", Parents: []string{"s"}, Kids: []string{"+g"}},
		{Name: "g", Spec: "S-g", Parents: []string{"s", "k"}},
	})
	require.NoError(t, err)
	release := func(step, status string, at int64) []ReadyStep {
		t.Helper()
		ready, err := e.s.ReleaseStep(e.ctx, id, step, "t-"+step, status, "", at)
		require.NoError(t, err)
		return ready
	}
	assert.Empty(t, release("s", "dead", 10))
	assert.Empty(t, release("s", "revived", 20))
	got := e.dump()
	assert.Equal(t, hash{"s": "q", "k": "w", "g": "w"}, got["wf.steps"])
	assert.Equal(t, hash{"k": "1", "g": "2"}, got["wf.left"], "g waits for s and k")
	assert.Equal(t, []ReadyStep{{Name: "k", Spec: "S-k"}}, release("s", "ok", 30))
	assert.Equal(t, []ReadyStep{{Name: "g", Spec: "S-g"}}, release("k", "ok", 40))
}

// A batch of first successes of distinct steps is recorded in bulk
// (wf_release.lua's bulk): its keys end as those of the same notices
// recorded one after another. Each batch is run twice, in two workflows
// alike: as it is, and behind a replay of an end recorded already, which
// sends the whole batch one notice after another; the keys of the two are
// compared whole after every batch. The steps: p frees a, b and c; d
// waits for all three (a fan-in), e for c whatever its end; c ends before
// it is marked queued (its id comes with its end).
func TestWorkflowReleaseBulkScript(t *testing.T) {
	t.Parallel()
	steps := []WorkflowStep{
		{Name: "p", Spec: "S-p", Kids: []string{"a", "b", "c"}},
		{Name: "a", Spec: "S-a", Parents: []string{"p"}, Kids: []string{"d"}, Place: 1},
		{Name: "b", Spec: "S-b", Parents: []string{"p"}, Kids: []string{"d"}, Place: 2},
		{Name: "c", Spec: "S-c", Parents: []string{"p"}, Kids: []string{"d", "+e"}, Place: 3},
		{Name: "d", Spec: "S-d", Parents: []string{"a", "b", "c"}, Place: 4},
		{Name: "e", Spec: "S-e", Parents: []string{"c"}, Place: 5},
	}
	bulk, single := newScriptEnv(t, "wf_release.lua"), newScriptEnv(t, "wf_release.lua")
	ids := map[*scriptEnv]string{bulk: bulk.workflow(), single: single.workflow()}
	for e, id := range ids {
		_, _, err := e.s.CreateWorkflow(e.ctx, id, "sum", time.Minute, steps)
		require.NoError(t, err)
	}
	pEnd := StepEnd{Step: "p", Task: "t-p", Status: "ok", Result: "P", At: 5}
	// compare compares the keys of the two workflows whole, but when each
	// was created and ended (by the Redis clock).
	compare := func(why string) {
		t.Helper()
		a, b := single.dump(), bulk.dump()
		for _, st := range []keyState{a, b} {
			delete(st["wf.flow"].(hash), "created")
			delete(st["wf.flow"].(hash), "ended")
		}
		bulk.same(a, b, why)
	}
	// release runs a batch in both workflows, compares their keys, and
	// answers the bulk's ready steps.
	release := func(ends ...StepEnd) []ReadyStep {
		t.Helper()
		ready, err := bulk.s.ReleaseSteps(bulk.ctx, ids[bulk], ends)
		require.NoError(t, err)
		_, err = single.s.ReleaseSteps(single.ctx, ids[single], append([]StepEnd{pEnd}, ends...))
		require.NoError(t, err)
		compare("in bulk and one notice after another")
		return ready
	}
	ok := func(step string, at int64) StepEnd {
		return StepEnd{Step: step, Task: "t-" + step, Status: "ok", Result: "R-" + step, At: at}
	}
	ready, err := bulk.s.ReleaseSteps(bulk.ctx, ids[bulk], []StepEnd{pEnd})
	require.NoError(t, err)
	assert.Equal(t, []ReadyStep{{Name: "a", Spec: "S-a"}, {Name: "b", Spec: "S-b"}, {Name: "c", Spec: "S-c"}}, ready)
	_, err = single.s.ReleaseSteps(single.ctx, ids[single], []StepEnd{pEnd})
	require.NoError(t, err)
	for e, id := range ids {
		_, err := e.s.StepsEnqueued(e.ctx, id, []QueuedStep{{Name: "a", TaskID: "t-a"}, {Name: "b", TaskID: "t-b"}})
		require.NoError(t, err)
	}
	compare("after p")

	assert.Empty(t, release(ok("a", 10)), "d waits for b and c")
	got := bulk.dump()
	assert.Equal(t, hash{"p": "ok", "a": "ok", "b": "q", "c": "r", "d": "w", "e": "w"}, got["wf.steps"])
	assert.Equal(t, hash{"a": "0", "b": "0", "c": "0", "d": "2", "e": "1"}, got["wf.left"])
	assert.Equal(t, hash{"p": "P", "a": "R-a"}, got["wf.results"])
	assert.Equal(t, hash{"p": "5", "a": "10"}, got["wf.seen"])
	assert.Equal(t, "4", got["wf.flow"].(hash)["open"])

	assert.Equal(t, []ReadyStep{{Name: "d", Spec: "S-d"}, {Name: "e", Spec: "S-e"}}, release(ok("b", 11), ok("c", 12)))
	got = bulk.dump()
	assert.Equal(t, hash{"p": "ok", "a": "ok", "b": "ok", "c": "ok", "d": "r", "e": "r"}, got["wf.steps"])
	assert.Equal(t, hash{"a": "0", "b": "0", "c": "0", "d": "0", "e": "0"}, got["wf.left"])
	assert.Equal(t, hash{"p": "a,b,c", "c": "d,e"}, got["wf.freed"], "the last parent in the batch frees the fan-in")
	assert.Equal(t, "t-c", got["wf.ids"].(hash)["c"], "ended before its mark: its id with its end")

	for e, id := range ids {
		_, err := e.s.StepsEnqueued(e.ctx, id, []QueuedStep{{Name: "d", TaskID: "t-d"}, {Name: "e", TaskID: "t-e"}})
		require.NoError(t, err)
	}
	assert.Empty(t, release(ok("e", 20), ok("d", 21)))
	got = bulk.dump()
	assert.Equal(t, "succeeded", got["wf.flow"].(hash)["state"], "the last ends close it")
	assert.Equal(t, "0", got["wf.flow"].(hash)["open"])
}

// A batch that is not all first successes (here a death among them, and
// a step twice) is recorded one notice after another, as separate calls.
func TestWorkflowReleaseMixedBatchScript(t *testing.T) {
	t.Parallel()
	e := newScriptEnv(t, "wf_release.lua")
	id := e.workflow()
	_, _, err := e.s.CreateWorkflow(e.ctx, id, "sum", time.Minute, diamond())
	require.NoError(t, err)
	ready, err := e.s.ReleaseSteps(e.ctx, id, []StepEnd{
		{Step: "top", Task: "t-top", Status: "ok", At: 10},
		{Step: "left", Task: "t-left", Status: "dead", At: 20},
		{Step: "right", Task: "t-right", Status: "ok", Result: "r", At: 30},
	})
	require.NoError(t, err)
	assert.Equal(t, []ReadyStep{{Name: "cleanup", Spec: "S-cleanup"}}, ready, "left and right ended; bottom cancelled")
	got := e.dump()
	assert.Equal(t, hash{"top": "ok", "left": "dead", "right": "ok", "bottom": "x", "cleanup": "r"}, got["wf.steps"])
	assert.Equal(t, hash{"left": "0", "right": "0", "bottom": "1", "cleanup": "0"}, got["wf.left"])
	assert.Equal(t, "1", got["wf.flow"].(hash)["dead"])
	assert.Equal(t, "1", got["wf.flow"].(hash)["open"])
}

// flow_enqueue.lua reads the steps' unique keys together and writes those
// it takes together: a key held answers its holder (flagged duplicate), a
// key whose hold has passed is taken afresh, and a step twice in one call
// is added once, the second answered the first's id.
func TestFlowEnqueueUniqueKeysScript(t *testing.T) {
	t.Parallel()
	e := newScriptEnv(t, "flow_enqueue.lua")
	shaOf := func(key string) string {
		sum := sha1.Sum([]byte(key))
		return hex.EncodeToString(sum[:])
	}
	later := float64(e.clockMs() + hour)
	// A hundred older stale holds, which the call's sweep drops first:
	// old's is found stale by the step's own look.
	unique, ttls := hash{shaOf("wf/old"): "ff", shaOf("wf/held"): "ee"}, zset{shaOf("wf/old"): 1, shaOf("wf/held"): later}
	for i := range 100 {
		unique[shaOf(strconv.Itoa(i))], ttls[shaOf(strconv.Itoa(i))] = "aa", 0
	}
	e.seed(keyState{"unique": unique, "uniquettl": ttls})
	step := func(name string) EnqueueOne {
		return EnqueueOne{Queue: "q", Payload: []byte(name), Args: EnqueueArgs{Unique: "wf/" + name, UniqueTTL: time.Hour, Flow: "wf." + name}}
	}
	before := e.clockMs()
	ids, errs := e.s.EnqueueSteps(e.ctx, []EnqueueOne{step("old"), step("held"), step("new"), step("new")})
	after := e.clockMs()
	require.NoError(t, errs[0])
	assert.ErrorIs(t, errs[1], ErrDuplicate)
	require.NoError(t, errs[2])
	assert.ErrorIs(t, errs[3], ErrDuplicate)
	assert.NotEqual(t, "ff", ids[0], "the stale hold is taken afresh")
	assert.Equal(t, "ee", ids[1])
	assert.Equal(t, ids[2], ids[3], "the second answers the first's id")
	got := e.dump()
	assert.Equal(t, hash{shaOf("wf/old"): ids[0], shaOf("wf/held"): "ee", shaOf("wf/new"): ids[2]}, got["unique"])
	ttl := got["uniquettl"].(zset)
	require.Len(t, ttl, 3, "the hundred swept")
	assert.Equal(t, later, ttl[shaOf("wf/held")])
	for _, name := range []string{"old", "new"} {
		e.within(int64(ttl[shaOf("wf/"+name)]), before+hour, after+hour, name)
	}
	assert.Equal(t, list{ids[2] + ",Fwf.new:new", ids[0] + ",Fwf.old:old"}, got["waiting"])
}
