package store

import (
	"crypto/sha1"
	"encoding/hex"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// enqueue.lua: tasks go to the back of their level's list (or its front,
// or the delayed set) as entries with ids counted up from the meta hash's
// tid, the work event pops the parked runtimes, and a queue not yet
// confirmed is named and registered. The task id counter is seeded ahead
// of the clock, so the ids are known.
func TestEnqueueScript(t *testing.T) {
	t.Parallel()
	t.Run("a batch at the back wakes the parked runtimes", func(t *testing.T) {
		t.Parallel()
		e, x := queueAhead(t, "enqueue.lua")
		e.seed(keyState{
			"waiting": list{"5:old"},
			"idle":    zset{"r1": 1, "r2": 2},
		})
		ids, err := e.s.Enqueue(e.ctx, "q", [][]byte{[]byte("p1"), []byte("p2")}, EnqueueArgs{MaxAttempts: 3, Timeout: 2 * time.Second, Weight: 2})
		require.NoError(t, err)
		require.Equal(t, []string{hexOf(x + 1), hexOf(x + 2)}, ids)
		e.expect(keyState{
			"meta":    hash{"name": "q", "registered": "1", "tid": decOf(x + 2)},
			"waiting": list{hexOf(x+2) + ",m3,t2000,w2:p2", hexOf(x+1) + ",m3,t2000,w2:p1", "5:old"},
		})
	})
	t.Run("a batch at the front of its level, on a queue made by it", func(t *testing.T) {
		t.Parallel()
		e := newScriptEnv(t, "enqueue.lua")
		x := e.clock() + 1e9
		e.seed(keyState{
			"meta": hash{"tid": decOf(x)},
			"high": list{"5,ph:old"},
		})
		ids, err := e.s.Enqueue(e.ctx, "q", [][]byte{[]byte("p1"), []byte("p2")}, EnqueueArgs{Front: true, Priority: "h"})
		require.NoError(t, err)
		require.Equal(t, []string{hexOf(x + 1), hexOf(x + 2)}, ids)
		e.expect(keyState{
			"meta":   hash{"name": "q", "registered": "1", "tid": decOf(x + 2)},
			"high":   list{"5,ph:old", hexOf(x+2) + ",ph:p2", hexOf(x+1) + ",ph:p1"},
			"queues": set{"q"},
		})
	})
	t.Run("delayed tasks wait in the delayed set with their due time", func(t *testing.T) {
		t.Parallel()
		e, x := queueAhead(t, "enqueue.lua")
		due := e.clock() + int64(time.Hour/time.Microsecond)
		e.seed(keyState{
			"idle": zset{"r1": 1},
		})
		_, err := e.s.Enqueue(e.ctx, "q", [][]byte{[]byte("p1"), []byte("p2")}, EnqueueArgs{DueAt: due, Retain: time.Second})
		require.NoError(t, err)
		e.expect(keyState{
			"meta": hash{"name": "q", "registered": "1", "tid": decOf(x + 2)},
			"delayed": zset{
				hexOf(x+1) + ",R1000,d" + hexOf(due) + ":p1": float64(due),
				hexOf(x+2) + ",R1000,d" + hexOf(due) + ":p2": float64(due),
			},
			"retained": zset{hexOf(x + 1): inf, hexOf(x + 2): inf},
			"idle":     zset{"r1": 1},
		})
	})
	sum := sha1.Sum([]byte("k"))
	sha := hex.EncodeToString(sum[:])
	t.Run("a unique key held while the task lives, stale ones dropped", func(t *testing.T) {
		t.Parallel()
		e, x := queueAhead(t, "enqueue.lua")
		kept := float64(e.clockMs() + hour)
		e.seed(keyState{
			"unique":    hash{"stale": "1", "kept": "2"},
			"uniquettl": zset{"stale": 1, "kept": kept},
		})
		ids, err := e.s.Enqueue(e.ctx, "q", [][]byte{[]byte("p")}, EnqueueArgs{Unique: "k"})
		require.NoError(t, err)
		require.Equal(t, []string{hexOf(x + 1)}, ids)
		e.expect(keyState{
			"meta":      hash{"name": "q", "registered": "1", "tid": decOf(x + 1)},
			"waiting":   list{hexOf(x+1) + ",u" + sha + ":p"},
			"unique":    hash{"kept": "2", sha: hexOf(x + 1)},
			"uniquettl": zset{"kept": kept},
		})
	})
	t.Run("a unique key held for a time", func(t *testing.T) {
		t.Parallel()
		e, x := queueAhead(t, "enqueue.lua")
		before := e.clockMs()
		_, err := e.s.Enqueue(e.ctx, "q", [][]byte{[]byte("p")}, EnqueueArgs{Unique: "k", UniqueTTL: time.Minute})
		require.NoError(t, err)
		got := e.dump()
		until := e.within(int64(got["uniquettl"].(zset)[sha]), before+60_000, e.clockMs()+60_000, "the key's expiry")
		e.same(keyState{
			"meta":      hash{"name": "q", "registered": "1", "tid": decOf(x + 1)},
			"waiting":   list{hexOf(x+1) + ":p"},
			"unique":    hash{sha: hexOf(x + 1)},
			"uniquettl": zset{sha: float64(until)},
		}, got)
	})
	t.Run("a unique key held by another task adds nothing", func(t *testing.T) {
		t.Parallel()
		e := newScriptEnv(t, "enqueue.lua")
		seeded := keyState{
			"meta":   hash{"name": "q", "registered": "1", "tid": "7"},
			"unique": hash{sha: "77"},
		}
		e.seed(seeded)
		ids, err := e.s.Enqueue(e.ctx, "q", [][]byte{[]byte("p")}, EnqueueArgs{Unique: "k"})
		require.ErrorIs(t, err, ErrDuplicate)
		require.Equal(t, []string{"77"}, ids)
		e.expect(seeded)
	})
	// A single task that is not plain (its outcome retained) still comes
	// here, and is handed off as enqueue_one.lua hands a plain one.
	t.Run("a single task goes straight to the longest-idle runtime", func(t *testing.T) {
		t.Parallel()
		e, x := queueAhead(t, "enqueue.lua")
		w := e.worker()
		lease := float64(e.clockMs() + hour)
		e.seed(keyState{
			"meta":   hash{"seq": decOf(x)},
			"leases": zset{w: lease},
			"idle":   zset{w: 1, "r2": 2},
		})
		ids, err := e.s.Enqueue(e.ctx, "q", [][]byte{[]byte("p")}, EnqueueArgs{Retain: time.Second})
		require.NoError(t, err)
		require.Equal(t, []string{hexOf(x + 1)}, ids)
		e.expect(keyState{
			"meta":     hash{"name": "q", "registered": "1", "tid": decOf(x + 1), "seq": decOf(x + 1)},
			"procs":    hash{hexOf(x + 1): "a" + w + hexOf(x+1) + ",R1000:p"},
			"retained": zset{hexOf(x + 1): inf},
			"leases":   zset{w: lease},
			"idle":     zset{"r2": 2},
		})
	})
	t.Run("no hand-off on a paused queue", func(t *testing.T) {
		t.Parallel()
		e, x := queueAhead(t, "enqueue.lua")
		w := e.worker()
		lease := float64(e.clockMs() + hour)
		e.seed(keyState{
			"meta":   hash{"paused": "1"},
			"leases": zset{w: lease},
			"idle":   zset{w: 1, "r2": 2, "r3": 3},
		})
		_, err := e.s.Enqueue(e.ctx, "q", [][]byte{[]byte("p")}, EnqueueArgs{Retain: time.Second})
		require.NoError(t, err)
		e.expect(keyState{
			"meta":     hash{"name": "q", "registered": "1", "tid": decOf(x + 1), "paused": "1"},
			"waiting":  list{hexOf(x+1) + ",R1000:p"},
			"retained": zset{hexOf(x + 1): inf},
			"leases":   zset{w: lease},
			"idle":     zset{"r3": 3}, // the work event names two: the task's runtime and one more
		})
	})
}

// queueAhead is a test's store for script (and the scripts more names)
// whose queue q is confirmed, named and registered, with its task id
// counter seeded at x, a second ahead of the clock, so that the ids the
// script gives are known: x+1 and on. A later seed of "meta" adds to it.
func queueAhead(t *testing.T, script string, more ...string) (e *scriptEnv, x int64) {
	t.Helper()
	e = newScriptEnv(t, script, more...)
	x = e.clock() + 1e9
	e.seed(keyState{"meta": hash{"name": "q", "registered": "1", "tid": decOf(x)}})
	return e, x
}
