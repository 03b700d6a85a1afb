package store

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

// enqueueFull runs enqueue.lua for one task as enqueueCall builds it for
// a task that is not alone in its pipeline.
func (e *scriptEnv) enqueueFull(payload []byte, args EnqueueArgs) {
	k := e.k
	front := "0"
	if args.Front {
		front = "1"
	}
	fields := args.fields()
	list := k.Waiting
	switch args.Priority {
	case "h":
		list, fields = k.High, fields+",ph"
	case "l":
		list, fields = k.Low, fields+",pl"
	}
	hand := handOff([][]byte{payload})
	argv := []string{k.Channel, "q", front, "0", "0", fields, "", "", hand, "", "", "", strconv.Itoa(e.s.aggLimit), string(payload)}
	keys := []string{list, k.Meta, k.Idle, k.Delayed, k.Unique, k.UniqueTTL, k.Stats, k.Leases, k.Procs, k.Waiting, k.High, k.Low, k.Retained, k.GroupWait, k.GroupReady, k.Gather, k.GatherDue, k.GatherSize}
	r, err := enqueued(e.s.scripts.Enqueue.Exec(e.ctx, e.rdb, keys, argv), 1)
	require.NoError(e.t, err)
	if r.unregistered {
		require.NoError(e.t, e.s.RegisterQueue(e.ctx, "q"))
	}
}

// Every effect of enqueue_one.lua on a plain single task is enqueue.lua's.
func TestEnqueueOneDoesWhatEnqueueDoes(t *testing.T) {
	w := uuid.NewString()
	for _, c := range []struct {
		name string
		seed keyState
		args EnqueueArgs
		big  bool
	}{
		{name: "hand-off, weighted, every field", args: EnqueueArgs{MaxAttempts: 3, Timeout: time.Second, Weight: 3, Persistent: true, Kind: "k", Trace: "tr"}},
		{name: "hand-off, high, front", args: EnqueueArgs{Priority: "h", Front: true}},
		{name: "paused", seed: keyState{"meta": hash{"paused": "1"}}},
		{name: "limit", seed: keyState{"meta": hash{"limit": "2"}}, args: EnqueueArgs{Weight: 2}},
		{name: "waiting low", seed: keyState{"low": list{"5,pl:x"}}, args: EnqueueArgs{Priority: "l"}},
		{name: "group waiting only", seed: keyState{"gwait": zset{"g\x00x": 0}}},
		{name: "group ready", seed: keyState{"gready": zset{"g": 1}}},
		{name: "rate", seed: keyState{"meta": hash{"rate": "5/1000"}}},
		{name: "lease gone", seed: keyState{"leases": zset{}}},
		{name: "no idle", seed: keyState{"idle": zset{}}},
		{name: "big", big: true},
		{name: "front, waiting", seed: keyState{"waiting": list{"5:x"}}, args: EnqueueArgs{Front: true}},
		{name: "unconfirmed", seed: keyState{"meta": hash{"registered": ""}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var dumps [2]keyState
			var evs [2][]string
			var x int64
			for i := range 2 {
				e := newScriptEnv(t, "enqueue_one.lua", "enqueue.lua")
				e.workers = append(e.workers, w)
				if i == 0 {
					x = e.clock() + 1e9
				}
				st := keyState{
					"meta":   hash{"name": "q", "registered": "1", "tid": decOf(x), "seq": decOf(x)},
					"leases": zset{w: float64(e.clockMs() + hour)},
					"idle":   zset{w: 1, "r2": 2},
				}
				for k, v := range c.seed {
					if h, ok := v.(hash); ok && k == "meta" {
						for f, s := range h {
							if s == "" {
								delete(st["meta"].(hash), f)
							} else {
								st["meta"].(hash)[f] = s
							}
						}
						continue
					}
					if z, ok := v.(zset); ok && len(z) == 0 {
						delete(st, k)
						continue
					}
					st[k] = v
				}
				e.seed(st)
				events := e.events()
				p := []byte("p")
				if c.big {
					p = []byte(strings.Repeat("b", MaxHandOffPayload+1))
				}
				if i == 0 {
					_, err := e.s.Enqueue(e.ctx, "q", [][]byte{p}, c.args)
					require.NoError(t, err)
					require.Contains(t, e.calls.names(), "enqueue_one.lua")
				} else {
					e.enqueueFull(p, c.args)
				}
				evs[i] = append(evs[i], nextEvent(t, events))
				d := e.dump()
				delete(d, "leases")
				dumps[i] = d
				e.compared["enqueue.lua"], e.compared["enqueue_one.lua"] = true, true
			}
			require.Equal(t, dumps[1], dumps[0])
			require.Equal(t, evs[1], evs[0])
		})
	}
}
