package worqr

import (
	"context"
	"fmt"
	"reflect"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/worqr/worqr/internal/scripts"
	"github.com/worqr/worqr/internal/store"
	"github.com/worqr/worqr/internal/testsignal"
)

// scriptCounter counts the scripts a hooked client sends, by name.
type scriptCounter struct {
	mu    sync.Mutex
	names map[string]string // SHA1 -> name
	n     map[string]int
	// others are the names of the scripts counted as "other", in order.
	others []string
}

func countScripts(c *Client, h *hooked) *scriptCounter {
	s := c.core.Store.Scripts()
	named := make(map[string]string)
	sc := &scriptCounter{n: make(map[string]int), names: map[string]string{
		s.Keepalive.SHA1(): "keepalive",
		s.Renew.SHA1():     "renew",
		s.Expired.SHA1():   "expired",
		s.Promote.SHA1():   "promote",
	}}
	// Every other script by its field name in the set, for messages.
	all := reflect.ValueOf(s).Elem()
	for i := range all.NumField() {
		if sc, ok := all.Field(i).Interface().(*scripts.Script); ok && sc != nil {
			named[sc.SHA1()] = all.Type().Field(i).Name
		}
	}
	count := func(cmd rueidis.Completed) {
		sha := scriptOf(cmd)
		if sha == "" {
			return
		}
		name, ok := sc.names[sha]
		sc.mu.Lock()
		if !ok {
			name = "other"
			sc.others = append(sc.others, named[sha])
		}
		sc.n[name]++
		sc.mu.Unlock()
	}
	h.set(func(h *hooked) {
		h.do = func(ctx context.Context, cmd rueidis.Completed, next func() rueidis.RedisResult) rueidis.RedisResult {
			count(cmd)
			return next()
		}
		h.doMulti = func(ctx context.Context, cmds []rueidis.Completed, next func() []rueidis.RedisResult) []rueidis.RedisResult {
			for _, cmd := range cmds {
				count(cmd)
			}
			return next()
		}
	})
	return sc
}

func (sc *scriptCounter) counts() map[string]int {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	out := make(map[string]int, len(sc.n))
	for k, v := range sc.n {
		out[k] = v
	}
	return out
}

// otherNames are the names of the scripts counted as "other", in order.
func (sc *scriptCounter) otherNames() []string {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	return append([]string(nil), sc.others...)
}

// An idle fleet costs Redis its renewals and nothing else: each renewal
// moves the peers' wake-ups on, so no reclaimer looks while every worker
// renews in time, and on a single Redis one script renews a worker's
// registry lease and all its queue leases.
func TestIdleFleetOnlyRenews(t *testing.T) {
	t.Parallel()
	k := setupClocked(t)
	ctx := k.ctx
	// A TTL long against the renew interval: a renewal would have to be
	// seconds late for a peer to wake.
	opts := WorkerOptions{TTL: 3 * time.Second, RenewInterval: fast.RenewInterval}
	var counters []*scriptCounter
	var joint bool
	for range 2 {
		c, h := k.hooked()
		k.c = c
		k.beats()
		joint = c.core.Store.JointRenewals()
		counters = append(counters, countScripts(c, h))
		w := newWorker(t, c, opts)
		require.NoError(t, w.StartWork(ctx, "a", Events{}))
		require.NoError(t, w.StartWork(ctx, "b", Events{}))
	}
	total := func(name string) int {
		n := 0
		for _, sc := range counters {
			n += sc.counts()[name]
		}
		return n
	}
	// Each worker's first look, a renewal of both after the second
	// joined, and each queue's check after subscribing (its promote),
	// which runs on the queue's dispatcher after StartWork returns: late,
	// on a loaded machine.
	eventually(t, testsignal.Wait, "each queue's check after subscribing", func() bool {
		for _, sc := range counters {
			if sc.counts()["promote"] < 2 {
				return false
			}
		}
		return true
	})
	for beats := 0; total("keepalive") < 6; beats++ {
		require.Less(t, beats, 10, "the fleet does not settle")
		k.run(opts.RenewInterval)
	}
	before := make([]map[string]int, len(counters))
	for i, sc := range counters {
		before[i] = sc.counts()
	}
	from := total("keepalive")
	k.run(10 * opts.RenewInterval)
	require.Equal(t, from+20, total("keepalive"), "ten rounds of renewals")
	for i, sc := range counters {
		after := sc.counts()
		rounds := after["keepalive"] - before[i]["keepalive"]
		assert.Positive(t, rounds)
		assert.Zero(t, after["expired"]-before[i]["expired"], "worker %d looked for dead peers", i)
		assert.Zero(t, after["other"]-before[i]["other"]+after["promote"]-before[i]["promote"],
			"worker %d sent other scripts (all it sent: %v, and %d promotes)", i, sc.otherNames(), after["promote"])
		if joint {
			assert.Zero(t, after["renew"]-before[i]["renew"], "worker %d renewed a queue lease apart", i)
		} else {
			// On a Cluster, one renewal per queue lease a round (give or
			// take the round in flight at either end).
			assert.InDelta(t, 2*rounds, after["renew"]-before[i]["renew"], 4, "worker %d", i)
		}
	}
}

// A renewal that sees a dead worker waiting sends the reclaimer to it at
// once, even with no peer lease to wake for.
func TestRenewalSendsTheReclaimerToADeadWorker(t *testing.T) {
	t.Parallel()
	k := setupTimed(t, nil)
	admin, ctx := k.c, k.ctx
	c, h := k.hooked()
	k.c = c // the clock runs beat by beat on the worker's client
	k.beats()
	c.core.Signals.Looked.Init(t)
	sc := countScripts(c, h)
	newWorker(t, c, WorkerOptions{TTL: 3 * time.Second, RenewInterval: fast.RenewInterval})
	c.core.Signals.Looked.WaitOrTimeout() // the first look
	k.run(fast.RenewInterval)
	require.Positive(t, sc.counts()["keepalive"], "a renewal")
	// A worker that died long ago, with nothing to give back: no lease in
	// the registry lies ahead to wake the lone worker's reclaimer.
	require.NoError(t, admin.core.Redis.Do(ctx, admin.core.Redis.B().Zadd().Key(admin.core.Store.Keys().Workers()).ScoreMember().ScoreMember(1, "dead-worker").Build()).Error())
	k.run(fast.RenewInterval) // the next renewal sees it
	untilLooked(t, c, "the dead worker is reclaimed", func() bool {
		n, err := admin.core.Redis.Do(ctx, admin.core.Redis.B().Zscore().Key(admin.core.Store.Keys().Workers()).Member("dead-worker").Build()).AsFloat64()
		return rueidis.IsRedisNil(err) && n == 0
	})
}

// A renewal that finds the worker's lease on one queue gone fences the
// worker, whether that lease was renewed with the registry lease or apart:
// Redis treats the worker as dead there, and a peer may hold its tasks.
func TestQueueLeaseFoundGoneFencesTheWorker(t *testing.T) {
	t.Parallel()
	for _, apart := range []bool{false, true} {
		name := "joint"
		if apart {
			name = "apart"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			k := setupTimed(t, nil)
			k.beats()
			c, ctx := k.c, k.ctx
			if apart {
				c.core.Store.RenewApart()
			}
			w, fences := fencingWorker(t, c)
			id := w.ID()
			require.NoError(t, w.StartWork(ctx, "a", Events{}))
			require.NoError(t, w.StartWork(ctx, "b", Events{}))
			require.NoError(t, c.core.Redis.Do(ctx, c.core.Redis.B().Zrem().Key(c.core.Store.Keys().Queue("b").Leases).Member(id).Build()).Error())
			k.run(fast.RenewInterval) // the next renewal finds it gone
			ev := recv(t, fences, testsignal.Wait, "fenced")
			assert.Equal(t, id, ev.WorkerID)
			assert.Empty(t, ev.Queue, "the whole worker fences itself")
			assert.Contains(t, ev.Cause.Error(), `lease on "b" gone`)
		})
	}
}

// One Keepalive call renews several workers' leases and tells each what
// happened to its own: a worker whose registry lease expired is renewed
// nowhere (and one reclaimer hears of it), a queue lease found gone is
// told for that queue alone, and the next expiry is a peer's, never the
// worker's own.
func TestKeepaliveOfSeveralWorkers(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	if !c.core.Store.JointRenewals() {
		t.Skip("queue leases are renewed apart on a Cluster")
	}
	s, k := c.core.Store, c.core.Store.Keys()
	score := func(key, member string) float64 { return zscore(t, c, key, member) }
	zadd := func(key, member string, f float64) {
		require.NoError(t, c.core.Redis.Do(ctx, c.core.Redis.B().Zadd().Key(key).ScoreMember().ScoreMember(f, member).Build()).Error())
	}
	ids := []string{"w1", "w2", "w3"}
	for _, id := range ids {
		require.NoError(t, s.RegisterWorker(ctx, id, time.Minute))
		for _, q := range []string{"a", "b"} {
			_, err := s.JoinQueue(ctx, q, id)
			require.NoError(t, err)
		}
	}
	zadd(k.Workers(), "w2", 1) // expired long ago
	require.NoError(t, c.core.Redis.Do(ctx, c.core.Redis.B().Zrem().Key(k.Queue("b").Leases).Member("w3").Build()).Error())
	w2OnA := score(k.Queue("a").Leases, "w2")

	got, err := s.Keepalive(ctx, 2*time.Minute, []store.Keepalive{
		{Worker: "w1", Queues: []string{"a", "b"}},
		{Worker: "w2", Queues: []string{"a"}},
		{Worker: "w3", Queues: []string{"a", "b"}},
	})
	require.NoError(t, err)
	require.Len(t, got, 3)
	assert.False(t, got[0].Gone)
	assert.Equal(t, []bool{false, false}, got[0].QueueGone)
	assert.True(t, got[0].Dead, "the first worker hears of the dead one")
	assert.True(t, got[1].Gone)
	assert.Equal(t, []bool{false}, got[1].QueueGone, "not renewed, nor found gone")
	assert.Equal(t, w2OnA, score(k.Queue("a").Leases, "w2"), "the expired worker's queue lease is left alone")
	assert.False(t, got[2].Gone)
	assert.Equal(t, []bool{false, true}, got[2].QueueGone)
	assert.False(t, got[2].Dead, "one reclaimer is enough")
	for _, id := range []string{"w1", "w3"} {
		left := score(k.Workers(), id) - score(k.Queue("a").Leases, id)
		assert.Zero(t, left, "%s: registry and queue lease renewed to the same expiry", id)
	}
	// Both renewed to two minutes: each one's next peer expiry is the
	// other's.
	for i, id := range []string{"w1", "w3"} {
		g := got[i*2]
		assert.Greater(t, g.Next, time.Minute, id)
		assert.LessOrEqual(t, g.Next, 2*time.Minute, id)
	}
	// w1's lease, renewed to a minute, is the first to run out; its next
	// peer expiry is still w3's.
	got, err = s.Keepalive(ctx, time.Minute, []store.Keepalive{{Worker: "w1"}})
	require.NoError(t, err)
	assert.Greater(t, got[0].Next, 90*time.Second, "w3's lease, not w1's own")
}

// The workers of one client with the same options renew on a common beat,
// all in one script: a round of five workers is one call, not one for the
// first and another for the rest.
func TestWorkersOfAClientRenewTogether(t *testing.T) {
	t.Parallel()
	k := setupClocked(t)
	ctx := k.ctx
	c, h := k.hooked()
	k.c = c
	k.beats()
	keepaliveSHA := c.core.Store.Scripts().Keepalive.SHA1()
	var mu sync.Mutex
	var calls []int // workers renewed by each keepalive call
	h.set(func(h *hooked) {
		h.do = func(ctx context.Context, cmd rueidis.Completed, next func() rueidis.RedisResult) rueidis.RedisResult {
			if scriptOf(cmd) == keepaliveSHA {
				// EVALSHA sha numkeys keys... ttl (id n)...
				args := cmd.Commands()
				n, err := strconv.Atoi(args[2])
				require.NoError(t, err)
				mu.Lock()
				calls = append(calls, (len(args)-3-n-1)/2)
				mu.Unlock()
			}
			return next()
		}
	})
	for range 5 {
		w := newWorker(t, c, fast)
		require.NoError(t, w.StartWork(ctx, "q", Events{}))
	}
	k.run(4 * fast.RenewInterval)
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, []int{5, 5, 5, 5}, calls, "workers in each keepalive call of four rounds")
}

// A joint renewal of many workers costs a few calls while none of the
// leases it touches has run out, and tells each worker what happened to
// its own all the same: one gone from the registry is renewed nowhere,
// one whose queue lease is gone hears of it for that queue alone, and one
// whose lease already runs out later than the renewal's is kept live, its
// lease not shortened.
func TestJointRenewalCostsAFewCallsWhileNoLeaseRanOut(t *testing.T) {
	t.Parallel()
	b, c, ctx := setup(t)
	if !c.core.Store.JointRenewals() {
		t.Skip("queue leases are renewed apart on a Cluster")
	}
	s, k := c.core.Store, c.core.Store.Keys()
	const n = store.MaxWorkersPerKeepalive
	var ks []store.Keepalive
	for i := range n {
		id := fmt.Sprintf("w%03d", i)
		require.NoError(t, s.RegisterWorker(ctx, id, time.Minute))
		_, err := s.JoinQueue(ctx, "q", id)
		require.NoError(t, err)
		ks = append(ks, store.Keepalive{Worker: id, Queues: []string{"q"}})
	}
	score := func(key, member string) float64 { return zscore(t, c, key, member) }
	renewFor := func(ttl time.Duration) []store.KeptAlive {
		got, err := s.Keepalive(ctx, ttl, ks)
		require.NoError(t, err)
		require.Len(t, got, n)
		return got
	}
	renew := func() []store.KeptAlive { return renewFor(2 * time.Minute) }
	// The counted renewal must move every lease: one that holds the
	// renewal's expiry already (renewed within the same millisecond of the
	// Redis clock) is left out of ZADD's count like a missing one, and is
	// asked for apart. So the first call (a script's first call on a new
	// server may be sent twice) renews to a minute, and the counted one to
	// two, later however little time passed between them.
	renewFor(time.Minute)
	scores := func(key string) map[string]float64 {
		zs, err := c.core.Redis.Do(ctx, c.core.Redis.B().Zrange().Key(key).Min("0").Max("-1").Withscores().Build()).AsZScores()
		require.NoError(t, err)
		m := make(map[string]float64, len(zs))
		for _, z := range zs {
			m[z.Member] = z.Score
		}
		return m
	}
	keys := []string{k.Workers(), k.Queue("q").Leases}
	before := []map[string]float64{scores(keys[0]), scores(keys[1])}
	var got []store.KeptAlive
	if c, ok := b.commandsOf(func() { got = renew() }); ok {
		assert.LessOrEqual(t, c, 10, "calls to renew %d workers", n)
	}
	for i, g := range got {
		require.False(t, g.Gone, ks[i].Worker)
		require.Equal(t, []bool{false}, g.QueueGone, ks[i].Worker)
	}
	for j, key := range keys {
		after := scores(key)
		require.Len(t, after, n)
		for w, was := range before[j] {
			require.Greater(t, after[w], was, "%s: the counted renewal moved every lease", w)
		}
	}

	// w001 left the registry, w002's lease on q is gone, and w003 holds
	// leases that run out later than this renewal's.
	require.NoError(t, c.core.Redis.Do(ctx, c.core.Redis.B().Zrem().Key(k.Workers()).Member("w001").Build()).Error())
	require.NoError(t, c.core.Redis.Do(ctx, c.core.Redis.B().Zrem().Key(k.Queue("q").Leases).Member("w002").Build()).Error())
	later := float64(time.Now().Add(time.Hour).UnixMilli())
	for _, key := range []string{k.Workers(), k.Queue("q").Leases} {
		require.NoError(t, c.core.Redis.Do(ctx, c.core.Redis.B().Zadd().Key(key).ScoreMember().ScoreMember(later, "w003").Build()).Error())
	}
	w001OnQ := score(k.Queue("q").Leases, "w001")
	got = renew()
	assert.True(t, got[1].Gone)
	assert.Equal(t, []bool{false}, got[1].QueueGone, "not renewed, nor found gone")
	assert.Zero(t, score(k.Workers(), "w001"), "a worker gone from the registry is not added back")
	assert.Equal(t, w001OnQ, score(k.Queue("q").Leases, "w001"), "its queue lease is left alone")
	assert.False(t, got[2].Gone)
	assert.Equal(t, []bool{true}, got[2].QueueGone)
	assert.Zero(t, score(k.Queue("q").Leases, "w002"), "a queue lease gone is not added back")
	assert.False(t, got[3].Gone)
	assert.Equal(t, []bool{false}, got[3].QueueGone)
	assert.Equal(t, later, score(k.Workers(), "w003"), "a later lease is not shortened")
	assert.Equal(t, later, score(k.Queue("q").Leases, "w003"))
	for _, i := range []int{0, 4, n - 1} {
		assert.False(t, got[i].Gone, ks[i].Worker)
		assert.Equal(t, []bool{false}, got[i].QueueGone, ks[i].Worker)
		assert.Equal(t, score(k.Workers(), ks[i].Worker), score(k.Queue("q").Leases, ks[i].Worker), "%s: registry and queue lease renewed to the same expiry", ks[i].Worker)
	}

	// A lease run out in the registry: each worker is asked, and the
	// expired one is not revived.
	require.NoError(t, c.core.Redis.Do(ctx, c.core.Redis.B().Zadd().Key(k.Workers()).ScoreMember().ScoreMember(1, "w004").Build()).Error())
	got = renew()
	assert.True(t, got[4].Gone)
	assert.Equal(t, float64(1), score(k.Workers(), "w004"), "an expired lease is never revived")
	assert.False(t, got[5].Gone)
	assert.Equal(t, []bool{false}, got[5].QueueGone)
}

// Arming the fencing deadline's timer, which every renewal answered does
// under the worker's mu, allocates nothing once its list of sessions has
// grown to the queues served.
func TestDeadlineArmAllocatesNothing(t *testing.T) {
	_, c, ctx := setup(t)
	w := newWorker(t, c, WorkerOptions{})
	for _, q := range []string{"a", "b", "c"} {
		require.NoError(t, w.StartWork(ctx, q, Events{}))
	}
	w.core.Lock()
	defer w.core.Unlock()
	w.core.Lease.Arm()
	assert.Zero(t, testing.AllocsPerRun(100, w.core.Lease.Arm), "arming the deadline timer allocated")
}
