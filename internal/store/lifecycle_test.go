package store

import (
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// promote.lua: the delayed tasks that are due move to the back of their
// level's list, in due order, and wake the queue; the next due time comes
// back.
func TestPromoteScript(t *testing.T) {
	t.Parallel()
	t.Run("plain tasks in one push", func(t *testing.T) {
		t.Parallel()
		e := newScriptEnv(t, "promote.lua")
		now := e.clock()
		e.seed(keyState{
			"waiting": list{"50:old"},
			"delayed": zset{"52:second": float64(now - 1000), "51:first": float64(now - 2000), "53:later": float64(now + 3_600_000_000)},
			"idle":    zset{"r1": 1, "r2": 2, "r3": 3, "r4": 4},
		})
		p, err := e.s.Promote(e.ctx, "q")
		require.NoError(t, err)
		assert.Equal(t, Promoted{Moved: 2, Next: now + 3_600_000_000, Now: p.Now}, p)
		e.within(p.Now, now, e.clock(), "the promotion's clock")
		e.expect(keyState{
			"waiting": list{"52:second", "51:first", "50:old"},
			"delayed": zset{"53:later": float64(now + 3_600_000_000)},
			"idle":    zset{"r4": 4},
		})
	})
	t.Run("more due than one read takes", func(t *testing.T) {
		t.Parallel()
		e := newScriptEnv(t, "promote.lua")
		now := e.clock()
		// 1,001 due (a read takes 1,000), the last two due at once, and
		// one later.
		const n = 1001
		delayed := zset{"9:later": float64(now + 3_600_000_000)}
		var waiting list
		for i := range n {
			entry := hexOf(int64(0x1000+i)) + ",a1,f1:p"
			due := now - 10_000 + int64(min(i, n-2))
			delayed[entry] = float64(due)
			waiting = append(list{entry}, waiting...)
		}
		e.seed(keyState{"delayed": delayed})
		p, err := e.s.Promote(e.ctx, "q")
		require.NoError(t, err)
		assert.EqualValues(t, n, p.Moved)
		e.expect(keyState{
			"waiting": waiting,
			"delayed": zset{"9:later": float64(now + 3_600_000_000)},
		})
	})
	t.Run("a task with a priority to its level's list", func(t *testing.T) {
		t.Parallel()
		e := newScriptEnv(t, "promote.lua")
		now := e.clock()
		e.seed(keyState{
			"delayed": zset{"51:first": float64(now - 3000), "52,ph:high": float64(now - 2000), "53,pl:low": float64(now - 1000)},
		})
		p, err := e.s.Promote(e.ctx, "q")
		require.NoError(t, err)
		assert.EqualValues(t, 3, p.Moved)
		assert.EqualValues(t, -1, p.Next)
		e.expect(keyState{
			"waiting": list{"51:first"},
			"high":    list{"52,ph:high"},
			"low":     list{"53,pl:low"},
		})
	})
}

// tick.lua: one tick of a periodic schedule enqueues its task once, with
// an id from the meta hash's counter, and records the tick, its task's id
// and the tick after it; a tick not later than the last, or still to
// come, changes nothing; tick 0 records now for a schedule never seen,
// and the next tick the registering worker gives, keeping the last task's
// id.
func TestTickScript(t *testing.T) {
	t.Parallel()
	t.Run("a new tick enqueues", func(t *testing.T) {
		t.Parallel()
		e := newScriptEnv(t, "tick.lua")
		x := e.clock() + 1e9
		tick := e.clockMs() - 10
		e.seed(keyState{
			"meta":     hash{"name": "q", "registered": "1", "tid": decOf(x)},
			"periodic": hash{"s": decOf(tick - 1000), "other": "5"},
			"idle":     zset{"r1": 1, "r2": 2, "r3": 3},
		})
		got, err := e.s.Tick(e.ctx, "q", "s", tick, tick+60_000, []byte("p"), EnqueueArgs{MaxAttempts: 2, Retain: 1500 * 1e6})
		require.NoError(t, err)
		assert.Equal(t, TickEnqueued, got.Status)
		assert.Equal(t, tick, got.Last)
		assert.Equal(t, hexOf(x+1), got.ID)
		e.expect(keyState{
			"meta":     hash{"name": "q", "registered": "1", "tid": decOf(x + 1)},
			"periodic": hash{"s": decOf(tick), "other": "5"},
			"ticks":    hash{"s": hexOf(x+1) + "," + decOf(tick+60_000)},
			"waiting":  list{hexOf(x+1) + ",m2,R1500:p"},
			"retained": zset{hexOf(x + 1): inf},
			"idle":     zset{"r3": 3},
		})
	})
	t.Run("a tick not later than the last changes nothing", func(t *testing.T) {
		t.Parallel()
		e := newScriptEnv(t, "tick.lua")
		tick := e.clockMs() - 10
		seeded := keyState{
			"meta":     hash{"name": "q", "registered": "1", "tid": "7"},
			"periodic": hash{"s": decOf(tick)},
		}
		e.seed(seeded)
		got, err := e.s.Tick(e.ctx, "q", "s", tick, tick+1000, []byte("p"), EnqueueArgs{})
		require.NoError(t, err)
		assert.Equal(t, TickSkipped, got.Status)
		assert.Equal(t, tick, got.Last)
		e.expect(seeded)
	})
	t.Run("a tick still to come changes nothing", func(t *testing.T) {
		t.Parallel()
		e := newScriptEnv(t, "tick.lua")
		seeded := keyState{"meta": hash{"name": "q", "registered": "1", "tid": "7"}}
		e.seed(seeded)
		got, err := e.s.Tick(e.ctx, "q", "s", e.clockMs()+hour, 0, []byte("p"), EnqueueArgs{})
		require.NoError(t, err)
		assert.Equal(t, TickEarly, got.Status)
		e.expect(seeded)
	})
	t.Run("tick 0 records now for a schedule never seen", func(t *testing.T) {
		t.Parallel()
		e := newScriptEnv(t, "tick.lua")
		before := e.clockMs()
		got, err := e.s.Tick(e.ctx, "q", "s", 0, 0, []byte("p"), EnqueueArgs{})
		require.NoError(t, err)
		assert.Equal(t, TickSkipped, got.Status)
		e.within(got.Last, before, e.clockMs(), "the first tick recorded")
		e.expect(keyState{"periodic": hash{"s": decOf(got.Last)}})
	})
	t.Run("tick 0 records the next tick given, keeping the last task's id", func(t *testing.T) {
		t.Parallel()
		e := newScriptEnv(t, "tick.lua")
		e.seed(keyState{
			"periodic": hash{"s": "1000", "t": "1000"},
			"ticks":    hash{"s": "6a,2000"},
		})
		_, err := e.s.Tick(e.ctx, "q", "s", 0, 5000, nil, EnqueueArgs{})
		require.NoError(t, err)
		_, err = e.s.Tick(e.ctx, "q", "t", 0, 7000, nil, EnqueueArgs{})
		require.NoError(t, err)
		e.expect(keyState{
			"periodic": hash{"s": "1000", "t": "1000"},
			"ticks":    hash{"s": "6a,5000", "t": ",7000"},
		})
	})
}

// run_now.lua: one delayed task, by id (not a prefix of one), goes to the
// back of its level's list with its due time set to now, and a runtime is
// woken; an id not delayed changes nothing.
func TestRunNowScript(t *testing.T) {
	t.Parallel()
	e := newScriptEnv(t, "run_now.lua")
	now := e.clock()
	hour := float64(now + 3_600_000_000)
	seed := keyState{
		"waiting": list{"50:old"},
		"delayed": zset{"51,a1,d1:retry": hour, "52:later": hour + 1, "53,ph:high": hour + 2},
	}
	e.seed(seed)
	for _, id := range []string{"5", "99", "50"} {
		ok, err := e.s.RunNow(e.ctx, "q", id)
		require.NoError(t, err)
		assert.False(t, ok, id)
	}
	e.expect(seed)

	ok, err := e.s.RunNow(e.ctx, "q", "51")
	require.NoError(t, err)
	assert.True(t, ok)
	ok, err = e.s.RunNow(e.ctx, "q", "53")
	require.NoError(t, err)
	assert.True(t, ok)
	got := e.dump()
	moved := got["waiting"].(list)[0]
	due, ok := strings.CutPrefix(moved, "51,a1,d")
	require.True(t, ok, moved)
	due, ok = strings.CutSuffix(due, ":retry")
	require.True(t, ok, moved)
	at, err := strconv.ParseInt(due, 16, 64)
	require.NoError(t, err)
	e.within(at, now, e.clock(), "the due time, now")
	high := got["high"].(list)[0]
	require.True(t, strings.HasPrefix(high, "53,ph,d") && strings.HasSuffix(high, ":high"), high)
	e.same(keyState{
		"waiting": list{moved, "50:old"},
		"high":    list{high},
		"delayed": zset{"52:later": hour + 1},
	}, got)
}

// outcome_list.lua: the kept outcomes, latest to expire first, their
// bodies cut; pending tasks and expired outcomes are left out.
func TestOutcomeListScript(t *testing.T) {
	t.Parallel()
	e := newScriptEnv(t, "outcome_list.lua")
	now := e.clockMs()
	seeded := keyState{
		"retained": zset{"70": inf, "71": float64(now + 10_000), "72": float64(now + 50_000), "73": float64(now - 1)},
		"results": hash{
			"71": "71,sok,S1000,E2000,a1:result of 71",
			"72": "72,sdead,S1000,E3000,a2,Ktimeout:boom",
			"73": "73,sok,S1,E2,a1:gone",
		},
	}
	e.seed(seeded)
	got, err := e.s.Outcomes(e.ctx, "q", 0, 10, 4)
	require.NoError(t, err)
	require.Equal(t, []KeptOutcome{
		{Result: Result{ID: "72", Status: "dead", Started: 1000, Ended: 3000, Expires: now + 50_000, Attempts: 2, Reason: "timeout", Body: "boom"}, Size: 4},
		{Result: Result{ID: "71", Status: "ok", Started: 1000, Ended: 2000, Expires: now + 10_000, Attempts: 1, Body: "resu"}, Size: 12},
	}, got)
	got, err = e.s.Outcomes(e.ctx, "q", 1, 1, -1)
	require.NoError(t, err)
	require.Len(t, got, 1)
	assert.Equal(t, "result of 71", got[0].Body)
	got, err = e.s.Outcomes(e.ctx, "q", 2, 10, -1)
	require.NoError(t, err)
	assert.Empty(t, got)
	e.expect(seeded)
}

// outcome_cut.lua: one task's kept outcome, its body cut; a pending task,
// an expired outcome and an unknown id have none.
func TestOutcomeCutScript(t *testing.T) {
	t.Parallel()
	e := newScriptEnv(t, "outcome_cut.lua")
	now := e.clockMs()
	seeded := keyState{
		"retained": zset{"70": inf, "71": float64(now + 10_000), "72": float64(now + 50_000), "73": float64(now - 1)},
		"results": hash{
			"70": "70,sok,S1,E2,a1:not yet",
			"71": "71,sok,S1000,E2000,a1:result of 71",
			"72": "72,sdead,S1000,E3000,a2,Ktimeout:boom",
			"73": "73,sok,S1,E2,a1:gone",
		},
	}
	e.seed(seeded)
	got, ok, err := e.s.OutcomeCut(e.ctx, "q", "71", 4)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, KeptOutcome{Result: Result{ID: "71", Status: "ok", Started: 1000, Ended: 2000, Expires: now + 10_000, Attempts: 1, Body: "resu"}, Size: 12}, got)
	got, ok, err = e.s.OutcomeCut(e.ctx, "q", "72", -1)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, KeptOutcome{Result: Result{ID: "72", Status: "dead", Started: 1000, Ended: 3000, Expires: now + 50_000, Attempts: 2, Reason: "timeout", Body: "boom"}, Size: 4}, got)
	for _, id := range []string{"70", "73", "74"} {
		_, ok, err = e.s.OutcomeCut(e.ctx, "q", id, 4)
		require.NoError(t, err)
		assert.False(t, ok, id)
	}
	e.expect(seeded)
}

// periodic_list.lua: each schedule's last tick, its task's id ("" for one
// whose tick's task is not known) and its next tick when known.
func TestPeriodicListScript(t *testing.T) {
	t.Parallel()
	e := newScriptEnv(t, "periodic_list.lua")
	seeded := keyState{
		"periodic": hash{"nightly": "1000", "heartbeat": "2000"},
		"ticks":    hash{"heartbeat": "66,3000", "gone": "67", "nightly": ",86401000"},
	}
	e.seed(seeded)
	got, err := e.s.Schedules(e.ctx, "q")
	require.NoError(t, err)
	require.Equal(t, []ScheduleState{{Name: "heartbeat", Last: 2000, TaskID: "66", Next: 3000}, {Name: "nightly", Last: 1000, Next: 86401000}}, got)
	e.expect(seeded)
}
