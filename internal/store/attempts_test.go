package store

import (
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// attemptRecord is one record of an attempt history as attempt_note
// writes it.
func attemptRecord(ended int64, how byte, worker, err string) string {
	return decOf(ended) + "," + string(how) + "," + strconv.Itoa(len(worker)) + "," + strconv.Itoa(len(err)) + ":" + worker + err
}

// attemptFields are the header fields a task's last failed attempt leaves
// in its entry (the 'H' and 'e' letters in records.go): a history of n
// records, the last one's end, how, worker and error, then last, the
// task's last error ("" for none; err unless that is "").
func attemptFields(n int, ended int64, how byte, worker, err, last string) string {
	f := ",H" + strconv.Itoa(n) + "." + decOf(ended) + "." + string(how) + "." + worker
	if err == "" {
		f += "."
	}
	if last != "" {
		f += ",e" + strings.NewReplacer("%", "%25", ",", "%2C", ":", "%3A").Replace(last)
	}
	return f
}

// attemptEnded is when the last attempt an entry carries ended (its 'H'
// field's).
func attemptEnded(t *testing.T, entry string) int64 {
	t.Helper()
	h, _, _ := strings.Cut(entry, ":")
	_, v, ok := strings.Cut(h, ",H")
	require.True(t, ok, "no attempt in %q", entry)
	parts := strings.Split(v, ".")
	require.GreaterOrEqual(t, len(parts), 4, "attempt %q", v)
	ended, err := strconv.ParseInt(parts[1], 10, 64)
	require.NoError(t, err)
	return ended
}

// A history reads back record by record, a malformed tail is dropped, and
// a rune cut at the bound is trimmed.
func TestParseAttempts(t *testing.T) {
	t.Parallel()
	v := attemptRecord(5, 'r', "w1", "a:b,c") + attemptRecord(6, 'k', "w2", "") + attemptRecord(7, 'd', "", "é"[:1])
	assert.Equal(t, []Attempt{
		{Ended: 5, How: AttemptRetried, Worker: "w1", Error: "a:b,c"},
		{Ended: 6, How: AttemptReclaimed, Worker: "w2"},
		{Ended: 7, How: AttemptDead},
	}, ParseAttempts(v))
	assert.Len(t, ParseAttempts(v+"8,r,1,99:xy"), 3, "a record longer than what is left")
	assert.Len(t, ParseAttempts(v+"junk"), 3)
	assert.Empty(t, ParseAttempts(""))
}

// attempt_added (retry.lua's and retry_plain.lua's) keeps the last ten
// records, the error of each cut to 1,024 bytes: the last in the entry,
// the others in the errors hash; the last error is kept whole, in the
// entry.
func TestAttemptHistoryBounded(t *testing.T) {
	t.Parallel()
	for _, script := range []string{"retry.lua", "retry_plain.lua"} {
		t.Run(script, func(t *testing.T) {
			t.Parallel()
			e := newScriptEnv(t, script)
			w := e.worker()
			lease := float64(e.clockMs() + hour)
			var old []string
			for i := range 9 {
				old = append(old, attemptRecord(int64(i+1), 'r', w, "e"+strconv.Itoa(i)))
			}
			long := strings.Repeat("x", 2000)
			e.seed(keyState{
				"meta":   hash{"name": "q", "seq": "9"},
				"leases": zset{w: lease},
				"procs":  hash{"1": "a" + w + "41,a10,f10" + attemptFields(10, 10, 'r', w, "e9", "e9") + ":x"},
				"errors": hash{"41:a": strings.Join(old, "")},
			})
			before := e.clockMs()
			_, err := e.retryBy(script, []RetryRef{{ProcRef: ProcRef{Worker: w, PID: "1"}, Err: long}})
			require.NoError(t, err)
			got := e.dump()
			entry := got["waiting"].(list)[0]
			at := e.within(attemptEnded(t, entry), before, e.clockMs(), "when it ended")
			assert.Contains(t, entry, attemptFields(10, at, 'r', w, long, long)+":x", "the last error is kept whole")
			assert.Equal(t, hash{"41:a": strings.Join(old[1:], "") + attemptRecord(10, 'r', w, "e9")}, got["errors"], "the oldest record dropped")
			f, err := e.s.FindTask(e.ctx, "q", "41", -1, FindBounds{Limit: 10, Budget: 1 << 20})
			require.NoError(t, err)
			want := ParseAttempts(strings.Join(old[1:], "") + attemptRecord(10, 'r', w, "e9") + attemptRecord(at, 'r', w, long[:1024]))
			require.Len(t, want, 10)
			assert.Equal(t, want, f.Attempts)
		})
	}
}

// A task's history goes wherever its error goes: when it finishes, when
// its dead letter is deleted, requeued or purged.
func TestAttemptHistoryRemoved(t *testing.T) {
	t.Parallel()
	t.Run("finish", func(t *testing.T) {
		t.Parallel()
		e := newScriptEnv(t, "finish.lua")
		w := e.worker()
		lease := float64(e.clockMs() + hour)
		e.seed(keyState{
			"meta":   hash{"name": "q", "seq": "9"},
			"leases": zset{w: lease},
			"procs":  hash{"1": "a" + w + "31,a2,f1:x"},
			"errors": hash{"31": "e", "31:a": attemptRecord(1, 'r', w, "e"), "30:a": attemptRecord(1, 'r', w, "other")},
		})
		_, _, err := e.s.Finish(e.ctx, "q", []ProcRef{{Worker: w, PID: "1"}})
		require.NoError(t, err)
		e.expect(keyState{
			"meta":   hash{"name": "q", "seq": "9"},
			"leases": zset{w: lease},
			"errors": hash{"30:a": attemptRecord(1, 'r', w, "other")},
		})
	})
	deadSeed := func() keyState {
		return keyState{
			"meta":   hash{"name": "q", "seq": "9"},
			"dead":   zset{"51,D1:a": 1, "52,D2:b": 2},
			"errors": hash{"51": "e51", "51:a": attemptRecord(1, 'd', "w", "e51"), "52": "e52", "52:a": attemptRecord(2, 'd', "w", "e52"), "60:a": attemptRecord(3, 'r', "w", "waits")},
		}
	}
	t.Run("dead letter deleted", func(t *testing.T) {
		t.Parallel()
		e := newScriptEnv(t, "dead_delete.lua")
		e.seed(deadSeed())
		ok, err := e.s.DeleteDead(e.ctx, "q", "51")
		require.NoError(t, err)
		require.True(t, ok)
		e.expect(keyState{
			"meta":   hash{"name": "q", "seq": "9"},
			"dead":   zset{"52,D2:b": 2},
			"errors": hash{"52": "e52", "52:a": attemptRecord(2, 'd', "w", "e52"), "60:a": attemptRecord(3, 'r', "w", "waits")},
		})
	})
	t.Run("dead letters purged", func(t *testing.T) {
		t.Parallel()
		e := newScriptEnv(t, "dead_purge.lua")
		e.seed(deadSeed())
		n, err := e.s.PurgeDead(e.ctx, "q")
		require.NoError(t, err)
		require.EqualValues(t, 2, n)
		e.expect(keyState{
			"meta":   hash{"name": "q", "seq": "9"},
			"errors": hash{"60:a": attemptRecord(3, 'r', "w", "waits")},
		})
	})
	t.Run("dead letter requeued", func(t *testing.T) {
		t.Parallel()
		e := newScriptEnv(t, "dead_requeue.lua")
		e.seed(deadSeed())
		ok, err := e.s.RequeueDead(e.ctx, "q", "52")
		require.NoError(t, err)
		require.True(t, ok)
		errs := e.dump()["errors"].(hash)
		assert.NotContains(t, errs, "52:a")
		assert.Contains(t, errs, "51:a")
	})
}
