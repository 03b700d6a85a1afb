package main

import (
	"fmt"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/worqr/worqr"
)

// stepRun reports a run of a workflow step on wfQueue: it starts with
// process id pid (the Redis clock, µs) and its handler ends at end (wall
// clock µs), completed or failing as fail says. Both are counted from
// 1000 times the workflow's number, so that workflows' runs have
// process ids of their own.
func stepRun(l *ledger, task string, pid, end int64, fail string) {
	var n int64
	if _, err := fmt.Sscanf(task, "wf-%d-", &n); err != nil {
		panic(err)
	}
	pid, end = pid+1000*n, end+1000*n
	p := strconv.FormatInt(pid, 16)
	out := outFinished
	switch fail {
	case failPlanned:
		out = outRetried
	case failPermanent:
		out = outDead
	}
	l.apply("w1.1", report{Ev: "start", T: pid, W: pid, Q: wfQueue, PID: p, Task: task, Owner: "w1.1-id", Attempt: 1})
	l.apply("w1.1", report{Ev: "end", T: end, W: end, Q: wfQueue, PID: p, OK: fail == "", Fail: fail})
	l.apply("w1.1", report{Ev: "settled", Q: wfQueue, PID: p, Cause: out})
}

// flow is workflow n of shape sh, its steps planned as plans say (by
// name; the others plain).
func flow(n int, sh wfShape, letRun bool, plans map[string]wfStepPlan) *wfInfo {
	w := &wfInfo{id: "cw-" + strconv.Itoa(n), shape: sh.name, letRun: letRun, steps: sh.steps,
		payload: make(map[string]string), plans: make(map[string]wfStepPlan)}
	for _, st := range sh.steps {
		w.plans[st.name] = plans[st.name]
		w.payload[st.name] = stepPayload(n, st.name, plans[st.name])
	}
	return w
}

// ended is a workflow's final state as Redis would tell it.
func ended(w *wfInfo, state worqr.WorkflowState, steps map[string]worqr.StepState) worqr.WorkflowInfo {
	info := worqr.WorkflowInfo{ID: w.id, State: state}
	for _, st := range w.steps {
		info.Steps = append(info.Steps, worqr.StepInfo{Name: st.name, Queue: wfQueue, State: steps[st.name], Parents: st.parents})
	}
	return info
}

// The workflow checks: a run of a step whose process id precedes its
// parent's completed end is early, one after it (or, under
// RunAfterFailure, after its permanent failure) is not, nor is one after
// a retried parent's second run; a cancelled step that ran is reported;
// a workflow still running, a step queued at the end, or cancelled though
// its parents succeeded, is lost; a failed workflow with every step
// succeeded is a wrong end.
func TestJudgeWorkflows(t *testing.T) {
	t.Parallel()
	chain, diamond := wfShapes[0], wfShapes[2]
	ok, dead, gone := worqr.StepSucceeded, worqr.StepDead, worqr.StepCancelled
	l := newLedger()
	states := make(map[string]worqr.WorkflowInfo)
	deadLetters := make(map[string][]deadLetter)

	// cw-1: right; a fails once, b starts after a's second run ended.
	w1 := flow(1, chain, false, map[string]wfStepPlan{"a": {fails: 1}})
	stepRun(l, w1.payload["a"], 100, 110, failPlanned)
	stepRun(l, w1.payload["a"], 150, 160, "")
	stepRun(l, w1.payload["b"], 170, 180, "")
	stepRun(l, w1.payload["c"], 190, 200, "")
	states[w1.id] = ended(w1, worqr.WorkflowSucceeded, map[string]worqr.StepState{"a": ok, "b": ok, "c": ok})

	// cw-2: b starts after a's failed run but before its completed one.
	w2 := flow(2, chain, false, map[string]wfStepPlan{"a": {fails: 1}})
	stepRun(l, w2.payload["a"], 100, 110, failPlanned)
	stepRun(l, w2.payload["b"], 120, 130, "")
	stepRun(l, w2.payload["a"], 150, 160, "")
	stepRun(l, w2.payload["c"], 190, 200, "")
	states[w2.id] = ended(w2, worqr.WorkflowSucceeded, map[string]worqr.StepState{"a": ok, "b": ok, "c": ok})

	// cw-3: diamond, b dies: d is cancelled, yet ran.
	w3 := flow(3, diamond, false, map[string]wfStepPlan{"b": {permanent: true}})
	stepRun(l, w3.payload["a"], 100, 110, "")
	stepRun(l, w3.payload["b"], 120, 130, failPermanent)
	stepRun(l, w3.payload["c"], 121, 131, "")
	stepRun(l, w3.payload["d"], 140, 150, "")
	deadLetters[w3.payload["b"]] = []deadLetter{{reason: worqr.ReasonPermanent}}
	states[w3.id] = ended(w3, worqr.WorkflowFailed, map[string]worqr.StepState{"a": ok, "b": dead, "c": ok, "d": gone})

	// cw-4: let-run chain, a dies, b runs after it (right), c after b.
	w4 := flow(4, chain, true, map[string]wfStepPlan{"a": {permanent: true}})
	stepRun(l, w4.payload["a"], 100, 110, failPermanent)
	stepRun(l, w4.payload["b"], 120, 130, "")
	stepRun(l, w4.payload["c"], 140, 150, "")
	deadLetters[w4.payload["a"]] = []deadLetter{{reason: worqr.ReasonPermanent}}
	states[w4.id] = ended(w4, worqr.WorkflowFailed, map[string]worqr.StepState{"a": dead, "b": ok, "c": ok})

	// cw-5: still running, c queued; cw-6: b cancelled though a
	// succeeded, and the workflow succeeded with steps cancelled.
	w5 := flow(5, chain, false, nil)
	stepRun(l, w5.payload["a"], 100, 110, "")
	stepRun(l, w5.payload["b"], 120, 130, "")
	states[w5.id] = ended(w5, worqr.WorkflowRunning, map[string]worqr.StepState{"a": ok, "b": ok, "c": worqr.StepQueued})
	w6 := flow(6, chain, false, nil)
	stepRun(l, w6.payload["a"], 100, 110, "")
	states[w6.id] = ended(w6, worqr.WorkflowSucceeded, map[string]worqr.StepState{"a": ok, "b": gone, "c": gone})

	v := l.judgeWorkflows([]*wfInfo{w1, w2, w3, w4, w5, w6}, states, deadLetters, 0)
	// cw-2's b, and cw-3's d, which ran though b never completed.
	require.Len(t, v.early, 2, "%v", v.early)
	require.Contains(t, v.early[0], "cw-2 (chain) step b")
	require.Contains(t, v.early[1], "cw-3 (diamond) step d")
	require.Len(t, v.cancelledRan, 1, "cw-3's d")
	require.Contains(t, v.cancelledRan[0], "cw-3 (diamond) step d")
	require.Len(t, v.notEnded, 1)
	require.Contains(t, v.notEnded[0], "cw-5")
	require.Len(t, v.lost, 2, "cw-5's c queued, cw-6's b cancelled: %v", v.lost)
	require.Len(t, v.wrongEnds, 1, "cw-6 succeeded with steps cancelled: %v", v.wrongEnds)
	require.Contains(t, v.wrongEnds[0], "cw-6")
	require.Equal(t, 6, v.flows)
	require.Equal(t, 1, v.letRun)
	require.Empty(t, l.problems)
}

// Step payloads read back as written.
func TestStepPayload(t *testing.T) {
	t.Parallel()
	for _, pl := range []wfStepPlan{{}, {fails: 1}, {permanent: true}, {early: "p0"}} {
		s := stepPayload(7, "a", pl)
		got, early, err := parseStep(s)
		require.NoError(t, err, s)
		require.Equal(t, pl, got, s)
		if pl.early != "" {
			require.Equal(t, "wf-7-p0", early)
		}
	}
	_, _, err := parseStep("job-1")
	require.Error(t, err)
}
