package store

import (
	"regexp"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

// Every effect of a retry at once through retry_plain.lua (Store.Retry,
// retry.lua given only what retry_plain.lua leaves) is retry.lua's alone:
// the same outcomes and keys, and, when retry_plain.lua takes every
// process, the same work event. Each process is said to be plain
// (RetryRef.Plain): retry_plain.lua checks so itself.
func TestRetryPlainDoesWhatRetryDoes(t *testing.T) {
	w, v, dead := uuid.NewString(), uuid.NewString(), uuid.NewString()
	for _, c := range []struct {
		name  string
		procs hash
		seed  keyState
		refs  []RetryRef
		left  bool // some processes are retry.lua's: retry_plain.lua leaves the batch whole
	}{
		{
			name: "first failures",
			procs: hash{
				"1": "a" + w + "61:a:b,c", "2": "a" + w + "62:", "3": "a" + v + "63:y",
				"4": "a" + w + "64:z", "5": "a" + w + "headerless",
			},
			seed: keyState{"progress": hash{"61": "1,5,1:", "99": "9,1,1:"}},
			refs: []RetryRef{
				{ProcRef: ProcRef{Worker: w, PID: "1"}, Err: "same"}, {ProcRef: ProcRef{Worker: w, PID: "2"}, Err: "same"},
				{ProcRef: ProcRef{Worker: v, PID: "3"}, Err: "same"}, {ProcRef: ProcRef{Worker: w, PID: "4"}, Err: "other"},
				{ProcRef: ProcRef{Worker: w, PID: "5"}},
			},
		},
		{
			name: "fields, started before or not",
			procs: hash{
				"1": "a" + w + "41,a1,f1,d5:x", "2": "a" + w + "42,kmail,m3,t500:y", "3": "a" + w + "43,a2,uabc,R9:z",
			},
			seed: keyState{
				"errors": hash{"41": "old", "41:a": attemptRecord(1, 'r', w, "old"), "42": "stale", "42:a": attemptRecord(2, 'd', dead, "stale"),
					"43:a": attemptRecord(3, 'k', dead, "")},
				"unique": hash{"abc": "43"},
			},
			refs: []RetryRef{
				{ProcRef: ProcRef{Worker: w, PID: "1"}, Err: "e1"}, {ProcRef: ProcRef{Worker: w, PID: "2"}, Err: "e2"},
				{ProcRef: ProcRef{Worker: w, PID: "3"}},
			},
		},
		{
			name:  "refused",
			procs: hash{"1": "a" + w + "71:x", "2": "a" + v + "72:y", "3": "a" + dead + "73:z"},
			refs: []RetryRef{
				{ProcRef: ProcRef{Worker: w, PID: "1"}, Err: "e"}, {ProcRef: ProcRef{Worker: w, PID: "1"}, Err: "twice"},
				{ProcRef: ProcRef{Worker: w, PID: "2"}}, {ProcRef: ProcRef{Worker: dead, PID: "3"}}, {ProcRef: ProcRef{Worker: w, PID: "9"}},
			},
		},
		{
			name: "left for retry.lua",
			procs: hash{
				"1": "c" + w + "81:x", "2": "d" + w + "82,uabc:y", "3": "a" + w + "83,w3:z", "4": "a" + w + "84,ga:g",
				"5": "a" + w + "85,ph:h", "6": "a" + w + "86,a1,f1,pl:l", "7": "a" + w + "87:plain",
			},
			seed: keyState{
				"meta":     hash{"name": "q", "seq": "9", "wx": "2", "limit": "10"},
				"errors":   hash{"81": "old", "81:a": attemptRecord(1, 'r', w, "old")},
				"unique":   hash{"abc": "82"},
				"grunning": hash{"a": "1"},
				"waiting":  list{"5:w"},
			},
			refs: []RetryRef{
				{ProcRef: ProcRef{Worker: w, PID: "1"}, Err: "e"}, {ProcRef: ProcRef{Worker: w, PID: "2"}, Err: "e"},
				{ProcRef: ProcRef{Worker: w, PID: "3"}, Err: "e"}, {ProcRef: ProcRef{Worker: w, PID: "4"}, Err: "e"},
				{ProcRef: ProcRef{Worker: w, PID: "5"}, Err: "e"}, {ProcRef: ProcRef{Worker: w, PID: "6"}, Err: "e"},
				{ProcRef: ProcRef{Worker: w, PID: "7"}, Err: "e"}, {ProcRef: ProcRef{Worker: w, PID: "7"}, Err: "twice"},
			},
			left: true,
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			var dumps [2]keyState
			var outs [2][]Outcome
			var evs [2]string
			for i := range 2 {
				e := newScriptEnv(t, "retry_plain.lua", "retry.lua")
				e.workers = append(e.workers, w, v, dead)
				lease := float64(e.clockMs() + hour)
				st := keyState{
					"meta":   hash{"name": "q", "seq": "9"},
					"leases": zset{w: lease, v: lease, dead: float64(e.clockMs() - 1)},
					"procs":  c.procs,
				}
				// A wake of the runtimes parked: one call's, not two.
				st["idle"] = zset{"r1": 1, "r2": 2, "r3": 3, "r4": 4, "r5": 5, "r6": 6, "r7": 7}
				for k, s := range c.seed {
					st[k] = s
				}
				e.seed(st)
				events := e.events()
				before := e.clock()
				var err error
				if i == 0 {
					outs[i], err = e.s.Retry(e.ctx, "q", plainRefs(c.refs))
					require.NoError(t, err)
					ran := e.calls.names()
					require.Equal(t, "retry_plain.lua", ran[0])
					if c.left {
						require.Equal(t, []string{"retry_plain.lua", "retry.lua"}, slices.Compact(ran), "a batch left whole goes to retry.lua once")
					} else {
						require.NotContains(t, ran, "retry.lua")
					}
				} else {
					outs[i], err = e.s.retryCall(e.ctx, "q", c.refs, false)
					require.NoError(t, err)
					e.compared["retry_plain.lua"] = true
				}
				evs[i] = nextEvent(t, events)
				d := e.dump()
				e.compared["retry.lua"] = true
				delete(d, "leases")
				dumps[i] = clockless(d, before, e.clock())
			}
			require.Equal(t, outs[1], outs[0])
			require.Equal(t, dumps[1], dumps[0])
			require.Equal(t, evs[1], evs[0])
			for _, o := range outs[0] {
				require.NotEqual(t, retryLeft, o)
			}
		})
	}
}

// clockless is d with the retry's clocks (within [lo, hi]) written as
// "<d>" where an entry's due time (hex µs) is one and "<ms>" where a
// history record's end (decimal ms) is, and a score of a sorted set taken
// from the clock as -1: two runs at different times then dump the same.
func clockless(d keyState, lo, hi int64) keyState {
	due := regexp.MustCompile(`,d[0-9a-f]+`)
	// Records follow each other unseparated; one in a header ('H') has
	// its parts after its count, each ending in '.'.
	ended := regexp.MustCompile(`([0-9]{13})(,r,|\.r\.)`)
	clock := func(s string) string {
		s = due.ReplaceAllStringFunc(s, func(m string) string {
			if u, err := strconv.ParseInt(m[2:], 16, 64); err == nil && u >= lo && u <= hi {
				return ",d<d>"
			}
			return m
		})
		return ended.ReplaceAllStringFunc(s, func(m string) string {
			if ms, err := strconv.ParseInt(m[:13], 10, 64); err == nil && ms >= lo/1000 && ms <= hi/1000 {
				return "<ms>" + m[13:]
			}
			return m
		})
	}
	out := keyState{}
	for name, v := range d {
		switch v := v.(type) {
		case list:
			l := make(list, len(v))
			for i, s := range v {
				l[i] = clock(s)
			}
			out[name] = l
		case hash:
			h := hash{}
			for f, s := range v {
				h[f] = clock(s)
			}
			out[name] = h
		case zset:
			z := zset{}
			for m, s := range v {
				if s >= float64(lo) && s <= float64(hi) {
					s = -1 // a turn taken at the clock
				}
				z[clock(m)] = s
			}
			out[name] = z
		default:
			out[name] = v
		}
	}
	return out
}

// retryBy runs a retry of queue "q" through script: retry.lua alone, or
// retry_plain.lua as Store.Retry sends it (and retry.lua only for what it
// leaves).
func (e *scriptEnv) retryBy(script string, refs []RetryRef) ([]Outcome, error) {
	if script == "retry.lua" {
		return e.s.retryCall(e.ctx, "q", refs, false)
	}
	return e.s.Retry(e.ctx, "q", plainRefs(refs))
}

// plainRefs are refs, each said to be of a plain task (RetryRef.Plain).
func plainRefs(refs []RetryRef) []RetryRef {
	out := slices.Clone(refs)
	for i := range out {
		out[i].Plain = true
	}
	return out
}

// Store.Retry sends a batch of retries at once of tasks said to be plain
// to retry_plain.lua, and any other batch to retry.lua, whole: a batch of
// both kinds is one call, and one retry_plain.lua leaves (a task said to
// be plain that is not) goes whole to retry.lua after it.
func TestRetrySendsPlainTasksToRetryPlain(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		refs []RetryRef
		ran  []string
	}{
		{"all plain", []RetryRef{{ProcRef: ProcRef{PID: "1"}, Plain: true}, {ProcRef: ProcRef{PID: "3"}, Plain: true}}, []string{"retry_plain.lua"}},
		{"none plain", []RetryRef{{ProcRef: ProcRef{PID: "1"}}, {ProcRef: ProcRef{PID: "2"}}}, []string{"retry.lua"}},
		{"both", []RetryRef{{ProcRef: ProcRef{PID: "2"}}, {ProcRef: ProcRef{PID: "1"}, Plain: true}}, []string{"retry.lua"}},
		{"one said plain is not", []RetryRef{{ProcRef: ProcRef{PID: "1"}, Plain: true}, {ProcRef: ProcRef{PID: "2"}, Plain: true}}, []string{"retry_plain.lua", "retry.lua"}},
		{"plain, delayed", []RetryRef{{ProcRef: ProcRef{PID: "1"}, Plain: true, Delay: time.Second}, {ProcRef: ProcRef{PID: "3"}, Plain: true, Delay: time.Second}}, []string{"retry.lua"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			e := newScriptEnv(t, "retry_plain.lua", "retry.lua")
			w := e.worker()
			e.seed(keyState{
				"meta":   hash{"name": "q", "seq": "9"},
				"leases": zset{w: float64(e.clockMs() + hour)},
				"procs":  hash{"1": "a" + w + "11:x", "2": "a" + w + "12,ph:y", "3": "a" + w + "13:z"},
			})
			for i := range c.refs {
				c.refs[i].Worker = w
			}
			out, err := e.s.Retry(e.ctx, "q", c.refs)
			require.NoError(t, err)
			for _, o := range out {
				require.Equal(t, WasActive, o)
			}
			require.Equal(t, c.ran, slices.Compact(e.calls.names()), "the scripts run, in order")
			got := e.dump()
			e.compared["retry_plain.lua"], e.compared["retry.lua"] = true, true
			require.Len(t, got["procs"], 3-len(c.refs), "the processes retried are gone")
		})
	}
}

// Dequeue says which tasks have no weight, group or priority (a retry
// of them at once may go to retry_plain.lua), and HandedProc the same.
func TestDequeueSaysPlain(t *testing.T) {
	t.Parallel()
	e := newScriptEnv(t, "dequeue.lua")
	w := e.worker()
	e.seed(keyState{
		"meta":    hash{"name": "q", "seq": "9"},
		"leases":  zset{w: float64(e.clockMs() + hour)},
		"waiting": list{"15,kmail,pl:k", "14,w2:w", "13,a1,f1,d5:r", "12:p"},
		"high":    list{"11,ph:h"},
	})
	procs, _, _, err := e.s.Dequeue(e.ctx, "q", w, 5, false)
	require.NoError(t, err)
	plain := map[string]bool{}
	for _, p := range procs {
		plain[p.Task.ID] = p.Plain
	}
	require.Equal(t, map[string]bool{"11": false, "12": true, "13": true, "14": false, "15": false}, plain)
	require.Len(t, e.dump()["procs"], 5)
	require.True(t, Event{PID: "1", To: w, Entry: "16,kmail:x"}.HandedProc().Plain)
	require.False(t, Event{PID: "1", To: w, Entry: "17,gG:x"}.HandedProc().Plain)
}
