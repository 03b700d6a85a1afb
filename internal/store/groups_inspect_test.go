package store

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// groupedSeed is a queue with tasks in its lists and in two groups: "a"
// with two tasks (one high priority, one retained holding a unique key,
// with an error), "b" with one.
func groupedSeed() keyState {
	return keyState{
		"meta":     hash{"name": "q"},
		"high":     list{"61,ph:h"},
		"waiting":  list{"63:n2", "62:n1"},
		"gwait":    zset{member("a", "65,ga,R1000,uabc:same"): 0, "a\x00" + "1" + "0000000000000066" + "66,ga,ph:a-high": 0, member("b", "64,gb:same"): 0},
		"gready":   zset{"a": 5, "b": 6},
		"errors":   hash{"65": "e"},
		"unique":   hash{"abc": "65"},
		"retained": zset{"65": inf},
	}
}

// waiting_list.lua and Range's whole read: the lists first in dequeue
// order, then the groups in key order, each in start order (a high
// priority task first); positions run across the two, counted from the
// back when negative, and a page reads only its positions.
func TestRangeGroupedScript(t *testing.T) {
	t.Parallel()
	e := newScriptEnv(t, "waiting_list.lua")
	e.seed(groupedSeed())
	all := []string{"h", "n1", "n2", "a-high", "same", "same"}
	ids := []string{"61", "62", "63", "66", "65", "64"}
	groups := []string{"", "", "", "a", "a", "b"}
	for _, cut := range []int{-1, 100} {
		got, err := e.s.Range(e.ctx, "q", 0, -1, cut)
		require.NoError(t, err)
		require.Len(t, got, len(all), "cut %d", cut)
		for i, task := range got {
			assert.Equal(t, all[i], task.Payload, "cut %d, position %d", cut, i)
			assert.Equal(t, ids[i], task.ID, "cut %d, position %d", cut, i)
			assert.Equal(t, groups[i], task.Group, "cut %d, position %d", cut, i)
		}
		for _, page := range []struct{ start, stop int64 }{{2, 3}, {4, 10}, {-2, -1}, {5, 5}, {6, 9}} {
			got, err := e.s.Range(e.ctx, "q", page.start, page.stop, cut)
			require.NoError(t, err)
			from, to := page.start, page.stop
			if from < 0 {
				from += 6
			}
			if to < 0 {
				to += 6
			}
			to = min(to, 5)
			var want []string
			for i := from; i <= to; i++ {
				want = append(want, ids[i])
			}
			var gotIDs []string
			for _, task := range got {
				gotIDs = append(gotIDs, task.ID)
			}
			assert.Equal(t, want, gotIDs, "cut %d, page %v", cut, page)
		}
	}
	n, err := e.s.QueueLen(e.ctx, "q")
	require.NoError(t, err)
	assert.EqualValues(t, 6, n, "the grouped tasks count")
	e.expect(groupedSeed())
}

// task_find.lua: a task waiting in a group is found, at its position in
// Range's order, its payload cut; an unknown id is not.
func TestTaskFindGroupedScript(t *testing.T) {
	t.Parallel()
	e := newScriptEnv(t, "task_find.lua")
	e.seed(groupedSeed())
	f, err := e.s.FindTask(e.ctx, "q", "64", 2, FindBounds{Limit: 100, Budget: 1 << 20})
	require.NoError(t, err)
	require.NotNil(t, f.Waiting)
	assert.EqualValues(t, 5, f.Position)
	assert.Equal(t, "sa", f.Waiting.Payload)
	assert.Equal(t, 4, f.Waiting.Size)
	assert.Equal(t, "b", f.Waiting.Group)
	assert.False(t, f.Partial)
	f, err = e.s.FindTask(e.ctx, "q", "6", -1, FindBounds{Limit: 100, Budget: 1 << 20})
	require.NoError(t, err)
	assert.Nil(t, f.Waiting, "an id that prefixes others is not theirs")
	e.expect(groupedSeed())
}

// cancel_id.lua: a grouped task is removed with its error, unique key and
// listing as retained; its group stays ready while a task of it waits,
// and leaves the ready set with its last.
func TestCancelIDGroupedScript(t *testing.T) {
	t.Parallel()
	e := newScriptEnv(t, "cancel_id.lua")
	e.seed(groupedSeed())
	got, _, err := e.s.CancelID(e.ctx, "q", "65")
	require.NoError(t, err)
	assert.Equal(t, CancelCount{Removed: 1}, got)
	got, _, err = e.s.CancelID(e.ctx, "q", "64")
	require.NoError(t, err)
	assert.Equal(t, CancelCount{Removed: 1}, got)
	want := groupedSeed()
	want["gwait"] = zset{"a\x00" + "1" + "0000000000000066" + "66,ga,ph:a-high": 0}
	want["gready"] = zset{"a": 5}
	delete(want, "errors")
	delete(want, "unique")
	delete(want, "retained")
	e.expect(want)
}

// cancel.lua: grouped tasks with the payload go with the plain ones, and
// a group left with none waiting leaves the ready set.
func TestCancelPayloadGroupedScript(t *testing.T) {
	t.Parallel()
	e := newScriptEnv(t, "cancel.lua")
	st := groupedSeed()
	st["waiting"] = list{"63:same", "62:n1"}
	e.seed(st)
	got, _, err := e.s.CancelPayload(e.ctx, "q", []byte("same"))
	require.NoError(t, err)
	assert.Equal(t, CancelCount{Removed: 3}, got)
	want := groupedSeed()
	want["waiting"] = list{"62:n1"}
	want["gwait"] = zset{"a\x00" + "1" + "0000000000000066" + "66,ga,ph:a-high": 0}
	want["gready"] = zset{"a": 5}
	delete(want, "errors")
	delete(want, "unique")
	delete(want, "retained")
	e.expect(want)
}

// check_queue.lua and check_repair.lua: a group's count of slots held is
// judged against the weights of all its processes (cancelled ones too),
// each miscount reported with its group unescaped; the repair sets the
// counts to what the processes that stay hold (an orphan goes back to its
// group), and a group whose count fell with tasks waiting out of turn
// takes its turn again, waking a parked runtime.
func TestCheckGroupsScripts(t *testing.T) {
	t.Parallel()
	e := newScriptEnv(t, "check_queue.lua", "check_repair.lua")
	gone, live := e.worker(), e.worker()
	now := e.clockMs()
	seeded := keyState{
		"meta":   hash{"name": "q", "seq": "40", "wx": "1"},
		"leases": zset{gone: float64(now - 1), live: float64(now + hour)},
		"procs": hash{"10": "a" + gone + "51,ga:orphan", "20": "a" + live + "52,ga,w2:held", "30": "a" + live + "53,gb:b",
			"40": "c" + live + "54,gc%2C:c"},
		"grunning": hash{"a": "1", "b": "1", "d": "2", "e": "x"},
		"gwait":    zset{member("d", "60,gd:dw"): 0},
		"idle":     zset{live: 1},
	}
	e.seed(seeded)
	sets := e.s.CheckScripts()
	looks, err := e.s.LookQueues(e.ctx, []string{"q"}, sets)
	require.NoError(t, err)
	require.Len(t, looks, 1)
	require.NoError(t, looks[0].Err)
	assert.Equal(t, []GroupCount{{Group: "a", Counted: 1, Held: 3}, {Group: "c,", Counted: 0, Held: 1}, {Group: "d", Counted: 2, Held: 0}, {Group: "e", Counted: -1, Held: 0}}, looks[0].MiscountedGroups)
	assert.Equal(t, looks[0].Counted, looks[0].Held, "the queue's own count is right")
	e.expect(seeded)

	before := e.clock()
	r := e.s.RepairQueues(e.ctx, []string{"q"}, sets)
	require.Len(t, r, 1)
	require.NoError(t, r[0].Err)
	assert.Equal(t, QueueRepair{Requeued: 1, LeasesRemoved: 1, Regrouped: 4}, r[0])
	got := e.dump()
	assert.Equal(t, hash{"a": "2", "b": "1", "c%2C": "1"}, got["grunning"])
	ready := got["gready"].(zset)
	require.Len(t, ready, 2, "a (its orphan back) and d (below its count now) take turns: %v", ready)
	e.within(int64(ready["a"]), before, e.clock(), "a's turn")
	e.within(int64(ready["d"]), before, e.clock(), "d's turn")
	assert.Nil(t, got["idle"], "the parked runtime is woken")
	assert.Len(t, got["gwait"], 2)
	looks, err = e.s.LookQueues(e.ctx, []string{"q"}, sets)
	require.NoError(t, err)
	assert.Empty(t, looks[0].MiscountedGroups, "nothing left to repair")
}
