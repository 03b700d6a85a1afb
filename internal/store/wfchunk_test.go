package store

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fanOut is a workflow of a step "top" and n children k0000, k0001, ...
// (five bytes each: a child's place in top's kids is 6i + 1).
func fanOut(n int) ([]WorkflowStep, []string) {
	kids := make([]string, n)
	for i := range kids {
		kids[i] = fmt.Sprintf("k%04d", i)
	}
	steps := []WorkflowStep{{Name: "top", Spec: "S-top", Kids: kids}}
	for i, k := range kids {
		steps = append(steps, WorkflowStep{Name: k, Spec: "S-" + k, Parents: []string{"top"}, Place: i + 1})
	}
	return steps, kids
}

// wf_release.lua settles a fan-out's children a thousand a call: the end
// of a parent of 2,500 children takes three calls, each of which lowers
// the counts of the next thousand, writes where the release stands
// ('@top' in freed: the byte of top's kids where the next child starts)
// and answers "more"; the last drops it. A call with enqueued answers only
// the children it freed; a replay without it answers all those still
// ready.
func TestWorkflowReleaseChunksScript(t *testing.T) {
	t.Parallel()
	e := newScriptEnv(t, "wf_release.lua")
	id := e.workflow()
	steps, kids := fanOut(2500)
	_, _, err := e.s.CreateWorkflow(e.ctx, id, "sum", time.Minute, steps)
	require.NoError(t, err)
	end := []StepEnd{{Step: "top", Task: "t-top", Status: "ok", Result: "r", At: 10}}
	for call, want := range []struct {
		more bool
		at   string // '@top' after the call; "" for none
		done int    // children settled after the call
	}{
		{true, "6001", 1000},
		{true, "12001", 2000},
		{false, "", 2500},
	} {
		ready, more, err := e.s.ReleaseChunk(e.ctx, id, end, call > 0)
		require.NoError(t, err)
		assert.Equal(t, want.more, more, "call %d", call)
		var names []string
		for _, r := range ready {
			names = append(names, r.Name)
		}
		assert.Equal(t, kids[call*1000:want.done], names, "call %d answers the children it freed", call)
		state := e.dump()
		freed := state["wf.freed"].(hash)
		at, ok := freed["@top"]
		if want.at == "" {
			assert.False(t, ok, "call %d: no release under way: %q", call, at)
		} else {
			assert.Equal(t, want.at, at, "call %d: where the release stands", call)
		}
		left, st := state["wf.left"].(hash), state["wf.steps"].(hash)
		for i, k := range kids {
			wantLeft, wantState := "1", "w"
			if i < want.done {
				wantLeft, wantState = "0", "r"
			}
			if left[k] != wantLeft || st[k] != wantState {
				t.Fatalf("call %d: %s has %s parents left and state %s, want %s and %s", call, k, left[k], st[k], wantLeft, wantState)
			}
		}
		assert.Equal(t, "ok", st["top"])
	}
	// A replay (a sweep's, after a crash) settles nothing again and
	// answers every child still ready.
	ready, more, err := e.s.ReleaseChunk(e.ctx, id, end, false)
	require.NoError(t, err)
	assert.False(t, more)
	assert.Len(t, ready, 2500)
	state := e.dump()
	assert.Equal(t, "0", state["wf.left"].(hash)["k2499"], "not lowered twice")
	assert.Equal(t, "2500", state["wf.flow"].(hash)["open"])
}

// A death's release is chunked too: the children are cancelled a
// thousand a call, and the workflow fails once the last are.
func TestWorkflowReleaseChunksDeathScript(t *testing.T) {
	t.Parallel()
	e := newScriptEnv(t, "wf_release.lua")
	id := e.workflow()
	steps, kids := fanOut(2500)
	_, _, err := e.s.CreateWorkflow(e.ctx, id, "sum", time.Minute, steps)
	require.NoError(t, err)
	end := []StepEnd{{Step: "top", Task: "t-top", Status: "dead", At: 10}}
	for call, open := range []string{"1500", "500", "0"} {
		ready, more, err := e.s.ReleaseChunk(e.ctx, id, end, call > 0)
		require.NoError(t, err)
		assert.Equal(t, 0, len(ready), "none made ready")
		assert.Equal(t, call < 2, more, "call %d", call)
		state := e.dump()
		flow, st := state["wf.flow"].(hash), state["wf.steps"].(hash)
		assert.Equal(t, open, flow["open"], "call %d", call)
		assert.Equal(t, "x", st[kids[min(call*1000+999, 2499)]], "call %d", call)
		if call < 2 {
			assert.Equal(t, "w", st[kids[call*1000+1000]], "call %d", call)
			assert.Equal(t, "running", flow["state"])
		} else {
			assert.Equal(t, "failed", flow["state"])
		}
	}
}

// A death whose release is under way, revived, undoes only what it
// settled: the children it cancelled wait again, a child that runs
// whatever its end and was settled keeps its count, one past where the
// release stood (never settled) keeps its count too; where it stood is
// dropped, and the parent's success then releases every child.
func TestWorkflowReviveDuringReleaseScript(t *testing.T) {
	t.Parallel()
	e := newScriptEnv(t, "wf_release.lua")
	id := e.workflow()
	steps, _ := fanOut(2500)
	// k0000 and k2000 run whatever top's end; k0000 has a second parent,
	// so top's death does not make it ready.
	steps[0].Kids[0], steps[0].Kids[2000] = "+k0000", "+k2000"
	steps = append(steps, WorkflowStep{Name: "other", Spec: "S-other", Kids: []string{"k0000"}, Place: 2501})
	steps[1].Parents = append(steps[1].Parents, "other")
	_, _, err := e.s.CreateWorkflow(e.ctx, id, "sum", time.Minute, steps)
	require.NoError(t, err)
	_, more := e.releaseEnd(id, "top", "dead", 10)
	require.True(t, more)
	state := e.dump()
	assert.Equal(t, "6002", state["wf.freed"].(hash)["@top"], "'+k0000' is a byte longer")
	assert.Equal(t, "1", state["wf.left"].(hash)["k0000"], "settled: other is left")
	assert.Equal(t, "x", state["wf.steps"].(hash)["k0999"])
	assert.Equal(t, "w", state["wf.steps"].(hash)["k1000"])

	_, more = e.releaseEnd(id, "top", "revived", 20)
	assert.False(t, more, "the revival ends the release")
	state = e.dump()
	left, st := state["wf.left"].(hash), state["wf.steps"].(hash)
	assert.Nil(t, state["wf.freed"], "no release under way, none freed")
	assert.Equal(t, "q", st["top"])
	assert.Equal(t, "w", st["k0999"], "waits again")
	assert.Equal(t, "1", left["k0999"])
	assert.Equal(t, "2", left["k0000"], "waits for top again")
	assert.Equal(t, "1", left["k2000"], "never settled")
	assert.Equal(t, "2502", state["wf.flow"].(hash)["open"])

	ready, err := e.s.ReleaseSteps(e.ctx, id, []StepEnd{{Step: "top", Task: "t-top", Status: "ok", At: 30}})
	require.NoError(t, err)
	assert.Equal(t, 2499, len(ready), "all but k0000, which waits for other")
	state = e.dump()
	for i := 1; i < 2500; i++ {
		k := fmt.Sprintf("k%04d", i)
		if s := state["wf.steps"].(hash)[k]; s != "r" {
			t.Fatalf("%s is %s, want r", k, s)
		}
	}
	assert.Equal(t, "1", state["wf.left"].(hash)["k0000"])
}

// A child that waits again once its cancelling parent is revived counts
// as left a parent that ended but whose release has not reached it yet:
// that release lowers its count later, so the child waits for both.
func TestWorkflowReviveCountsReleaseUnderWayScript(t *testing.T) {
	t.Parallel()
	e := newScriptEnv(t, "wf_release.lua")
	id := e.workflow()
	// top and big are both parents of k0000...k2499; big lists them
	// from the last, so its first thousand are k2499...k1500.
	steps, kids := fanOut(2500)
	var back []string
	for i := len(kids) - 1; i >= 0; i-- {
		back = append(back, kids[i])
	}
	steps = append(steps, WorkflowStep{Name: "big", Spec: "S-big", Kids: back, Place: 2501})
	for i := 1; i <= 2500; i++ {
		steps[i].Parents = append(steps[i].Parents, "big")
	}
	_, _, err := e.s.CreateWorkflow(e.ctx, id, "sum", time.Minute, steps)
	require.NoError(t, err)
	bigEnd := []StepEnd{{Step: "big", Task: "t-big", Status: "ok", At: 10}}
	_, more, err := e.s.ReleaseChunk(e.ctx, id, bigEnd, false)
	require.NoError(t, err)
	require.True(t, more)
	_, more = e.releaseEnd(id, "top", "dead", 10)
	require.True(t, more)
	e.releaseEnd(id, "top", "revived", 20)
	state := e.dump()
	assert.Equal(t, "w", state["wf.steps"].(hash)["k0000"], "waits again")
	assert.Equal(t, "2", state["wf.left"].(hash)["k0000"], "for top, and for big, whose release has not reached it")
	assert.Equal(t, "1", state["wf.left"].(hash)["k2499"], "big's release settled it")

	// big's release goes on: k0000 still waits for top.
	ready, err := e.s.ReleaseSteps(e.ctx, id, bigEnd)
	require.NoError(t, err)
	assert.Equal(t, 0, len(ready), "none made ready")
	state = e.dump()
	assert.Equal(t, "w", state["wf.steps"].(hash)["k0000"])
	assert.Equal(t, "1", state["wf.left"].(hash)["k0000"])
}

// A workflow that fails while a release is under way (its last open step
// dies before the rest of a fan-out's release is carried: a sweep's
// replay of the parent's notice then settles nothing, the workflow has
// ended) and is revived runs again: the child that waits again is not
// held by the release cut short, since no carry goes on with it.
func TestWorkflowReviveAfterFailDuringReleaseScript(t *testing.T) {
	t.Parallel()
	e := newScriptEnv(t, "wf_release.lua")
	id := e.workflow()
	// top has 1,001 children; other is k1000's second parent.
	steps, kids := fanOut(1001)
	steps = append(steps, WorkflowStep{Name: "other", Spec: "S-other", Kids: []string{"k1000"}, Place: 1002})
	steps[1001].Parents = append(steps[1001].Parents, "other")
	_, _, err := e.s.CreateWorkflow(e.ctx, id, "sum", time.Minute, steps)
	require.NoError(t, err)
	topEnd := []StepEnd{{Step: "top", Task: "t-top", Status: "ok", At: 10}}
	_, more, err := e.s.ReleaseChunk(e.ctx, id, topEnd, false)
	require.NoError(t, err)
	require.True(t, more, "k1000 is left")
	// The carrier crashes; the thousand children run and end.
	var ends []StepEnd
	for _, k := range kids[:1000] {
		ends = append(ends, StepEnd{Step: k, Task: "t-" + k, Status: "ok", At: 20})
	}
	_, _, err = e.s.ReleaseChunk(e.ctx, id, ends, false)
	require.NoError(t, err)
	// other dies: k1000 is cancelled, the last open step; the workflow fails.
	e.releaseEnd(id, "other", "dead", 30)
	require.Equal(t, "failed", e.dump()["wf.flow"].(hash)["state"])
	// The sweep's replay of top's notice: the workflow has ended, nothing
	// is left to carry, and the notice is forgotten.
	_, more, err = e.s.ReleaseChunk(e.ctx, id, topEnd, false)
	require.NoError(t, err)
	require.False(t, more)

	e.releaseEnd(id, "other", "revived", 40)
	state := e.dump()
	assert.Equal(t, "running", state["wf.flow"].(hash)["state"])
	assert.Equal(t, "w", state["wf.steps"].(hash)["k1000"], "waits again")
	assert.Equal(t, "1", state["wf.left"].(hash)["k1000"], "for other only: top's release is not carried again")
	ready, err := e.s.ReleaseSteps(e.ctx, id, []StepEnd{{Step: "other", Task: "t-other", Status: "ok", At: 50}})
	require.NoError(t, err)
	require.Len(t, ready, 1, "other's success frees k1000")
	assert.Equal(t, "k1000", ready[0].Name)
}

// cascadeTree is a workflow of a step "top", its fan children k0, k1, ...
// and per children of each of those, k0.000, k0.001, ... (a death of top
// cancels fan*(per+1) descendants, over two levels).
func cascadeTree(fan, per int) []WorkflowStep {
	steps := []WorkflowStep{{Name: "top", Spec: "S-top"}}
	for i := range fan {
		k := fmt.Sprintf("k%d", i)
		steps[0].Kids = append(steps[0].Kids, k)
		kid := WorkflowStep{Name: k, Spec: "S-" + k, Parents: []string{"top"}}
		var grand []WorkflowStep
		for j := range per {
			g := fmt.Sprintf("%s.%03d", k, j)
			kid.Kids = append(kid.Kids, g)
			grand = append(grand, WorkflowStep{Name: g, Spec: "S-" + g, Parents: []string{k}})
		}
		steps = append(steps, kid)
		steps = append(steps, grand...)
	}
	for i := range steps {
		steps[i].Place = i
	}
	return steps
}

// A death's cascade below its children is settled within the same bound
// as they are: top's death, over 10 children of 250 children each, ends
// a thousand descendants a call, keeps where its cascade stands under
// '!top' (with '@top') and answers "more" until the last is cancelled,
// when the workflow fails and both marks are dropped.
func TestWorkflowCascadeChunksScript(t *testing.T) {
	t.Parallel()
	e := newScriptEnv(t, "wf_release.lua")
	id := e.workflow()
	steps := cascadeTree(10, 250)
	_, _, err := e.s.CreateWorkflow(e.ctx, id, "sum", time.Minute, steps)
	require.NoError(t, err)
	end := []StepEnd{{Step: "top", Task: "t-top", Status: "dead", At: 10}}
	for call, want := range []struct {
		ended int
		more  bool
	}{{1000, true}, {2000, true}, {2510, false}} {
		ready, more, err := e.s.ReleaseChunk(e.ctx, id, end, call > 0)
		require.NoError(t, err)
		assert.Empty(t, ready, "none made ready")
		assert.Equal(t, want.more, more, "call %d", call)
		state := e.dump()
		st, flow := state["wf.steps"].(hash), state["wf.flow"].(hash)
		ended := 0
		for _, s := range steps[1:] {
			if st[s.Name] == "x" {
				ended++
			} else {
				require.Equal(t, "w", st[s.Name], "call %d: %s", call, s.Name)
			}
		}
		assert.Equal(t, want.ended, ended, "call %d: descendants cancelled", call)
		assert.Equal(t, strconv.Itoa(2510-want.ended), flow["open"], "call %d", call)
		freed, _ := state["wf.freed"].(hash)
		if want.more {
			assert.Equal(t, "running", flow["state"], "call %d", call)
			assert.NotEmpty(t, freed["!top"], "call %d: where the cascade stands", call)
			assert.NotEmpty(t, freed["@top"], "call %d: the release under way", call)
		} else {
			assert.Equal(t, "failed", flow["state"])
			assert.Empty(t, freed, "no release or cascade under way")
		}
	}
	// A replay settles nothing again.
	_, more, err := e.s.ReleaseChunk(e.ctx, id, end, false)
	require.NoError(t, err)
	assert.False(t, more)
	assert.Equal(t, "0", e.dump()["wf.flow"].(hash)["open"])
}

// A cascade under way keeps where it stands: after top's first call,
// k3's children are cut after its 240th, and the next call goes on
// from there, in order.
func TestWorkflowCascadeStandsScript(t *testing.T) {
	t.Parallel()
	e := newScriptEnv(t, "wf_release.lua")
	id := e.workflow()
	_, _, err := e.s.CreateWorkflow(e.ctx, id, "sum", time.Minute, cascadeTree(10, 250))
	require.NoError(t, err)
	end := []StepEnd{{Step: "top", Task: "t-top", Status: "dead", At: 10}}
	_, more, err := e.s.ReleaseChunk(e.ctx, id, end, false)
	require.NoError(t, err)
	require.True(t, more)
	st := e.dump()["wf.steps"].(hash)
	assert.Equal(t, "x", st["k3.239"])
	assert.Equal(t, "w", st["k3.240"])
	assert.Equal(t, "w", st["k4.000"])
	// k3's 241st child starts at byte 7*240+1; its first 240, which
	// have no children, are not kept.
	assert.Equal(t, "k9:1,k8:1,k7:1,k6:1,k5:1,k4:1,k3:1681", e.dump()["wf.freed"].(hash)["!top"])
}

// A death revived while its cascade is under way: the descendants it
// cancelled wait again, those it had not reached wait still, and a step
// of its cascade that another death holds (k7, whose second parent died
// meanwhile) has the rest of its children cancelled in the revival, since
// no later call goes on with the cascade. Nothing is left under way.
func TestWorkflowReviveDuringCascadeScript(t *testing.T) {
	t.Parallel()
	e := newScriptEnv(t, "wf_release.lua")
	id := e.workflow()
	steps := cascadeTree(10, 250)
	steps = append(steps, WorkflowStep{Name: "other", Spec: "S-other", Kids: []string{"k7"}, Place: len(steps)})
	for i := range steps {
		if steps[i].Name == "k7" {
			steps[i].Parents = append(steps[i].Parents, "other")
		}
	}
	_, _, err := e.s.CreateWorkflow(e.ctx, id, "sum", time.Minute, steps)
	require.NoError(t, err)
	_, more := e.releaseEnd(id, "top", "dead", 10)
	require.True(t, more)
	e.releaseEnd(id, "other", "dead", 20)
	_, more = e.releaseEnd(id, "top", "revived", 30)
	assert.False(t, more)
	state := e.dump()
	st, left := state["wf.steps"].(hash), state["wf.left"].(hash)
	assert.Equal(t, "q", st["top"])
	for i := range 10 {
		k := fmt.Sprintf("k%d", i)
		want := "w"
		if i == 7 {
			want = "x"
		}
		require.Equal(t, want, st[k], k)
		for j := range 250 {
			g := fmt.Sprintf("%s.%03d", k, j)
			require.Equal(t, want, st[g], g)
			if want == "w" {
				require.Equal(t, "1", left[g], g)
			}
		}
	}
	assert.Equal(t, "1", left["k0"])
	assert.Equal(t, "2260", state["wf.flow"].(hash)["open"], "top, nine children and theirs")
	assert.Nil(t, state["wf.freed"], "nothing under way")
}

// A revival during a cascade gives back to a child that runs whatever its
// parent's end only what the cascade took: k3's children wait for k3 and
// for hold (which has not ended); top's first call lowered the counts of
// k3's first 240 only, so after the revival all 250 wait for both again.
func TestWorkflowReviveDuringCascadeRestoresCountsScript(t *testing.T) {
	t.Parallel()
	e := newScriptEnv(t, "wf_release.lua")
	id := e.workflow()
	steps := cascadeTree(10, 250)
	hold := WorkflowStep{Name: "hold", Spec: "S-hold", Place: len(steps)}
	for i := range steps {
		if steps[i].Name == "k3" {
			for j, k := range steps[i].Kids {
				steps[i].Kids[j] = "+" + k
			}
		}
		if strings.HasPrefix(steps[i].Name, "k3.") {
			steps[i].Parents = append(steps[i].Parents, "hold")
			hold.Kids = append(hold.Kids, steps[i].Name)
		}
	}
	steps = append(steps, hold)
	_, _, err := e.s.CreateWorkflow(e.ctx, id, "sum", time.Minute, steps)
	require.NoError(t, err)
	_, more := e.releaseEnd(id, "top", "dead", 10)
	require.True(t, more)
	state := e.dump()
	require.Equal(t, "k9:1,k8:1,k7:1,k6:1,k5:1,k4:1,k3:1921", state["wf.freed"].(hash)["!top"], "k3's children, a byte longer")
	require.Equal(t, "1", state["wf.left"].(hash)["k3.239"], "settled")
	require.Equal(t, "2", state["wf.left"].(hash)["k3.240"], "not reached")

	_, more = e.releaseEnd(id, "top", "revived", 20)
	assert.False(t, more)
	state = e.dump()
	for j := range 250 {
		g := fmt.Sprintf("k3.%03d", j)
		require.Equal(t, "w", state["wf.steps"].(hash)[g], g)
		require.Equal(t, "2", state["wf.left"].(hash)[g], g)
	}
	assert.Nil(t, state["wf.freed"], "nothing under way")
}

// A revival does not let a step run before its parents while another
// death's cascade is under way: k9.000 waits for s and, whatever its
// end, for k9; so do k3.239 and k3.240 for s and k3. top's death
// cancels k9 and k3, but its cascade stands before k9's children and
// between k3.239 and k3.240; s dies (cancelling the three) and is
// revived. They wait for s, and k9.000 and k3.240 for their other
// parent's cancellation too, which the cascade has not settled in them:
// when the cascade goes on and settles it, they still wait for s, and
// s's success frees them.
func TestWorkflowReviveDuringOtherCascadeScript(t *testing.T) {
	t.Parallel()
	e := newScriptEnv(t, "wf_release.lua")
	id := e.workflow()
	steps := cascadeTree(10, 250)
	mine := []string{"k9.000", "k3.239", "k3.240"}
	s := WorkflowStep{Name: "s", Spec: "S-s", Kids: mine, Place: len(steps)}
	for i := range steps {
		switch steps[i].Name {
		case "k9":
			steps[i].Kids[0] = "+k9.000"
		case "k3":
			steps[i].Kids[239], steps[i].Kids[240] = "+k3.239", "+k3.240"
		case "k9.000", "k3.239", "k3.240":
			steps[i].Parents = append(steps[i].Parents, "s")
		}
	}
	steps = append(steps, s)
	_, _, err := e.s.CreateWorkflow(e.ctx, id, "sum", time.Minute, steps)
	require.NoError(t, err)
	topEnd := []StepEnd{{Step: "top", Task: "t-top", Status: "dead", At: 10}}
	_, more, err := e.s.ReleaseChunk(e.ctx, id, topEnd, false)
	require.NoError(t, err)
	require.True(t, more)
	state := e.dump()
	require.Equal(t, "x", state["wf.steps"].(hash)["k9"])
	require.Equal(t, "k9:1,k8:1,k7:1,k6:1,k5:1,k4:1,k3:1682", state["wf.freed"].(hash)["!top"], "k3's cascade stands at k3.240, a byte on")
	// Parents left before s's death and after its revival.
	left := map[string]string{"k9.000": "2", "k3.239": "1", "k3.240": "2"}
	for k, n := range left {
		require.Equal(t, n, state["wf.left"].(hash)[k], "%s: its other parent's cancellation settled in it, or not", k)
	}
	e.releaseEnd(id, "s", "dead", 20)
	for _, k := range mine {
		require.Equal(t, "x", e.dump()["wf.steps"].(hash)[k], k)
	}
	e.releaseEnd(id, "s", "revived", 30)
	state = e.dump()
	for k, n := range left {
		assert.Equal(t, "w", state["wf.steps"].(hash)[k], "%s waits again", k)
		assert.Equal(t, n, state["wf.left"].(hash)[k], "%s: for s, and for its other parent's cancellation if not settled in it", k)
	}

	// top's cascade goes on to its end.
	for call := 0; more; call++ {
		require.Less(t, call, 5)
		var ready []ReadyStep
		ready, more, err = e.s.ReleaseChunk(e.ctx, id, topEnd, true)
		require.NoError(t, err)
		require.Empty(t, ready, "nothing runs before s ends")
	}
	state = e.dump()
	for _, k := range mine {
		assert.Equal(t, "w", state["wf.steps"].(hash)[k], "%s waits for s", k)
		assert.Equal(t, "1", state["wf.left"].(hash)[k], k)
	}
	assert.Equal(t, "x", state["wf.steps"].(hash)["k9.249"])
	ready, err := e.s.ReleaseSteps(e.ctx, id, []StepEnd{{Step: "s", Task: "t-s", Status: "ok", At: 40}})
	require.NoError(t, err)
	var names []string
	for _, r := range ready {
		names = append(names, r.Name)
	}
	assert.ElementsMatch(t, mine, names, "s's success frees them")
}
