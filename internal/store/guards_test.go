package store

import (
	"crypto/sha1"
	"encoding/hex"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The guard paths of the scripts whose main path is tested elsewhere:
// each call is refused, or finds nothing to do, and leaves every key as
// it was seeded.

// The scripts that settle or touch one process refuse a worker whose
// lease on the queue is gone and a process that is not the worker's (or
// not there), changing nothing.
func TestProcessScriptsGuards(t *testing.T) {
	t.Parallel()
	calls := []struct {
		script string
		run    func(e *scriptEnv, p ProcRef) (Outcome, error)
	}{
		{"finish.lua", func(e *scriptEnv, p ProcRef) (Outcome, error) {
			out, _, err := e.s.Finish(e.ctx, "q", []ProcRef{p})
			return only(out, err)
		}},
		{"retry.lua", func(e *scriptEnv, p ProcRef) (Outcome, error) {
			return only(e.retryBy("retry.lua", []RetryRef{{ProcRef: p, Err: "boom"}}))
		}},
		{"retry_plain.lua", func(e *scriptEnv, p ProcRef) (Outcome, error) {
			return only(e.retryBy("retry_plain.lua", []RetryRef{{ProcRef: p, Err: "boom"}}))
		}},
		{"bury.lua", func(e *scriptEnv, p ProcRef) (Outcome, error) {
			return e.s.Bury(e.ctx, "q", p, "error", "boom", DeadBounds{MaxCount: 10, MaxAge: time.Hour})
		}},
		{"stop.lua", func(e *scriptEnv, p ProcRef) (Outcome, error) {
			return e.s.Requeue(e.ctx, "q", p)
		}},
		{"progress.lua", func(e *scriptEnv, p ProcRef) (Outcome, error) {
			return e.s.ReportProgress(e.ctx, "q", p, 50, "half")
		}},
	}
	for _, call := range calls {
		for _, tc := range []struct {
			name string
			ref  func(w, other, gone string) ProcRef
			want Outcome
		}{
			{"lease gone", func(_, _, gone string) ProcRef { return ProcRef{Worker: gone, PID: "2"} }, LeaseGone},
			{"another worker's process", func(w, _, _ string) ProcRef { return ProcRef{Worker: w, PID: "1"} }, NotOwned},
			{"no such process", func(w, _, _ string) ProcRef { return ProcRef{Worker: w, PID: "9"} }, NotOwned},
		} {
			t.Run(call.script+"/"+tc.name, func(t *testing.T) {
				t.Parallel()
				e := newScriptEnv(t, call.script)
				w, other, gone := e.worker(), e.worker(), e.worker()
				now := e.clockMs()
				seeded := keyState{
					"meta":    hash{"name": "q", "seq": "9"},
					"leases":  zset{w: float64(now + hour), other: float64(now + hour), gone: float64(now - 1)},
					"procs":   hash{"1": "a" + other + "71,uabc:x", "2": "a" + gone + "72:y"},
					"unique":  hash{"abc": "71"},
					"waiting": list{"73:waits"},
				}
				e.seed(seeded)
				got, err := call.run(e, tc.ref(w, other, gone))
				require.NoError(t, err)
				assert.Equal(t, tc.want, got)
				e.expect(seeded)
			})
		}
	}
}

// only is the one outcome of a batch of one.
func only(out []Outcome, err error) (Outcome, error) {
	if err != nil || len(out) != 1 {
		return 0, err
	}
	return out[0], nil
}

// release.lua, as a reclaimer: a worker whose lease is live is refused,
// with the time its lease has left, and keeps everything.
func TestReleaseRefusesALiveLease(t *testing.T) {
	t.Parallel()
	e := newScriptEnv(t, "release.lua")
	w := e.worker()
	now := e.clockMs()
	seeded := keyState{
		"meta":   hash{"name": "q", "seq": "9"},
		"leases": zset{w: float64(now + 60_000)},
		"procs":  hash{"1": "a" + w + "71:x"},
		"idle":   zset{w: 1},
	}
	e.seed(seeded)
	r := e.s.ReleaseOne(e.ctx, Release{Queue: "q", Worker: w, Mode: ReleaseExpired})
	require.NoError(t, r.Err)
	assert.True(t, r.Refused)
	assert.InDelta(t, 60*time.Second, r.LeaseLeft, float64(5*time.Second))
	assert.Zero(t, r.Returned)
	e.expect(seeded)
}

// join.lua: a registry lease that ran out between serve.lua and it gives
// no queue lease; a queue confirmed in the registry answers so.
func TestJoinScriptGuards(t *testing.T) {
	t.Parallel()
	t.Run("a registry lease run out", func(t *testing.T) {
		t.Parallel()
		e := newScriptEnv(t, "join.lua")
		w := e.worker()
		seeded := keyState{"meta": hash{"name": "q"}}
		e.seed(seeded)
		expiry := strconv.FormatInt(e.clockMs()-1, 10)
		n, err := e.s.scripts.Join.Exec(e.ctx, e.s.rdb, []string{e.k.Leases, e.k.Meta}, []string{w, expiry, "q"}).AsInt64()
		require.NoError(t, err)
		assert.EqualValues(t, -1, n)
		e.expect(seeded)
	})
	t.Run("a queue confirmed", func(t *testing.T) {
		t.Parallel()
		e := newScriptEnv(t, "join.lua")
		w := e.worker()
		expiry := float64(e.clockMs() + hour)
		e.seed(keyState{"workers": zset{w: expiry}, "meta": hash{"name": "q", "registered": "1"}})
		unregistered, err := e.s.JoinQueue(e.ctx, "q", w)
		require.NoError(t, err)
		assert.False(t, unregistered)
		e.expect(keyState{
			"workers": zset{w: expiry},
			"wq:" + w: set{"q"},
			"leases":  zset{w: expiry},
			"meta":    hash{"name": "q", "registered": "1"},
		})
	})
}

// check_unregister.lua: a queue that does not exist is reported so, and
// no meta hash is made for it.
func TestCheckUnregisterGone(t *testing.T) {
	t.Parallel()
	e := newScriptEnv(t, "check_unregister.lua")
	seeded := keyState{"meta": hash{"registered": "1", "seq": "5"}, "queues": set{"z"}}
	e.seed(seeded)
	exists, err := e.s.UnregisterQueue(e.ctx, "q", e.s.CheckScripts())
	require.NoError(t, err)
	assert.False(t, exists)
	e.expect(seeded)
}

// promote.lua: with nothing due, nothing moves, and the next due time is
// answered.
func TestPromoteNothingDue(t *testing.T) {
	t.Parallel()
	e := newScriptEnv(t, "promote.lua")
	due := e.clock() + 3_600_000_000
	seeded := keyState{"delayed": zset{"41:later": float64(due)}, "waiting": list{"40:waits"}, "idle": zset{"r1": 1}}
	e.seed(seeded)
	before := e.clock()
	p, err := e.s.Promote(e.ctx, "q")
	require.NoError(t, err)
	assert.Zero(t, p.Moved)
	assert.Equal(t, due, p.Next)
	e.within(p.Now, before, e.clock(), "the clock")
	e.expect(seeded)
}

// The scripts that remove or requeue in bulk, on a queue with nothing of
// theirs, change nothing.
func TestBulkScriptsFindNothing(t *testing.T) {
	t.Parallel()
	cases := []struct {
		script string
		run    func(e *scriptEnv) (int64, error)
	}{
		{"cancel.lua", func(e *scriptEnv) (int64, error) {
			n, notices, err := e.s.CancelPayload(e.ctx, "q", []byte("none"))
			assert.Empty(e.t, notices)
			return n.Removed + n.Marked, err
		}},
		{"cancel_waiting.lua", func(e *scriptEnv) (int64, error) {
			n, more, notices, err := e.s.CancelWaiting(e.ctx, "q", CancelSelection{Kind: "none"}, 100)
			assert.False(e.t, more)
			assert.Empty(e.t, notices)
			return n, err
		}},
		{"dead_requeue_all.lua", func(e *scriptEnv) (int64, error) {
			return e.s.RequeueAllDead(e.ctx, "q")
		}},
		{"dead_purge.lua", func(e *scriptEnv) (int64, error) {
			return e.s.PurgeDead(e.ctx, "q")
		}},
		{"run_now.lua", func(e *scriptEnv) (int64, error) {
			ok, err := e.s.RunNow(e.ctx, "q", "99")
			if ok {
				return 1, err
			}
			return 0, err
		}},
		{"flow_forget.lua", func(e *scriptEnv) (int64, error) {
			return 0, e.s.ForgetNotices(e.ctx, "q", []string{"wf1.x,99,ok"})
		}},
	}
	for _, tc := range cases {
		t.Run(tc.script, func(t *testing.T) {
			t.Parallel()
			e := newScriptEnv(t, tc.script)
			w := e.worker()
			seeded := keyState{
				"meta":    hash{"name": "q", "seq": "9", "registered": "1"},
				"leases":  zset{w: float64(e.clockMs() + hour)},
				"waiting": list{"72,kjob:same"},
				"delayed": zset{"73:later": 5},
				"procs":   hash{"1": "a" + w + "71:same"},
				"errors":  hash{"72": "retried once"},
				"flows":   zset{"wf1.a,70,ok": 1},
			}
			e.seed(seeded)
			n, err := tc.run(e)
			require.NoError(t, err)
			assert.Zero(t, n)
			e.expect(seeded)
		})
	}
}

// delete.lua on a queue that does not exist drops nothing and makes no
// key.
func TestDeleteNoQueue(t *testing.T) {
	t.Parallel()
	e := newScriptEnv(t, "delete.lua")
	n, notices, err := e.s.DeleteQueue(e.ctx, "q")
	require.NoError(t, err)
	assert.Zero(t, n)
	assert.Empty(t, notices)
	e.expect(keyState{})
}

// flow_notices.lua: notices younger than the age asked for are not
// listed.
func TestFlowNoticesTooYoung(t *testing.T) {
	t.Parallel()
	e := newScriptEnv(t, "flow_notices.lua")
	seeded := keyState{"flows": zset{"wf1.a,61,ok": float64(e.clock())}}
	e.seed(seeded)
	got, err := e.s.FlowNotices(e.ctx, "q", time.Minute, 10)
	require.NoError(t, err)
	assert.Empty(t, got)
	e.expect(seeded)
}

// The inspection scripts on an empty queue: nothing found, no key made.
func TestInspectionScriptsOnNothing(t *testing.T) {
	t.Parallel()
	t.Run("waiting_list.lua", func(t *testing.T) {
		t.Parallel()
		e := newScriptEnv(t, "waiting_list.lua")
		got, err := e.s.Range(e.ctx, "q", 0, -1, 10)
		require.NoError(t, err)
		assert.Empty(t, got)
		e.expect(keyState{})
	})
	t.Run("task_find.lua", func(t *testing.T) {
		t.Parallel()
		e := newScriptEnv(t, "task_find.lua")
		seeded := keyState{"waiting": list{"72:other"}, "dead": zset{"73:dead": 1}}
		e.seed(seeded)
		got, err := e.s.FindTask(e.ctx, "q", "99", 10, FindBounds{Limit: 100, Budget: 1 << 20})
		require.NoError(t, err)
		assert.Equal(t, Found{}, got)
		e.expect(seeded)
	})
	t.Run("groups_list.lua", func(t *testing.T) {
		t.Parallel()
		e := newScriptEnv(t, "groups_list.lua")
		got, err := e.s.GroupsRead(e.ctx, "q", 10)
		require.NoError(t, err)
		assert.Equal(t, GroupsState{}, got)
		e.expect(keyState{})
	})
}

// flow_enqueue.lua: released steps are enqueued at once, each holding its
// unique key while it lives (its 'u' field), and the parked runtimes are
// woken; a step whose key is held adds nothing and answers the holder's
// id.
func TestFlowEnqueueScript(t *testing.T) {
	t.Parallel()
	e := newScriptEnv(t, "flow_enqueue.lua")
	x := e.clock() + 1e9
	e.seed(keyState{
		"meta":    hash{"name": "q", "registered": "1", "tid": decOf(x)},
		"waiting": list{"5:old"},
		"idle":    zset{"r1": 1},
	})
	steps := []EnqueueOne{
		{Queue: "q", Payload: []byte("L"), Args: EnqueueArgs{Unique: "wf/left", Flow: "wf1.left"}},
		{Queue: "q", Payload: []byte("C"), Args: EnqueueArgs{Unique: "wf/cleanup", Flow: "wf1.cleanup", Priority: "h"}},
	}
	ids, errs := e.s.EnqueueSteps(e.ctx, steps)
	require.Equal(t, []error{nil, nil}, errs)
	require.Equal(t, []string{hexOf(x + 1), hexOf(x + 2)}, ids)
	enqueued := keyState{
		"meta":    hash{"name": "q", "registered": "1", "tid": decOf(x + 2)},
		"waiting": list{hexOf(x+1) + ",Fwf1.left,u" + sha1Hex("wf/left") + ":L", "5:old"},
		"high":    list{hexOf(x+2) + ",Fwf1.cleanup,ph,u" + sha1Hex("wf/cleanup") + ":C"},
		"unique":  hash{sha1Hex("wf/left"): hexOf(x + 1), sha1Hex("wf/cleanup"): hexOf(x + 2)},
	}
	e.expect(enqueued)

	again, errs := e.s.EnqueueSteps(e.ctx, steps[:1])
	require.ErrorIs(t, errs[0], ErrDuplicate)
	assert.Equal(t, ids[:1], again, "the holder's id")
	e.expect(enqueued)
}

// sha1Hex is a unique key as the scripts hold it.
func sha1Hex(key string) string {
	sum := sha1.Sum([]byte(key))
	return hex.EncodeToString(sum[:])
}
