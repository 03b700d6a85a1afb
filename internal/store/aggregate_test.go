package store

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// gathered is a gathering's member as stored: the key, NUL, the entry.
func gathered(key, entry string) string { return key + "\x00" + entry }

// memberSize is the bytes a task of this id and payload takes as a member
// of an aggregated task, as the gathering's size hash counts them.
func memberSize(id, payload string) string {
	return decOf(int64(len(aggregated(id, payload))))
}

// aggregated is the payload of an aggregated task of these members, each
// an id and a payload.
func aggregated(members ...string) string {
	var b strings.Builder
	for i := 0; i+1 < len(members); i += 2 {
		b.WriteString(members[i] + "," + decOf(int64(len(members[i+1]))) + ":" + members[i+1])
	}
	return b.String()
}

// enqueue.lua with an aggregation key: the first task opens the gathering
// with its deadline; the max-th flushes it
// into one task, with the first member's fields, an id past the call's
// own, and the members in id order; another key's gathering stays.
func TestEnqueueAggregateScript(t *testing.T) {
	t.Parallel()
	t.Run("the first task opens a gathering", func(t *testing.T) {
		t.Parallel()
		e := newScriptEnv(t, "enqueue.lua")
		x := e.clock() + 1e9
		e.seed(keyState{"meta": hash{"name": "q", "registered": "1", "tid": decOf(x), "adelay": "5000"}})
		before := e.clock()
		ids, err := e.s.Enqueue(e.ctx, "q", [][]byte{[]byte("p1")}, EnqueueArgs{Kind: "k", Aggregate: "a:1"})
		require.NoError(t, err)
		require.Equal(t, []string{hexOf(x + 1)}, ids)
		got := e.dump()
		due := int64(got["gatherdue"].(zset)["a:1"])
		e.within(due, before+5_000_000, e.clock()+5_000_000, "the deadline")
		e.same(keyState{
			"meta":       hash{"name": "q", "registered": "1", "tid": decOf(x + 1), "adelay": "5000"},
			"gather":     zset{gathered("a:1", hexOf(x+1)+",kk:p1"): 0},
			"gatherdue":  zset{"a:1": float64(due)},
			"gathersize": hash{"a:1": memberSize(hexOf(x+1), "p1")},
		}, got)
	})
	t.Run("the max-th task flushes the gathering", func(t *testing.T) {
		t.Parallel()
		e := newScriptEnv(t, "enqueue.lua")
		x := e.clock() + 1e9
		e.seed(keyState{
			"meta":      hash{"name": "q", "registered": "1", "tid": decOf(x), "amax": "3"},
			"gather":    zset{gathered("a", "10,kk,m2:p1"): 0, gathered("a", "11:p2"): 0, gathered("b", "12:other"): 0},
			"gatherdue": zset{"a": 100, "b": 200},
			"idle":      zset{"r1": 1, "r2": 2, "r3": 3},
		})
		ids, err := e.s.Enqueue(e.ctx, "q", [][]byte{[]byte("p:3")}, EnqueueArgs{Aggregate: "a"})
		require.NoError(t, err)
		require.Equal(t, []string{hexOf(x + 1)}, ids)
		e.expect(keyState{
			"meta":      hash{"name": "q", "registered": "1", "tid": decOf(x + 2), "amax": "3"},
			"waiting":   list{hexOf(x+2) + ",kk,m2,A3:" + aggregated("10", "p1", "11", "p2", hexOf(x+1), "p:3")},
			"gather":    zset{gathered("b", "12:other"): 0},
			"gatherdue": zset{"b": 200},
			"idle":      zset{"r3": 3},
		})
	})
	t.Run("a batch flushes each time it reaches max, and opens the next", func(t *testing.T) {
		t.Parallel()
		e := newScriptEnv(t, "enqueue.lua")
		x := e.clock() + 1e9
		e.seed(keyState{"meta": hash{"name": "q", "registered": "1", "tid": decOf(x), "amax": "2", "adelay": "1000"}})
		before := e.clock()
		ids, err := e.s.Enqueue(e.ctx, "q", [][]byte{[]byte("a"), []byte("b"), []byte("c"), []byte("d"), []byte("e")}, EnqueueArgs{Aggregate: "k", Priority: "h"})
		require.NoError(t, err)
		require.Len(t, ids, 5)
		got := e.dump()
		due := int64(got["gatherdue"].(zset)["k"])
		e.within(due, before+1_000_000, e.clock()+1_000_000, "the new gathering's deadline")
		e.same(keyState{
			"meta": hash{"name": "q", "registered": "1", "tid": decOf(x + 7), "amax": "2", "adelay": "1000"},
			"high": list{
				hexOf(x+7) + ",ph,A2:" + aggregated(ids[2], "c", ids[3], "d"),
				hexOf(x+6) + ",ph,A2:" + aggregated(ids[0], "a", ids[1], "b"),
			},
			"gather":     zset{gathered("k", ids[4]+",ph:e"): 0},
			"gatherdue":  zset{"k": float64(due)},
			"gathersize": hash{"k": memberSize(ids[4], "e")},
		}, got)
	})
}

// promote.lua: a gathering whose deadline has passed is flushed whole
// into one task at the back of the queue (its id from the meta hash's
// counter) and counted as one moved; one still to come stays; the next
// due time is the earliest of the delayed tasks and the deadlines. A
// second promotion finds nothing.
func TestPromoteAggregateScript(t *testing.T) {
	t.Parallel()
	e := newScriptEnv(t, "promote.lua")
	now := e.clock()
	x := now + 1e9
	later := float64(now + 3_600_000_000)
	e.seed(keyState{
		"meta":      hash{"name": "q", "tid": decOf(x)},
		"waiting":   list{"50:old"},
		"delayed":   zset{"52:later": later + 1},
		"gather":    zset{gathered("due", "10,kk:p1"): 0, gathered("due", "11,kk:p2"): 0, gathered("not", "12:p3"): 0},
		"gatherdue": zset{"due": float64(now - 1000), "not": later},
		"idle":      zset{"r1": 1, "r2": 2, "r3": 3},
	})
	p, err := e.s.Promote(e.ctx, "q")
	require.NoError(t, err)
	assert.Equal(t, Promoted{Moved: 1, Next: int64(later), Now: p.Now}, p)
	want := keyState{
		"meta":      hash{"name": "q", "tid": decOf(x + 1)},
		"waiting":   list{hexOf(x+1) + ",kk,A2:" + aggregated("10", "p1", "11", "p2"), "50:old"},
		"delayed":   zset{"52:later": later + 1},
		"gather":    zset{gathered("not", "12:p3"): 0},
		"gatherdue": zset{"not": later},
		"idle":      zset{"r3": 3},
	}
	e.expect(want)
	p, err = e.s.Promote(e.ctx, "q")
	require.NoError(t, err)
	assert.Zero(t, p.Moved, "flushed once")
	e.expect(want)
}

// control.lua op agg: the settings are written, and 0 removes each.
func TestControlAggregationScript(t *testing.T) {
	t.Parallel()
	e := newScriptEnv(t, "control.lua")
	e.seed(keyState{"meta": hash{"name": "q", "registered": "1", "amax": "7"}})
	require.NoError(t, e.s.ControlAggregation(e.ctx, "q", 0, 1500*time.Millisecond, false))
	e.expect(keyState{"meta": hash{"name": "q", "registered": "1", "adelay": "1500"}})
	require.NoError(t, e.s.ControlAggregation(e.ctx, "q", 20, 0, false))
	e.expect(keyState{"meta": hash{"name": "q", "registered": "1", "amax": "20"}})
}

// delete.lua drops the gatherings, counted with the waiting tasks, and
// queue_info.lua counts them and reads the settings.
func TestAggregateQueueInfoAndDeleteScripts(t *testing.T) {
	t.Parallel()
	e := newScriptEnv(t, "queue_info.lua", "delete.lua")
	seeded := keyState{
		"meta":      hash{"name": "q", "registered": "1", "tid": "8", "amax": "5"},
		"waiting":   list{"20:w"},
		"gather":    zset{gathered("a", "10:p1"): 0, gathered("a", "11:p2"): 0, gathered("b", "12:p3"): 0},
		"gatherdue": zset{"a": 1, "b": 2},
	}
	e.seed(seeded)
	st, err := e.s.QueueState(e.ctx, "q")
	require.NoError(t, err)
	assert.Equal(t, QueueState{Waiting: 1, Oldest: 0x20, Gatherings: 2, Gathering: 3, AggregateMax: 5}, st)
	e.expect(seeded)
	n, _, err := e.s.DeleteQueue(e.ctx, "q")
	require.NoError(t, err)
	assert.EqualValues(t, 4, n)
	e.expect(keyState{})
}

// enqueue.lua on a gathering holding more than a lowered max: its stored
// tasks, older, are flushed first, max at a time, and the call's task
// joins the next flush or the gathering left open.
func TestEnqueueAggregateLoweredMaxScript(t *testing.T) {
	t.Parallel()
	e := newScriptEnv(t, "enqueue.lua")
	x := e.clock() + 1e9
	e.seed(keyState{
		"meta":      hash{"name": "q", "registered": "1", "tid": decOf(x), "amax": "2"},
		"gather":    zset{gathered("a", "10:p1"): 0, gathered("a", "11:p2"): 0, gathered("a", "12:p3"): 0},
		"gatherdue": zset{"a": 100},
	})
	ids, err := e.s.Enqueue(e.ctx, "q", [][]byte{[]byte("p4")}, EnqueueArgs{Aggregate: "a"})
	require.NoError(t, err)
	e.expect(keyState{
		"meta": hash{"name": "q", "registered": "1", "tid": decOf(x + 3), "amax": "2"},
		"waiting": list{
			hexOf(x+3) + ",A2:" + aggregated("12", "p3", ids[0], "p4"),
			hexOf(x+2) + ",A2:" + aggregated("10", "p1", "11", "p2"),
		},
	})
}

// enqueue.lua on a gathering holding more than a lowered max, where the
// flushes leave some of its stored tasks: the gathering left open keeps
// the deadline of its oldest task, not a new one from this call, or a
// task already waiting its whole MaxDelay would wait it again.
func TestEnqueueAggregateLoweredMaxKeepsDeadlineScript(t *testing.T) {
	t.Parallel()
	e := newScriptEnv(t, "enqueue.lua")
	x := e.clock() + 1e9
	e.seed(keyState{
		"meta":      hash{"name": "q", "registered": "1", "tid": decOf(x), "amax": "3"},
		"gather":    zset{gathered("a", "10:p1"): 0, gathered("a", "11:p2"): 0, gathered("a", "12:p3"): 0, gathered("a", "13:p4"): 0},
		"gatherdue": zset{"a": 100},
	})
	ids, err := e.s.Enqueue(e.ctx, "q", [][]byte{[]byte("p5")}, EnqueueArgs{Aggregate: "a"})
	require.NoError(t, err)
	e.expect(keyState{
		"meta":       hash{"name": "q", "registered": "1", "tid": decOf(x + 2), "amax": "3"},
		"waiting":    list{hexOf(x+2) + ",A3:" + aggregated("10", "p1", "11", "p2", "12", "p3")},
		"gather":     zset{gathered("a", "13:p4"): 0, gathered("a", ids[0]+":p5"): 0},
		"gatherdue":  zset{"a": 100},
		"gathersize": hash{"a": decOf(int64(len(aggregated("13", "p4", ids[0], "p5"))))},
	})
}

// enqueue.lua with a size bound: a task that would take the aggregated
// task's payload past it flushes the gathering without it, before max,
// and opens the next with a deadline of its own; a batch flushes as often
// as the bound says; the gathering's size is kept (read from the size
// hash, not measured).
func TestEnqueueAggregateSizeBoundScript(t *testing.T) {
	t.Parallel()
	t.Run("the task past the bound opens the next gathering", func(t *testing.T) {
		t.Parallel()
		e := newScriptEnv(t, "enqueue.lua")
		x := e.clock() + 1e9
		e.s.SetAggregateLimit(30)
		e.seed(keyState{
			"meta":       hash{"name": "q", "registered": "1", "tid": decOf(x), "amax": "10", "adelay": "2000"},
			"gather":     zset{gathered("a", "10,kk:aaaa"): 0, gathered("a", "11:bbbb"): 0},
			"gatherdue":  zset{"a": 100},
			"gathersize": hash{"a": "18"},
		})
		before := e.clock()
		ids, err := e.s.Enqueue(e.ctx, "q", [][]byte{[]byte("cccccccccc")}, EnqueueArgs{Aggregate: "a"})
		require.NoError(t, err)
		got := e.dump()
		due := int64(got["gatherdue"].(zset)["a"])
		e.within(due, before+2_000_000, e.clock()+2_000_000, "the next gathering's deadline")
		e.same(keyState{
			"meta":       hash{"name": "q", "registered": "1", "tid": decOf(x + 2), "amax": "10", "adelay": "2000"},
			"waiting":    list{hexOf(x+2) + ",kk,A2:" + aggregated("10", "aaaa", "11", "bbbb")},
			"gather":     zset{gathered("a", ids[0]+":cccccccccc"): 0},
			"gatherdue":  zset{"a": float64(due)},
			"gathersize": hash{"a": memberSize(ids[0], "cccccccccc")},
		}, got)
	})
	t.Run("a batch flushes each time the bound is reached", func(t *testing.T) {
		t.Parallel()
		e := newScriptEnv(t, "enqueue.lua")
		x := e.clock() + 1e9
		one := int64(len(aggregated(hexOf(x+1), "pp")))
		e.s.SetAggregateLimit(int(2*one + 1)) // two members, not three
		e.seed(keyState{"meta": hash{"name": "q", "registered": "1", "tid": decOf(x), "amax": "100"}})
		ids, err := e.s.Enqueue(e.ctx, "q", [][]byte{[]byte("pa"), []byte("pb"), []byte("pc"), []byte("pd"), []byte("pe")}, EnqueueArgs{Aggregate: "k"})
		require.NoError(t, err)
		require.Len(t, ids, 5)
		got := e.dump()
		due := int64(got["gatherdue"].(zset)["k"])
		e.same(keyState{
			"meta": hash{"name": "q", "registered": "1", "tid": decOf(x + 7), "amax": "100"},
			"waiting": list{
				hexOf(x+7) + ",A2:" + aggregated(ids[2], "pc", ids[3], "pd"),
				hexOf(x+6) + ",A2:" + aggregated(ids[0], "pa", ids[1], "pb"),
			},
			"gather":     zset{gathered("k", ids[4]+":pe"): 0},
			"gatherdue":  zset{"k": float64(due)},
			"gathersize": hash{"k": memberSize(ids[4], "pe")},
		}, got)
	})
}

// promote.lua with a size bound: a gathering due whose tasks take more
// than the bound in one payload is flushed into as many aggregated tasks
// as the bound needs, each counted as moved; its size goes with it.
func TestPromoteAggregateSizeBoundScript(t *testing.T) {
	t.Parallel()
	e := newScriptEnv(t, "promote.lua")
	now := e.clock()
	x := now + 1e9
	e.s.SetAggregateLimit(20)
	e.seed(keyState{
		"meta":       hash{"name": "q", "tid": decOf(x)},
		"gather":     zset{gathered("a", "10,kk:aaaa"): 0, gathered("a", "11:bbbb"): 0, gathered("a", "12:cccc"): 0},
		"gatherdue":  zset{"a": float64(now - 1000)},
		"gathersize": hash{"a": "27"},
	})
	p, err := e.s.Promote(e.ctx, "q")
	require.NoError(t, err)
	assert.Equal(t, Promoted{Moved: 2, Next: -1, Now: p.Now}, p)
	e.expect(keyState{
		"meta": hash{"name": "q", "tid": decOf(x + 2)},
		"waiting": list{
			hexOf(x+2) + ",A1:" + aggregated("12", "cccc"),
			hexOf(x+1) + ",kk,A2:" + aggregated("10", "aaaa", "11", "bbbb"),
		},
	})
}

// gather_list.lua: the open gatherings in deadline order, a page from
// start, each with its tasks counted, its bytes from the size hash (-1
// when it holds none), and how many are open; nothing changes.
func TestGatherListScript(t *testing.T) {
	t.Parallel()
	e := newScriptEnv(t, "gather_list.lua")
	seeded := keyState{
		"gather": zset{gathered("a", "10:p1"): 0, gathered("a", "11:p2"): 0, gathered("b", "12:p3"): 0,
			gathered("c", "13:p4"): 0, gathered("ab", "14:p5"): 0},
		"gatherdue":  zset{"a": 300, "b": 100, "c": 200, "ab": 400},
		"gathersize": hash{"a": "14", "b": "7", "ab": "7"},
	}
	e.seed(seeded)
	gs, open, err := e.s.Gatherings(e.ctx, "q", 0, 3)
	require.NoError(t, err)
	assert.EqualValues(t, 4, open)
	assert.Equal(t, []Gathering{{Key: "b", Deadline: 100, Tasks: 1, Bytes: 7}, {Key: "c", Deadline: 200, Tasks: 1, Bytes: -1}, {Key: "a", Deadline: 300, Tasks: 2, Bytes: 14}}, gs)
	gs, open, err = e.s.Gatherings(e.ctx, "q", 3, 3)
	require.NoError(t, err)
	assert.EqualValues(t, 4, open)
	assert.Equal(t, []Gathering{{Key: "ab", Deadline: 400, Tasks: 1, Bytes: 7}}, gs)
	gs, _, err = e.s.Gatherings(e.ctx, "q", 4, 3)
	require.NoError(t, err)
	assert.Empty(t, gs)
	e.expect(seeded)
}

// check_queue.lua and check_repair.lua: a gathering that holds tasks but
// has no deadline is counted (one of each key, however many tasks, a key
// that prefixes another kept apart); the repair gives it a deadline of
// now, and leaves a gathering with one as it is.
func TestCheckUndueGatheringScripts(t *testing.T) {
	t.Parallel()
	e := newScriptEnv(t, "check_queue.lua", "check_repair.lua")
	seeded := keyState{
		"meta": hash{"name": "q"},
		"gather": zset{gathered("a", "10:p1"): 0, gathered("a", "11:p2"): 0, gathered("ab", "12:p3"): 0,
			gathered("b", "13:p4"): 0, gathered("c\x01", "14:p5"): 0},
		"gatherdue": zset{"ab": 500},
	}
	e.seed(seeded)
	sets := e.s.CheckScripts()
	looks, err := e.s.LookQueues(e.ctx, []string{"q"}, sets)
	require.NoError(t, err)
	require.NoError(t, looks[0].Err)
	assert.EqualValues(t, 3, looks[0].UndueGatherings, "a, b and c\\x01")
	e.expect(seeded)

	before := e.clock()
	r := e.s.RepairQueues(e.ctx, []string{"q"}, sets)
	require.NoError(t, r[0].Err)
	assert.Equal(t, QueueRepair{Rescheduled: 3}, r[0])
	got := e.dump()
	due := got["gatherdue"].(zset)
	assert.Equal(t, float64(500), due["ab"], "a deadline kept")
	for _, key := range []string{"a", "b", "c\x01"} {
		e.within(int64(due[key]), before, e.clock(), "the deadline of "+key)
	}
	e.same(keyState{"meta": seeded["meta"], "gather": seeded["gather"],
		"gatherdue": zset{"ab": 500, "a": due["a"], "b": due["b"], "c\x01": due["c\x01"]}}, got)
	looks, err = e.s.LookQueues(e.ctx, []string{"q"}, sets)
	require.NoError(t, err)
	assert.Zero(t, looks[0].UndueGatherings, "nothing left to repair")
}
