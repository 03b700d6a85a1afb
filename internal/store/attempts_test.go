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
// records, the error of each cut to 1,024 bytes.
func TestAttemptHistoryBounded(t *testing.T) {
	t.Parallel()
	for _, script := range []string{"retry.lua", "retry_plain.lua"} {
		t.Run(script, func(t *testing.T) {
			t.Parallel()
			e := newScriptEnv(t, script)
			w := e.worker()
			lease := float64(e.clockMs() + hour)
			var old []string
			for i := range 10 {
				old = append(old, attemptRecord(int64(i+1), 'r', w, "e"+strconv.Itoa(i)))
			}
			long := strings.Repeat("x", 2000)
			e.seed(keyState{
				"meta":   hash{"name": "q", "seq": "9"},
				"leases": zset{w: lease},
				"procs":  hash{"1": "a" + w + "41,a10,f10:x"},
				"errors": hash{"41": "e9", "41:a": strings.Join(old, "")},
			})
			before := e.clockMs()
			_, err := e.retryBy(script, []RetryRef{{ProcRef: ProcRef{Worker: w, PID: "1"}, Err: long}})
			require.NoError(t, err)
			got := e.dump()["errors"].(hash)
			history := ParseAttempts(got["41:a"])
			require.Len(t, history, 10, "the oldest record dropped")
			at := e.within(history[9].Ended, before, e.clockMs(), "when it ended")
			assert.Equal(t, strings.Join(old[1:], "")+attemptRecord(at, 'r', w, long[:1024]), got["41:a"])
			assert.Equal(t, long, got["41"], "the last error is kept whole, as before")
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
