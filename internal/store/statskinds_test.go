package store

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/worqr/worqr/internal/scripts"
)

// The scripts keep as many kinds apart as the client's constant says.
func TestStatsKindsIsTheScripts(t *testing.T) {
	t.Parallel()
	rdb := testRedis(t)
	lua := scripts.WithCommon("return stats_writer().KINDS")
	n, err := lua.Exec(context.Background(), rdb, nil, nil).AsInt64()
	require.NoError(t, err)
	assert.EqualValues(t, StatsKinds, n)
}

// stats.lua with counts of kinds: a kind is admitted while there is room
// (the field "kinds" lists it, with the hour), later ones go to
// "(other)"; a kind not counted for the hour ring's window gives its
// place up, with its values in every slot; the roll to a new minute
// moves the kinds' values with the others.
func TestStatsScriptKinds(t *testing.T) {
	t.Parallel()
	// run runs stats.lua with counts and returns the keys and the
	// minute the script wrote under.
	run := func(e *scriptEnv, counts string) (keyState, int64) {
		before := e.clockMs() / 60_000
		require.NoError(t, e.s.scripts.Stats.Exec(e.ctx, e.s.rdb, []string{e.k.Stats, e.k.Meta}, []string{counts}).Error())
		got := e.dump()
		cur := e.within(num(t, got["stats"].(hash)["cur"]), before, e.clockMs()/60_000, "the minute")
		return got, cur
	}
	ten := func(hour0, hour int64) string {
		var rec []string
		for i := range StatsKinds {
			h := hour
			if i == 0 {
				h = hour0
			}
			rec = append(rec, fmt.Sprintf("k%d=%d", i, h))
		}
		return strings.Join(rec, " ")
	}
	t.Run("admitted", func(t *testing.T) {
		t.Parallel()
		e := newScriptEnv(t, "stats.lua")
		e.statsOn()
		e.seed(keyState{"meta": hash{"name": "q"}})
		got, cur := run(e, "f=3 f/email.welcome=2 r/email.welcome=1 f/a-b_c/d=1 zz/x=4 f/=1")
		h := decOf(cur / 60)
		e.same(keyState{
			"meta": hash{"name": "q"},
			"stats": hash{"cur": decOf(cur), "c:f": "3", "c:f/email.welcome": "2", "c:r/email.welcome": "1", "c:f/a-b_c/d": "1",
				"kinds": "a-b_c/d=" + h + " email.welcome=" + h},
		}, got)
	})
	t.Run("past the bound, other", func(t *testing.T) {
		t.Parallel()
		e := newScriptEnv(t, "stats.lua")
		e.statsOn()
		hour := e.clockMs() / 3_600_000
		rec := ten(hour, hour)
		e.seed(keyState{"meta": hash{"name": "q"}, "stats": hash{"kinds": rec}})
		got, cur := run(e, "f/new=3 f/k1=1 d/new2=2 r/bad:kind=1 f/(other)=1")
		require.Equal(t, hour, cur/60, "the hour turned during the test")
		e.same(keyState{
			"meta":  hash{"name": "q"},
			"stats": hash{"cur": decOf(cur), "c:f/(other)": "4", "c:f/k1": "1", "c:d/(other)": "2", "c:r/(other)": "1", "kinds": rec},
		}, got)
	})
	t.Run("a kind gone from every window gives its place up", func(t *testing.T) {
		t.Parallel()
		e := newScriptEnv(t, "stats.lua")
		e.statsOn()
		hour := e.clockMs() / 3_600_000
		e.seed(keyState{"meta": hash{"name": "q"}, "stats": hash{
			"kinds": ten(hour-StatsHours, hour-1),
			"m5":    "5", "m5:f/k0": "4", "m5:f/k1": "1", "h3": "3", "h3:d/k0": "1", "h3:f": "9",
		}})
		got, cur := run(e, "f/new=1")
		require.Equal(t, hour, cur/60, "the hour turned during the test")
		want := strings.Replace(ten(hour-StatsHours, hour-1), fmt.Sprintf("k0=%d ", hour-StatsHours), "", 1) + fmt.Sprintf(" new=%d", hour)
		e.same(keyState{
			"meta": hash{"name": "q"},
			"stats": hash{"cur": decOf(cur), "c:f/new": "1", "kinds": want,
				"m5": "5", "m5:f/k1": "1", "h3": "3", "h3:f": "9"},
		}, got)
	})
	t.Run("a new minute moves the kinds", func(t *testing.T) {
		t.Parallel()
		e := newScriptEnv(t, "stats.lua")
		e.statsOn()
		minute := e.clockMs() / 60_000
		prev := minute - 1
		hour := prev / 60
		rec := "a=" + decOf(hour)
		e.seed(keyState{"meta": hash{"name": "q"}, "stats": hash{
			"kinds": rec, "cur": decOf(prev), "c:f": "2", "c:f/a": "2", "c:d/(other)": "1",
			// A slot reused: its old values go, a kind's too.
			"m" + decOf(prev%StatsMinutes): decOf(prev - StatsMinutes), "m" + decOf(prev%StatsMinutes) + ":f/a": "7",
		}})
		got, cur := run(e, "s=1")
		require.Equal(t, minute, cur, "the minute turned during the test")
		m, h := "m"+decOf(prev%StatsMinutes), "h"+decOf(hour%StatsHours)
		e.same(keyState{
			"meta": hash{"name": "q"},
			"stats": hash{"cur": decOf(cur), "c:s": "1", "kinds": rec,
				m: decOf(prev), m + ":f": "2", m + ":f/a": "2", m + ":d/(other)": "1",
				h: decOf(hour), h + ":f": "2", h + ":f/a": "2", h + ":d/(other)": "1"},
		}, got)
	})
}

// bury.lua counts a dead task under its kind too; one without a kind
// only in the total.
func TestBuryScriptCountsKinds(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{"", "email.welcome"} {
		t.Run("kind "+kind, func(t *testing.T) {
			t.Parallel()
			e := newScriptEnv(t, "bury.lua")
			e.statsOn()
			w := e.worker()
			header := "61"
			if kind != "" {
				header += ",k" + kind
			}
			e.seed(keyState{
				"meta":   hash{"name": "q", "seq": "9"},
				"leases": zset{w: float64(e.clockMs() + hour)},
				"procs":  hash{"1": "a" + w + header + ":x"},
			})
			out, err := e.s.Bury(e.ctx, "q", ProcRef{Worker: w, PID: "1"}, "error", "boom", DeadBounds{MaxCount: 3, MaxAge: time.Hour})
			require.NoError(t, err)
			require.Equal(t, WasActive, out)
			st := e.dump()["stats"].(hash)
			assert.Equal(t, "1", st["c:d"])
			if kind == "" {
				for f := range st {
					assert.NotContains(t, f, "/", "no kind counted")
				}
				assert.NotContains(t, st, "kinds")
				return
			}
			assert.Equal(t, "1", st["c:d/"+kind])
			assert.Contains(t, st["kinds"], kind+"=")
		})
	}
}

// Many kinds from one client: the client folds those past its own bound
// into "(other)", the script those past StatsKinds; none is lost.
func TestStatsKindsBound(t *testing.T) {
	t.Parallel()
	rdb := testRedis(t)
	ctx := context.Background()
	s := New(rdb, "worqrtest-"+uuid.NewString()[:8], false, true)
	key, meta := s.Keys().Queue("q").Stats, s.Keys().Queue("q").Meta
	t.Cleanup(func() { rdb.Do(context.Background(), rdb.B().Del().Key(key, meta).Build()) })
	require.NoError(t, rdb.Do(ctx, rdb.B().Hset().Key(meta).FieldValue().FieldValue("name", "q").Build()).Error())
	const kinds = 100
	for i := range kinds {
		pids := []string{strconv.FormatInt(19_000, 16), strconv.FormatInt(19_000, 16)}
		s.stats.ended("q", false, 20_000, pids, []string{fmt.Sprintf("kind%03d", i), ""}, []Outcome{WasActive, WasActive})
		s.stats.ended("q", true, 20_000, pids[:1], []string{fmt.Sprintf("kind%03d", i)}, []Outcome{WasActive})
	}
	s.stats.mu.Lock()
	assert.Len(t, s.stats.queues["q"].kinds, statsPendingKinds+1, "the client's bound and its other")
	s.stats.mu.Unlock()
	require.NoError(t, s.FlushStats(ctx, ""))
	// A second flush after: kinds admitted stay, others still fold.
	s.stats.ended("q", false, 20_000, []string{"1"}, []string{"kind999"}, []Outcome{WasActive})
	require.NoError(t, s.FlushStats(ctx, ""))

	_, slots, err := s.Stats(ctx, "q", time.Time{})
	require.NoError(t, err)
	require.NotEmpty(t, slots)
	m := slots[0]
	assert.Len(t, m.Kinds, StatsKinds+1, "the kinds kept apart and their other: %v", m.Kinds)
	var sum [3]int64
	for kind, c := range m.Kinds {
		if kind != StatsOtherKind {
			assert.Equal(t, [3]int64{1, 1, 0}, c, kind)
		}
		for i := range c {
			sum[i] += c[i]
		}
	}
	assert.Equal(t, [3]int64{kinds + 1, kinds, 0}, sum, "every task with a kind counted once")
	assert.EqualValues(t, 2*kinds+1, m.Counts[StatFinished])
	assert.EqualValues(t, kinds-StatsKinds+1, m.Kinds[StatsOtherKind][KindFinished])

	// A read of recent minutes (HMGET) names the kinds' fields too.
	_, near, err := s.Stats(ctx, "q", time.Now().Add(-time.Minute))
	require.NoError(t, err)
	require.NotEmpty(t, near)
	assert.Equal(t, m.Kinds, near[0].Kinds)
}

// release.lua counts a task its poison guard buries under its kind too.
func TestPoisonBurialCountsItsKind(t *testing.T) {
	t.Parallel()
	rdb := testRedis(t)
	ctx := context.Background()
	s := New(rdb, "worqrtest-"+uuid.NewString()[:8], false, true)
	k := s.Keys().Queue("q")
	t.Cleanup(func() {
		rdb.Do(context.Background(), rdb.B().Del().Key(k.Waiting, k.Procs, k.Meta, k.Dead, k.Errors, k.Leases, k.Stats).Build())
	})
	clock, err := rdb.Do(ctx, rdb.B().Time().Build()).AsStrSlice()
	require.NoError(t, err)
	sec, _ := strconv.ParseInt(clock[0], 10, 64)
	usec, _ := strconv.ParseInt(clock[1], 10, 64)
	start := time.Unix(sec, usec*1000).Add(-100 * time.Millisecond)
	worker := uuid.NewString()
	id := strconv.FormatInt(start.Add(-time.Second).UnixMicro(), 16)
	pid := strconv.FormatInt(start.UnixMicro(), 16)
	require.NoError(t, rdb.Do(ctx, rdb.B().Hset().Key(k.Meta).FieldValue().FieldValue("name", "q").Build()).Error())
	require.NoError(t, rdb.Do(ctx, rdb.B().Hset().Key(k.Procs).FieldValue().FieldValue(pid, "a"+worker+id+",a1,r1,kemail.welcome:payload").Build()).Error())

	r := s.ReleaseOne(ctx, Release{Queue: "q", Worker: worker, Mode: ReleaseExpired,
		Poison: Poison{Limit: 2, Window: 2 * time.Second, Born: start.Add(-10 * time.Second), Bounds: DeadBounds{MaxCount: 10, MaxAge: time.Hour}}})
	require.NoError(t, r.Err)
	require.Equal(t, []string{id}, r.Buried)
	st, err := rdb.Do(ctx, rdb.B().Hgetall().Key(k.Stats).Build()).AsStrMap()
	require.NoError(t, err)
	assert.Equal(t, "1", st["c:d"])
	assert.Equal(t, "1", st["c:d/email.welcome"])
}
