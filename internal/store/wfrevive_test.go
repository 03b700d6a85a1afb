package store

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A revival during its own cascade, where a step of that cascade another
// death holds (h, whose second parent e died) has the rest of its
// children cancelled in the revival: that goes on through a step that
// waits again (m, cancelled by d and now waiting for d and s) and cuts
// it again, and m's end lowers z's count ("+z": z runs whatever m's end)
// a second time. z also waits for q, which has not ended: it must not
// be made ready.
//
//	d -> m, h      e -> h      q -> z
//	h -> f000..f996, s         s -> m      m -> +z
//
// d's first call settles m, h, m's child z and h's first 997 children:
// its cascade stands at h's s.
func TestWorkflowReviveCutAgainLowersOnceScript(t *testing.T) {
	t.Parallel()
	e := newScriptEnv(t, "wf_release.lua")
	id := e.workflow()
	e.createWithFill(id, 997, []WorkflowStep{
		{Name: "d", Spec: "S-d", Kids: []string{"m", "h"}},
		{Name: "e", Spec: "S-e", Kids: []string{"h"}},
		{Name: "q", Spec: "S-q", Kids: []string{"z"}},
		{Name: "h", Spec: "S-h", Parents: []string{"d", "e"}, Kids: []string{"s"}},
		{Name: "s", Spec: "S-s", Parents: []string{"h"}, Kids: []string{"m"}},
		{Name: "m", Spec: "S-m", Parents: []string{"d", "s"}, Kids: []string{"+z"}},
		{Name: "z", Spec: "S-z", Parents: []string{"m", "q"}},
	})
	_, more := e.releaseEnd(id, "d", "dead", 10)
	require.True(t, more)
	state := e.dump()
	require.Equal(t, fmt.Sprintf("h:%d", 5*997+1), state["wf.freed"].(hash)["!d"], "d's cascade stands at h's s")
	require.Equal(t, "w", state["wf.steps"].(hash)["s"])
	require.Equal(t, "1", state["wf.left"].(hash)["z"], "m's cancellation settled in z: q is left")
	e.releaseEnd(id, "e", "dead", 20)

	ready, _ := e.releaseEnd(id, "d", "revived", 30)
	state = e.dump()
	st, left := state["wf.steps"].(hash), state["wf.left"].(hash)
	assert.Equal(t, "x", st["s"], "h is held by e: s is cancelled")
	assert.Equal(t, "x", st["m"], "and so is m, s's child")
	for _, r := range ready {
		assert.NotEqual(t, "z", r.Name, "z answered as ready while q has not ended")
	}
	assert.Equal(t, "w", st["z"], "z waits for q")
	assert.Equal(t, "1", left["z"], "for q")
}

// As above, but the step whose count m's second cut lowers waits again
// itself: w waits for d and, whatever its end, for m; d's death cancels
// it, and m's cancellation is settled in it. The revival makes w wait
// for d again; the held cascade cuts m again and lowers w's count, not
// yet recounted, to 0: w must not be made ready before d, queued again,
// ends.
//
//	d -> m, h, w      e -> h
//	h -> f000..f995, s         s -> m      m -> +w
func TestWorkflowReviveCutAgainFreesNoWaiterScript(t *testing.T) {
	t.Parallel()
	e := newScriptEnv(t, "wf_release.lua")
	id := e.workflow()
	e.createWithFill(id, 996, []WorkflowStep{
		{Name: "d", Spec: "S-d", Kids: []string{"m", "h", "w"}},
		{Name: "e", Spec: "S-e", Kids: []string{"h"}},
		{Name: "h", Spec: "S-h", Parents: []string{"d", "e"}, Kids: []string{"s"}},
		{Name: "s", Spec: "S-s", Parents: []string{"h"}, Kids: []string{"m"}},
		{Name: "m", Spec: "S-m", Parents: []string{"d", "s"}, Kids: []string{"+w"}},
		{Name: "w", Spec: "S-w", Parents: []string{"d", "m"}},
	})
	_, more := e.releaseEnd(id, "d", "dead", 10)
	require.True(t, more)
	state := e.dump()
	require.Equal(t, fmt.Sprintf("h:%d", 5*996+1), state["wf.freed"].(hash)["!d"], "d's cascade stands at h's s")
	require.Equal(t, "x", state["wf.steps"].(hash)["w"])
	require.Equal(t, "1", state["wf.left"].(hash)["w"], "m's cancellation settled in w")
	e.releaseEnd(id, "e", "dead", 20)

	ready, _ := e.releaseEnd(id, "d", "revived", 30)
	state = e.dump()
	st, left := state["wf.steps"].(hash), state["wf.left"].(hash)
	assert.Equal(t, "q", st["d"])
	assert.Equal(t, "x", st["m"], "cancelled again with s")
	for _, r := range ready {
		assert.NotEqual(t, "w", r.Name, "w answered as ready while its parent d is queued")
	}
	assert.Equal(t, "w", st["w"], "w waits for d")
	assert.Equal(t, "1", left["w"], "for d")
}

// A step that waits again and runs whatever the end of a held step of
// the revived death's cascade, which had not reached it, counts that
// held step among its parents left: the revival settles the held step's
// rest of children after the recount, lowering k's count once, and k
// still waits for d.
//
//	d -> k, h      e -> h      h -> f000..f997, +k
func TestWorkflowReviveCountsItsHeldCascadeScript(t *testing.T) {
	t.Parallel()
	e := newScriptEnv(t, "wf_release.lua")
	id := e.workflow()
	e.createWithFill(id, 998, []WorkflowStep{
		{Name: "d", Spec: "S-d", Kids: []string{"k", "h"}},
		{Name: "e", Spec: "S-e", Kids: []string{"h"}},
		{Name: "h", Spec: "S-h", Parents: []string{"d", "e"}, Kids: []string{"+k"}},
		{Name: "k", Spec: "S-k", Parents: []string{"d", "h"}},
	})
	_, more := e.releaseEnd(id, "d", "dead", 10)
	require.True(t, more)
	require.Equal(t, fmt.Sprintf("h:%d", 5*998+1), e.dump()["wf.freed"].(hash)["!d"], "d's cascade stands at h's +k")
	e.releaseEnd(id, "e", "dead", 20)

	ready, _ := e.releaseEnd(id, "d", "revived", 30)
	for _, r := range ready {
		assert.NotEqual(t, "k", r.Name, "k answered as ready while its parent d is queued")
	}
	state := e.dump()
	assert.Equal(t, "w", state["wf.steps"].(hash)["k"], "k waits for d")
	assert.Equal(t, "1", state["wf.left"].(hash)["k"], "for d: h's end is settled")
}

// createWithFill creates workflow id of steps and of n steps more, f000
// and on, each a child of h, which lists them first among its kids: each
// step is placed in its order, the n last.
func (e *scriptEnv) createWithFill(id string, n int, steps []WorkflowStep) {
	e.t.Helper()
	var fill []string
	for i := range n {
		fill = append(fill, fmt.Sprintf("f%03d", i))
	}
	for i := range steps {
		if steps[i].Name == "h" {
			steps[i].Kids = slices.Concat(fill, steps[i].Kids)
		}
	}
	for _, f := range fill {
		steps = append(steps, WorkflowStep{Name: f, Spec: "S-" + f, Parents: []string{"h"}})
	}
	for i := range steps {
		steps[i].Place = i
	}
	_, _, err := e.s.CreateWorkflow(e.ctx, id, "sum", time.Minute, steps)
	require.NoError(e.t, err)
}

// releaseEnd releases the end of step (its task t-<step>), of status at
// at, alone in its call, and returns what it answered.
func (e *scriptEnv) releaseEnd(id, step, status string, at int64) (ready []ReadyStep, more bool) {
	e.t.Helper()
	ready, more, err := e.s.ReleaseChunk(e.ctx, id, []StepEnd{{Step: step, Task: "t-" + step, Status: status, At: at}}, false)
	require.NoError(e.t, err)
	return ready, more
}
