package store

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// deadHold is the score of a group held on its sequence's dead task
// (GROUP_DEAD_HOLD in common/groups.lua).
const deadHold = 1 << 53

// bury.lua and dequeue.lua: with the queue holding its sequences on a
// dead task, a sequence's task that dies holds its group (its id in the
// limits hash, the group scored deadHold, counted in gdead); a group that
// is no sequence is not held; a dead letter trimmed by the bounds
// releases its group's hold. A dequeue starts nothing of a held group,
// and scores one it meets with a turn deadHold.
func TestSequenceHoldBuryScript(t *testing.T) {
	t.Parallel()
	e := newScriptEnv(t, "bury.lua", "dequeue.lua")
	w := e.worker()
	now := e.clockMs()
	lease := float64(now + hour)
	e.seed(keyState{
		"meta":     hash{"name": "q", "seq": "9", "glimit": "1", "ghold": "1", "gdead": "1"},
		"leases":   zset{w: lease},
		"procs":    hash{"1": "a" + w + "11,gs:s1", "2": "a" + w + "21,gp:p1"},
		"gwait":    zset{member("s", "12,gs:s2"): 0, member("t", "13,gt:t1"): 0},
		"gready":   zset{"s": inf, "t": deadHold},
		"grunning": hash{"s": "1", "p": "1"},
		"glimits":  hash{"p": "2", "t:d": "9"},
		"dead":     zset{"9,gt,D1:t0": float64(now - 2*hour)},
	})
	before := e.clock()
	for _, pid := range []string{"1", "2"} {
		out, err := e.s.Bury(e.ctx, "q", ProcRef{Worker: w, PID: pid}, "error", "boom", DeadBounds{MaxCount: 10, MaxAge: time.Hour})
		require.NoError(t, err)
		assert.Equal(t, WasActive, out)
	}
	got := e.dump()
	assert.Equal(t, hash{"p": "2", "s:d": "11"}, got["glimits"], "s held on 11; p no sequence; t's dead letter trimmed")
	assert.Equal(t, "1", got["meta"].(hash)["gdead"])
	ready := got["gready"].(zset)
	assert.Equal(t, float64(deadHold), ready["s"])
	e.within(int64(ready["t"]), before, e.clock(), "t's turn, given back")
	assert.Len(t, got["dead"], 2)
	assert.Nil(t, got["grunning"])

	// s meets a dequeue with a turn (as after a task joined it once it
	// was emptied): it starts nothing, and is held again.
	e.seed(keyState{"gready": zset{"s": 1}})
	procs, _, _, err := e.s.Dequeue(e.ctx, "q", w, 5, false)
	require.NoError(t, err)
	require.Len(t, procs, 1)
	assert.Equal(t, "t1", procs[0].Task.Payload)
	got = e.dump()
	assert.Equal(t, zset{"s": deadHold}, got["gready"], "t emptied")
	assert.Len(t, got["gwait"], 1, "s2 waits")
}

// seqHoldSeed is a queue holding two groups on their dead tasks: s,
// with a task waiting, on 11, and u, with none, on 31.
func seqHoldSeed() keyState {
	return keyState{
		"meta":    hash{"name": "q", "registered": "1", "ghold": "1", "gdead": "2"},
		"glimits": hash{"s:d": "11", "u:d": "31", "s": "1"},
		"gready":  zset{"s": deadHold},
		"gwait":   zset{member("s", "12,gs:s2"): 0},
		"dead":    zset{"11,gs,a1,f1,D5,Wx,Kerror:s1": 5, "31,gu,D6:u1": 6, "41,D7:plain": 7},
		"idle":    zset{"r1": 1},
	}
}

// The scripts that take a dead letter out of the dead letters release
// the hold it made (its group gets a turn now; the runtimes are woken),
// and only that one; turning the setting off releases every hold.
func TestSequenceHoldReleaseScripts(t *testing.T) {
	t.Parallel()
	check := func(t *testing.T, e *scriptEnv, before int64, glimits hash, gdead string) keyState {
		t.Helper()
		got := e.dump()
		assert.Equal(t, glimits, got["glimits"])
		assert.Equal(t, gdead, got["meta"].(hash)["gdead"])
		e.within(int64(got["gready"].(zset)["s"]), before, e.clock(), "s's turn")
		assert.Nil(t, got["idle"], "the parked runtime is woken")
		return got
	}
	t.Run("requeue", func(t *testing.T) {
		t.Parallel()
		e := newScriptEnv(t, "dead_requeue.lua")
		e.seed(seqHoldSeed())
		before := e.clock()
		ok, err := e.s.RequeueDead(e.ctx, "q", "11")
		require.NoError(t, err)
		require.True(t, ok)
		got := check(t, e, before, hash{"u:d": "31", "s": "1"}, "1")
		assert.Len(t, got["gwait"], 2, "s1 back in its group, ahead of s2 by its id")
	})
	t.Run("requeue all", func(t *testing.T) {
		t.Parallel()
		e := newScriptEnv(t, "dead_requeue_all.lua")
		e.seed(seqHoldSeed())
		before := e.clock()
		n, err := e.s.RequeueAllDead(e.ctx, "q")
		require.NoError(t, err)
		assert.EqualValues(t, 3, n)
		got := check(t, e, before, hash{"s": "1"}, "")
		assert.Len(t, got["gwait"], 3)
	})
	t.Run("delete", func(t *testing.T) {
		t.Parallel()
		e := newScriptEnv(t, "dead_delete.lua")
		e.seed(seqHoldSeed())
		ok, err := e.s.DeleteDead(e.ctx, "q", "41")
		require.NoError(t, err)
		require.True(t, ok)
		got := e.dump()
		assert.Equal(t, seqHoldSeed()["glimits"], got["glimits"], "a plain dead letter holds nothing")
		assert.Equal(t, zset{"r1": 1}, got["idle"], "and wakes nobody")
		before := e.clock()
		ok, err = e.s.DeleteDead(e.ctx, "q", "11")
		require.NoError(t, err)
		require.True(t, ok)
		check(t, e, before, hash{"u:d": "31", "s": "1"}, "1")
	})
	t.Run("purge", func(t *testing.T) {
		t.Parallel()
		e := newScriptEnv(t, "dead_purge.lua")
		e.seed(seqHoldSeed())
		before := e.clock()
		n, err := e.s.PurgeDead(e.ctx, "q")
		require.NoError(t, err)
		assert.EqualValues(t, 3, n)
		check(t, e, before, hash{"s": "1"}, "")
	})
	t.Run("off", func(t *testing.T) {
		t.Parallel()
		e := newScriptEnv(t, "control.lua")
		e.seed(seqHoldSeed())
		before := e.clock()
		require.NoError(t, e.s.ControlSequenceHold(e.ctx, "q", false, false))
		got := e.dump()
		assert.Equal(t, hash{"s": "1"}, got["glimits"])
		assert.Equal(t, hash{"name": "q", "registered": "1"}, got["meta"])
		e.within(int64(got["gready"].(zset)["s"]), before, e.clock(), "s's turn")
		require.NoError(t, e.s.ControlSequenceHold(e.ctx, "q", true, false))
		assert.Equal(t, "1", e.dump()["meta"].(hash)["ghold"])
	})
}
