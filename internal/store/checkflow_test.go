package store

import (
	"bufio"
	"context"
	"fmt"
	"math"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// check_workflow.lua reads a workflow's state, how many of its keys exist
// and do not expire, and its steps ready or queued with the steps whose
// end freed them and those steps' specs, changing nothing.
func TestCheckWorkflowScript(t *testing.T) {
	t.Parallel()
	e := newScriptEnv(t, "check_workflow.lua")
	id := e.workflow()
	sets := e.s.CheckScripts()
	_, _, err := e.s.CreateWorkflow(e.ctx, id, "sum", time.Minute, diamond())
	require.NoError(t, err)
	looks, err := e.s.LookWorkflows(e.ctx, []string{id, "none"}, [][]string{AllSteps, AllSteps}, false, sets)
	require.NoError(t, err)
	require.Len(t, looks, 2)
	assert.Equal(t, WorkflowLook{State: "running", Keys: 7, Lasting: 7, Specs: map[string]string{},
		Steps: []LookedStep{{Name: "top", State: "r", Spec: "S-top"}}}, looks[0], "flow, steps, spec, left, parents, kids, order")
	assert.Equal(t, WorkflowLook{Specs: map[string]string{}}, looks[1], "a workflow with no key")

	_, err = e.s.StepsEnqueued(e.ctx, id, []QueuedStep{{Name: "top", TaskID: "t1"}})
	require.NoError(t, err)
	_, err = e.s.ReleaseStep(e.ctx, id, "top", "t1", "ok", "r", 70)
	require.NoError(t, err)
	_, err = e.s.StepsEnqueued(e.ctx, id, []QueuedStep{{Name: "left", TaskID: "t2"}})
	require.NoError(t, err)
	before := e.dump()
	looks, err = e.s.LookWorkflows(e.ctx, []string{id}, [][]string{AllSteps}, false, sets)
	require.NoError(t, err)
	assert.Equal(t, WorkflowLook{State: "running", Keys: 11, Lasting: 11, Specs: map[string]string{"top": "S-top"},
		Steps: []LookedStep{
			{Name: "left", State: "q", TaskID: "t2", Spec: "S-left"},
			{Name: "right", State: "r", Spec: "S-right", FreedBy: []string{"top"}},
		}}, looks[0], "a queued step's freed by is not asked for: only a ready step's is judged")
	// Only the steps named are looked at, and none when none is.
	looks, err = e.s.LookWorkflows(e.ctx, []string{id, id}, [][]string{{"right", "top", "bottom"}, nil}, false, sets)
	require.NoError(t, err)
	assert.Equal(t, WorkflowLook{State: "running", Keys: 11, Lasting: 11, Specs: map[string]string{"top": "S-top"},
		Steps: []LookedStep{{Name: "right", State: "r", Spec: "S-right", FreedBy: []string{"top"}}}}, looks[0])
	assert.Equal(t, WorkflowLook{State: "running", Keys: 11, Lasting: 11, Specs: map[string]string{}}, looks[1])
	e.expect(before)

	_, _, err = e.s.CancelWorkflow(e.ctx, id)
	require.NoError(t, err)
	looks, err = e.s.LookWorkflows(e.ctx, []string{id}, [][]string{AllSteps}, false, sets)
	require.NoError(t, err)
	assert.Equal(t, WorkflowLook{State: "cancelled", Keys: 11, Specs: map[string]string{}}, looks[0], "an ended workflow's keys expire; its steps are not listed")
	e.expect(e.dump())
}

// check_workflow.lua answers, at a look that names no step, the releases
// under way of a running workflow (a step's end whose children are not
// all settled), whether or not a notice still carries them: where each
// stands, the step's state, task, the stamp of its end and its queue.
// A look that names steps does not read them, and neither changes a key.
func TestCheckWorkflowScriptAnswersReleasesUnderWay(t *testing.T) {
	t.Parallel()
	e := newScriptEnv(t, "check_workflow.lua")
	id := e.workflow()
	sets := e.s.CheckScripts()
	const kids = 2500
	steps := []WorkflowStep{{Name: "p", Spec: "qa"}}
	for i := range kids {
		name := fmt.Sprintf("kid-%04d", i)
		steps[0].Kids = append(steps[0].Kids, name)
		steps = append(steps, WorkflowStep{Name: name, Spec: "qb", Parents: []string{"p"}})
	}
	_, _, err := e.s.CreateWorkflow(e.ctx, id, "sum", time.Minute, steps)
	require.NoError(t, err)
	_, err = e.s.StepsEnqueued(e.ctx, id, []QueuedStep{{Name: "p", TaskID: "t1"}})
	require.NoError(t, err)
	end := []StepEnd{{Step: "p", Task: "t1", Status: "ok", At: 70}}
	ready, more, err := e.s.ReleaseChunk(e.ctx, id, end, false)
	require.NoError(t, err)
	require.True(t, more)
	require.Len(t, ready, 1000)

	before := e.dump()
	looks, err := e.s.LookWorkflows(e.ctx, []string{id, id}, [][]string{nil, {"p", "kid-0000"}}, false, sets)
	require.NoError(t, err)
	// 1,000 names of 8 bytes and their commas settled: the next starts
	// at byte 9,001.
	assert.Equal(t, []ReleaseMark{{Step: "p", At: "9001", State: "ok", TaskID: "t1", Stamp: 70, Spec: "qa"}}, looks[0].Marks)
	assert.Empty(t, looks[1].Marks, "a look that names steps reads no release")
	e.expect(before)

	for more {
		_, more, err = e.s.ReleaseChunk(e.ctx, id, end, true)
		require.NoError(t, err)
	}
	looks, err = e.s.LookWorkflows(e.ctx, []string{id}, nil, false, sets)
	require.NoError(t, err)
	assert.Empty(t, looks[0].Marks, "a release done")
}

// check_wf_repair.lua leaves a running workflow alone; sets an ended
// one's keys that do not expire to expire with its flow hash, or once its
// keep has passed since its end; and deletes the keys of a workflow whose
// flow hash is gone.
func TestCheckWorkflowRepairScript(t *testing.T) {
	t.Parallel()
	e := newScriptEnv(t, "check_wf_repair.lua")
	id := e.workflow()
	k := e.s.Keys().Workflow(id)
	sets := e.s.CheckScripts()
	repair := func() WorkflowRepair {
		t.Helper()
		r := e.s.RepairWorkflows(e.ctx, []string{id}, sets)
		require.Len(t, r, 1)
		require.NoError(t, r[0].Err)
		return r[0]
	}
	pttl := func(key string) int64 {
		t.Helper()
		n, err := e.rdb.Do(e.ctx, e.rdb.B().Pttl().Key(key).Build()).AsInt64()
		require.NoError(t, err)
		return n
	}
	persist := func(keys ...string) {
		t.Helper()
		for _, key := range keys {
			require.NoError(t, e.rdb.Do(e.ctx, e.rdb.B().Persist().Key(key).Build()).Error())
		}
	}
	_, _, err := e.s.CreateWorkflow(e.ctx, id, "sum", time.Hour, diamond())
	require.NoError(t, err)
	running := e.dump()
	assert.Equal(t, WorkflowRepair{}, repair(), "a running workflow")
	e.expect(running)
	assert.Equal(t, int64(-1), pttl(k.Flow))

	_, _, err = e.s.CancelWorkflow(e.ctx, id)
	require.NoError(t, err)
	ended := e.dump()
	assert.Equal(t, WorkflowRepair{}, repair(), "an ended workflow whose keys expire")
	require.NoError(t, e.rdb.Do(e.ctx, e.rdb.B().Pexpire().Key(k.Flow).Milliseconds(10*60*1000).Build()).Error())
	persist(k.Steps, k.Spec)
	assert.Equal(t, WorkflowRepair{Expiring: true, Keys: 2}, repair())
	e.expect(ended)
	for _, key := range []string{k.Steps, k.Spec} {
		assert.InDelta(t, 10*60*1000, pttl(key), 2000, "expires with the flow hash")
	}

	// None expires: the keep counts from the end.
	persist(k.Flow, k.Steps, k.Spec, k.Left, k.Parents, k.Kids)
	end, err := e.rdb.Do(e.ctx, e.rdb.B().Hget().Key(k.Flow).Field("ended").Build()).AsInt64()
	require.NoError(t, err)
	require.NoError(t, e.rdb.Do(e.ctx, e.rdb.B().Hset().Key(k.Flow).FieldValue().FieldValue("ended", strconv.FormatInt(end-20*60*1000, 10)).Build()).Error())
	assert.Equal(t, WorkflowRepair{Expiring: true, Keys: 6}, repair())
	for _, key := range []string{k.Flow, k.Steps, k.Spec, k.Left, k.Parents, k.Kids} {
		assert.InDelta(t, 40*60*1000, pttl(key), 2000, "the keep left since the end")
	}
	require.NoError(t, e.rdb.Do(e.ctx, e.rdb.B().Hset().Key(k.Flow).FieldValue().FieldValue("ended", strconv.FormatInt(end-2*3600*1000, 10)).Build()).Error())
	persist(k.Flow)
	assert.Equal(t, WorkflowRepair{Expiring: true, Keys: 1}, repair())
	assert.LessOrEqual(t, pttl(k.Flow), int64(1), "its keep has passed: it expires at once")
	assert.Equal(t, ended["wf.steps"], e.dump()["wf.steps"], "its fields are not touched")

	// The flow hash gone: the rest is deleted.
	require.NoError(t, e.rdb.Do(e.ctx, e.rdb.B().Del().Key(k.Flow).Build()).Error())
	persist(k.Steps)
	assert.Equal(t, WorkflowRepair{Deleted: true, Keys: 6}, repair())
	e.expect(keyState{})
	assert.Equal(t, WorkflowRepair{}, repair(), "nothing left")
	e.expect(keyState{})
}

// TaskOutcomes tells a retained task not ended yet from one ended and
// from one not listed; PendingNotices finds a notice by its start.
func TestCheckReadsOfAQueue(t *testing.T) {
	t.Parallel()
	rdb := testRedis(t)
	s := New(rdb, "worqrtest-"+strconv.FormatInt(time.Now().UnixNano(), 36), false, false)
	k := s.Keys().Queue("q")
	t.Cleanup(func() { rdb.Do(context.Background(), rdb.B().Del().Key(k.Retained, k.Flows).Build()) })
	ctx := context.Background()
	require.NoError(t, rdb.Do(ctx, rdb.B().Zadd().Key(k.Retained).ScoreMember().ScoreMember(math.Inf(1), "a").ScoreMember(5, "b").Build()).Error())
	require.NoError(t, rdb.Do(ctx, rdb.B().Zadd().Key(k.Flows).ScoreMember().ScoreMember(1, "w.s,a,ok").ScoreMember(2, "w*.s,b,ok").Build()).Error())
	got, err := s.TaskOutcomes(ctx, "q", []string{"a", "b", "c"})
	require.NoError(t, err)
	assert.Equal(t, []int{RetainedPending, RetainedEnded, RetainedNone}, got)
	found, err := s.PendingNotices(ctx, "q", []string{"w.s,", "w.s,a,", "w.s,b,", "w.t,", "w*.s,b,", "w", "w.t,", "w.s,"})
	require.NoError(t, err)
	assert.Equal(t, []bool{true, true, false, false, true, true, false, true}, found)
}

// check_workflow.lua reads each parent's freed list once a call, however
// many of the steps it names that parent freed: a step ready by the end
// of a parent of many children would otherwise copy and search the
// parent's whole list, of all its children, once for each, and a page
// of a large fan-out would block Redis for seconds. Counted on a real
// Redis, whose MONITOR shows the commands scripts send.
func TestCheckWorkflowReadsAParentsFreedListOnce(t *testing.T) {
	addr := os.Getenv("WORQR_TEST_REDIS")
	if addr == "" || os.Getenv("WORQR_TEST_CLUSTER") != "" {
		t.Skip("needs WORQR_TEST_REDIS: miniredis's MONITOR does not show a script's commands")
	}
	rdb := testRedis(t)
	ctx := context.Background()
	s := New(rdb, "worqrtest-"+uuid.NewString()[:8], false, false)
	const kids = 300
	steps := []WorkflowStep{{Name: "p", Spec: "qa"}}
	var names []string
	for i := range kids {
		name := fmt.Sprintf("kid-%03d", i)
		names = append(names, name)
		steps[0].Kids = append(steps[0].Kids, name)
		steps = append(steps, WorkflowStep{Name: name, Spec: "qb", Parents: []string{"p"}})
	}
	_, _, err := s.CreateWorkflow(ctx, "fan", "sum", time.Minute, steps)
	require.NoError(t, err)
	_, err = s.StepsEnqueued(ctx, "fan", []QueuedStep{{Name: "p", TaskID: "t1"}})
	require.NoError(t, err)
	_, err = s.ReleaseStep(ctx, "fan", "p", "t1", "ok", "", 70)
	require.NoError(t, err)
	t.Cleanup(func() {
		for _, k := range s.Keys().Workflow("fan").all() {
			rdb.Do(context.Background(), rdb.B().Del().Key(k).Build())
		}
	})

	mon, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer mon.Close()
	_, err = mon.Write([]byte("*1\r\n$7\r\nMONITOR\r\n"))
	require.NoError(t, err)
	lines := bufio.NewReader(mon)
	ok, err := lines.ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "+OK\r\n", ok)

	looks, err := s.LookWorkflows(ctx, []string{"fan"}, [][]string{names}, false, s.CheckScripts())
	require.NoError(t, err)
	require.Len(t, looks[0].Steps, kids, "every child ready")
	assert.Equal(t, []string{"p"}, looks[0].Steps[0].FreedBy)
	marker := "end-of-look-" + uuid.NewString()
	require.NoError(t, rdb.Do(ctx, rdb.B().Echo().Message(marker).Build()).Error())
	freed := strconv.Quote(s.Keys().Workflow("fan").Freed)
	reads := 0
	require.NoError(t, mon.SetReadDeadline(time.Now().Add(10*time.Second)))
	for {
		line, err := lines.ReadString('\n')
		require.NoError(t, err)
		if strings.Contains(line, marker) {
			break
		}
		if strings.Contains(line, `"HGET" `+freed) {
			reads++
		}
	}
	assert.Equal(t, 1, reads, "reads of the parent's freed list")
}
