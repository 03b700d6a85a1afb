package store

import (
	"context"
	"github.com/worqr/worqr/internal/clock"
	"math"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/google/uuid"
	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/worqr/worqr/internal/scripts"
)

// testRedis is a client of the Redis Cluster whose seed nodes
// WORQR_TEST_CLUSTER lists, or of the Redis of WORQR_TEST_REDIS, or of a
// miniredis (as the root package's tests choose).
func testRedis(t *testing.T) rueidis.Client {
	t.Helper()
	opt := rueidis.ClientOption{DisableCache: true}
	if seeds := os.Getenv("WORQR_TEST_CLUSTER"); seeds != "" {
		opt.InitAddress = strings.Split(seeds, ",")
	} else if addr := os.Getenv("WORQR_TEST_REDIS"); addr != "" {
		opt.InitAddress = []string{addr}
	} else {
		m := miniredis.RunT(t)
		opt.InitAddress = []string{m.Addr()}
		opt.AlwaysRESP2, opt.ForceSingleClient = true, true
	}
	rdb, err := rueidis.NewClient(opt)
	require.NoError(t, err)
	t.Cleanup(rdb.Close)
	return rdb
}

// The client's histogram buckets are the scripts' (common/stats.lua's
// stats_bucket), at every edge.
func TestStatsBucketIsTheScripts(t *testing.T) {
	t.Parallel()
	rdb := testRedis(t)
	ctx := context.Background()
	var durations []int64
	for k := 0; k <= 40; k++ {
		edge := int64(1) << k
		durations = append(durations, edge-1, edge, edge+1)
	}
	durations = append(durations, 0, 3, 1000, 123456789, math.MaxInt64/2)
	args := make([]string, len(durations))
	for i, d := range durations {
		args[i] = strconv.FormatInt(d, 10)
	}
	lua := scripts.WithCommon(`local out = {}
for i, v in ipairs(ARGV) do out[i] = stats_bucket(tonumber(v)) end
return out`)
	got, err := lua.Exec(ctx, rdb, nil, args).AsIntSlice()
	require.NoError(t, err)
	require.Len(t, got, len(durations))
	for i, d := range durations {
		assert.EqualValues(t, got[i], statsBucket(d), "%d µs", d)
	}
}

// The counts a client carries are written as the scripts would have
// counted them; names a script does not know are skipped.
func TestStatsCarriedCountsAreWritten(t *testing.T) {
	t.Parallel()
	rdb := testRedis(t)
	ctx := context.Background()
	s := New(rdb, "worqrtest-"+uuid.NewString()[:8], false, true)
	key, meta := s.Keys().Queue("q").Stats, s.Keys().Queue("q").Meta
	t.Cleanup(func() { rdb.Do(context.Background(), rdb.B().Del().Key(key, meta).Build()) })
	// A queue that exists; only its counts are written.
	require.NoError(t, rdb.Do(ctx, rdb.B().Hset().Key(meta).FieldValue().FieldValue("name", "q").Build()).Error())
	// A dequeue of two tasks that waited 3 and 1000 µs (the pid is the
	// dequeue time; the id the enqueue, or the 'd' field when due later).
	s.stats.started("q", []Proc{
		{PID: strconv.FormatInt(5003, 16), Task: Task{ID: strconv.FormatInt(5000, 16)}},
		{PID: strconv.FormatInt(9000, 16), Task: Task{ID: "1", Due: 8000}},
		{PID: "2710", Task: Task{Payload: "not worqr's"}}, // counted, not timed
	})
	s.stats.ended("q", false, 20_000, []string{strconv.FormatInt(19_000, 16), "1"}, nil, []Outcome{WasActive, NotOwned})
	s.stats.ended("q", true, 20_000, []string{strconv.FormatInt(20_001, 16)}, nil, []Outcome{WasActive})
	require.NoError(t, s.FlushStats(ctx, ""))
	assert.True(t, s.StatsNextIdle().IsZero(), "nothing left")

	_, slots, err := s.Stats(ctx, "q", time.Time{})
	require.NoError(t, err)
	require.Len(t, slots, 2, "the minute and its hour")
	m := slots[0]
	want := [len(StatCounters)]int64{}
	want[StatStarted], want[StatFinished], want[StatRetried] = 3, 1, 1
	assert.Equal(t, want, m.Counts)
	assert.EqualValues(t, 1, m.Wait[statsBucket(3)])
	assert.EqualValues(t, 1, m.Wait[statsBucket(1000)])
	assert.EqualValues(t, 1003, m.WaitSum)
	assert.EqualValues(t, 1, m.Run[statsBucket(1000)])
	assert.EqualValues(t, 1, m.Run[0], "a pid ahead of the clock runs 0 µs")
	assert.EqualValues(t, 1000, m.RunSum)

	add := s.scripts.Stats.Exec(ctx, rdb, []string{key, meta}, []string{"s=2 zz=5 w3=1 f=x w37=4 u36=2 ws=7"})
	require.NoError(t, add.Error())
	all, err := rdb.Do(ctx, rdb.B().Hgetall().Key(key).Build()).AsStrMap()
	require.NoError(t, err)
	assert.Equal(t, "5", all["c:s"])
	assert.Equal(t, "1", all["c:w3"])
	assert.Equal(t, "2", all["c:u36"])
	assert.Equal(t, "1010", all["c:ws"])
	assert.NotContains(t, all, "c:zz")
	assert.NotContains(t, all, "c:w37", "past the last bucket")

	// A queue deleted (its meta hash without its name): nothing written.
	require.NoError(t, rdb.Do(ctx, rdb.B().Del().Key(key, meta).Build()).Error())
	require.NoError(t, s.scripts.Stats.Exec(ctx, rdb, []string{key, meta}, []string{"s=2"}).Error())
	n, err := rdb.Do(ctx, rdb.B().Exists().Key(key).Build()).AsInt64()
	require.NoError(t, err)
	assert.Zero(t, n)
	assert.Equal(t, "1", all["c:f"], "a value that is not a number is skipped")
}

// What counting costs the client per task: a dequeue of 14 tasks and the
// finish of their 14 processes (the batch the process benchmark settles
// at), with the mutex uncontended.
func BenchmarkStatsCount(b *testing.B) {
	buf := newStatsBuf(clock.Real())
	procs := make([]Proc, 14)
	pids := make([]string, len(procs))
	outs := make([]Outcome, len(procs))
	for i := range procs {
		pid := int64(1_700_000_000_000_000 + i)
		procs[i] = Proc{PID: strconv.FormatInt(pid, 16), Task: Task{ID: strconv.FormatInt(pid-1000*int64(i), 16)}}
		pids[i], outs[i] = procs[i].PID, WasActive
	}
	b.ResetTimer()
	for range b.N {
		buf.started("q", procs)
		buf.ended("q", false, 1_700_000_000_005_000, pids, nil, outs)
		if c := buf.take("q"); c.p != nil {
			_ = c.counts()
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(procs)), "ns/task")
}
