package store

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// turnsSeed is a queue with groups a (turn 1) and b (turn 2), n tasks
// waiting in each, a's own turns 3.
func turnsSeed(e *scriptEnv, w string, n int) keyState {
	wait := zset{}
	for i := range n {
		wait[member("a", fmt.Sprintf("%x,ga:a%d", 0x100+i, i))] = 0
		wait[member("b", fmt.Sprintf("%x,gb:b%d", 0x200+i, i))] = 0
	}
	return keyState{
		"meta":    hash{"name": "q", "seq": "9", "gtx": "1"},
		"leases":  zset{w: float64(e.clockMs() + hour)},
		"gwait":   wait,
		"gready":  zset{"a": 1, "b": 2},
		"glimits": hash{"a:t": "3"},
	}
}

func payloads(procs []Proc) []string {
	var out []string
	for _, p := range procs {
		out = append(out, p.Task.Payload)
	}
	return out
}

// dequeue.lua: a group of 3 turns keeps its place for 3 dequeues of one
// task, its turns used kept with its turn ('<used>/<turn>'), then moves
// behind b, forgetting them; b (one turn) takes one and moves on.
func TestDequeueGroupTurnsScript(t *testing.T) {
	t.Parallel()
	e := newScriptEnv(t, "dequeue.lua")
	w := e.worker()
	e.seed(turnsSeed(e, w, 5))
	var order []string
	take := func() {
		t.Helper()
		procs, _, _, err := e.s.Dequeue(e.ctx, "q", w, 1, false)
		require.NoError(t, err)
		require.Len(t, procs, 1)
		order = append(order, procs[0].Task.Payload)
	}
	take()
	got := e.dump()
	assert.Equal(t, hash{"a:t": "3", "a:u": "1/1"}, got["glimits"], "a used one turn of three, at its turn 1")
	assert.Equal(t, float64(1), got["gready"].(zset)["a"], "a keeps its place")
	take()
	assert.Equal(t, "2/1", e.dump()["glimits"].(hash)["a:u"])
	take()
	got = e.dump()
	assert.Equal(t, hash{"a:t": "3"}, got["glimits"], "a's run is over: its turns used go")
	assert.Greater(t, got["gready"].(zset)["a"], float64(2), "a moved behind b")
	take()
	take()
	take()
	assert.Equal(t, []string{"a0", "a1", "a2", "b0", "a3", "a4"}, order)
	got = e.dump()
	assert.NotContains(t, got["gready"], "a", "a emptied")
	assert.Equal(t, hash{"a:t": "3"}, got["glimits"], "an emptied group keeps no turns used")
}

// dequeue.lua: with fewer turns to give than tasks asked for, a turn is
// a share of them, and a group of 3 turns takes 3 shares in a row: a (3)
// and b (1) for 8 tasks, shares of 2.
func TestDequeueGroupTurnsSharesScript(t *testing.T) {
	t.Parallel()
	e := newScriptEnv(t, "dequeue.lua")
	w := e.worker()
	e.seed(turnsSeed(e, w, 10))
	procs, _, _, err := e.s.Dequeue(e.ctx, "q", w, 8, false)
	require.NoError(t, err)
	assert.Equal(t, []string{"a0", "a1", "a2", "a3", "a4", "a5", "b0", "b1"}, payloads(procs))
	got := e.dump()
	assert.Equal(t, hash{"a:t": "3"}, got["glimits"])
	assert.Less(t, got["gready"].(zset)["a"], got["gready"].(zset)["b"], "a's run came first")

	// 4 tasks: a (its turn first) takes its 3 shares of 1, b its one.
	procs, _, _, err = e.s.Dequeue(e.ctx, "q", w, 4, false)
	require.NoError(t, err)
	assert.Equal(t, []string{"a6", "a7", "a8", "b2"}, payloads(procs))
}

// dequeue.lua: turns used that belong to another turn of the group (it
// left the ready set and came back, or was held and let go) count
// nothing: a new run; turns used over a lowered turns leave one; a
// group held at its limit forgets its turns used; the default turns
// apply to every group without its own.
func TestDequeueGroupTurnsStaleScript(t *testing.T) {
	t.Parallel()
	e := newScriptEnv(t, "dequeue.lua")
	w := e.worker()
	st := turnsSeed(e, w, 6)
	st["glimits"] = hash{"a:t": "3", "a:u": "2/7", "b:u": "5/2", "b": "1"}
	st["meta"] = hash{"name": "q", "seq": "9", "gtx": "1", "gturns": "2"}
	e.seed(st)
	procs, _, _, err := e.s.Dequeue(e.ctx, "q", w, 1, false)
	require.NoError(t, err)
	assert.Equal(t, []string{"a0"}, payloads(procs))
	assert.Equal(t, "1/1", e.dump()["glimits"].(hash)["a:u"], "a's turns used were of turn 7: a new run")
	for range 2 {
		_, _, _, err = e.s.Dequeue(e.ctx, "q", w, 1, false)
		require.NoError(t, err)
	}
	// b (limit 1, 2 turns by default, 5 used at its turn: one left) takes
	// one and is held at its limit: its turns used go.
	procs, _, _, err = e.s.Dequeue(e.ctx, "q", w, 1, false)
	require.NoError(t, err)
	assert.Equal(t, []string{"b0"}, payloads(procs))
	got := e.dump()
	assert.Equal(t, hash{"a:t": "3", "b": "1"}, got["glimits"])
	assert.Equal(t, inf, got["gready"].(zset)["b"])
}

// dequeue.lua: a queue without turns reads no turns (the same calls as
// before they existed), and leaves stray turns used alone.
func TestDequeueWithoutTurnsReadsNoneScript(t *testing.T) {
	t.Parallel()
	e := newScriptEnv(t, "dequeue.lua")
	w := e.worker()
	st := turnsSeed(e, w, 2)
	st["meta"] = hash{"name": "q", "seq": "9"}
	st["glimits"] = hash{"a:t": "3"}
	e.seed(st)
	procs, _, _, err := e.s.Dequeue(e.ctx, "q", w, 2, false)
	require.NoError(t, err)
	assert.Equal(t, []string{"a0", "b0"}, payloads(procs), "a's own turns unread without gtx")
	assert.Equal(t, hash{"a:t": "3"}, e.dump()["glimits"])
}

// control.lua: turns are set and removed, a group's own marking gtx; the
// default removed with no group's own left forgets every turns used.
func TestControlGroupTurnsScript(t *testing.T) {
	t.Parallel()
	e := newScriptEnv(t, "control.lua")
	e.seed(keyState{"meta": hash{"name": "q", "registered": "1"}})
	require.NoError(t, e.s.ControlGroupTurns(e.ctx, "q", "", 2, false))
	require.NoError(t, e.s.ControlGroupTurns(e.ctx, "q", "p:1", 5, false))
	got := e.dump()
	assert.Equal(t, hash{"name": "q", "registered": "1", "gturns": "2", "gtx": "1"}, got["meta"])
	assert.Equal(t, hash{"p%3A1:t": "5"}, got["glimits"])
	require.NoError(t, e.s.ControlGroupTurns(e.ctx, "q", "p:1", 0, false))
	assert.Nil(t, e.dump()["glimits"])

	e2 := newScriptEnv(t, "control.lua")
	e2.seed(keyState{"meta": hash{"name": "q", "registered": "1", "gturns": "3"}, "glimits": hash{"a:u": "1/5", "b:u": "2/6", "b": "4"}})
	require.NoError(t, e2.s.ControlGroupTurns(e2.ctx, "q", "", 0, false))
	got = e2.dump()
	assert.Equal(t, hash{"b": "4"}, got["glimits"], "no turns left: the turns used go")
	assert.Equal(t, hash{"name": "q", "registered": "1"}, got["meta"])
	assert.ErrorIs(t, e2.s.ControlGroupTurns(e2.ctx, "nope", "", 1, false), ErrNoQueue)
}

// queue_info.lua and groups_list.lua: the default turns, and each group's
// own turns and sequence-hold setting.
func TestGroupTurnsReadScript(t *testing.T) {
	t.Parallel()
	e := newScriptEnv(t, "queue_info.lua", "groups_list.lua")
	seed := keyState{
		"meta":    hash{"name": "q", "gturns": "2"},
		"gwait":   zset{member("a", "11,ga:a1"): 0, member("b", "12,gb:b1"): 0, member("c", "13,gc:c1"): 0},
		"gready":  zset{"a": 1, "b": 2, "c": 3},
		"glimits": hash{"a:t": "4", "a:h": "1", "b:h": "0"},
	}
	e.seed(seed)
	st, err := e.s.QueueState(e.ctx, "q")
	require.NoError(t, err)
	assert.Equal(t, 2, st.GroupTurns)
	gs, err := e.s.GroupsRead(e.ctx, "q", 10)
	require.NoError(t, err)
	assert.Equal(t, 2, gs.DefaultTurns)
	byKey := map[string]GroupState{}
	for _, g := range gs.Groups {
		byKey[g.Key] = g
	}
	assert.Equal(t, 4, byKey["a"].Turns)
	assert.Equal(t, GroupHoldOn, byKey["a"].Hold)
	assert.Equal(t, GroupHoldOff, byKey["b"].Hold)
	assert.Equal(t, GroupHoldAsQueue, byKey["c"].Hold)
	assert.Equal(t, 0, byKey["c"].Turns)
	e.expect(seed)
}

// bury.lua with a group's own sequence-hold setting: on holds its
// sequence though the queue's is off; off does not hold it though the
// queue's is on.
func TestGroupHoldBuryScript(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		queue     bool
		own       string
		held      bool
		wantGdead string
	}{
		{"own on, queue off", false, "1", true, "1"},
		{"own off, queue on", true, "0", false, ""},
		{"as the queue's, on", true, "", true, "1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newScriptEnv(t, "bury.lua")
			w := e.worker()
			meta := hash{"name": "q", "seq": "9", "glimit": "1", "ghx": "1"}
			if tc.queue {
				meta["ghold"] = "1"
			}
			limits := hash{}
			if tc.own != "" {
				limits["s:h"] = tc.own
			}
			st := keyState{
				"meta":     meta,
				"leases":   zset{w: float64(e.clockMs() + hour)},
				"procs":    hash{"1": "a" + w + "11,gs:s1"},
				"gwait":    zset{member("s", "12,gs:s2"): 0},
				"gready":   zset{"s": inf},
				"grunning": hash{"s": "1"},
			}
			if len(limits) > 0 {
				st["glimits"] = limits
			}
			e.seed(st)
			_, err := e.s.Bury(e.ctx, "q", ProcRef{Worker: w, PID: "1"}, "error", "boom", DeadBounds{MaxCount: 10, MaxAge: time.Hour})
			require.NoError(t, err)
			got := e.dump()
			if tc.held {
				assert.Equal(t, "11", got["glimits"].(hash)["s:d"])
				assert.Equal(t, float64(deadHold), got["gready"].(zset)["s"])
			} else {
				assert.NotContains(t, got["glimits"], "s:d")
				assert.Less(t, got["gready"].(zset)["s"], float64(deadHold))
			}
			assert.Equal(t, tc.wantGdead, got["meta"].(hash)["gdead"])
		})
	}
}

// control.lua: a group's own sequence-hold setting is set and removed;
// off, or back to the queue's when that is off, lets its hold go; the
// queue's setting turned off lets every hold go but those of groups whose
// own is on.
func TestControlGroupHoldScript(t *testing.T) {
	t.Parallel()
	seed := keyState{
		"meta":    hash{"name": "q", "registered": "1", "ghold": "1", "ghx": "1", "gdead": "2"},
		"glimits": hash{"s:d": "11", "u:d": "31", "s:h": "1"},
		"gready":  zset{"s": deadHold, "u": deadHold},
		"gwait":   zset{member("s", "12,gs:s2"): 0, member("u", "32,gu:u2"): 0},
	}
	t.Run("queue off", func(t *testing.T) {
		t.Parallel()
		e := newScriptEnv(t, "control.lua")
		e.seed(seed)
		require.NoError(t, e.s.ControlSequenceHold(e.ctx, "q", false, false))
		got := e.dump()
		assert.Equal(t, hash{"s:d": "11", "s:h": "1"}, got["glimits"], "s held by its own setting")
		assert.Equal(t, float64(deadHold), got["gready"].(zset)["s"])
		assert.Less(t, got["gready"].(zset)["u"], float64(deadHold), "u released")
		assert.Equal(t, "1", got["meta"].(hash)["gdead"])
	})
	t.Run("group off", func(t *testing.T) {
		t.Parallel()
		e := newScriptEnv(t, "control.lua")
		e.seed(seed)
		require.NoError(t, e.s.ControlGroupHold(e.ctx, "q", "u", GroupHoldOff, false))
		got := e.dump()
		assert.Equal(t, hash{"s:d": "11", "s:h": "1", "u:h": "0"}, got["glimits"])
		assert.Less(t, got["gready"].(zset)["u"], float64(deadHold), "u released")
		require.NoError(t, e.s.ControlGroupHold(e.ctx, "q", "s", GroupHoldAsQueue, false))
		got = e.dump()
		assert.Equal(t, hash{"s:d": "11", "u:h": "0"}, got["glimits"], "s back to the queue's, which is on: still held")
		assert.Equal(t, float64(deadHold), got["gready"].(zset)["s"])
		assert.Equal(t, "1", got["meta"].(hash)["gdead"])
		require.NoError(t, e.s.ControlGroupHold(e.ctx, "q", "u", GroupHoldOn, false))
		assert.Equal(t, "1", e.dump()["glimits"].(hash)["u:h"])
	})
}
