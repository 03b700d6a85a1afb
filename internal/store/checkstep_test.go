package store

import (
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// check_step_gone.lua answers gone only for a task listed as pending in
// the retained set and in none of the places a task lives (waiting,
// in flight, delayed, dead, the groups' waiting set), changing nothing;
// a search stopped at its bound answers none gone.
func TestCheckStepGoneScript(t *testing.T) {
	t.Parallel()
	e := newScriptEnv(t, "check_step_gone.lua")
	inf := math.Inf(1)
	owner := strings.Repeat("o", 36)
	e.seed(keyState{
		"retained": zset{"a": inf, "b": inf, "c": inf, "d": 5, "e": inf, "f": inf, "g": inf, "h": inf},
		"waiting":  list{"a,R1:p"},
		"high":     list{"h,R1,ph:p"},
		"procs":    hash{"1": "r" + owner + "b,R1:p"},
		"delayed":  zset{"e,R1,d1:p": 1},
		"dead":     zset{"f,R1:p": 1},
		"gwait":    zset{"grp\x000" + strings.Repeat("0", 16) + "g,R1,ggrp:p": 0},
	})
	before := e.dump()
	got, err := e.s.GoneTasks(e.ctx, "q", []string{"a", "b", "c", "d", "e", "f", "g", "h", "i"}, e.s.CheckScripts())
	require.NoError(t, err)
	assert.Equal(t, []bool{false, false, true, false, false, false, false, false, false}, got,
		"only c: pending and nowhere (d ended, i not listed)")
	e.expect(before)

	// A search stopped at its bound confirms none.
	k := e.k
	vals, err := e.s.CheckScripts().StepGone.Exec(e.ctx, e.rdb,
		[]string{k.Procs, k.Delayed, k.Dead, k.High, k.Waiting, k.Low, k.GroupWait, k.Gather, k.Retained}, []string{"3", "1000000", "c"}).AsIntSlice()
	require.NoError(t, err)
	assert.Equal(t, []int64{1, 0}, vals, "partial")
	e.expect(before)
}

// check_step_requeue.lua enqueues a step anew only while its old task is
// pending and in no place of the queue, giving the step's unique key to
// the new task and keeping the old task's pending mark; once the key has
// a new holder it answers that holder and changes nothing.
// check_step_forget.lua then drops the old task's mark.
func TestCheckStepRequeueScript(t *testing.T) {
	t.Parallel()
	e := newScriptEnv(t, "check_step_requeue.lua", "check_step_forget.lua")
	sets := e.s.CheckScripts()
	inf := math.Inf(1)
	task := EnqueueOne{Queue: "q", Payload: []byte("pay"), Args: EnqueueArgs{Flow: "w.s", Unique: "worqr/workflow/w/s", UniqueTTL: time.Hour, Retain: time.Second}}
	sha := uniqueSum(task.Args.Unique)
	seeded := keyState{
		"retained":  zset{"a0": inf},
		"unique":    hash{sha: "a0"},
		"uniquettl": zset{sha: 9e12},
		"meta":      hash{"name": "q", "registered": "1", "tid": "a0"},
		"waiting":   list{"a0" + task.Args.fields() + ":pay"},
	}
	e.seed(seeded)
	done, id, err := e.s.RequeueStep(e.ctx, "q", "a0", task, sets)
	require.NoError(t, err)
	assert.Equal(t, []string{StepPresent, ""}, []string{done, id}, "its task waits")
	e.expect(seeded)

	require.NoError(t, e.rdb.Do(e.ctx, e.rdb.B().Del().Key(e.k.Waiting).Build()).Error())
	delete(seeded, "waiting")
	from := e.clock()
	done, id, err = e.s.RequeueStep(e.ctx, "q", "a0", task, sets)
	require.NoError(t, err)
	to := e.clock()
	require.Equal(t, StepEnqueued, done)
	n, err := strconv.ParseInt(id, 16, 64)
	require.NoError(t, err)
	require.True(t, n >= from && n <= to, "the new id is the clock's µs")
	got := e.dump()
	exp, ok := got["uniquettl"].(zset)
	require.True(t, ok)
	assert.InDelta(t, float64(n/1000+3600*1000), exp[sha], 1, "held for an hour from now")
	enqueued := keyState{
		"retained":  zset{"a0": inf, id: inf},
		"unique":    hash{sha: id},
		"uniquettl": zset{sha: exp[sha]},
		"meta":      hash{"name": "q", "registered": "1", "tid": strconv.FormatInt(n, 10)},
		"waiting":   list{id + task.Args.fields() + ":pay"},
	}
	e.same(enqueued, got, "the step enqueued anew, the old task's mark kept")

	done, held, err := e.s.RequeueStep(e.ctx, "q", "a0", task, sets)
	require.NoError(t, err)
	assert.Equal(t, []string{StepHeld, id}, []string{done, held}, "a second run answers the new task")
	e.expect(enqueued)

	forgot, err := e.s.ForgetTask(e.ctx, "q", "a0", task.Args.Unique, sets)
	require.NoError(t, err)
	assert.True(t, forgot)
	enqueued["retained"] = zset{id: inf}
	e.expect(enqueued)
	forgot, err = e.s.ForgetTask(e.ctx, "q", id, task.Args.Unique, sets)
	require.NoError(t, err)
	assert.False(t, forgot, "the key's holder keeps its mark")
	done, _, err = e.s.RequeueStep(e.ctx, "q", "a0", task, sets)
	require.NoError(t, err)
	assert.Equal(t, StepEnded, done, "the old task no longer pending")
	e.expect(enqueued)
}

// check_step_swap.lua gives a queued step the new task's id only while
// the workflow runs and names the old one.
func TestCheckStepSwapScript(t *testing.T) {
	t.Parallel()
	e := newScriptEnv(t, "check_step_swap.lua")
	id := e.workflow()
	sets := e.s.CheckScripts()
	_, _, err := e.s.CreateWorkflow(e.ctx, id, "sum", time.Minute, diamond())
	require.NoError(t, err)
	_, err = e.s.StepsEnqueued(e.ctx, id, []QueuedStep{{Name: "top", TaskID: "t1"}})
	require.NoError(t, err)
	before := e.dump()
	ok, err := e.s.SwapStepTask(e.ctx, id, "top", "t0", "t2", sets)
	require.NoError(t, err)
	assert.False(t, ok, "another task named")
	ok, err = e.s.SwapStepTask(e.ctx, id, "left", "", "t2", sets)
	require.NoError(t, err)
	assert.False(t, ok, "a step not queued")
	e.expect(before)
	ok, err = e.s.SwapStepTask(e.ctx, id, "top", "t1", "t2", sets)
	require.NoError(t, err)
	assert.True(t, ok)
	before["wf.ids"] = hash{"top": "t2"}
	e.expect(before)
	ok, err = e.s.SwapStepTask(e.ctx, id, "top", "t1", "t3", sets)
	require.NoError(t, err)
	assert.False(t, ok, "a second run")
	e.expect(before)
}
