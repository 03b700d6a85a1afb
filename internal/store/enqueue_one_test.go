package store

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// enqueue_one.lua: a plain single task (due now, no unique key, group,
// aggregation key, retained outcome or workflow step) is enqueued as
// enqueue.lua would: its id counted up from the meta hash's tid (seeded
// ahead of the clock, so the id is known), its entry at the back (or the
// front) of its level's list with the work event naming the parked
// runtimes, or handed to the longest-idle runtime when nothing waits,
// nothing holds the queue back and its worker's lease is live; the
// client's stats counts written; a queue not yet confirmed named and
// registered.
func TestEnqueueOneScript(t *testing.T) {
	t.Parallel()
	t.Run("handed to the longest-idle runtime", func(t *testing.T) {
		t.Parallel()
		e, x := queueAhead(t, "enqueue_one.lua")
		w := e.worker()
		lease := float64(e.clockMs() + hour)
		e.seed(keyState{
			"meta":   hash{"seq": decOf(x)},
			"leases": zset{w: lease},
			"idle":   zset{w: 1, "r2": 2},
		})
		events := e.events()
		ids, err := e.s.Enqueue(e.ctx, "q", [][]byte{[]byte("p")}, EnqueueArgs{MaxAttempts: 3, Kind: "k"})
		require.NoError(t, err)
		require.Equal(t, []string{hexOf(x + 1)}, ids)
		entry := hexOf(x+1) + ",m3,kk:p"
		e.expect(keyState{
			"meta":   hash{"name": "q", "registered": "1", "tid": decOf(x + 1), "seq": decOf(x + 1)},
			"procs":  hash{hexOf(x + 1): "a" + w + entry},
			"leases": zset{w: lease},
			"idle":   zset{"r2": 2},
		})
		assert.Equal(t, "h"+w+","+hexOf(x+1)+","+entry, nextEvent(t, events))
	})
	// Each of these holds the task back from the idle runtime: it waits,
	// and the work event names that runtime and one more. The payload too
	// large is the caller's to judge (it sends hand "0").
	for _, c := range []struct {
		name  string
		meta  hash     // past name, registered and tid
		seed  keyState // past meta, leases and idle
		lease func(e *scriptEnv) float64
		big   bool // a payload too large for an event
	}{
		{name: "a paused queue", meta: hash{"paused": "1"}},
		{name: "a concurrency limit", meta: hash{"limit": "5"}},
		{name: "a rate limit", meta: hash{"rate": "5/1000"}},
		{name: "a task waiting at a higher level", seed: keyState{"high": list{"5,ph:hi"}}},
		{name: "a task waiting at a lower level", seed: keyState{"low": list{"5,pl:lo"}}},
		{name: "a group ready to start", seed: keyState{"gready": zset{"g": 1}}},
		{name: "the worker's lease run out", lease: func(e *scriptEnv) float64 { return float64(e.clockMs() - 1000) }},
		{name: "a payload too large for an event", big: true},
	} {
		t.Run("no hand-off: "+c.name, func(t *testing.T) {
			t.Parallel()
			e := newScriptEnv(t, "enqueue_one.lua")
			x := e.clock() + 1e9
			w := e.worker()
			lease := float64(e.clockMs() + hour)
			if c.lease != nil {
				lease = c.lease(e)
			}
			meta := hash{"name": "q", "registered": "1", "tid": decOf(x)}
			for k, v := range c.meta {
				meta[k] = v
			}
			seeded := keyState{"meta": meta, "leases": zset{w: lease}, "idle": zset{w: 1, "r2": 2, "r3": 3}}
			for k, v := range c.seed {
				seeded[k] = v
			}
			e.seed(seeded)
			payload := "p"
			if c.big {
				payload = strings.Repeat("b", MaxHandOffPayload+1)
			}
			events := e.events()
			_, err := e.s.Enqueue(e.ctx, "q", [][]byte{[]byte(payload)}, EnqueueArgs{})
			require.NoError(t, err)
			want := keyState{"waiting": list{hexOf(x+1) + ":" + payload}, "leases": zset{w: lease}, "idle": zset{"r3": 3}}
			for k, v := range seeded {
				if _, ok := want[k]; !ok {
					want[k] = v
				}
			}
			want["meta"].(hash)["tid"] = decOf(x + 1)
			e.expect(want)
			assert.Equal(t, "w1:"+w+",r2", nextEvent(t, events))
		})
	}
	t.Run("at the front of its level, on a queue made by it", func(t *testing.T) {
		t.Parallel()
		e := newScriptEnv(t, "enqueue_one.lua")
		x := e.clock() + 1e9
		e.seed(keyState{
			"meta": hash{"tid": decOf(x)},
			"high": list{"5,ph:old"},
			"idle": zset{"r1": 1, "r2": 2, "r3": 3},
		})
		events := e.events()
		ids, err := e.s.Enqueue(e.ctx, "q", [][]byte{[]byte("p")}, EnqueueArgs{Front: true, Priority: "h"})
		require.NoError(t, err)
		require.Equal(t, []string{hexOf(x + 1)}, ids)
		e.expect(keyState{
			"meta":   hash{"name": "q", "registered": "1", "tid": decOf(x + 1)},
			"high":   list{"5,ph:old", hexOf(x+1) + ",ph:p"},
			"idle":   zset{"r3": 3},
			"queues": set{"q"},
		})
		assert.Equal(t, "w1:r1,r2", nextEvent(t, events))
	})
	t.Run("at a lower level, none parked", func(t *testing.T) {
		t.Parallel()
		e, x := queueAhead(t, "enqueue_one.lua")
		e.seed(keyState{
			"waiting": list{"5:old"},
		})
		events := e.events()
		ids, err := e.s.Enqueue(e.ctx, "q", [][]byte{[]byte("p")}, EnqueueArgs{Priority: "l", Weight: 2})
		require.NoError(t, err)
		require.Equal(t, []string{hexOf(x + 1)}, ids)
		e.expect(keyState{
			"meta":    hash{"name": "q", "registered": "1", "tid": decOf(x + 1)},
			"waiting": list{"5:old"},
			"low":     list{hexOf(x+1) + ",w2,pl:p"},
		})
		assert.Equal(t, "w1", nextEvent(t, events), "with none parked the event wakes every runtime")
	})
	t.Run("the client's stats counts", func(t *testing.T) {
		t.Parallel()
		e := newScriptEnv(t, "enqueue_one.lua")
		e.statsOn()
		e.s.stats.every = 0 // every call carries what the client counted
		x := e.clock() + 1e9
		e.seed(keyState{"meta": hash{"name": "q", "registered": "1", "tid": decOf(x)}})
		// The first enqueue counts itself, the second carries that count
		// and counts itself.
		for range 2 {
			_, err := e.s.Enqueue(e.ctx, "q", [][]byte{[]byte("p")}, EnqueueArgs{})
			require.NoError(t, err)
		}
		got := e.dump()
		cur := num(t, got["stats"].(hash)["cur"])
		e.within(cur, e.clockMs()/60_000-1, e.clockMs()/60_000, "the stats' minute")
		e.same(keyState{
			"meta":    hash{"name": "q", "registered": "1", "tid": decOf(x + 2)},
			"waiting": list{hexOf(x+2) + ":p", hexOf(x+1) + ":p"},
			"stats":   hash{"cur": decOf(cur), "c:e": "1"},
		}, got)
	})
}

// events listens on the queue's channel from before it returns: the
// events the scripts publish, in order.
func (e *scriptEnv) events() <-chan string {
	e.t.Helper()
	got := make(chan string, 16)
	subscribed := make(chan struct{})
	var once sync.Once
	l := e.s.Listen("q", func() { once.Do(func() { close(subscribed) }) }, func(m string) { got <- m })
	e.t.Cleanup(func() { l.Stop(context.Background(), true) })
	select {
	case <-subscribed:
	case <-time.After(10 * time.Second):
		e.t.Fatal("the queue's channel was never subscribed")
	}
	return got
}

// nextEvent is the next of events, or a failure when none comes in time.
func nextEvent(t *testing.T, events <-chan string) string {
	t.Helper()
	select {
	case m := <-events:
		return m
	case <-time.After(10 * time.Second):
		t.Fatal("no event")
		return ""
	}
}
