package store

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// dequeue.lua: tasks leave the front of their lists, high first, into
// processes of the worker whose ids count up from the meta hash's seq
// (seeded ahead of the clock, so the ids are known); the controls hold
// it back; a runtime that got what it asked for leaves the idle set, one
// that got less parks there.
func TestDequeueScript(t *testing.T) {
	t.Parallel()
	t.Run("high first, then normal, each from its front", func(t *testing.T) {
		t.Parallel()
		e := newScriptEnv(t, "dequeue.lua")
		x := e.clock() + 1e9
		w := e.worker()
		lease := float64(e.clockMs() + hour)
		e.seed(keyState{
			"meta":    hash{"name": "q", "seq": decOf(x)},
			"leases":  zset{w: lease},
			"waiting": list{"13:three", "12,a1,eboom:two", "11:one"},
			"high":    list{"21:hi"},
			"idle":    zset{w: 1},
		})
		procs, until, now, err := e.s.Dequeue(e.ctx, "q", w, 3, true)
		require.NoError(t, err)
		assert.Zero(t, until)
		assert.Zero(t, now)
		require.Len(t, procs, 3)
		for i, want := range []struct{ pid, id, err string }{{hexOf(x + 1), "21", ""}, {hexOf(x + 2), "11", ""}, {hexOf(x + 3), "12", "boom"}} {
			assert.Equal(t, want.pid, procs[i].PID)
			assert.Equal(t, want.id, procs[i].Task.ID)
			assert.Equal(t, want.err, procs[i].Task.LastError)
		}
		e.expect(keyState{
			"meta":    hash{"name": "q", "seq": decOf(x + 3)},
			"leases":  zset{w: lease},
			"waiting": list{"13:three"},
			"procs": hash{
				hexOf(x + 1): "a" + w + "21:hi",
				hexOf(x + 2): "a" + w + "11:one",
				hexOf(x + 3): "a" + w + "12,a1,eboom:two",
			},
		})
	})
	t.Run("a retried task's error, read from its header alone", func(t *testing.T) {
		t.Parallel()
		e := newScriptEnv(t, "dequeue.lua")
		x := e.clock() + 1e9
		w := e.worker()
		lease := float64(e.clockMs() + hour)
		// 31 was started before, its error escaped in its header (before
		// its count of starts: fields come in any order); 32 and 33 never
		// were, their payloads holding an ',e', with errors left in the
		// errors hash under their ids, which the dequeue does not read.
		seeded := keyState{
			"meta":    hash{"name": "q", "seq": decOf(x)},
			"leases":  zset{w: lease},
			"waiting": list{"33,uabc:y,eboom", "32:x,eboom", "31,f1,w2" + attemptFields(1, 1, 'r', w, "a, b: 100%", "a, b: 100%") + ",a2,d5:retried"},
			"errors":  hash{"32": "stale", "33": "stale"},
		}
		e.seed(seeded)
		procs, _, _, err := e.s.Dequeue(e.ctx, "q", w, 3, false)
		require.NoError(t, err)
		require.Len(t, procs, 3)
		for i, want := range []struct{ id, err string }{{"31", "a, b: 100%"}, {"32", ""}, {"33", ""}} {
			assert.Equal(t, want.id, procs[i].Task.ID)
			assert.Equal(t, want.err, procs[i].Task.LastError, "task %s", want.id)
		}
		e.expect(keyState{
			"meta":   hash{"name": "q", "seq": decOf(x + 3), "wx": "1"},
			"leases": zset{w: lease},
			"errors": seeded["errors"],
			"procs": hash{
				hexOf(x + 1): "a" + w + seeded["waiting"].(list)[2],
				hexOf(x + 2): "a" + w + "32:x,eboom",
				hexOf(x + 3): "a" + w + "33,uabc:y,eboom",
			},
		})
	})
	t.Run("a runtime that finds too few parks", func(t *testing.T) {
		t.Parallel()
		e := newScriptEnv(t, "dequeue.lua")
		x := e.clock() + 1e9
		w := e.worker()
		lease := float64(e.clockMs() + hour)
		e.seed(keyState{
			"meta":    hash{"name": "q", "seq": decOf(x)},
			"leases":  zset{w: lease},
			"waiting": list{"11:one"},
		})
		before := e.clockMs()
		procs, _, _, err := e.s.Dequeue(e.ctx, "q", w, 2, true)
		require.NoError(t, err)
		require.Len(t, procs, 1)
		got := e.dump()
		parked := e.within(int64(got["idle"].(zset)[w]), before, e.clockMs(), "when it parked")
		e.same(keyState{
			"meta":   hash{"name": "q", "seq": decOf(x + 1)},
			"leases": zset{w: lease},
			"procs":  hash{hexOf(x + 1): "a" + w + "11:one"},
			"idle":   zset{w: float64(parked)},
		}, got)
	})
	t.Run("under a limit, weights fill the free slots in order", func(t *testing.T) {
		t.Parallel()
		e := newScriptEnv(t, "dequeue.lua")
		x := e.clock() + 1e9
		w, other := e.worker(), e.worker()
		lease := float64(e.clockMs() + hour)
		e.seed(keyState{
			"meta":    hash{"name": "q", "seq": decOf(x), "limit": "3"},
			"leases":  zset{w: lease},
			"procs":   hash{"1": "a" + other + "10:running"},
			"waiting": list{"13:after", "12:light", "11,w2:heavy"},
		})
		procs, _, _, err := e.s.Dequeue(e.ctx, "q", w, 3, false)
		require.NoError(t, err)
		require.Len(t, procs, 1, "the light task behind the heavy one does not fit")
		e.expect(keyState{
			"meta":    hash{"name": "q", "seq": decOf(x + 1), "limit": "3", "wx": "1"},
			"leases":  zset{w: lease},
			"procs":   hash{"1": "a" + other + "10:running", hexOf(x + 1): "a" + w + "11,w2:heavy"},
			"waiting": list{"13:after", "12:light"},
		})
	})
	t.Run("under a rate limit, starts are kept for the window", func(t *testing.T) {
		t.Parallel()
		e := newScriptEnv(t, "dequeue.lua")
		x := e.clock() + 1e9
		w := e.worker()
		lease := float64(e.clockMs() + hour)
		started := e.clock() - 1000
		e.seed(keyState{
			"meta":    hash{"name": "q", "seq": decOf(x), "rate": "2", "per": "60000"},
			"leases":  zset{w: lease},
			"waiting": list{"12:two", "11:one"},
			"starts":  zset{"old": float64(started), "gone": float64(started - 61_000_000)},
		})
		before := e.clock()
		procs, until, now, err := e.s.Dequeue(e.ctx, "q", w, 2, false)
		require.NoError(t, err)
		require.Len(t, procs, 1, "one start left in the window")
		e.within(now, before, e.clock(), "the clock the limit was judged by")
		assert.Equal(t, started+60_000_000+1, until, "when the oldest start leaves the window")
		e.expect(keyState{
			"meta":    hash{"name": "q", "seq": decOf(x + 1), "rate": "2", "per": "60000"},
			"leases":  zset{w: lease},
			"procs":   hash{hexOf(x + 1): "a" + w + "11:one"},
			"waiting": list{"12:two"},
			"starts":  zset{"old": float64(started), hexOf(x + 1): float64(x + 1)},
		})
	})
	t.Run("a paused queue hands out nothing", func(t *testing.T) {
		t.Parallel()
		e := newScriptEnv(t, "dequeue.lua")
		w := e.worker()
		seeded := keyState{
			"meta":    hash{"name": "q", "paused": "1"},
			"leases":  zset{w: float64(e.clockMs() + hour)},
			"waiting": list{"11:one"},
		}
		e.seed(seeded)
		procs, _, _, err := e.s.Dequeue(e.ctx, "q", w, 1, false)
		require.NoError(t, err)
		assert.Empty(t, procs)
		e.expect(seeded)
	})
	t.Run("a worker whose lease is gone takes nothing", func(t *testing.T) {
		t.Parallel()
		e := newScriptEnv(t, "dequeue.lua")
		w := e.worker()
		seeded := keyState{
			"meta":    hash{"name": "q"},
			"leases":  zset{w: float64(e.clockMs() - 1)},
			"waiting": list{"11:one"},
			"idle":    zset{w: 1},
		}
		e.seed(seeded)
		_, _, _, err := e.s.Dequeue(e.ctx, "q", w, 1, true)
		require.ErrorIs(t, err, ErrLeaseGone)
		e.expect(seeded)
	})
}

// dequeue.lua's plain path (no limit, no rate, the high and low lists and
// the ready groups empty) takes from the normal list alone: each of the
// others, with the normal list empty, still hands out its task.
func TestDequeueScriptPassesPlainPathByState(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name  string
		seed  keyState // past meta and leases
		entry string   // the task that starts
	}{
		{name: "a low task", seed: keyState{"low": list{"11,pl:low"}}, entry: "11,pl:low"},
		{name: "a ready group's task", seed: keyState{
			"gwait":  zset{member("a", "11,ga:grouped"): 0},
			"gready": zset{"a": 1},
		}, entry: "11,ga:grouped"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			e := newScriptEnv(t, "dequeue.lua")
			x := e.clock() + 1e9
			w := e.worker()
			lease := float64(e.clockMs() + hour)
			seed := keyState{"meta": hash{"name": "q", "seq": decOf(x)}, "leases": zset{w: lease}}
			for k, v := range c.seed {
				seed[k] = v
			}
			e.seed(seed)
			procs, _, _, err := e.s.Dequeue(e.ctx, "q", w, 1, false)
			require.NoError(t, err)
			require.Len(t, procs, 1)
			assert.Equal(t, "11", procs[0].Task.ID)
			got := e.dump()
			assert.Equal(t, hash{hexOf(x + 1): "a" + w + c.entry}, got["procs"])
			assert.Nil(t, got["low"])
			assert.Nil(t, got["gwait"])
		})
	}
}
