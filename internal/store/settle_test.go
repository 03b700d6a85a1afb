package store

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// finish.lua: each process of a live lease's worker goes, with its
// progress report, its error, its unique key and, if it asked for one, a
// retained outcome; the others (lease gone, not the worker's) stay.
func TestFinishScript(t *testing.T) {
	t.Parallel()
	e := newScriptEnv(t, "finish.lua")
	w, dead := e.worker(), e.worker()
	now := e.clockMs()
	lease := float64(now + hour)
	pid := hexOf(1_700_000_000_123_456) // started at ms 1_700_000_000_123
	e.seed(keyState{
		"meta":   hash{"name": "q", "seq": "9", "wx": "1"},
		"leases": zset{w: lease, dead: float64(now - 1)},
		"procs": hash{
			pid: "a" + w + "31,a1,R5000,w2,uabc:x",
			"2": "c" + w + "32:y",
			"3": "a" + dead + "33:z",
		},
		"errors":   hash{"31": "e", "31:a": attemptRecord(1, 'r', w, "e")}, // its error and history go with it
		"progress": hash{"31": pid + ",50,1:half", "33": "3,10,1:"},
		"unique":   hash{"abc": "31"},
		"retained": zset{"31": inf, "old": 1},
		"results":  hash{"old": "old,sok,S1,E1,a1:gone"},
	})
	before := e.clockMs()
	out, _, err := e.s.Finish(e.ctx, "q", []ProcRef{{Worker: w, PID: pid, Result: "done"}, {Worker: w, PID: "2"}, {Worker: dead, PID: "3"}, {Worker: w, PID: "4"}})
	require.NoError(t, err)
	assert.Equal(t, []Outcome{WasActive, WasCancelled, LeaseGone, NotOwned}, out)
	got := e.dump()
	r, ok := ParseResult(got["results"].(hash)["31"])
	require.True(t, ok)
	ended := e.within(r.Ended, before, e.clockMs(), "when it ended")
	e.same(keyState{
		"meta":     hash{"name": "q", "seq": "9"},
		"leases":   zset{w: lease, dead: float64(now - 1)},
		"procs":    hash{"3": "a" + dead + "33:z"},
		"progress": hash{"33": "3,10,1:"},
		"retained": zset{"31": float64(ended + 5000)},
		"results":  hash{"31": "31,sok,S1700000000123,E" + decOf(ended) + ",a2:done"},
	}, got, "the expired outcome is dropped as the new one is kept")
}

// finish.lua: a header of counts and a due time alone (a task retried, or
// delayed) has its error and history removed if it counts a start, and
// frees one slot; a counted start beside a weight, a group or a unique key
// still gives those back.
func TestFinishScriptCountsOnly(t *testing.T) {
	t.Parallel()
	e := newScriptEnv(t, "finish.lua")
	w := e.worker()
	lease := float64(e.clockMs() + hour)
	e.seed(keyState{
		"meta":   hash{"name": "q", "seq": "9", "wx": "2"},
		"leases": zset{w: lease},
		"procs": hash{
			"1": "a" + w + "41,a1,f1,d5:x", "2": "a" + w + "42,d5:y", "3": "a" + w + "43,a1,w3:z",
			"4": "a" + w + "44,a2,f1,gG:g", "5": "a" + w + "45,a1,uabc:u",
		},
		"errors": hash{
			"41": "e", "41:a": attemptRecord(1, 'r', w, "e"), "42": "kept",
			"43": "e", "43:a": attemptRecord(1, 'r', w, "e"), "44:a": attemptRecord(1, 'k', w, ""), "45": "e",
		},
		"grunning": hash{"G": "1"},
		"unique":   hash{"abc": "45"},
	})
	out, _, err := e.s.Finish(e.ctx, "q", []ProcRef{{Worker: w, PID: "1"}, {Worker: w, PID: "2"}, {Worker: w, PID: "3"}, {Worker: w, PID: "4"}, {Worker: w, PID: "5"}})
	require.NoError(t, err)
	assert.Equal(t, []Outcome{WasActive, WasActive, WasActive, WasActive, WasActive}, out)
	e.same(keyState{
		"meta":   hash{"name": "q", "seq": "9"},
		"leases": zset{w: lease},
		"errors": hash{"42": "kept"}, // a task never started has no error of its own
	}, e.dump())
}

// finish.lua, of retried tasks: one that carries its only attempt in its
// entry (the usual header, or a reclaim's with a due time after it) leaves
// the errors hash as it is; one with older attempts there, or whose
// history is all there (no 'H' field), has them removed; a field an
// enqueue set, before the attempt, is still seen (its unique key given
// up).
func TestFinishScriptRetried(t *testing.T) {
	t.Parallel()
	e := newScriptEnv(t, "finish.lua")
	w := e.worker()
	lease := float64(e.clockMs() + hour)
	other := hash{"60:a": attemptRecord(1, 'r', w, "other"), "69": "dead", "69:a": attemptRecord(2, 'd', w, "dead")}
	errs := hash{"62:a": attemptRecord(1, 'r', w, "older"), "65": "e", "65:a": attemptRecord(1, 'r', w, "e")}
	for f, v := range other {
		errs[f] = v
	}
	e.seed(keyState{
		"meta":   hash{"name": "q", "seq": "9"},
		"leases": zset{w: lease},
		"procs": hash{
			"1": "a" + w + "61,a1,f1,d5" + attemptFields(1, 2, 'r', w, "boom", "boom") + ":x",
			"2": "a" + w + "62,a2,f2,d5" + attemptFields(2, 2, 'r', w, "boom", "boom") + ":y",
			"3": "a" + w + "63,a1" + attemptFields(1, 2, 'k', w, "", "") + ",d5:z",
			"4": "a" + w + "64,uabc,a1,f1,d5" + attemptFields(1, 2, 'r', w, "boom", "boom") + ":u",
			"5": "a" + w + "65,a1,f1,d5:v",
		},
		"errors": errs,
		"unique": hash{"abc": "64"},
	})
	refs := []ProcRef{{Worker: w, PID: "1"}, {Worker: w, PID: "2"}, {Worker: w, PID: "3"}, {Worker: w, PID: "4"}, {Worker: w, PID: "5"}}
	out, _, err := e.s.Finish(e.ctx, "q", refs)
	require.NoError(t, err)
	assert.Equal(t, []Outcome{WasActive, WasActive, WasActive, WasActive, WasActive}, out)
	e.expect(keyState{
		"meta":   hash{"name": "q", "seq": "9"},
		"leases": zset{w: lease},
		"errors": other,
	})
}

// retry.lua: each process's task goes back to waiting, or to the delayed
// set, with one more start and one more failure and its due time, and its
// error recorded; a task of a deleted queue is dropped.
func TestRetryScript(t *testing.T) {
	t.Parallel()
	e := newScriptEnv(t, "retry.lua")
	w := e.worker()
	lease := float64(e.clockMs() + hour)
	e.seed(keyState{
		"meta":     hash{"name": "q", "seq": "9"},
		"leases":   zset{w: lease},
		"procs":    hash{"1": "a" + w + "41,a1,f1:x", "2": "a" + w + "42,ph:y", "3": "d" + w + "43,uabc:z", "4": "a" + w + "44:w"},
		"errors":   hash{"43": "old", "43:a": attemptRecord(1, 'r', w, "old")},
		"progress": hash{"41": "1,5,1:"},
		"unique":   hash{"abc": "43"},
		"idle":     zset{"r1": 1, "r2": 2, "r3": 3, "r4": 4},
	})
	before := e.clock()
	out, err := e.s.Retry(e.ctx, "q", []RetryRef{
		{ProcRef: ProcRef{Worker: w, PID: "1"}, Err: "e1"},
		{ProcRef: ProcRef{Worker: w, PID: "2"}},
		{ProcRef: ProcRef{Worker: w, PID: "3"}, Err: "e3"},
		{ProcRef: ProcRef{Worker: w, PID: "4"}, Delay: 5 * time.Second},
	})
	require.NoError(t, err)
	assert.Equal(t, []Outcome{WasActive, WasActive, WasDeleted, WasActive}, out)
	got := e.dump()
	now := e.within(field(t, got["waiting"].(list)[0], "d", 16), before, e.clock(), "the retry's clock")
	due := now + 5_000_000
	at := now / 1000
	// Each retried attempt is noted in its entry, the errors hash untouched
	// (a history of one record); the dropped task's history goes.
	e.same(keyState{
		"meta":    hash{"name": "q", "seq": "9"},
		"leases":  zset{w: lease},
		"waiting": list{"41,a2,f2,d" + hexOf(now) + attemptFields(1, at, 'r', w, "e1", "e1") + ":x"},
		"high":    list{"42,ph,a1,f1,d" + hexOf(now) + attemptFields(1, at, 'r', w, "", "") + ":y"},
		"delayed": zset{"44,a1,f1,d" + hexOf(due) + attemptFields(1, at, 'r', w, "", "") + ":w": float64(due)},
		"idle":    zset{"r4": 4}, // one work event for the two: it names three runtimes
	}, got)
}

// retry.lua and retry_plain.lua: a failed attempt is added to the history
// of a task whose header counts attempts (here one reclaim, its record in
// the errors hash as a header without an 'H' field has it), the older
// records staying in the hash; a header that counts none starts a history
// of its own in its entry, neither reading nor writing the errors hash.
func TestRetryScriptHistory(t *testing.T) {
	t.Parallel()
	for _, script := range []string{"retry.lua", "retry_plain.lua"} {
		t.Run(script, func(t *testing.T) {
			t.Parallel()
			e := newScriptEnv(t, script)
			w, lost := e.worker(), e.worker()
			lease := float64(e.clockMs() + hour)
			reclaimed := attemptRecord(1_000, 'k', lost, "")
			e.seed(keyState{
				"meta":   hash{"name": "q", "seq": "9"},
				"leases": zset{w: lease},
				"procs":  hash{"1": "a" + w + "51,a2:x", "2": "a" + w + "52:y"},
				"errors": hash{"51:a": reclaimed, "52": "stale", "52:a": attemptRecord(900, 'd', lost, "stale")},
			})
			before := e.clock()
			out, err := e.retryBy(script, []RetryRef{
				{ProcRef: ProcRef{Worker: w, PID: "1"}, Err: "e1"},
				{ProcRef: ProcRef{Worker: w, PID: "2"}, Err: "e2"},
			})
			require.NoError(t, err)
			assert.Equal(t, []Outcome{WasActive, WasActive}, out)
			got := e.dump()
			now := e.within(field(t, got["waiting"].(list)[0], "d", 16), before, e.clock(), "the retry's clock")
			at := now / 1000
			e.same(keyState{
				"meta":   hash{"name": "q", "seq": "9"},
				"leases": zset{w: lease},
				"waiting": list{
					"52,a1,f1,d" + hexOf(now) + attemptFields(1, at, 'r', w, "e2", "e2") + ":y",
					"51,a3,f1,d" + hexOf(now) + attemptFields(2, at, 'r', w, "e1", "e1") + ":x",
				},
				// The reclaim stays in the hash, the older record; what is
				// left under 52 is not read.
				"errors": hash{"51:a": reclaimed, "52": "stale", "52:a": attemptRecord(900, 'd', lost, "stale")},
			}, got)
		})
	}
}

// retry.lua and retry_plain.lua: the first failures of one call, of two
// workers with errors shared and not, each get the history record of their
// own worker and error; each payload (with ':' and ',' in it, or a value
// without a header, read as the header '0') goes back as it was.
func TestRetryScriptFirstFailures(t *testing.T) {
	t.Parallel()
	for _, script := range []string{"retry.lua", "retry_plain.lua"} {
		t.Run(script, func(t *testing.T) {
			t.Parallel()
			e := newScriptEnv(t, script)
			w, v := e.worker(), e.worker()
			lease := float64(e.clockMs() + hour)
			e.seed(keyState{
				"meta":   hash{"name": "q", "seq": "9"},
				"leases": zset{w: lease, v: lease},
				"procs": hash{
					"1": "a" + w + "61:a:b,c", "2": "a" + w + "62:", "3": "a" + v + "63:y",
					"4": "a" + w + "64:z", "5": "a" + w + "headerless",
				},
			})
			before := e.clock()
			out, err := e.retryBy(script, []RetryRef{
				{ProcRef: ProcRef{Worker: w, PID: "1"}, Err: "same"},
				{ProcRef: ProcRef{Worker: w, PID: "2"}, Err: "same"},
				{ProcRef: ProcRef{Worker: v, PID: "3"}, Err: "same"},
				{ProcRef: ProcRef{Worker: w, PID: "4"}, Err: "other"},
				{ProcRef: ProcRef{Worker: w, PID: "5"}},
			})
			require.NoError(t, err)
			assert.Equal(t, []Outcome{WasActive, WasActive, WasActive, WasActive, WasActive}, out)
			got := e.dump()
			now := e.within(field(t, got["waiting"].(list)[0], "d", 16), before, e.clock(), "the retry's clock")
			d, at := ",a1,f1,d"+hexOf(now), now/1000
			e.same(keyState{
				"meta":   hash{"name": "q", "seq": "9"},
				"leases": zset{w: lease, v: lease},
				"waiting": list{
					"0" + d + attemptFields(1, at, 'r', w, "", "") + ":headerless",
					"64" + d + attemptFields(1, at, 'r', w, "other", "other") + ":z",
					"63" + d + attemptFields(1, at, 'r', v, "same", "same") + ":y",
					"62" + d + attemptFields(1, at, 'r', w, "same", "same") + ":",
					"61" + d + attemptFields(1, at, 'r', w, "same", "same") + ":a:b,c",
				},
			}, got)
		})
	}
}

// stop.lua: Requeue puts the task at the back with one more start (not a
// failure); GiveBack puts a handed-off task back at the front as it was; a
// cancelled task is dropped.
func TestStopScript(t *testing.T) {
	t.Parallel()
	t.Run("requeue", func(t *testing.T) {
		t.Parallel()
		e := newScriptEnv(t, "stop.lua")
		w := e.worker()
		lease := float64(e.clockMs() + hour)
		e.seed(keyState{
			"meta":     hash{"name": "q", "seq": "9", "wx": "2"},
			"leases":   zset{w: lease},
			"procs":    hash{"1": "a" + w + "51,w3:x"},
			"progress": hash{"51": "1,5,1:"},
			"waiting":  list{"50:old"},
		})
		before := e.clock()
		out, err := e.s.Requeue(e.ctx, "q", ProcRef{Worker: w, PID: "1"})
		require.NoError(t, err)
		assert.Equal(t, WasActive, out)
		got := e.dump()
		now := e.within(field(t, got["waiting"].(list)[0], "d", 16), before, e.clock(), "the requeue's clock")
		e.same(keyState{
			"meta":    hash{"name": "q", "seq": "9"},
			"leases":  zset{w: lease},
			"waiting": list{"51,w3,a1,d" + hexOf(now) + ":x", "50:old"},
		}, got)
	})
	t.Run("give back", func(t *testing.T) {
		t.Parallel()
		e := newScriptEnv(t, "stop.lua")
		w := e.worker()
		lease := float64(e.clockMs() + hour)
		e.seed(keyState{
			"meta":    hash{"name": "q", "seq": "9"},
			"leases":  zset{w: lease},
			"procs":   hash{"1": "a" + w + "51:x"},
			"waiting": list{"52:new", "50:old"},
			"idle":    zset{"r1": 1, "r2": 2, "r3": 3},
		})
		out, err := e.s.GiveBack(e.ctx, "q", ProcRef{Worker: w, PID: "1"})
		require.NoError(t, err)
		assert.Equal(t, WasActive, out)
		e.expect(keyState{
			"meta":    hash{"name": "q", "seq": "9"},
			"leases":  zset{w: lease},
			"waiting": list{"52:new", "50:old", "51:x"},
			"idle":    zset{"r3": 3},
		})
	})
	t.Run("a cancelled task is dropped", func(t *testing.T) {
		t.Parallel()
		e := newScriptEnv(t, "stop.lua")
		w := e.worker()
		lease := float64(e.clockMs() + hour)
		e.seed(keyState{
			"meta":   hash{"name": "q", "seq": "9"},
			"leases": zset{w: lease},
			"procs":  hash{"1": "c" + w + "51,a1,uabc:x"},
			"errors": hash{"51": "e"},
			"unique": hash{"abc": "51"},
		})
		out, err := e.s.Requeue(e.ctx, "q", ProcRef{Worker: w, PID: "1"})
		require.NoError(t, err)
		assert.Equal(t, WasCancelled, out)
		e.expect(keyState{
			"meta":   hash{"name": "q", "seq": "9"},
			"leases": zset{w: lease},
		})
	})
	t.Run("the last process of a deleted queue takes its meta hash along", func(t *testing.T) {
		t.Parallel()
		e := newScriptEnv(t, "stop.lua")
		w := e.worker()
		lease := float64(e.clockMs() + hour)
		e.seed(keyState{
			"meta":   hash{"seq": "9"},
			"leases": zset{w: lease},
			"procs":  hash{"1": "d" + w + "51:x"},
		})
		out, err := e.s.Requeue(e.ctx, "q", ProcRef{Worker: w, PID: "1"})
		require.NoError(t, err)
		assert.Equal(t, WasDeleted, out)
		e.expect(keyState{"leases": zset{w: lease}})
	})
}

// bury.lua, of a task that carries its last attempt and error in its
// entry: its whole history goes to the errors hash (the entry's attempt
// after the older ones, the death last), and its error under its id; the
// error its header carries when the death records none. The dead letter
// carries neither field.
func TestBuryScriptFlushesTheEntrysAttempt(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ name, err, want string }{{"with an error", "third", "third"}, {"with none", "", "a, b: 1%"}} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			e := newScriptEnv(t, "bury.lua")
			w := e.worker()
			lease := float64(e.clockMs() + hour)
			older := attemptRecord(1, 'r', w, "first")
			e.seed(keyState{
				"meta":   hash{"name": "q", "seq": "9"},
				"leases": zset{w: lease},
				"procs":  hash{"1": "a" + w + "71,kmail,a2,f2,d5" + attemptFields(2, 2, 'r', w, "a, b: 1%", "a, b: 1%") + ":x"},
				"errors": hash{"71:a": older},
			})
			before := e.clockMs()
			out, err := e.s.Bury(e.ctx, "q", ProcRef{Worker: w, PID: "1"}, "failed", c.err, DeadBounds{MaxCount: 10, MaxAge: time.Hour})
			require.NoError(t, err)
			assert.Equal(t, WasActive, out)
			got := e.dump()
			var died int64
			for m, score := range got["dead"].(zset) {
				died = e.within(int64(score), before, e.clockMs(), "when it died")
				assert.Equal(t, "71,kmail,f2,d5,a3,D"+decOf(died)+",W"+w+",Kfailed:x", m)
			}
			e.same(keyState{
				"meta":   hash{"name": "q", "seq": "9"},
				"leases": zset{w: lease},
				"dead":   zset{"71,kmail,f2,d5,a3,D" + decOf(died) + ",W" + w + ",Kfailed:x": float64(died)},
				"errors": hash{"71": c.want, "71:a": older + attemptRecord(2, 'r', w, "a, b: 1%") + attemptRecord(died, 'd', w, c.err)},
			}, got)
			dl, err := e.s.DeadLetters(e.ctx, "q", 0, 10, -1)
			require.NoError(t, err)
			require.Len(t, dl, 1)
			assert.Equal(t, c.want, dl[0].Error)
		})
	}
}

// bury.lua: the task goes to the dead letters with when, who and why,
// its error recorded, and the dead letters trimmed to their bounds.
func TestBuryScript(t *testing.T) {
	t.Parallel()
	e := newScriptEnv(t, "bury.lua")
	w := e.worker()
	now := e.clockMs()
	lease := float64(now + hour)
	e.seed(keyState{
		"meta":     hash{"name": "q", "seq": "9"},
		"leases":   zset{w: lease},
		"procs":    hash{"1": "a" + w + "61,a1,f1,uabc:x"},
		"progress": hash{"61": "1,5,1:"},
		"unique":   hash{"abc": "61"},
		"dead": zset{
			"58,Dold:too old":  float64(now - 2*hour),
			"59,Da:oldest":     float64(now - 3000),
			"60,Db:next":       float64(now - 2000),
			"62,Dc:the newest": float64(now - 1000),
		},
		"errors": hash{"58": "e58", "58:a": attemptRecord(1, 'd', "x", "e58"), "59": "e59", "60": "e60", "61:a": attemptRecord(7, 'r', w, "first")},
	})
	before := e.clockMs()
	out, err := e.s.Bury(e.ctx, "q", ProcRef{Worker: w, PID: "1"}, "error", "boom", DeadBounds{MaxCount: 3, MaxAge: time.Hour})
	require.NoError(t, err)
	assert.Equal(t, WasActive, out)
	got := e.dump()
	var died int64
	for entry := range got["dead"].(zset) {
		if entry[:3] == "61," {
			died = e.within(field(t, entry, "D", 10), before, e.clockMs(), "when it died")
		}
	}
	e.same(keyState{
		"meta":   hash{"name": "q", "seq": "9"},
		"leases": zset{w: lease},
		"dead": zset{
			"60,Db:next":       float64(now - 2000),
			"62,Dc:the newest": float64(now - 1000),
			"61,f1,uabc,a2,D" + decOf(died) + ",W" + w + ",Kerror:x": float64(died),
		},
		"errors": hash{"60": "e60", "61": "boom", "61:a": attemptRecord(7, 'r', w, "first") + attemptRecord(died, 'd', w, "boom")},
	}, got, "the unique key is given up; the oldest and the too old dead letters go, with their errors and histories; the attempt is noted")
}
