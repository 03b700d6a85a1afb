package store

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// cancelSeed is a queue with a task of each kind: waiting (one retained,
// holding a unique key, with an error), high, delayed and in flight
// (one retained).
func cancelSeed(w string) keyState {
	return keyState{
		"meta":     hash{"name": "q"},
		"waiting":  list{"61:same", "62,R1000,uabc:b", "60:same"},
		"high":     list{"66,ph:same"},
		"delayed":  zset{"63:same": 5},
		"procs":    hash{"1": "a" + w + "64,R1000:d", "2": "a" + w + "65:same"},
		"errors":   hash{"62": "e"},
		"unique":   hash{"abc": "62"},
		"retained": zset{"62": inf, "64": inf},
	}
}

// cancel_id.lua: a waiting or delayed task is removed, with its error, its
// unique key and its listing as retained; one in flight is marked
// cancelled; an id the queue does not hold, or a task cancelled already,
// changes nothing.
func TestCancelIDScript(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		id     string
		want   CancelCount
		change func(st keyState)
	}{
		{"waiting", "62", CancelCount{Removed: 1}, func(st keyState) {
			st["waiting"] = list{"61:same", "60:same"}
			delete(st, "errors")
			delete(st, "unique")
			st["retained"] = zset{"64": inf}
		}},
		{"high", "66", CancelCount{Removed: 1}, func(st keyState) { delete(st, "high") }},
		{"delayed", "63", CancelCount{Removed: 1}, func(st keyState) { delete(st, "delayed") }},
		{"in flight", "64", CancelCount{Marked: 1}, func(st keyState) {
			st["procs"].(hash)["1"] = "c" + st["procs"].(hash)["1"][1:]
			st["retained"] = zset{"62": inf}
		}},
		{"unknown", "99", CancelCount{}, func(keyState) {}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newScriptEnv(t, "cancel_id.lua")
			w := e.worker()
			e.seed(cancelSeed(w))
			got, _, err := e.s.CancelID(e.ctx, "q", tc.id)
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
			want := cancelSeed(w)
			tc.change(want)
			e.expect(want)
		})
	}
	t.Run("cancelled already", func(t *testing.T) {
		t.Parallel()
		e := newScriptEnv(t, "cancel_id.lua")
		w := e.worker()
		seeded := keyState{"procs": hash{"1": "c" + w + "64:d"}}
		e.seed(seeded)
		got, _, err := e.s.CancelID(e.ctx, "q", "64")
		require.NoError(t, err)
		assert.Equal(t, CancelCount{}, got)
		e.expect(seeded)
	})
}

// cancel.lua: every task with the payload goes, from every list and the
// delayed set, and every one in flight is marked cancelled.
func TestCancelPayloadScript(t *testing.T) {
	t.Parallel()
	e := newScriptEnv(t, "cancel.lua")
	w := e.worker()
	e.seed(cancelSeed(w))
	got, _, err := e.s.CancelPayload(e.ctx, "q", []byte("same"))
	require.NoError(t, err)
	assert.Equal(t, CancelCount{Removed: 4, Marked: 1}, got)
	want := cancelSeed(w)
	want["waiting"] = list{"62,R1000,uabc:b"}
	delete(want, "high")
	delete(want, "delayed")
	want["procs"].(hash)["2"] = "c" + w + "65:same"
	e.expect(want)
}

// delete.lua: every key of the queue goes but the processes, which are
// marked deleted, and the meta hash, which keeps its counters while they
// remain.
func TestDeleteScript(t *testing.T) {
	t.Parallel()
	e := newScriptEnv(t, "delete.lua")
	w := e.worker()
	st := cancelSeed(w)
	st["meta"] = hash{"name": "q", "registered": "1", "paused": "1", "limit": "5", "rate": "1", "per": "10", "seq": "9", "tid": "8", "wx": "1",
		"grate": "1/10", "grx": "1", "ghx": "1", "gturns": "3", "gtx": "1"}
	st["dead"] = zset{"70:x": 1}
	st["results"] = hash{"70": "70,sdead,S1,E1,a1:x"}
	st["uniquettl"] = zset{"abc": 1}
	st["starts"] = zset{"1": 1}
	st["periodic"] = hash{"s": "1"}
	st["ticks"] = hash{"s": "60"}
	st["progress"] = hash{"64": "1,5,1:"}
	st["stats"] = hash{"cur": "1"}
	st["leases"] = zset{w: 1}
	st["idle"] = zset{w: 1}
	st["queues"] = set{"q", "other"}
	e.seed(st)
	n, _, err := e.s.DeleteQueue(e.ctx, "q")
	require.NoError(t, err)
	assert.EqualValues(t, 5, n, "four waiting and one delayed")
	e.expect(keyState{
		"meta":   hash{"seq": "9", "tid": "8", "wx": "1"},
		"procs":  hash{"1": "d" + w + "64,R1000:d", "2": "d" + w + "65:same"},
		"leases": zset{w: 1},
		"idle":   zset{w: 1},
		"queues": set{"other"},
	})
}

// cancel_waiting.lua: waiting tasks go in bulk, by id, by kind (the whole
// kind, not a prefix) or all, in dequeue order (high, then each list from
// its front), with their errors, unique keys and listings as retained;
// delayed and in-flight tasks stay; at most limit entries are looked at.
func TestCancelWaitingScript(t *testing.T) {
	t.Parallel()
	seed := func() keyState {
		return keyState{
			"meta":     hash{"name": "q"},
			"waiting":  list{"71,kmail:x", "77,kmailer:m", "72:y", "73,kmail,R1000,uabc:z"},
			"high":     list{"74,ph,kmail:h"},
			"low":      list{"75,pl:l"},
			"delayed":  zset{"76,kmail:d": 5},
			"errors":   hash{"73": "e", "72": "f"},
			"unique":   hash{"abc": "73"},
			"retained": zset{"73": inf},
			"gwait":    zset{member("a", "81,ga,kmail:g1"): 0, member("a", "82,ga:g2"): 0, member("b", "83,gb,kmail:g3"): 0},
			"gready":   zset{"a": 1, "b": 2},
		}
	}
	cases := []struct {
		name    string
		sel     CancelSelection
		limit   int
		removed int64
		more    bool
		change  func(st keyState)
	}{
		{"ids", CancelSelection{IDs: []string{"73", "75", "99", "73", "81", "83"}}, 100, 4, false, func(st keyState) {
			st["waiting"] = list{"71,kmail:x", "77,kmailer:m", "72:y"}
			st["gwait"] = zset{member("a", "82,ga:g2"): 0}
			st["gready"] = zset{"a": 1} // b emptied leaves the turns; a still waits
			delete(st, "low")
			st["errors"] = hash{"72": "f"}
			delete(st, "unique")
			delete(st, "retained")
		}},
		{"kind", CancelSelection{Kind: "mail"}, 100, 5, false, func(st keyState) {
			st["waiting"] = list{"77,kmailer:m", "72:y"}
			st["gwait"] = zset{member("a", "82,ga:g2"): 0}
			st["gready"] = zset{"a": 1}
			delete(st, "high")
			st["errors"] = hash{"72": "f"}
			delete(st, "unique")
			delete(st, "retained")
		}},
		{"all", CancelSelection{}, 100, 9, false, func(st keyState) {
			delete(st, "waiting")
			delete(st, "gwait")
			delete(st, "gready")
			delete(st, "high")
			delete(st, "low")
			delete(st, "errors")
			delete(st, "unique")
			delete(st, "retained")
		}},
		{"all, bounded", CancelSelection{}, 2, 2, true, func(st keyState) {
			st["waiting"] = list{"71,kmail:x", "77,kmailer:m", "72:y"}
			delete(st, "high")
			st["errors"] = hash{"72": "f"}
			delete(st, "unique")
			delete(st, "retained")
		}},
		{"all, bounded in the groups", CancelSelection{}, 7, 7, true, func(st keyState) {
			delete(st, "waiting")
			delete(st, "high")
			delete(st, "low")
			delete(st, "errors")
			delete(st, "unique")
			delete(st, "retained")
			st["gwait"] = zset{member("a", "82,ga:g2"): 0, member("b", "83,gb,kmail:g3"): 0}
		}},
		{"kind, bounded", CancelSelection{Kind: "mailer"}, 3, 0, true, func(keyState) {}},
		{"unknown kind", CancelSelection{Kind: "sms"}, 100, 0, false, func(keyState) {}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newScriptEnv(t, "cancel_waiting.lua")
			e.seed(seed())
			removed, more, _, err := e.s.CancelWaiting(e.ctx, "q", tc.sel, tc.limit)
			require.NoError(t, err)
			assert.Equal(t, tc.removed, removed)
			assert.Equal(t, tc.more, more)
			want := seed()
			tc.change(want)
			e.expect(want)
		})
	}
}

// cancel_id.lua: a group held until its front task is due (a sequence's
// retry delay) takes a turn now when that task is cancelled and others
// wait, so that they need not wait for a task that is gone; a group held
// at its limit or on its dead task stays held.
func TestCancelIDReleasesAHeldGroupScript(t *testing.T) {
	t.Parallel()
	e := newScriptEnv(t, "cancel_id.lua")
	now := e.clock()
	due := fmt.Sprintf("%x", now+int64(time.Hour/time.Microsecond))
	rateBase := float64(1 << 52)
	e.seed(keyState{
		"meta": hash{"name": "q"},
		"gwait": zset{
			member("s", "11,gs,d"+due+":s1"): 0, member("s", "12,gs:s2"): 0,
			member("l", "21,gl:l1"): 0, member("l", "22,gl:l2"): 0,
			member("h", "31,gh:h1"): 0, member("h", "32,gh:h2"): 0,
		},
		"gready": zset{"s": rateBase + float64(now) + float64(time.Hour/time.Microsecond), "l": inf, "h": deadHold},
	})
	for _, id := range []string{"11", "21", "31"} {
		got, _, err := e.s.CancelID(e.ctx, "q", id)
		require.NoError(t, err)
		assert.Equal(t, CancelCount{Removed: 1}, got, id)
	}
	got := e.dump()
	ready := got["gready"].(zset)
	e.within(int64(ready["s"]), now, e.clock(), "s's turn, now")
	assert.Equal(t, inf, ready["l"], "l held at its limit")
	assert.Equal(t, float64(deadHold), ready["h"], "h held on its dead task")
	assert.Equal(t, zset{member("s", "12,gs:s2"): 0, member("l", "22,gl:l2"): 0, member("h", "32,gh:h2"): 0}, got["gwait"])
}
