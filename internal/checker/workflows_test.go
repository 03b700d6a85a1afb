package checker

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/worqr/worqr/internal/store"
)

// chain is a workflow of two steps, a then b, each on the queue its spec
// names.
func chain() []store.WorkflowStep {
	return []store.WorkflowStep{
		{Name: "a", Spec: "qa", Kids: []string{"b"}},
		{Name: "b", Spec: "qb", Parents: []string{"a"}},
	}
}

// wfKeys are the keys of workflow id that exist.
func wfKeys(m *miniredis.Miniredis, id string) []string {
	var out []string
	for _, k := range m.Keys() {
		if len(k) > len("checktest:{wf:"+id+"}") && k[:len("checktest:{wf:"+id+"}")] == "checktest:{wf:"+id+"}" {
			out = append(out, k)
		}
	}
	return out
}

// persist makes keys not expire, as a restore without their expiry would.
func persist(t *testing.T, m *miniredis.Miniredis, keys ...string) {
	t.Helper()
	rdb, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{m.Addr()}, DisableCache: true, AlwaysRESP2: true, ForceSingleClient: true})
	require.NoError(t, err)
	defer rdb.Close()
	for _, k := range keys {
		require.NoError(t, rdb.Do(context.Background(), rdb.B().Persist().Key(k).Build()).Error())
	}
}

// A running workflow and an ended one are no finding, and their keys are
// no unknown keys; a workflow whose flow hash was lost leaves keys behind,
// which a repair deletes; an ended workflow whose keys were made to last
// is set to expire again; one whose key holds a type worqr never writes
// there is reported and left alone.
func TestCheckFindsAndRepairsWorkflowKeys(t *testing.T) {
	env, m := newEnv(t)
	ctx := context.Background()
	s := env.Store
	for _, id := range []string{"running", "ended", "lost", "lasting"} {
		_, _, err := s.CreateWorkflow(ctx, id, "sum", time.Hour, chain())
		require.NoError(t, err)
		_, err = s.StepsEnqueued(ctx, id, []store.QueuedStep{{Name: "a", TaskID: "t1"}})
		require.NoError(t, err)
	}
	for _, id := range []string{"ended", "lasting"} {
		_, _, err := s.CancelWorkflow(ctx, id)
		require.NoError(t, err)
	}
	_, err := m.ZAdd("checktest:{q:qa}:retained", math.Inf(1), "t1") // a's task, not ended yet, delayed
	require.NoError(t, err)
	_, err = m.ZAdd("checktest:{q:qa}:delayed", 1e15, "t1,R1:x")
	require.NoError(t, err)
	rep, err := Run(ctx, env, false)
	require.NoError(t, err)
	assert.Equal(t, 4, rep.WorkflowsChecked)
	assert.Empty(t, rep.UnknownKeys, "workflow keys are worqr's")
	assert.Empty(t, rep.LeftoverWorkflows)
	assert.Empty(t, rep.LastingWorkflows)
	assert.Empty(t, rep.StalledSteps, "a queued step is carried by its task")
	assert.Empty(t, rep.LostSteps)

	m.Del("checktest:{wf:lost}:flow")
	require.NoError(t, m.Set("checktest:{wf:bad}:flow", "not a hash"))
	persist(t, m, "checktest:{wf:lasting}:steps", "checktest:{wf:lasting}:flow")
	ended := wfKeys(m, "ended")
	rep, err = Run(ctx, env, false)
	require.NoError(t, err)
	assert.Equal(t, []string{"lost"}, rep.LeftoverWorkflows)
	assert.Equal(t, []string{"lasting"}, rep.LastingWorkflows)
	assert.Equal(t, []string{"bad"}, rep.BrokenWorkflows)
	assert.Zero(t, rep.Repaired, "no repair without asking")
	assert.NotEmpty(t, wfKeys(m, "lost"))

	rep, err = Run(ctx, env, true)
	require.NoError(t, err)
	assert.Equal(t, []string{"lost"}, rep.Repaired.DeletedWorkflows)
	assert.Equal(t, []string{"lasting"}, rep.Repaired.ExpiringWorkflows)
	assert.Empty(t, wfKeys(m, "lost"), "its keys are deleted")
	for _, k := range wfKeys(m, "lasting") {
		ttl := m.TTL(k)
		assert.True(t, ttl > 59*time.Minute && ttl <= time.Hour, "%s expires once its keep has passed: %v", k, ttl)
	}
	assert.Equal(t, ended, wfKeys(m, "ended"), "an ended workflow's keys stay until they expire")
	assert.Len(t, wfKeys(m, "running"), 8, "a running workflow is left alone")

	rep, err = Run(ctx, env, false)
	require.NoError(t, err)
	assert.Empty(t, rep.LeftoverWorkflows, "repaired")
	assert.Empty(t, rep.LastingWorkflows, "repaired")
	assert.Equal(t, []string{"bad"}, rep.BrokenWorkflows, "reported, never touched")
	bad, err := m.Get("checktest:{wf:bad}:flow")
	require.NoError(t, err)
	assert.Equal(t, "not a hash", bad)
	assert.Equal(t, 4, rep.WorkflowsChecked)
}

// A step released whose enqueue nothing carries any more is stalled: one
// ready from the start whose creator stopped before enqueuing it, and one
// a parent's end freed whose notice is gone. One whose parent's notice is
// pending (a sweep carries it) is not, nor a step queued. A repair
// enqueues the stalled ones, by workflow.
func TestCheckFindsAndRepairsStalledSteps(t *testing.T) {
	env, m := newEnv(t)
	ctx := context.Background()
	s := env.Store
	for _, id := range []string{"fresh", "carried", "lost"} {
		_, _, err := s.CreateWorkflow(ctx, id, "sum", time.Hour, chain())
		require.NoError(t, err)
	}
	for _, id := range []string{"carried", "lost"} {
		_, err := s.StepsEnqueued(ctx, id, []store.QueuedStep{{Name: "a", TaskID: "t1"}})
		require.NoError(t, err)
		_, err = s.ReleaseStep(ctx, id, "a", "t1", "ok", "", 70)
		require.NoError(t, err)
	}
	_, err := m.ZAdd("checktest:{q:qa}:flows", 70, "carried.a,t1,ok")
	require.NoError(t, err)
	_, err = m.ZAdd("checktest:{q:qa}:flows", 71, "other.a,t1,ok")
	require.NoError(t, err)

	rep, err := Run(ctx, env, false)
	require.NoError(t, err)
	assert.Equal(t, []WorkflowStep{{Workflow: "fresh", Step: "a"}, {Workflow: "lost", Step: "b"}}, rep.StalledSteps)

	enqueued := make(map[string][]store.ReadyStep)
	env.EnqueueSteps = func(_ context.Context, id string, steps []store.ReadyStep) error {
		enqueued[id] = append(enqueued[id], steps...)
		return nil
	}
	rep, err = Run(ctx, env, true)
	require.NoError(t, err)
	assert.Equal(t, map[string][]store.ReadyStep{"fresh": {{Name: "a", Spec: "qa"}}, "lost": {{Name: "b", Spec: "qb"}}}, enqueued)
	assert.Equal(t, []WorkflowStep{{Workflow: "fresh", Step: "a"}, {Workflow: "lost", Step: "b"}}, rep.Repaired.EnqueuedSteps)

	// Enqueued and marked queued, as the fake did not: nothing stalls.
	for _, id := range []string{"fresh", "lost"} {
		_, err = s.StepsEnqueued(ctx, id, []store.QueuedStep{{Name: enqueued[id][0].Name, TaskID: "t2"}})
		require.NoError(t, err)
	}
	rep, err = Run(ctx, env, false)
	require.NoError(t, err)
	assert.Empty(t, rep.StalledSteps)
}

// A step whose release completes while the check reads its parents'
// queues (marked queued, then its notice removed) is not stalled, nor is
// a queued step whose end is carried meanwhile lost: the workflow is
// looked at again after the notices were read.
func TestCheckDoesNotJudgeAStepReleasedMeanwhileStalled(t *testing.T) {
	env, _ := newEnv(t)
	ctx := context.Background()
	s := env.Store
	steps := chain()
	steps[0].Spec = "racing"
	_, _, err := s.CreateWorkflow(ctx, "w", "sum", time.Hour, steps)
	require.NoError(t, err)
	_, err = s.StepsEnqueued(ctx, "w", []store.QueuedStep{{Name: "a", TaskID: "t1"}})
	require.NoError(t, err)
	_, err = s.ReleaseStep(ctx, "w", "a", "t1", "ok", "", 70)
	require.NoError(t, err)
	// And a queued step whose task ends, and whose end is carried, while
	// the check reads its queue.
	steps = chain()
	steps[0].Spec = "ending"
	_, _, err = s.CreateWorkflow(ctx, "v", "sum", time.Hour, steps)
	require.NoError(t, err)
	_, err = s.StepsEnqueued(ctx, "v", []store.QueuedStep{{Name: "a", TaskID: "t1"}})
	require.NoError(t, err)
	// The carrier marks b queued as the check asks for a's queue, before
	// its notice is read (and found gone); v's a ends and is recorded.
	env.StepQueue = func(spec string) (string, bool) {
		switch spec {
		case "racing":
			_, err := s.StepsEnqueued(ctx, "w", []store.QueuedStep{{Name: "b", TaskID: "t2"}})
			require.NoError(t, err)
		case "ending":
			_, err := s.ReleaseStep(ctx, "v", "a", "t1", "ok", "", 70)
			require.NoError(t, err)
		}
		return spec, true
	}
	rep, err := Run(ctx, env, false)
	require.NoError(t, err)
	assert.Empty(t, rep.StalledSteps)
	assert.Empty(t, rep.LostSteps)
}

// A queued step whose task has not ended and is delayed is carried by it, and one whose
// task ended is carried by the notice its end left; a step whose task
// ended, or whose outcome is gone, with no notice left is lost, and
// reported only.
func TestCheckFindsLostSteps(t *testing.T) {
	env, m := newEnv(t)
	ctx := context.Background()
	s := env.Store
	for _, id := range []string{"alive", "noticed", "unnoticed", "gone"} {
		_, _, err := s.CreateWorkflow(ctx, id, "sum", time.Hour, chain())
		require.NoError(t, err)
		_, err = s.StepsEnqueued(ctx, id, []store.QueuedStep{{Name: "a", TaskID: "t-" + id}})
		require.NoError(t, err)
	}
	for task, score := range map[string]float64{"t-alive": math.Inf(1), "t-noticed": 5, "t-unnoticed": 5} {
		_, err := m.ZAdd("checktest:{q:qa}:retained", score, task)
		require.NoError(t, err)
	}
	_, err := m.ZAdd("checktest:{q:qa}:delayed", 1e15, "t-alive,R1:x")
	require.NoError(t, err)
	m.HSet("checktest:{q:qa}:meta", "name", "qa") // a queue that holds a task is a registered one
	require.NoError(t, s.RegisterQueue(ctx, "qa"))
	_, err = m.ZAdd("checktest:{q:qa}:flows", 70, "noticed.a,t-noticed,ok")
	require.NoError(t, err)
	_, err = m.ZAdd("checktest:{q:qa}:flows", 70, "unnoticed.a,t-other,ok")
	require.NoError(t, err)

	rep, err := Run(ctx, env, true)
	require.NoError(t, err)
	assert.Equal(t, []WorkflowStep{{Workflow: "gone", Step: "a", Task: "t-gone"}, {Workflow: "unnoticed", Step: "a", Task: "t-unnoticed"}}, rep.LostSteps)
	assert.Empty(t, rep.StalledSteps)
	assert.Zero(t, rep.Repaired, "a lost step is not repaired")
}

// A running workflow whose freed hash holds a type worqr never writes
// there is reported broken, once, whether or not it has a ready step
// (whose look reads that hash), as when its steps were read whole.
func TestCheckReportsARunningWorkflowWithABrokenFreedHash(t *testing.T) {
	env, m := newEnv(t)
	ctx := context.Background()
	s := env.Store
	for _, id := range []string{"ready", "queued"} {
		_, _, err := s.CreateWorkflow(ctx, id, "sum", time.Hour, chain())
		require.NoError(t, err)
	}
	_, err := s.StepsEnqueued(ctx, "queued", []store.QueuedStep{{Name: "a", TaskID: "t1"}})
	require.NoError(t, err)
	for _, id := range []string{"ready", "queued"} {
		require.NoError(t, m.Set("checktest:{wf:"+id+"}:freed", "not a hash"))
	}
	rep, err := Run(ctx, env, false)
	require.NoError(t, err)
	assert.Equal(t, []string{"queued", "ready"}, rep.BrokenWorkflows)
	assert.Empty(t, rep.StalledSteps, "a broken workflow's steps are not judged")
}
