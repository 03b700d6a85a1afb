package store

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// deadSeed is a queue, deleted since (its meta hash without a name), with
// three dead letters: one retained with its outcome, one of high
// priority, and one whose id needs its pattern escaped.
func deadSeed(w string) keyState {
	return keyState{
		"meta": hash{"tid": "7"},
		"dead": zset{
			"71,a3,f3,r1,h1,uabc,D5,W" + w + ",Kerror,m5,R1000:x": 5,
			"72,ph,a1,D6,W" + w + ",Kpoison:y":                    6,
			"7*,D7:z":                                             7,
		},
		"errors":   hash{"71": "boom", "72": "died", "7*": "odd"},
		"results":  hash{"71": "71,sdead,S1,E5,a3,Kerror:boom", "70": "70,sok,S1,E2,a1:kept"},
		"retained": zset{"71": 9, "70": 9},
		"idle":     zset{"r1": 1, "r2": 2, "r3": 3, "r4": 4, "r5": 5},
	}
}

// dead_requeue.lua: the dead letter goes back to the back of its list as a
// task never started (its counts and death fields gone, its budget and
// payload kept, due now), its error and its outcome dropped, listed as
// pending again if retained; a queue that lost its name is made again and
// registered.
func TestDeadRequeueScript(t *testing.T) {
	t.Parallel()
	e := newScriptEnv(t, "dead_requeue.lua")
	w := e.worker()
	e.seed(deadSeed(w))
	before := e.clock()
	ok, err := e.s.RequeueDead(e.ctx, "q", "71")
	require.NoError(t, err)
	require.True(t, ok)
	got := e.dump()
	due := e.within(field(t, got["waiting"].(list)[0], "d", 16), before, e.clock(), "when it became due")
	want := deadSeed(w)
	want["meta"] = hash{"tid": "7", "name": "q", "registered": "1"}
	want["queues"] = set{"q"}
	want["waiting"] = list{"71,m5,R1000,d" + hexOf(due) + ":x"}
	delete(want["dead"].(zset), "71,a3,f3,r1,h1,uabc,D5,W"+w+",Kerror,m5,R1000:x")
	delete(want["errors"].(hash), "71")
	delete(want["results"].(hash), "71")
	want["retained"] = zset{"71": inf, "70": 9}
	want["idle"] = zset{"r3": 3, "r4": 4, "r5": 5}
	require.Equal(t, want, got)

	ok, err = e.s.RequeueDead(e.ctx, "q", "99")
	require.NoError(t, err)
	assert.False(t, ok)
	e.expect(got)
}

// dead_requeue_all.lua: every dead letter goes back, oldest first out.
func TestDeadRequeueAllScript(t *testing.T) {
	t.Parallel()
	e := newScriptEnv(t, "dead_requeue_all.lua")
	w := e.worker()
	e.seed(deadSeed(w))
	before := e.clock()
	n, err := e.s.RequeueAllDead(e.ctx, "q")
	require.NoError(t, err)
	assert.EqualValues(t, 3, n)
	got := e.dump()
	after := e.clock()
	waiting := got["waiting"].(list)
	require.Len(t, waiting, 2)
	due1 := e.within(field(t, waiting[1], "d", 16), before, after, "when the first became due")
	due2 := e.within(field(t, waiting[0], "d", 16), due1, after, "when the last became due")
	due3 := e.within(field(t, got["high"].(list)[0], "d", 16), before, after, "when the high one became due")
	e.same(keyState{
		"meta":     hash{"tid": "7", "name": "q", "registered": "1"},
		"queues":   set{"q"},
		"waiting":  list{"7*,d" + hexOf(due2) + ":z", "71,m5,R1000,d" + hexOf(due1) + ":x"},
		"high":     list{"72,ph,d" + hexOf(due3) + ":y"},
		"results":  hash{"70": "70,sok,S1,E2,a1:kept"},
		"retained": zset{"71": inf, "70": 9},
		"idle":     zset{"r5": 5},
	}, got)
}

// dead_delete.lua and dead_purge.lua: a dead letter goes with its error,
// or all of them do; other errors (of tasks waiting for a retry) stay.
func TestDeadDeleteScripts(t *testing.T) {
	t.Parallel()
	t.Run("one", func(t *testing.T) {
		t.Parallel()
		e := newScriptEnv(t, "dead_delete.lua")
		w := e.worker()
		e.seed(deadSeed(w))
		ok, err := e.s.DeleteDead(e.ctx, "q", "7*")
		require.NoError(t, err)
		require.True(t, ok)
		ok, err = e.s.DeleteDead(e.ctx, "q", "7")
		require.NoError(t, err)
		require.False(t, ok, "a prefix of an id names no dead letter")
		want := deadSeed(w)
		delete(want["dead"].(zset), "7*,D7:z")
		delete(want["errors"].(hash), "7*")
		e.expect(want)
	})
	t.Run("all", func(t *testing.T) {
		t.Parallel()
		e := newScriptEnv(t, "dead_purge.lua")
		w := e.worker()
		st := deadSeed(w)
		st["errors"].(hash)["80"] = "a retry's"
		e.seed(st)
		n, err := e.s.PurgeDead(e.ctx, "q")
		require.NoError(t, err)
		assert.EqualValues(t, 3, n)
		delete(st, "dead")
		st["errors"] = hash{"80": "a retry's"}
		e.expect(st)
	})
}
