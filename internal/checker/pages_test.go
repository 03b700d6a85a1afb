package checker

import (
	"context"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/worqr/worqr/internal/store"
)

// replyMeter sits between a client and Redis and keeps the most bytes
// Redis sent between two writes of the client: the largest reply, or
// pipelined batch of replies, the client read.
type replyMeter struct {
	mu       sync.Mutex
	run, max int
}

func (r *replyMeter) largest() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return max(r.max, r.run)
}

// newReplyMeter listens for clients and relays them to addr.
func newReplyMeter(t *testing.T, addr string) (*replyMeter, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = ln.Close() })
	r := &replyMeter{}
	go func() {
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", addr)
			if err != nil {
				_ = in.Close()
				return
			}
			t.Cleanup(func() { _ = in.Close(); _ = out.Close() })
			go func() { // client to Redis: a write starts a new reply
				buf := make([]byte, 64<<10)
				for {
					n, err := in.Read(buf)
					if n > 0 {
						r.mu.Lock()
						r.max, r.run = max(r.max, r.run), 0
						r.mu.Unlock()
						if _, err := out.Write(buf[:n]); err != nil {
							return
						}
					}
					if err != nil {
						_ = out.Close()
						return
					}
				}
			}()
			go func() { // Redis to client: counted
				_, _ = io.Copy(writerFunc(func(p []byte) (int, error) {
					r.mu.Lock()
					r.run += len(p)
					r.mu.Unlock()
					return in.Write(p)
				}), out)
				_ = in.Close()
			}()
		}
	}()
	return r, ln.Addr().String()
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// A workflow of more steps than a page is read a page at a time: a
// queued step whose task was removed by hand, on its last page, is found
// vanished and enqueued anew by a repair, and no reply the check reads
// holds much more than a page's worth of steps, whatever the workflow's
// size (a read of its steps whole answers them all in one reply).
func TestCheckReadsAWorkflowsStepsAPageAtATime(t *testing.T) {
	env, m := newEnv(t)
	meter, addr := newReplyMeter(t, m.Addr())
	rdb, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: true, AlwaysRESP2: true, ForceSingleClient: true})
	require.NoError(t, err)
	t.Cleanup(rdb.Close)
	direct := env.Store
	env.Store = store.New(rdb, "checktest", false, false)
	env.StepsPage = 20
	ctx := context.Background()

	// Steps with no parents, all queued at once, in place order; the last
	// one's queue is vq, the others' wq.
	const n = 400 // enough that a whole read (24 KB) would be three times the bound below
	steps := make([]store.WorkflowStep, n)
	for i := range steps {
		steps[i] = store.WorkflowStep{Name: fmt.Sprintf("step-%04d", i), Spec: "wq", Place: i}
	}
	steps[n-1].Spec = "vq"
	env.StepTask = func(id string, st store.ReadyStep) (store.EnqueueOne, error) {
		return store.EnqueueOne{Queue: st.Spec, Payload: []byte("x"), Args: store.EnqueueArgs{
			Flow: id + "." + st.Name, Unique: "wf/" + id + "/" + st.Name, Retain: time.Hour, UniqueTTL: 2 * time.Hour,
		}}, nil
	}
	_, ready, err := direct.CreateWorkflow(ctx, "wide", "sum", time.Hour, steps)
	require.NoError(t, err)
	require.Len(t, ready, n)
	tasks := make([]store.EnqueueOne, n)
	for i, st := range ready {
		tasks[i], err = env.StepTask("wide", st)
		require.NoError(t, err)
	}
	ids, errs := direct.EnqueueEach(ctx, tasks)
	queued := make([]store.QueuedStep, n)
	for i := range ids {
		require.NoError(t, errs[i])
		queued[i] = store.QueuedStep{Name: ready[i].Name, TaskID: ids[i]}
	}
	_, err = direct.StepsEnqueued(ctx, "wide", queued)
	require.NoError(t, err)
	var old string
	for _, q := range queued {
		if q.Name == steps[n-1].Name {
			old = q.TaskID
		}
	}
	require.NotEmpty(t, old)

	rep, err := Run(ctx, env, false)
	require.NoError(t, err)
	assert.Zero(t, wfProblems(rep), "%+v", rep)

	m.Del("checktest:{q:vq}:waiting") // the last step's task, removed by hand
	rep, err = Run(ctx, env, false)
	require.NoError(t, err)
	assert.Equal(t, []WorkflowStep{{Workflow: "wide", Step: steps[n-1].Name, Task: old}}, rep.VanishedSteps)
	assert.Equal(t, 1, wfProblems(rep), "%+v", rep)
	// A page of steps answered by wf_steps.lua is about 60 bytes a step;
	// all 400 at once would be 24 KB.
	assert.Less(t, meter.largest(), 8<<10, "the largest reply the check read")
	t.Logf("largest reply: %d bytes", meter.largest())

	rep, err = Run(ctx, env, true)
	require.NoError(t, err)
	require.Len(t, rep.Repaired.RequeuedSteps, 1)
	task := rep.Repaired.RequeuedSteps[0].Task
	assert.NotEqual(t, old, task)
	page, ok, err := direct.WorkflowSteps(ctx, "wide", n-1, 1, 1)
	require.NoError(t, err)
	require.True(t, ok)
	require.Len(t, page.Steps, 1)
	assert.Equal(t, task, page.Steps[0].TaskID, "the workflow follows the new task")
	rep, err = Run(ctx, env, false)
	require.NoError(t, err)
	assert.Zero(t, wfProblems(rep), "%+v", rep)
	assert.Less(t, meter.largest(), 8<<10, "the largest reply the check read")
}

// wfProblems counts a report's findings about workflows.
func wfProblems(r Report) int {
	return len(r.LeftoverWorkflows) + len(r.LastingWorkflows) + len(r.StalledSteps) + len(r.LostSteps) +
		len(r.VanishedSteps) + len(r.BrokenWorkflows)
}

// A workflow created before its steps' order was kept cannot be read a
// page at a time: its steps are looked at whole, and its stalled step
// found as any other's.
func TestCheckReadsAWorkflowWithoutOrderWhole(t *testing.T) {
	env, m := newEnv(t)
	env.StepsPage = 1
	ctx := context.Background()
	for _, id := range []string{"old", "new"} {
		_, _, err := env.Store.CreateWorkflow(ctx, id, "sum", time.Hour, chain())
		require.NoError(t, err)
	}
	m.Del("checktest:{wf:old}:order")
	rep, err := Run(ctx, env, false)
	require.NoError(t, err)
	assert.Equal(t, []WorkflowStep{{Workflow: "new", Step: "a"}, {Workflow: "old", Step: "a"}}, rep.StalledSteps)
	assert.Equal(t, 2, wfProblems(rep), "%+v", rep)
}

// The pages of one workflow judged together are looked at together: each
// page's ready step is found stalled, none hidden by another page's.
func TestCheckJudgesAWorkflowsPagesTogether(t *testing.T) {
	env, _ := newEnv(t)
	env.StepsPage = 10
	ctx := context.Background()
	steps := make([]store.WorkflowStep, 30)
	for i := range steps {
		steps[i] = store.WorkflowStep{Name: fmt.Sprintf("s%02d", i), Spec: "q", Place: i}
		if i%10 != 0 {
			steps[i].Parents = []string{"s00"}
			steps[0].Kids = append(steps[0].Kids, steps[i].Name)
		}
	}
	_, ready, err := env.Store.CreateWorkflow(ctx, "paged", "sum", time.Hour, steps)
	require.NoError(t, err)
	require.Len(t, ready, 3, "one ready step a page")
	rep, err := Run(ctx, env, false)
	require.NoError(t, err)
	assert.Equal(t, []WorkflowStep{{Workflow: "paged", Step: "s00"}, {Workflow: "paged", Step: "s10"}, {Workflow: "paged", Step: "s20"}}, rep.StalledSteps)
}

// A workflow read whole (created before its steps' order was kept) whose
// ids hash holds a type worqr never writes there is reported broken,
// once, when the look at its steps finds it so: it is not left unjudged
// and unreported.
func TestCheckReportsAWorkflowReadWholeBrokenAtItsStepsLook(t *testing.T) {
	env, m := newEnv(t)
	ctx := context.Background()
	_, _, err := env.Store.CreateWorkflow(ctx, "old", "sum", time.Hour, chain())
	require.NoError(t, err)
	_, err = env.Store.StepsEnqueued(ctx, "old", []store.QueuedStep{{Name: "a", TaskID: "t1"}})
	require.NoError(t, err)
	m.Del("checktest:{wf:old}:order")
	m.Del("checktest:{wf:old}:ids")
	require.NoError(t, m.Set("checktest:{wf:old}:ids", "not a hash"))
	rep, err := Run(ctx, env, false)
	require.NoError(t, err)
	assert.Equal(t, []string{"old"}, rep.BrokenWorkflows)
	assert.Equal(t, 1, wfProblems(rep), "%+v", rep)
}
