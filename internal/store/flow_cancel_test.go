package store

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// flowSeed is a queue holding workflow tasks (an 'F' field) waiting,
// delayed, waiting in a group, in flight, and in flight cancelled
// already, beside plain tasks of the same payload.
func flowSeed(w string) keyState {
	return keyState{
		"meta":    hash{"name": "q"},
		"waiting": list{"61,Fwf1.a:same", "60:same"},
		"delayed": zset{"63,Fwf1.b:same": 5},
		"gwait":   zset{"g\x00" + "0" + "0000000000000001" + "66,gg,Fwf2.c:same": 0},
		"gready":  zset{"g": 1},
		"procs": hash{
			"1": "a" + w + "64,Fwf3.d:same",
			"2": "a" + w + "65:same",
			"3": "c" + w + "67,Fwf3.e:same",
		},
	}
}

// takeFlows removes the flows set from a dump, checks that each notice
// was written between lo and hi (µs, Redis clock), and returns them.
func takeFlows(e *scriptEnv, st keyState, lo, hi int64) []string {
	e.t.Helper()
	z, _ := st["flows"].(zset)
	delete(st, "flows")
	var out []string
	for m, at := range z {
		e.within(int64(at), lo, hi, m)
		out = append(out, m)
	}
	slices.Sort(out)
	return out
}

// The cancel scripts and delete.lua write a 'cancelled' notice for each
// workflow task they cancel, in the same script, and answer with them;
// plain tasks, and a process cancelled already (its notice written when
// it was marked), leave none.
func TestFlowCancelNoticeScripts(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		script string // the script CancelID, CancelPayload, CancelWaiting or DeleteQueue runs
		run    func(e *scriptEnv) ([]string, error)
		want   []string
	}{
		{"cancel id waiting", "cancel_id.lua", func(e *scriptEnv) ([]string, error) {
			_, n, err := e.s.CancelID(e.ctx, "q", "61")
			return n, err
		}, []string{"wf1.a,61,cancelled"}},
		{"cancel id delayed", "cancel_id.lua", func(e *scriptEnv) ([]string, error) {
			_, n, err := e.s.CancelID(e.ctx, "q", "63")
			return n, err
		}, []string{"wf1.b,63,cancelled"}},
		{"cancel id in a group", "cancel_id.lua", func(e *scriptEnv) ([]string, error) {
			_, n, err := e.s.CancelID(e.ctx, "q", "66")
			return n, err
		}, []string{"wf2.c,66,cancelled"}},
		{"cancel id in flight", "cancel_id.lua", func(e *scriptEnv) ([]string, error) {
			_, n, err := e.s.CancelID(e.ctx, "q", "64")
			return n, err
		}, []string{"wf3.d,64,cancelled"}},
		{"cancel id plain", "cancel_id.lua", func(e *scriptEnv) ([]string, error) {
			_, n, err := e.s.CancelID(e.ctx, "q", "65")
			return n, err
		}, nil},
		{"cancel payload", "cancel.lua", func(e *scriptEnv) ([]string, error) {
			_, n, err := e.s.CancelPayload(e.ctx, "q", []byte("same"))
			return n, err
		}, []string{"wf1.a,61,cancelled", "wf1.b,63,cancelled", "wf2.c,66,cancelled", "wf3.d,64,cancelled"}},
		{"cancel waiting", "cancel_waiting.lua", func(e *scriptEnv) ([]string, error) {
			_, _, n, err := e.s.CancelWaiting(e.ctx, "q", CancelSelection{}, 100)
			return n, err
		}, []string{"wf1.a,61,cancelled", "wf2.c,66,cancelled"}},
		{"delete", "delete.lua", func(e *scriptEnv) ([]string, error) {
			_, n, err := e.s.DeleteQueue(e.ctx, "q")
			return n, err
		}, []string{"wf1.a,61,cancelled", "wf1.b,63,cancelled", "wf2.c,66,cancelled", "wf3.d,64,cancelled"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newScriptEnv(t, tc.script)
			w := e.worker()
			e.seed(flowSeed(w))
			before := e.clock()
			got, err := tc.run(e)
			require.NoError(t, err)
			after := e.clock()
			slices.Sort(got)
			assert.Equal(t, tc.want, got, "the notices answered")
			assert.Equal(t, tc.want, takeFlows(e, e.dump(), before, after), "the notices written")
			for _, raw := range got {
				n, ok := ParseNotice(raw)
				assert.True(t, ok, raw)
				assert.Equal(t, "cancelled", n.Status)
			}
		})
	}
}

// A cancel of plain tasks writes no flows set and answers no notice.
func TestCancelPlainWritesNoNotice(t *testing.T) {
	t.Parallel()
	e := newScriptEnv(t, "cancel.lua")
	w := e.worker()
	e.seed(cancelSeed(w))
	_, got, err := e.s.CancelPayload(e.ctx, "q", []byte("same"))
	require.NoError(t, err)
	assert.Empty(t, got)
	assert.NotContains(t, e.dump(), "flows")
}

// wf_release.lua with a 'cancelled' notice: the step ends cancelled ('x'),
// its children that need it are cancelled with their descendants, one
// that runs whatever its parent's end is freed, and the workflow, once
// every step has ended, fails though no step died.
func TestWorkflowReleaseCancelledScript(t *testing.T) {
	t.Parallel()
	e := newScriptEnv(t, "wf_release.lua")
	id := e.workflow()
	_, _, err := e.s.CreateWorkflow(e.ctx, id, "sum", time.Minute, diamond())
	require.NoError(t, err)
	_, err = e.s.StepsEnqueued(e.ctx, id, []QueuedStep{{Name: "top", TaskID: "t1"}})
	require.NoError(t, err)
	_, err = e.s.ReleaseStep(e.ctx, id, "top", "t1", "ok", "", 10)
	require.NoError(t, err)
	_, err = e.s.StepsEnqueued(e.ctx, id, []QueuedStep{{Name: "left", TaskID: "t2"}, {Name: "right", TaskID: "t3"}})
	require.NoError(t, err)

	ready, err := e.s.ReleaseStep(e.ctx, id, "left", "t2", "cancelled", "", 20)
	require.NoError(t, err)
	assert.Equal(t, []ReadyStep{{Name: "cleanup", Spec: "S-cleanup"}}, ready)
	got := e.dump()
	assert.Equal(t, hash{"top": "ok", "left": "x", "right": "q", "bottom": "x", "cleanup": "r"}, got["wf.steps"])
	assert.Equal(t, "1", got["wf.flow"].(hash)["cancelled"])
	assert.NotContains(t, got["wf.flow"].(hash), "dead")

	_, err = e.s.ReleaseStep(e.ctx, id, "right", "t3", "ok", "", 30)
	require.NoError(t, err)
	_, err = e.s.StepsEnqueued(e.ctx, id, []QueuedStep{{Name: "cleanup", TaskID: "t4"}})
	require.NoError(t, err)
	rec, _, err := e.s.WorkflowState(e.ctx, id)
	require.NoError(t, err)
	assert.Equal(t, "running", rec.State)
	_, err = e.s.ReleaseStep(e.ctx, id, "cleanup", "t4", "ok", "", 40)
	require.NoError(t, err)
	rec, _, err = e.s.WorkflowState(e.ctx, id)
	require.NoError(t, err)
	assert.Equal(t, "failed", rec.State, "a step cancelled fails its workflow")
}
