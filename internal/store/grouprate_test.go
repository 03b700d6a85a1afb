package store

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// groupRateBase is GROUP_RATE_BASE (common/groups.lua): a group held back by
// its rate is scored this plus when its next start is allowed.
const groupRateBase = 1 << 52

// startRecord is a group's start in its rate window (gstarts).
func startRecord(group string, at int64, id string) string {
	return fmt.Sprintf("%s\x00%016x%s", group, at, id)
}

// dequeue.lua: a group with a rate of 2 a window starts 2, then waits out
// of turn, scored by when its oldest start leaves the window, while the
// other groups go on; the reply says when, so that the runtime sleeps
// until then. A group's own rate wins over the default, and starts that
// left the window no longer count.
func TestDequeueGroupRateScript(t *testing.T) {
	t.Parallel()
	e := newScriptEnv(t, "dequeue.lua")
	w := e.worker()
	const perMs = hour
	now := e.clock()
	old, recent := now-2*perMs*1000, now-10*60*1e6 // left the window; in it
	gwait := zset{}
	for i := range 3 {
		gwait[member("a", fmt.Sprintf("%x,ga:a%d", 0x20+i, i))] = 0
		gwait[member("b", fmt.Sprintf("%x,gb:b%d", 0x30+i, i))] = 0
		gwait[member("c", fmt.Sprintf("%x,gc:c%d", 0x40+i, i))] = 0
	}
	e.seed(keyState{
		"meta":    hash{"name": "q", "seq": "9", "grate": "2/3600000", "grx": "1"},
		"leases":  zset{w: float64(e.clockMs() + hour)},
		"gwait":   gwait,
		"gready":  zset{"a": 1, "b": 2, "c": 3},
		"glimits": hash{"c:r": "5/3600000"},
		"gstarts": zset{startRecord("b", old, "9"): 0, startRecord("b", recent, "10"): 0},
	})
	before := e.clock()
	procs, until, now2, err := e.s.Dequeue(e.ctx, "q", w, 10, false)
	require.NoError(t, err)
	after := e.clock()
	var tasks []string
	for _, p := range procs {
		tasks = append(tasks, p.Task.Payload)
	}
	// a: 2 of its 3 (its rate), b: 1 (one start of the window left), c:
	// all 3 (its own rate of 5).
	assert.ElementsMatch(t, []string{"a0", "a1", "b0", "c0", "c1", "c2"}, tasks)
	got := e.dump()
	ready := got["gready"].(zset)
	require.Len(t, ready, 2, "c emptied")
	aUntil := int64(ready["a"]) - groupRateBase
	e.within(aUntil, before+perMs*1000+1, after+perMs*1000+1, "a's next start: its first start of this call leaves the window")
	assert.Equal(t, float64(groupRateBase+recent+perMs*1000+1), ready["b"], "b's next start: its start in the window leaves it")
	assert.Equal(t, recent+perMs*1000+1, until, "the earliest group's next start")
	e.within(now2, before, after, "the clock it was judged by")
	starts := got["gstarts"].(zset)
	assert.NotContains(t, starts, startRecord("b", old, "9"), "the start that left the window is dropped")
	assert.Contains(t, starts, startRecord("b", recent, "10"))
	assert.Len(t, starts, 1+2+1+3, "each start of this call recorded")

	// Held back, a and b are passed over: nothing starts, and the reply
	// says when the first may.
	procs, until, _, err = e.s.Dequeue(e.ctx, "q", w, 10, false)
	require.NoError(t, err)
	assert.Empty(t, procs)
	assert.Equal(t, recent+perMs*1000+1, until)

	// Once its time has come (here: b's score moved into the past), a
	// group takes turns again.
	e.seed(keyState{"gready": zset{"a": ready["a"], "b": float64(groupRateBase + e.clock() - 1)}})
	require.NoError(t, e.rdb.Do(e.ctx, e.rdb.B().Del().Key(e.k.GroupStarts).Build()).Error(), "b's window passed")
	procs, _, _, err = e.s.Dequeue(e.ctx, "q", w, 10, false)
	require.NoError(t, err)
	require.Len(t, procs, 2, "b's two left; a still held")
	assert.Equal(t, "b1", procs[0].Task.Payload)
}

// groups_list.lua: a group held back by its rate is not ready and says
// until when; own rates and the default are read.
func TestGroupsReadRateScript(t *testing.T) {
	t.Parallel()
	e := newScriptEnv(t, "groups_list.lua")
	until := e.clock() + 5e6
	seeded := keyState{
		"meta":    hash{"name": "q", "grate": "2/60000", "grx": "1"},
		"gwait":   zset{member("a", "61,ga:1"): 0, member("b", "62,gb:2"): 0},
		"gready":  zset{"a": float64(groupRateBase + until), "b": 1},
		"glimits": hash{"a:r": "3/1000"},
	}
	e.seed(seeded)
	got, err := e.s.GroupsRead(e.ctx, "q", 10)
	require.NoError(t, err)
	e.expect(seeded) // a read writes nothing
	assert.ElementsMatch(t, []GroupState{
		{Key: "a", Waiting: 1, Rate: 3, Per: time.Second, RateUntil: until},
		{Key: "b", Waiting: 1, Ready: true},
	}, got.Groups)
	assert.EqualValues(t, 1, got.Ready, "a is held")
	assert.Equal(t, 2, got.DefaultRate)
	assert.Equal(t, time.Minute, got.DefaultPer)
}

// control.lua: a new rate gives the groups held back by theirs a turn at
// once; a queue left with no rate forgets the starts.
func TestControlGroupRateScript(t *testing.T) {
	t.Parallel()
	e := newScriptEnv(t, "control.lua", "dequeue.lua")
	held := float64(groupRateBase + e.clock() + 1e9)
	e.seed(keyState{
		"meta":    hash{"name": "q", "registered": "1"},
		"gwait":   zset{member("a", "61,ga:1"): 0, member("b", "62,gb:2"): 0},
		"gready":  zset{"a": held, "b": held},
		"gstarts": zset{startRecord("a", 1, "60"): 0, startRecord("b", 1, "59"): 0},
	})
	before := e.clock()
	require.NoError(t, e.s.ControlGroupRate(e.ctx, "q", "a", 5, time.Second, false))
	got := e.dump()
	e.within(int64(got["gready"].(zset)["a"]), before, e.clock(), "a's turn")
	assert.Equal(t, held, got["gready"].(zset)["b"], "b keeps waiting")
	assert.Equal(t, hash{"a:r": "5/1000"}, got["glimits"])
	assert.Equal(t, "1", got["meta"].(hash)["grx"])

	require.NoError(t, e.s.ControlGroupRate(e.ctx, "q", "", 1, time.Minute, false))
	got = e.dump()
	e.within(int64(got["gready"].(zset)["b"]), before, e.clock(), "b's turn: the default changed")
	assert.Equal(t, "1/60000", got["meta"].(hash)["grate"])

	require.NoError(t, e.s.ControlGroupRate(e.ctx, "q", "", 0, 0, false))
	require.NoError(t, e.s.ControlGroupRate(e.ctx, "q", "a", 0, 0, false))
	got = e.dump()
	assert.Equal(t, zset{startRecord("b", 1, "59"): 0}, got["gstarts"], "a's starts go with its rate")
	assert.Nil(t, got["glimits"])

	// A dequeue's sampling clears the starts of a group with no rate.
	w := e.worker()
	e.seed(keyState{"leases": zset{w: float64(e.clockMs() + hour)}})
	_, _, _, err := e.s.Dequeue(e.ctx, "q", w, 1, false)
	require.NoError(t, err)
	assert.NotContains(t, e.dump(), "gstarts")
}

// retry.lua and dequeue.lua: a task of a sequence (a group with a limit
// of 1) retried with a delay waits in its group, at its front, due then;
// the dequeue holds the group until then, as one held by its rate, and
// says so; a group with a higher limit lets it wait in the delayed set.
func TestSequenceRetryHoldsItsGroupScript(t *testing.T) {
	t.Parallel()
	e := newScriptEnv(t, "retry.lua", "dequeue.lua")
	w := e.worker()
	e.seed(keyState{
		"meta":     hash{"name": "q", "seq": "9", "glimit": "1"},
		"leases":   zset{w: float64(e.clockMs() + hour)},
		"procs":    hash{"1": "a" + w + "11,gs:s1", "2": "a" + w + "21,gp:p1"},
		"gwait":    zset{member("s", "12,gs:s2"): 0},
		"gready":   zset{"s": inf},
		"grunning": hash{"s": "1", "p": "1"},
		"glimits":  hash{"p": "2"},
	})
	const delay = int64(hour) * 1000 // µs
	before := e.clock()
	_, err := e.s.Retry(e.ctx, "q", []RetryRef{{ProcRef: ProcRef{Worker: w, PID: "1"}, Err: "e", Delay: time.Duration(delay) * time.Microsecond},
		{ProcRef: ProcRef{Worker: w, PID: "2"}, Err: "e", Delay: time.Duration(delay) * time.Microsecond}})
	require.NoError(t, err)
	got := e.dump()
	assert.Len(t, got["delayed"], 1, "p1: its group is no sequence")
	require.Len(t, got["gwait"], 2)
	procs, until, _, err := e.s.Dequeue(e.ctx, "q", w, 5, false)
	require.NoError(t, err)
	assert.Empty(t, procs, "s2 waits for s1, which waits for its delay")
	e.within(until, before+delay, e.clock()+delay, "the reply says when s1 is due")
	assert.Equal(t, float64(groupRateBase+until), e.dump()["gready"].(zset)["s"], "held until then")
}

// dequeue.lua: a rate window longer than the Redis clock's count of µs
// since 1970 still holds (the cut-off of the starts that left it is 0, not
// a negative number, which Redis's Lua prints as 16 f's and would drop
// every start).
func TestDequeueGroupRateLongWindowScript(t *testing.T) {
	t.Parallel()
	e := newScriptEnv(t, "dequeue.lua")
	w := e.worker()
	const perMs = 100 * 365 * 24 * hour
	gwait := zset{}
	for i := range 6 {
		gwait[member("a", fmt.Sprintf("%x,ga:a%d", 0x20+i, i))] = 0
	}
	e.seed(keyState{
		"meta":   hash{"name": "q", "seq": "9", "grate": fmt.Sprintf("2/%d", perMs)},
		"leases": zset{w: float64(e.clockMs() + hour)},
		"gwait":  gwait,
		"gready": zset{"a": 1},
	})
	total := 0
	for range 3 {
		procs, _, _, err := e.s.Dequeue(e.ctx, "q", w, 1, false)
		require.NoError(t, err)
		total += len(procs)
	}
	assert.Equal(t, 2, total, "a rate of 2 a window starts 2 tasks")
	assert.Len(t, e.dump()["gstarts"], 2, "both starts in the window")
}
