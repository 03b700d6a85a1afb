package store

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The scripts that read: each answers from the keys seeded, and leaves
// them as they were (registered.lua and stats.lua, which write a field or
// two, leave the rest).

// registered.lua: a queue that exists is confirmed in its meta hash; one
// deleted in between (no meta hash) is not made again.
func TestRegisteredScript(t *testing.T) {
	t.Parallel()
	t.Run("a queue that exists is confirmed", func(t *testing.T) {
		t.Parallel()
		e := newScriptEnv(t, "registered.lua")
		e.seed(keyState{"meta": hash{"name": "q", "limit": "3"}})
		require.NoError(t, e.s.RegisterQueue(e.ctx, "q"))
		e.expect(keyState{
			"meta":   hash{"name": "q", "limit": "3", "registered": "1"},
			"queues": set{"q"},
		})
	})
	t.Run("a queue deleted in between is not confirmed", func(t *testing.T) {
		t.Parallel()
		e := newScriptEnv(t, "registered.lua")
		require.NoError(t, e.s.RegisterQueue(e.ctx, "q"))
		e.expect(keyState{"queues": set{"q"}})
	})
}

// states.lua: each pid's state while it is the worker's and its lease is
// live; lost otherwise, and every one once the lease is gone.
func TestStatesScript(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		lease int64 // ms from the clock
		want  []State
	}{
		{"a live lease", hour, []State{Active, Cancelled, Deleted, Lost, Lost}},
		{"a lease gone", -1, []State{Lost, Lost, Lost, Lost, Lost}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newScriptEnv(t, "states.lua")
			w, other := e.worker(), e.worker()
			seeded := keyState{
				"leases": zset{w: float64(e.clockMs() + tc.lease)},
				"procs": hash{
					"1": "a" + w + "10:x",
					"2": "c" + w + "11:y",
					"3": "d" + w + "12:z",
					"4": "a" + other + "13:theirs",
				},
			}
			e.seed(seeded)
			got, err := e.s.States(e.ctx, "q", w, []string{"1", "2", "3", "4", "5"})
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
			e.expect(seeded)
		})
	}
}

// queue_info.lua: the counts of every level and the groups, the controls,
// and when the task waiting longest became due, at one instant.
func TestQueueInfoScript(t *testing.T) {
	t.Parallel()
	t.Run("counts and controls", func(t *testing.T) {
		t.Parallel()
		e := newScriptEnv(t, "queue_info.lua")
		w := e.worker()
		seeded := keyState{
			"meta":     hash{"name": "q", "paused": "1", "limit": "5", "rate": "10", "per": "60000", "wx": "2", "glimit": "3"},
			"waiting":  list{"13:b", "12:a"},
			"high":     list{"20,d5:h"},
			"low":      list{"30:l"},
			"delayed":  zset{"40:later": 1e18},
			"procs":    hash{"1": "a" + w + "50:x", "2": "a" + w + "51,w3:y"},
			"dead":     zset{"60:gone": 1},
			"gwait":    zset{"g1\x00" + "0" + "0000000000000001" + "70,gg1:in g1": 0},
			"gready":   zset{"g1": 1, "g2": inf},
			"grunning": hash{"g2": "1", "g3": "1"},
		}
		e.seed(seeded)
		got, err := e.s.QueueState(e.ctx, "q")
		require.NoError(t, err)
		assert.Equal(t, QueueState{
			Waiting: 5, Delayed: 1, InFlight: 2, Dead: 1, InFlightWeight: 4,
			Paused: true, Limit: 5, Rate: 10, Per: 60_000_000_000, Oldest: 5,
			Groups: 3, GroupsReady: 1, GroupLimit: 3,
		}, got)
		e.expect(seeded)
	})
	t.Run("grouped tasks count for the oldest", func(t *testing.T) {
		t.Parallel()
		e := newScriptEnv(t, "queue_info.lua")
		seeded := keyState{
			"meta":    hash{"name": "q"},
			"waiting": list{"90:plain"},
			// g1's next task is due at 0x40 (its 'd'), g2's (held at its
			// limit) was enqueued at 0x30: the oldest of all.
			"gwait": zset{
				"g1\x00" + "2" + "0000000000000050" + "50,gg1,d40:a": 0,
				"g1\x00" + "2" + "0000000000000060" + "60,gg1:b":     0,
				"g2\x00" + "2" + "0000000000000030" + "30,gg2:c":     0,
			},
			"gready": zset{"g1": 1, "g2": inf},
		}
		e.seed(seeded)
		got, err := e.s.QueueState(e.ctx, "q")
		require.NoError(t, err)
		assert.EqualValues(t, 4, got.Waiting)
		assert.EqualValues(t, 0x30, got.Oldest, "the held group's task")
		e.expect(seeded)
	})
	t.Run("a queue whose only waiting task is grouped has an oldest", func(t *testing.T) {
		t.Parallel()
		e := newScriptEnv(t, "queue_info.lua")
		seeded := keyState{
			"meta":   hash{"name": "q"},
			"gwait":  zset{"g1\x00" + "2" + "0000000000000061" + "61,gg1:a": 0},
			"gready": zset{"g1": 1},
		}
		e.seed(seeded)
		got, err := e.s.QueueState(e.ctx, "q")
		require.NoError(t, err)
		assert.EqualValues(t, 1, got.Waiting)
		assert.EqualValues(t, 0x61, got.Oldest)
		e.expect(seeded)
	})
	t.Run("a queue that does not exist reads empty", func(t *testing.T) {
		t.Parallel()
		e := newScriptEnv(t, "queue_info.lua")
		got, err := e.s.QueueState(e.ctx, "q")
		require.NoError(t, err)
		assert.Equal(t, QueueState{}, got)
		e.expect(keyState{})
	})
}

// stats.lua: a client's counts go to the current minute of the queue's
// stats hash; a queue deleted (its meta hash gone) takes none.
func TestStatsScript(t *testing.T) {
	t.Parallel()
	t.Run("counts go to the current minute", func(t *testing.T) {
		t.Parallel()
		e := newScriptEnv(t, "stats.lua")
		e.statsOn()
		e.seed(keyState{"meta": hash{"name": "q"}})
		before := e.clockMs() / 60_000
		require.NoError(t, e.s.scripts.Stats.Exec(e.ctx, e.s.rdb, []string{e.k.Stats, e.k.Meta}, []string{"s=2 w3=1 ws=7 zz=5"}).Error())
		got := e.dump()
		cur := e.within(num(t, got["stats"].(hash)["cur"]), before, e.clockMs()/60_000, "the minute")
		e.same(keyState{
			"meta":  hash{"name": "q"},
			"stats": hash{"cur": decOf(cur), "c:s": "2", "c:w3": "1", "c:ws": "7"},
		}, got)
	})
	t.Run("a deleted queue takes none", func(t *testing.T) {
		t.Parallel()
		e := newScriptEnv(t, "stats.lua")
		e.statsOn()
		require.NoError(t, e.s.scripts.Stats.Exec(e.ctx, e.s.rdb, []string{e.k.Stats, e.k.Meta}, []string{"s=2"}).Error())
		e.expect(keyState{})
	})
}

// outcome.lua: a kept outcome while it has not expired; else, when asked
// to look, whether one will come and why not.
func TestOutcomeScript(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		id   string
		look bool
		want OutcomeState
	}{
		{"kept", "71", false, OutcomeKept},
		{"expired, not looking", "72", false, OutcomeNone},
		{"expired dead letter, looking", "72", true, OutcomeNone},
		{"pending", "70", false, OutcomeComing},
		{"retained waiting, not listed", "73", true, OutcomeComing},
		{"not retained, delayed", "74", true, OutcomeUnkept},
		{"retained in flight, cancelled", "75", true, OutcomeCanceled},
		{"retained in flight, queue deleted", "76", true, OutcomeDeleted},
		{"not retained, in flight", "77", true, OutcomeUnkept},
		{"not retained, dead", "78", true, OutcomeUnkept},
		{"unknown", "79", true, OutcomeNone},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newScriptEnv(t, "outcome.lua")
			w := e.worker()
			now := e.clockMs()
			seeded := keyState{
				"retained": zset{"70": inf, "71": float64(now + hour), "72": float64(now - 1)},
				"results": hash{
					"71": "71,sok,S1000,E2000,a1:result",
					"72": "72,sdead,S1,E2,a1:expired",
				},
				"dead":    zset{"72,R:expired": 1, "78:dead": 2},
				"waiting": list{"80:other", "73,R:waits"},
				"delayed": zset{"74:later": 5},
				"procs": hash{
					"1": "c" + w + "75,R:cancelled",
					"2": "d" + w + "76,R:deleted",
					"3": "a" + w + "77:running",
				},
			}
			e.seed(seeded)
			r, got, err := e.s.TaskOutcome(e.ctx, "q", tc.id, tc.look)
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
			if tc.want == OutcomeKept {
				assert.Equal(t, Result{ID: "71", Status: "ok", Started: 1000, Ended: 2000, Expires: now + hour, Attempts: 1, Body: "result"}, r)
			}
			e.expect(seeded)
		})
	}
}

// dead_list.lua: the dead letters newest first, from an offset, each with
// its last error and its payload cut; an offset past the end lists none.
func TestDeadListScript(t *testing.T) {
	t.Parallel()
	e := newScriptEnv(t, "dead_list.lua")
	seeded := keyState{
		"dead":   zset{"31,Kx:payload": 1000, "32:pp": 2000, "33:newest": 3000},
		"errors": hash{"31": "boom"},
	}
	e.seed(seeded)
	got, err := e.s.DeadLetters(e.ctx, "q", 1, 10, 2)
	require.NoError(t, err)
	require.Len(t, got, 2)
	assert.Equal(t, []string{"32", "pp", "", "31", "pa", "boom"},
		[]string{got[0].Task.ID, got[0].Task.Payload, got[0].Error, got[1].Task.ID, got[1].Task.Payload, got[1].Error})
	assert.Equal(t, []int{2, 7}, []int{got[0].Task.Size, got[1].Task.Size}, "the whole sizes")
	assert.Equal(t, "x", got[1].Task.Reason)
	e.expect(seeded)

	got, err = e.s.DeadLetters(e.ctx, "q", 3, 10, 2)
	require.NoError(t, err)
	assert.Empty(t, got)
	e.expect(seeded)
}

// delayed_list.lua: the delayed tasks in due order, a range of them, with
// their payloads cut.
func TestDelayedListScript(t *testing.T) {
	t.Parallel()
	e := newScriptEnv(t, "delayed_list.lua")
	seeded := keyState{"delayed": zset{"41:abcdef": 5000, "42:xy": 6000, "43:last": 7000}}
	e.seed(seeded)
	got, err := e.s.Delayed(e.ctx, "q", 0, -2, 3)
	require.NoError(t, err)
	require.Len(t, got, 2)
	assert.Equal(t, DelayedTask{Task: Task{ID: "41", Payload: "abc", Size: 6}, Due: 5000}, got[0])
	assert.Equal(t, DelayedTask{Task: Task{ID: "42", Payload: "xy", Size: 2}, Due: 6000}, got[1])
	e.expect(seeded)

	got, err = e.s.Delayed(e.ctx, "q", 5, 10, 3)
	require.NoError(t, err)
	assert.Empty(t, got, "a range past the end")
	e.expect(seeded)
}

// procs_list.lua: every process, its task's payload cut, once each.
func TestProcsListScript(t *testing.T) {
	t.Parallel()
	e := newScriptEnv(t, "procs_list.lua")
	w := e.worker()
	// A process's task counts the attempt it runs.
	seeded := keyState{"procs": hash{"p1": "a" + w + "51:hello", "p2": "c" + w + "52,a2:x"}}
	e.seed(seeded)
	got, err := e.s.Procs(e.ctx, "q", 2)
	require.NoError(t, err)
	slices.SortFunc(got, func(a, b Proc) int { return strings.Compare(a.PID, b.PID) })
	assert.Equal(t, []Proc{
		{PID: "p1", State: Active, Owner: w, Task: Task{ID: "51", Attempts: 1, Payload: "he", Size: 5}},
		{PID: "p2", State: Cancelled, Owner: w, Task: Task{ID: "52", Attempts: 3, Payload: "x", Size: 1}},
	}, got)
	e.expect(seeded)
}

// wf_state.lua: a workflow's fields and, unless brief, its steps; a
// workflow unknown reads as not found.
func TestWorkflowStateScript(t *testing.T) {
	t.Parallel()
	e := newScriptEnv(t, "wf_state.lua")
	id := e.workflow()
	seeded := keyState{
		"wf.flow":    hash{"state": "running", "created": "1000"},
		"wf.steps":   hash{"a": "ok", "b": "w"},
		"wf.ids":     hash{"a": "61"},
		"wf.parents": hash{"b": "a"},
		"wf.spec":    hash{"a": "spec a", "b": "spec b"},
	}
	e.seed(seeded)
	got, ok, err := e.s.WorkflowState(e.ctx, id)
	require.NoError(t, err)
	require.True(t, ok)
	slices.SortFunc(got.Steps, func(a, b StepRecord) int { return strings.Compare(a.Name, b.Name) })
	assert.Equal(t, WorkflowRecord{State: "running", Created: 1000, Steps: []StepRecord{
		{Name: "a", State: "ok", TaskID: "61", Spec: "spec a"},
		{Name: "b", State: "w", Parents: []string{"a"}, Spec: "spec b"},
	}}, got)
	e.expect(seeded)

	got, ok, err = e.s.WorkflowBrief(e.ctx, id)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, WorkflowRecord{State: "running", Created: 1000}, got)
	e.expect(seeded)

	_, ok, err = e.s.WorkflowState(e.ctx, id+"-unknown")
	require.NoError(t, err)
	assert.False(t, ok, "an unknown workflow")
	e.expect(seeded)
}

// wf_steps.lua: a part of a workflow's steps in the order kept at
// create, from a place, with the workflow's counts; a step's parents cut
// to a bound and the rest counted; a spec cut to its queue (a queue's
// name may hold what looks like the spec's next field); a workflow
// without an order reads with no total and no steps; one unknown as not
// found.
func TestWorkflowStepsScript(t *testing.T) {
	t.Parallel()
	e := newScriptEnv(t, "wf_steps.lua")
	id := e.workflow()
	var many []string
	for i := range 12 {
		many = append(many, fmt.Sprintf("p%02d", i))
	}
	odd := `{"q":"x\\\",\"a\":{}","a":{"r":1},"p":"cGF5bG9hZA=="}` // its queue: x\","a":{}
	seeded := keyState{
		"wf.flow":    hash{"state": "running", "created": "1000", "open": "3", "dead": "1"},
		"wf.steps":   hash{"a": "ok", "b": "q", "c": "w", "d": "dead"},
		"wf.ids":     hash{"a": "61", "b": "62", "d": "64"},
		"wf.parents": hash{"b": "a", "c": strings.Join(many, ","), "d": strings.Join(many[:2], ",")},
		"wf.spec":    hash{"a": `{"q":"qa","a":{},"p":"QUFB"}`, "b": odd, "c": "unreadable", "d": `{"q":"qd","a":{}}`},
		"wf.order":   zset{"a": 0, "b": 1, "c": 2, "d": 3},
	}
	e.seed(seeded)
	got, ok, err := e.s.WorkflowSteps(e.ctx, id, 1, 2, 10)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, StepsPage{State: "running", Created: 1000, Total: 4, Open: 3, Dead: 1, Steps: []StepRecord{
		{Name: "b", State: "q", TaskID: "62", Parents: []string{"a"}, Spec: `{"q":"x\\\",\"a\":{}"}`},
		{Name: "c", State: "w", Parents: many[:10], Spec: "unreadable"},
	}, MoreOfEach: []int{0, 2}}, got)
	e.expect(seeded)

	got, ok, err = e.s.WorkflowSteps(e.ctx, id, 0, 10, 2)
	require.NoError(t, err)
	require.True(t, ok)
	require.Len(t, got.Steps, 4, "to the last")
	assert.Equal(t, StepRecord{Name: "a", State: "ok", TaskID: "61", Spec: `{"q":"qa"}`}, got.Steps[0])
	assert.Equal(t, StepRecord{Name: "d", State: "dead", TaskID: "64", Parents: many[:2], Spec: `{"q":"qd"}`}, got.Steps[3])
	assert.Equal(t, []int{0, 0, 10, 0}, got.MoreOfEach, "two listed: c's other ten counted, d's none")
	e.expect(seeded)

	got, ok, err = e.s.WorkflowSteps(e.ctx, id, 4, 10, 10)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, StepsPage{State: "running", Created: 1000, Total: 4, Open: 3, Dead: 1}, got, "past the last step")
	e.expect(seeded)

	require.NoError(t, e.rdb.Do(e.ctx, e.rdb.B().Del().Key(e.s.Keys().Workflow(id).Order).Build()).Error())
	old := keyState{}
	for k, v := range seeded {
		if k != "wf.order" {
			old[k] = v
		}
	}
	got, ok, err = e.s.WorkflowSteps(e.ctx, id, 0, 10, 10)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, StepsPage{State: "running", Created: 1000, Total: -1, Open: 3, Dead: 1}, got, "created before the order was kept")
	e.expect(old)

	_, ok, err = e.s.WorkflowSteps(e.ctx, id+"-unknown", 0, 10, 10)
	require.NoError(t, err)
	assert.False(t, ok, "an unknown workflow")
	e.expect(old)
}

// wf_results.lua: the results of a step's parents that succeeded; a step
// the workflow does not have reads as not found.
func TestWorkflowResultsScript(t *testing.T) {
	t.Parallel()
	e := newScriptEnv(t, "wf_results.lua")
	id := e.workflow()
	seeded := keyState{
		"wf.flow":    hash{"state": "running", "created": "1000"},
		"wf.steps":   hash{"a": "ok", "c": "r", "b": "w"},
		"wf.parents": hash{"b": "a,c"},
		"wf.results": hash{"a": "result of a"},
	}
	e.seed(seeded)
	got, ok, err := e.s.StepResults(e.ctx, id, "b")
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, map[string][]byte{"a": []byte("result of a")}, got)
	e.expect(seeded)

	_, ok, err = e.s.StepResults(e.ctx, id, "nope")
	require.NoError(t, err)
	assert.False(t, ok)
	e.expect(seeded)
}

// flow_read.lua: per notice, when it was written and its task's kept
// outcome; a notice gone (carried already) reads as not found.
func TestFlowReadScript(t *testing.T) {
	t.Parallel()
	e := newScriptEnv(t, "flow_read.lua")
	seeded := keyState{
		"flows":   zset{"wf1.a,61,ok": 1234567, "wf1.b,62,dead": 1234568},
		"results": hash{"61": "61,sok,S1,E2,a1:body"},
	}
	e.seed(seeded)
	var notices []Notice
	for _, raw := range []string{"wf1.a,61,ok", "wf1.b,62,dead", "wf1.c,63,ok"} {
		n, ok := ParseNotice(raw)
		require.True(t, ok)
		notices = append(notices, n)
	}
	got, err := e.s.FlowRead(e.ctx, "q", notices)
	require.NoError(t, err)
	assert.Equal(t, []NoticeRead{
		{At: 1234567, Found: true, Kept: true, Result: Result{ID: "61", Status: "ok", Started: 1, Ended: 2, Attempts: 1, Body: "body"}},
		{At: 1234568, Found: true},
		{},
	}, got)
	e.expect(seeded)
}

// check_registry.lua: both registries, and each candidate judged: whether
// it is registered, has a queue set, and which of its queues the set lacks.
func TestCheckRegistryScript(t *testing.T) {
	t.Parallel()
	e := newScriptEnv(t, "check_registry.lua")
	w, gone, stray := e.worker(), e.worker(), e.worker()
	now := e.clockMs()
	seeded := keyState{
		"workers":    zset{w: float64(now + 60_000), gone: float64(now - 5_000)},
		"queues":     set{"q", "r"},
		"wq:" + w:    set{"q"},
		"wq:" + gone: set{"q", "r"},
	}
	e.seed(seeded)
	got, err := e.s.ReadRegistry(e.ctx, map[string][]string{w: {"q", "r"}, gone: {"r"}, stray: {"q"}}, e.s.CheckScripts())
	require.NoError(t, err)
	assert.Equal(t, map[string]bool{"q": true, "r": true}, got.Queues)
	require.Len(t, got.Workers, 2)
	assert.InDelta(t, 60_000, got.Workers[w], 5_000)
	assert.InDelta(t, -5_000, got.Workers[gone], 5_000)
	assert.Equal(t, map[string]Judgement{
		w:     {Registered: true, HasSet: true, Missing: []string{"r"}},
		gone:  {Registered: true, HasSet: true, Missing: []string{}},
		stray: {Registered: false, HasSet: false, Missing: []string{"q"}},
	}, got.Judged)
	e.expect(seeded)
}
