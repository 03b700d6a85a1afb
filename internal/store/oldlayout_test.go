package store

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// An entry retried under the earlier layout counts its starts ('a') but
// carries no attempt or error ('H', 'e'): its last error is in the errors
// hash under its id, and its whole history under '<id>:a'. The scripts
// read it there: its dequeue gives that error, a retry or a reclaim moves
// it into the entry (the hash keeping the older records alone), a death
// keeps it as the dead letter's, and a finish leaves the hash empty.
func TestOldLayoutEntries(t *testing.T) {
	t.Parallel()
	oldEntry := "41,a1,f1,d5:x"
	seed := func(e *scriptEnv, w string, st keyState) {
		first := attemptRecord(5, 'r', w, "boom")
		st["meta"] = hash{"name": "q", "seq": "9"}
		st["errors"] = hash{"41": "boom", "41:a": first}
		e.seed(st)
	}
	dequeue := func(e *scriptEnv, w string) Proc {
		t.Helper()
		ps, _, _, err := e.s.Dequeue(e.ctx, "q", w, 1, false)
		require.NoError(t, err)
		require.Len(t, ps, 1)
		return ps[0]
	}
	history := func(e *scriptEnv) []Attempt {
		t.Helper()
		f, err := e.s.FindTask(e.ctx, "q", "41", -1, FindBounds{Limit: 100, Budget: 1 << 20})
		require.NoError(t, err)
		require.False(t, f.Partial)
		return f.Attempts
	}
	errorsLeft := func(e *scriptEnv, scripts ...string) hash {
		got := e.dump()
		for _, s := range scripts {
			e.compared[s] = true
		}
		h, _ := got["errors"].(hash)
		return h
	}
	for _, c := range []struct{ script, retryErr string }{{"retry_plain.lua", "bang"}, {"retry_plain.lua", ""}, {"retry.lua", "bang"}} {
		retryErr := c.retryErr
		t.Run("dequeue, "+c.script+" "+retryErr+", finish", func(t *testing.T) {
			t.Parallel()
			e := newScriptEnv(t, "dequeue.lua", "retry_plain.lua", "retry.lua", "finish.lua", "task_find.lua")
			w := e.worker()
			seed(e, w, keyState{"leases": zset{w: float64(e.clockMs() + hour)}, "waiting": list{oldEntry}})
			first := Attempt{Ended: 5, How: AttemptRetried, Worker: w, Error: "boom"}
			p := dequeue(e, w)
			assert.Equal(t, "boom", p.Task.LastError, "the first dequeue")
			assert.Equal(t, []Attempt{first}, history(e), "in flight")
			require.True(t, p.Plain)
			out, err := e.retryBy(c.script, []RetryRef{{ProcRef: ProcRef{Worker: w, PID: p.PID}, Err: retryErr}})
			require.NoError(t, err)
			require.Equal(t, []Outcome{WasActive}, out)
			assert.Equal(t, hash{"41:a": attemptRecord(5, 'r', w, "boom")}, errorsLeft(e, "retry_plain.lua", "retry.lua"), "after the retry")
			hist := history(e)
			require.Len(t, hist, 2, "waiting")
			assert.Equal(t, first, hist[0])
			assert.Equal(t, Attempt{Ended: hist[1].Ended, How: AttemptRetried, Worker: w, Error: retryErr}, hist[1])
			p = dequeue(e, w)
			last := retryErr
			if last == "" {
				last = "boom" // an attempt with no error keeps the one before
			}
			assert.Equal(t, last, p.Task.LastError, "the second dequeue")
			_, _, err = e.s.Finish(e.ctx, "q", []ProcRef{{Worker: w, PID: p.PID}})
			require.NoError(t, err)
			assert.Empty(t, errorsLeft(e, "dequeue.lua", "finish.lua", "task_find.lua"), "after the finish")
		})
	}
	t.Run("dequeue, finish", func(t *testing.T) {
		t.Parallel()
		e := newScriptEnv(t, "dequeue.lua", "finish.lua")
		w := e.worker()
		seed(e, w, keyState{"leases": zset{w: float64(e.clockMs() + hour)}, "waiting": list{oldEntry}})
		p := dequeue(e, w)
		assert.Equal(t, "boom", p.Task.LastError)
		_, _, err := e.s.Finish(e.ctx, "q", []ProcRef{{Worker: w, PID: p.PID}})
		require.NoError(t, err)
		assert.Empty(t, errorsLeft(e, "dequeue.lua", "finish.lua"))
	})
	t.Run("delayed, promoted", func(t *testing.T) {
		t.Parallel()
		e := newScriptEnv(t, "promote.lua", "dequeue.lua", "finish.lua")
		w := e.worker()
		seed(e, w, keyState{"leases": zset{w: float64(e.clockMs() + hour)}, "delayed": zset{oldEntry: 5}})
		_, err := e.s.Promote(e.ctx, "q")
		require.NoError(t, err)
		errorsLeft(e, "promote.lua")
		p := dequeue(e, w)
		assert.Equal(t, "boom", p.Task.LastError)
		_, _, err = e.s.Finish(e.ctx, "q", []ProcRef{{Worker: w, PID: p.PID}})
		require.NoError(t, err)
		assert.Empty(t, errorsLeft(e, "dequeue.lua", "finish.lua"))
	})
	t.Run("reclaimed", func(t *testing.T) {
		t.Parallel()
		e := newScriptEnv(t, "release.lua", "dequeue.lua", "task_find.lua")
		dead, w := e.worker(), e.worker()
		now := e.clockMs()
		seed(e, dead, keyState{
			"leases": zset{dead: float64(now - 1), w: float64(now + hour)},
			"procs":  hash{"1": "a" + dead + oldEntry},
		})
		r := e.s.ReleaseOne(e.ctx, Release{Queue: "q", Worker: dead, Mode: ReleaseExpired})
		require.NoError(t, r.Err)
		assert.Equal(t, hash{"41:a": attemptRecord(5, 'r', dead, "boom")}, errorsLeft(e, "release.lua"))
		hist := history(e)
		require.Len(t, hist, 2)
		assert.Equal(t, Attempt{Ended: 5, How: AttemptRetried, Worker: dead, Error: "boom"}, hist[0])
		assert.Equal(t, Attempt{Ended: hist[1].Ended, How: AttemptReclaimed, Worker: dead}, hist[1])
		assert.Equal(t, "boom", dequeue(e, w).Task.LastError)
		errorsLeft(e, "dequeue.lua", "task_find.lua")
	})
	for _, buryErr := range []string{"last", ""} {
		t.Run("buried "+buryErr, func(t *testing.T) {
			t.Parallel()
			e := newScriptEnv(t, "bury.lua", "task_find.lua")
			w := e.worker()
			seed(e, w, keyState{
				"leases": zset{w: float64(e.clockMs() + hour)},
				"procs":  hash{"1": "a" + w + oldEntry},
			})
			out, err := e.s.Bury(e.ctx, "q", ProcRef{Worker: w, PID: "1"}, "failed", buryErr, DeadBounds{MaxCount: 10, MaxAge: 1e12})
			require.NoError(t, err)
			require.Equal(t, WasActive, out)
			last := buryErr
			if last == "" {
				last = "boom"
			}
			left := errorsLeft(e, "bury.lua")
			assert.Equal(t, last, left["41"], "the dead letter's error")
			hist := history(e)
			require.Len(t, hist, 2)
			assert.Equal(t, Attempt{Ended: 5, How: AttemptRetried, Worker: w, Error: "boom"}, hist[0])
			assert.Equal(t, Attempt{Ended: hist[1].Ended, How: AttemptDead, Worker: w, Error: buryErr}, hist[1])
			errorsLeft(e, "task_find.lua")
		})
	}
}

// A search that stops at a bound before the task's entry answers the
// history the errors hash holds, without the latest attempt, which the
// entry carries (TaskLocation.History's doc says so); one that reaches
// it answers the whole.
func TestFindTaskPartialHistoryLacksTheLatestAttempt(t *testing.T) {
	t.Parallel()
	e := newScriptEnv(t, "task_find.lua")
	w := e.worker()
	first := attemptRecord(5, 'r', w, "boom")
	seeded := keyState{
		"meta":    hash{"name": "q", "seq": "9"},
		"waiting": list{"41,a2,f2,d5" + attemptFields(2, 7, 'r', w, "bang", "bang") + ":x", "52:y", "51:y", "50:y"},
		"errors":  hash{"41:a": first},
	}
	e.seed(seeded)
	f, err := e.s.FindTask(e.ctx, "q", "41", -1, FindBounds{Limit: 2, Budget: 1 << 20})
	require.NoError(t, err)
	assert.True(t, f.Partial)
	assert.Nil(t, f.Waiting)
	assert.Equal(t, []Attempt{{Ended: 5, How: AttemptRetried, Worker: w, Error: "boom"}}, f.Attempts, "the hash's records alone")
	f, err = e.s.FindTask(e.ctx, "q", "41", -1, FindBounds{Limit: 100, Budget: 1 << 20})
	require.NoError(t, err)
	assert.False(t, f.Partial)
	require.NotNil(t, f.Waiting)
	assert.Equal(t, []Attempt{
		{Ended: 5, How: AttemptRetried, Worker: w, Error: "boom"},
		{Ended: 7, How: AttemptRetried, Worker: w, Error: "bang"},
	}, f.Attempts, "the whole history")
	e.expect(seeded) // a read writes nothing
}
