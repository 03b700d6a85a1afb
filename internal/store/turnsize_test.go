package store

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// turnSizeSeed is a queue with the groups named, each n tasks waiting
// (payloads "<group><i>"), their turns in that order, and meta's fields
// set over name and seq.
func turnSizeSeed(e *scriptEnv, w string, groups []string, n int, meta hash) keyState {
	wait, ready := zset{}, zset{}
	for j, g := range groups {
		for i := range n {
			wait[member(g, fmt.Sprintf("%x,g%s:%s%d", 0x100*(j+1)+i, g, g, i))] = 0
		}
		ready[g] = float64(j + 1)
	}
	m := hash{"name": "q", "seq": "9"}
	for f, v := range meta {
		m[f] = v
	}
	return keyState{
		"meta":   m,
		"leases": zset{w: float64(e.clockMs() + hour)},
		"gwait":  wait,
		"gready": ready,
	}
}

// dequeue.lua: with more groups ready than tasks asked for, a turn is one
// task under the default turn size, so ten groups give one each; under a
// turn size of 8 (the meta field 'gsize') the first group takes 8 and the
// next the 2 left, each moving behind the groups that took nothing.
func TestDequeueGroupTurnSizeScript(t *testing.T) {
	t.Parallel()
	groups := []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l"}
	for _, tc := range []struct {
		size string
		want []string
	}{
		{"", []string{"a0", "b0", "c0", "d0", "e0", "f0", "g0", "h0", "i0", "j0"}},
		{"8", []string{"a0", "a1", "a2", "a3", "a4", "a5", "a6", "a7", "b0", "b1"}},
	} {
		t.Run("size="+tc.size, func(t *testing.T) {
			t.Parallel()
			e := newScriptEnv(t, "dequeue.lua")
			w := e.worker()
			meta := hash{}
			if tc.size != "" {
				meta["gsize"] = tc.size
			}
			e.seed(turnSizeSeed(e, w, groups, 10, meta))
			procs, _, _, err := e.s.Dequeue(e.ctx, "q", w, 10, false)
			require.NoError(t, err)
			assert.ElementsMatch(t, tc.want, payloads(procs))
			ready := e.dump()["gready"].(zset)
			if tc.size == "8" {
				assert.Greater(t, ready["a"], ready["l"], "a moved behind the groups that took nothing")
				assert.Less(t, ready["a"], ready["b"], "b took its turn after a")
			}
		})
	}
}

// dequeue.lua: under a turn size, a group takes no more than its free
// room under its limit: a, limited to 2 with one slot held, takes one and
// is held at its limit; b, limited to 2, takes 2 and is held; c the rest.
func TestDequeueGroupTurnSizeLimitScript(t *testing.T) {
	t.Parallel()
	e := newScriptEnv(t, "dequeue.lua")
	w := e.worker()
	st := turnSizeSeed(e, w, []string{"a", "b", "c"}, 10, hash{"gsize": "8"})
	st["glimits"] = hash{"a": "2", "b": "2"}
	st["grunning"] = hash{"a": "1"}
	e.seed(st)
	procs, _, _, err := e.s.Dequeue(e.ctx, "q", w, 11, false)
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{"a0", "b0", "b1", "c0", "c1", "c2", "c3", "c4", "c5", "c6", "c7"}, payloads(procs))
	got := e.dump()
	assert.Equal(t, inf, got["gready"].(zset)["a"], "a is at its limit")
	assert.Equal(t, inf, got["gready"].(zset)["b"], "b is at its limit")
	assert.Equal(t, hash{"a": "2", "b": "2", "c": "8"}, got["grunning"])
}

// dequeue.lua: a group's turns multiply the turn size: a (2 turns) takes
// 2 turns of 4 in a row, b (1) one of 4.
func TestDequeueGroupTurnSizeTimesTurnsScript(t *testing.T) {
	t.Parallel()
	e := newScriptEnv(t, "dequeue.lua")
	w := e.worker()
	st := turnSizeSeed(e, w, []string{"a", "b", "c"}, 10, hash{"gsize": "4", "gtx": "1"})
	st["glimits"] = hash{"a:t": "2"}
	e.seed(st)
	procs, _, _, err := e.s.Dequeue(e.ctx, "q", w, 12, false)
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{"a0", "a1", "a2", "a3", "a4", "a5", "a6", "a7", "b0", "b1", "b2", "b3"}, payloads(procs))
	assert.Equal(t, hash{"a:t": "2"}, e.dump()["glimits"])
}
