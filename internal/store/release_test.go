package store

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The poison-pill guard of release.lua, rule by rule: processes of a dead
// worker are seeded with start times around the Redis clock, one release
// runs, and the entries that come back (or go to the dead letters) are
// compared.
func TestReleaseRunsThePoisonGuard(t *testing.T) {
	t.Parallel()
	const window = 2 * time.Second
	cases := []struct {
		name   string
		mode   ReleaseMode
		header string        // the task's header fields before
		age    time.Duration // how long ago the process started
		joined time.Duration // how long before the process the holder joined (0: unknown)
		want   string        // the header fields after, or "dead"
	}{
		{"a mature holder dead soon after the start counts", ReleaseExpired, "", 100 * time.Millisecond, 10 * time.Second, ",a1,r1"},
		{"the death that reaches the limit buries", ReleaseExpired, ",a1,r1", 100 * time.Millisecond, 10 * time.Second, "dead"},
		{"a holder of unknown age counts", ReleaseExpired, "", 100 * time.Millisecond, 0, ",a1,r1"},
		{"a holder that had just joined counts nothing", ReleaseExpired, "", 100 * time.Millisecond, time.Second, ",a1"},
		{"a holder that had just joined counts once the task has a death", ReleaseExpired, ",a1,r1", 100 * time.Millisecond, time.Second, "dead"},
		{"a task once held healthy counts nothing", ReleaseExpired, ",a1,r1,h1", 100 * time.Millisecond, 10 * time.Second, ",a2,r1,h1"},
		{"a task held past the window is marked and cleared", ReleaseExpired, ",a1,r1", 3 * time.Second, 10 * time.Second, ",a2,h1"},
		{"a worker giving its work back counts nothing", ReleaseForce, "", 100 * time.Millisecond, 10 * time.Second, ",a1"},
		{"a worker giving back a task held long marks it", ReleaseForce, "", 3 * time.Second, 10 * time.Second, ",a1,h1"},
	}
	rdb := testRedis(t)
	ctx := context.Background()
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := New(rdb, "worqrtest-"+uuid.NewString()[:8], false, false)
			k := s.Keys().Queue("q")
			t.Cleanup(func() {
				rdb.Do(context.Background(), rdb.B().Del().Key(k.Waiting, k.Procs, k.Meta, k.Dead, k.Errors, k.Leases).Build())
			})
			clock, err := rdb.Do(ctx, rdb.B().Time().Build()).AsStrSlice()
			require.NoError(t, err)
			sec, _ := strconv.ParseInt(clock[0], 10, 64)
			usec, _ := strconv.ParseInt(clock[1], 10, 64)
			now := time.Unix(sec, usec*1000)
			start := now.Add(-tc.age)
			worker := uuid.NewString()
			var born time.Time
			if tc.joined > 0 {
				born = start.Add(-tc.joined)
			}
			id := strconv.FormatInt(start.Add(-time.Second).UnixMicro()+int64(i), 16)
			pid := strconv.FormatInt(start.UnixMicro(), 16)
			require.NoError(t, rdb.Do(ctx, rdb.B().Hset().Key(k.Meta).FieldValue().FieldValue("name", "q").Build()).Error())
			require.NoError(t, rdb.Do(ctx, rdb.B().Hset().Key(k.Procs).FieldValue().FieldValue(pid, "a"+worker+id+tc.header+":payload").Build()).Error())

			r := s.ReleaseOne(ctx, Release{Queue: "q", Worker: worker, Mode: tc.mode,
				Poison: Poison{Limit: 2, Window: window, Born: born, Bounds: DeadBounds{MaxCount: 10, MaxAge: time.Hour}}})
			require.NoError(t, r.Err)
			waiting, err := rdb.Do(ctx, rdb.B().Lrange().Key(k.Waiting).Start(0).Stop(-1).Build()).AsStrSlice()
			require.NoError(t, err)
			dead, err := rdb.Do(ctx, rdb.B().Zrange().Key(k.Dead).Min("0").Max("-1").Build()).AsStrSlice()
			require.NoError(t, err)
			if tc.want == "dead" {
				assert.Empty(t, waiting)
				require.Len(t, dead, 1)
				assert.Contains(t, dead[0], ",Kpoison")
				assert.NotContains(t, dead[0], ",H", "a dead letter's history is all in the errors hash")
				assert.Equal(t, []string{id}, r.Buried)
				assert.Zero(t, r.Returned)
				errs, err := rdb.Do(ctx, rdb.B().Hgetall().Key(k.Errors).Build()).AsStrMap()
				require.NoError(t, err)
				assert.Contains(t, errs[id], "its holder died soon after starting it")
				history := ParseAttempts(errs[AttemptsField(id)])
				require.NotEmpty(t, history)
				assert.Equal(t, byte(AttemptDead), history[len(history)-1].How)
				assert.Equal(t, worker, history[len(history)-1].Worker)
				return
			}
			assert.Empty(t, dead)
			assert.Empty(t, r.Buried)
			require.Len(t, waiting, 1)
			header, payload, _ := strings.Cut(waiting[0], ":")
			assert.Equal(t, "payload", payload)
			assert.ElementsMatch(t, fields(id+tc.want), fields(header))
			if tc.mode == ReleaseExpired {
				assert.Regexp(t, `,H1\.[0-9]+\.k\.`+worker+`\.(,|$)`, header, "the reclaim is the entry's attempt, its only one")
			} else {
				assert.NotContains(t, header, ",H", "a task given back failed no attempt")
			}
		})
	}
}

// fields are a header's id and fields, but for "d" (when the task became
// due, which a release sets to its time) and "H" (a reclaim's attempt,
// with its time).
func fields(header string) []string {
	all := strings.Split(header, ",")
	out := all[:1]
	for _, f := range all[1:] {
		if !strings.HasPrefix(f, "d") && !strings.HasPrefix(f, "H") {
			out = append(out, f)
		}
	}
	return out
}
