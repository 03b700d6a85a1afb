package store

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// member is a grouped entry's member in the group waiting set (see
// G.member in common/groups.lua): normal priority, ranked by its id.
func member(group, entry string) string {
	id, _, _ := strings.Cut(entry, ",")
	id, _, _ = strings.Cut(id, ":")
	return group + "\x00" + "2" + strings.Repeat("0", 16-len(id)) + id + entry
}

// enqueue.lua: grouped tasks wait in the group set, not the list, with
// their group in the header (escaped), and their group becomes ready;
// none is handed off. A group's key escapes ',', ':', '%' and controls.
func TestEnqueueGroupedScript(t *testing.T) {
	t.Parallel()
	e := newScriptEnv(t, "enqueue.lua")
	w := e.worker()
	lease := float64(e.clockMs() + hour)
	e.seed(keyState{"leases": zset{w: lease}, "idle": zset{w: 1}})
	before := e.clock()
	ids, err := e.s.Enqueue(e.ctx, "q", [][]byte{[]byte("x"), []byte("y")}, EnqueueArgs{Group: "t:1,%"})
	require.NoError(t, err)
	got := e.dump()
	g := "t%3A1%2C%25"
	turn := e.within(int64(got["gready"].(zset)[g]), before, e.clock(), "the group's turn")
	assert.Equal(t, zset{member(g, ids[0]+",g"+g+":x"): 0, member(g, ids[1]+",g"+g+":y"): 0}, got["gwait"])
	assert.Equal(t, zset{g: float64(turn)}, got["gready"])
	assert.Nil(t, got["waiting"], "not in the list")
	assert.Nil(t, got["procs"], "not handed off")
	assert.Nil(t, got["idle"], "the parked runtime is woken")

	back, err := UnescapeGroup(g)
	require.NoError(t, err)
	assert.Equal(t, "t:1,%", back)
	assert.Equal(t, "a%00b%20%7F", EscapeGroup("a\x00b \x7f"))
}

// dequeue.lua: the ready groups take turns, lowest turn first, one task a
// turn with the normal list as one more; a group at its limit leaves the
// ready set; the slots each holds are counted.
func TestDequeueGroupsScript(t *testing.T) {
	t.Parallel()
	e := newScriptEnv(t, "dequeue.lua")
	x := e.clock() + 1e9
	w := e.worker()
	lease := float64(e.clockMs() + hour)
	a1, a2, b1, c1 := "11,ga:a1", "12,ga:a2", "13,gb,w2:b1", "14,gc:c1"
	e.seed(keyState{
		"meta":     hash{"name": "q", "seq": decOf(x), "glimit": "1", "gp": "5"},
		"leases":   zset{w: lease},
		"waiting":  list{"16:p2", "15:p1"},
		"gwait":    zset{member("a", a1): 0, member("a", a2): 0, member("b", b1): 0, member("c", c1): 0},
		"gready":   zset{"a": 1, "b": 7, "c": 9},
		"glimits":  hash{"b": "3"},
		"grunning": hash{"c": "1"},
	})
	before := e.clock()
	procs, _, _, err := e.s.Dequeue(e.ctx, "q", w, 10, false)
	require.NoError(t, err)
	var tasks []string
	for _, p := range procs {
		tasks = append(tasks, p.Task.Payload)
	}
	// Three groups ready for 10 tasks: a turn takes a share of up to 4.
	// a (turn 1) takes one and is at the default limit 1, the list (5) takes
	// both of its tasks, b (7: its own limit 3 holds its weight 2) its
	// one; c is at the default limit.
	assert.Equal(t, []string{"a1", "p1", "p2", "b1"}, tasks)
	got := e.dump()
	gp := e.within(mustInt(t, got["meta"].(hash)["gp"]), before, e.clock()+10, "the list's last turn")
	assert.Equal(t, hash{"name": "q", "seq": decOf(x + 4), "glimit": "1", "gp": decOf(gp), "wx": "1"}, got["meta"])
	assert.Equal(t, zset{member("a", a2): 0, member("c", c1): 0}, got["gwait"])
	assert.Equal(t, zset{"a": inf, "c": inf}, got["gready"], "a and c held at their limit, b empty")
	assert.Equal(t, hash{"a": "1", "b": "2", "c": "1"}, got["grunning"])
}

// dequeue.lua: with fewer groups ready than tasks asked for, a turn takes
// a share of them from its group's front, and each task moves the group's
// turn a step; a group held at its limit (scored +inf) is passed over.
func TestDequeueGroupSharesScript(t *testing.T) {
	t.Parallel()
	e := newScriptEnv(t, "dequeue.lua")
	w := e.worker()
	seeded := zset{}
	for i := range 4 {
		seeded[member("a", fmt.Sprintf("%x,ga:a%d", 0x20+i, i))] = 0
		seeded[member("b", fmt.Sprintf("%x,gb:b%d", 0x30+i, i))] = 0
		seeded[member("h", fmt.Sprintf("%x,gh:h%d", 0x40+i, i))] = 0
	}
	e.seed(keyState{
		"meta":     hash{"name": "q", "seq": "9"},
		"leases":   zset{w: float64(e.clockMs() + hour)},
		"gwait":    seeded,
		"gready":   zset{"a": 1, "b": 2, "h": inf},
		"glimits":  hash{"h": "1"},
		"grunning": hash{"h": "1"},
	})
	procs, _, _, err := e.s.Dequeue(e.ctx, "q", w, 6, false)
	require.NoError(t, err)
	var tasks []string
	for _, p := range procs {
		tasks = append(tasks, p.Task.Payload)
	}
	assert.Equal(t, []string{"a0", "a1", "a2", "b0", "b1", "b2"}, tasks, "two groups ready: a share of 3 each; h held")
	ready := e.dump()["gready"].(zset)
	assert.Equal(t, inf, ready["h"], "h stays held")
	assert.Less(t, ready["a"], ready["b"], "a's turn came first")
	assert.Equal(t, ready["a"]+3, ready["b"], "each task taken moves a turn a step")
}

func mustInt(t *testing.T, s string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(s, 10, 64)
	require.NoError(t, err)
	return n
}

// finish.lua and retry.lua: a grouped process's end gives back its slots
// in its group, which, held with tasks waiting, becomes ready again; a retry
// puts the task back in its group, where it takes its place by its id.
func TestSettleGroupedScript(t *testing.T) {
	t.Parallel()
	e := newScriptEnv(t, "finish.lua", "retry.lua")
	w := e.worker()
	lease := float64(e.clockMs() + hour)
	e.seed(keyState{
		"meta":     hash{"name": "q", "seq": "9"},
		"leases":   zset{w: lease},
		"procs":    hash{"1": "a" + w + "11,ga:a1", "2": "a" + w + "13,gb:b1", "3": "a" + w + "14,gc,w3:c1"},
		"gwait":    zset{member("a", "12,ga:a2"): 0, member("b", "15,gb:b2"): 0},
		"grunning": hash{"a": "1", "b": "1", "c": "3"},
		"gready":   zset{"a": inf, "b": 1}, // a held at its limit
	})
	before := e.clock()
	out, _, err := e.s.Finish(e.ctx, "q", []ProcRef{{Worker: w, PID: "1"}, {Worker: w, PID: "3"}})
	require.NoError(t, err)
	assert.Equal(t, []Outcome{WasActive, WasActive}, out)
	_, err = e.s.Retry(e.ctx, "q", []RetryRef{{ProcRef: ProcRef{Worker: w, PID: "2"}, Err: "e"}})
	require.NoError(t, err)
	got := e.dump()
	turn := e.within(int64(got["gready"].(zset)["a"]), before, e.clock(), "a's turn")
	assert.Equal(t, zset{"a": float64(turn), "b": 1}, got["gready"], "a ready again; b keeps its turn")
	assert.Nil(t, got["grunning"], "no slot held")
	var retried string
	for m := range got["gwait"].(zset) {
		if strings.HasPrefix(m, "b\x00") && strings.Contains(m, ":b1") {
			retried = m
		}
	}
	require.NotEmpty(t, retried)
	assert.True(t, retried < member("b", "15,gb:b2"), "the retried task goes before the group's later one")
	assert.Contains(t, retried, ",a1,f1,")
	assert.Nil(t, got["procs"])
}

// promote.lua and release.lua: a delayed grouped task joins its group
// when due; a reclaimed one goes back to its group and frees its slot.
func TestPromoteAndReleaseGroupedScript(t *testing.T) {
	t.Parallel()
	e := newScriptEnv(t, "promote.lua", "release.lua")
	w := e.worker()
	due := float64(e.clock() - 1000)
	e.seed(keyState{
		"meta":     hash{"name": "q", "seq": "9"},
		"leases":   zset{w: 1},
		"delayed":  zset{"21,ga,d1:late": due},
		"procs":    hash{"5": "a" + w + "22,ga:held"},
		"grunning": hash{"a": "1"},
	})
	moved, err := e.s.Promote(e.ctx, "q")
	require.NoError(t, err)
	assert.EqualValues(t, 1, moved.Moved)
	r := e.s.ReleaseOne(e.ctx, Release{Queue: "q", Worker: w, Mode: ReleaseExpired, Poison: Poison{Bounds: DeadBounds{MaxCount: 10, MaxAge: time.Hour}}})
	require.NoError(t, r.Err)
	assert.EqualValues(t, 1, r.Returned)
	got := e.dump()
	var members []string
	for m := range got["gwait"].(zset) {
		members = append(members, m)
	}
	require.Len(t, members, 2)
	assert.Contains(t, got["gready"], "a")
	assert.Nil(t, got["grunning"])
	assert.Nil(t, got["delayed"])
	assert.Nil(t, got["waiting"])
}

// run_now.lua: a grouped delayed task run now goes to its group, not the
// list, and its group becomes ready.
func TestRunNowGroupedScript(t *testing.T) {
	t.Parallel()
	e := newScriptEnv(t, "run_now.lua")
	later := float64(e.clockMs() + hour)
	e.seed(keyState{
		"meta":    hash{"name": "q", "seq": "9"},
		"delayed": zset{"21,ga,d1:later": later},
	})
	ok, err := e.s.RunNow(e.ctx, "q", "21")
	require.NoError(t, err)
	require.True(t, ok)
	got := e.dump()
	assert.Nil(t, got["waiting"], "not in the list")
	assert.Nil(t, got["delayed"])
	require.Len(t, got["gwait"], 1)
	for m := range got["gwait"].(zset) {
		assert.True(t, strings.HasPrefix(m, "a\x00"+"2"+strings.Repeat("0", 14)+"21"+"21,ga,d"), "%q", m)
	}
	assert.Contains(t, got["gready"], "a")
}
