package store

import (
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// renew.lua: a live lease is extended to ttl from now; one run out is
// never revived.
func TestRenewScript(t *testing.T) {
	t.Parallel()
	e := newScriptEnv(t, "renew.lua")
	w, gone := e.worker(), e.worker()
	now := e.clockMs()
	e.seed(keyState{"leases": zset{w: float64(now + 1000), gone: float64(now - 1)}})
	require.NoError(t, e.s.RenewQueueLease(e.ctx, "q", w, time.Minute))
	require.ErrorIs(t, e.s.RenewQueueLease(e.ctx, "q", gone, time.Minute), ErrLeaseGone)
	got := e.dump()
	expiry := e.within(int64(got["leases"].(zset)[w]), now+60_000, e.clockMs()+60_000, "the renewed lease")
	e.same(keyState{"leases": zset{w: float64(expiry), gone: float64(now - 1)}}, got)
}

// keepalive.lua: live registry leases are renewed, with the queue leases
// of their workers that are live; a worker whose registry lease ran out
// has none of its leases touched; the caller learns of the expired worker
// no peer claimed.
func TestKeepaliveScript(t *testing.T) {
	t.Parallel()
	e := newScriptEnv(t, "keepalive.lua")
	w1, w2, w3, dead := e.worker(), e.worker(), e.worker(), e.worker()
	now := e.clockMs()
	// Live leases run out in 30 s: renewed for a minute (one that runs out
	// later already is never shortened).
	soon, past := float64(now+30_000), float64(now-hour)
	e.seed(keyState{
		"workers": zset{w1: soon, w2: soon, w3: past, dead: past - 1},
		"leases":  zset{w1: soon, w2: past, w3: soon},
	})
	// On a Cluster queue leases are renewed apart (RenewQueueLease): the
	// registry's slot is not theirs.
	joint := e.s.JointRenewals()
	var queues []string
	if joint {
		queues = []string{"q"}
	}
	ks := []Keepalive{{Worker: w1, Queues: queues}, {Worker: w2, Queues: queues}, {Worker: w3, Queues: queues}}
	out, err := e.s.Keepalive(e.ctx, time.Minute, ks)
	require.NoError(t, err)
	require.Len(t, out, 3)
	assert.False(t, out[0].Gone)
	assert.True(t, out[0].Dead, "an expired worker waits unclaimed")
	for i, o := range out {
		assert.EqualValues(t, 2, o.Workers, "the registry's live workers, the expired not counted (%d)", i)
	}
	assert.False(t, out[1].Gone)
	assert.True(t, out[2].Gone)
	got := e.dump()
	expiry := float64(e.within(int64(got["workers"].(zset)[w1]), now+60_000, e.clockMs()+60_000, "the renewed leases"))
	want := keyState{
		"workers": zset{w1: expiry, w2: expiry, w3: past, dead: past - 1},
		"leases":  zset{w1: soon, w2: past, w3: soon},
	}
	if joint {
		assert.Equal(t, []bool{false}, out[0].QueueGone)
		assert.Equal(t, []bool{true}, out[1].QueueGone)
		assert.Equal(t, []bool{false}, out[2].QueueGone, "left alone")
		want["leases"] = zset{w1: expiry, w2: past, w3: soon}
	}
	require.Equal(t, want, got)
}

// keepalive.lua counts the registry's live workers, not its size: a
// reclaimer looks with a chance of Lookers times its share of them, and
// the survivors of a fleet that mostly died (a zone lost) are the only
// ones left to look. Counted with the dead, 10 survivors of 1,000 would
// each look with a chance of 8 in 1,000, and the dead would wait about
// twelve renewals for one of them.
func TestKeepaliveCountsTheLiveWorkers(t *testing.T) {
	t.Parallel()
	e := newScriptEnv(t, "keepalive.lua")
	self := e.worker()
	now := e.clockMs()
	reg := zset{self: float64(now + 30_000)}
	for range 20 {
		reg[e.worker()] = float64(now - 1000) // run out, unclaimed
	}
	e.seed(keyState{"workers": reg})
	out, err := e.s.Keepalive(e.ctx, time.Minute, []Keepalive{{Worker: self}})
	require.NoError(t, err)
	require.Len(t, out, 1)
	assert.True(t, out[0].Dead, "the dead wait unclaimed")
	assert.EqualValues(t, 1, out[0].Workers, "the live workers: the survivor alone")
	got := e.dump()["workers"].(zset)
	e.within(int64(got[self]), now+60_000, e.clockMs()+60_000, "the survivor's renewed lease")
	got[self] = reg[self]
	assert.Equal(t, reg, got, "the dead left as they were")
}

// expired.lua: the expired workers no peer has claimed, but the caller,
// are claimed for it; claims run out are dropped.
func TestExpiredScript(t *testing.T) {
	t.Parallel()
	e := newScriptEnv(t, "expired.lua")
	self, w1, w2, live := e.worker(), e.worker(), e.worker(), e.worker()
	now := e.clockMs()
	e.seed(keyState{
		"workers":    zset{self: float64(now - 3000), w1: float64(now - 2000), w2: float64(now - 1000), live: float64(now + hour)},
		"reclaiming": zset{w2: float64(now + hour), "gone": float64(now - 1)},
	})
	got, err := e.s.ExpiredWorkers(e.ctx, 5, self, 10*time.Second)
	require.NoError(t, err)
	assert.Equal(t, []string{w1}, got.Dead)
	assert.Greater(t, got.Next, 59*time.Minute, "until the live worker's lease runs out")
	st := e.dump()
	claim := e.within(int64(st["reclaiming"].(zset)[w1]), now+10_000, e.clockMs()+10_000, "the claim")
	e.same(keyState{
		"workers":    zset{self: float64(now - 3000), w1: float64(now - 2000), w2: float64(now - 1000), live: float64(now + hour)},
		"reclaiming": zset{w2: float64(now + hour), w1: float64(claim)},
	}, st)
}

// register.lua, serve.lua, join.lua and deregister.lua: a worker enters
// the registry, with its process id, start and host, serves a queue (its
// queue set) and takes a lease there that ends with its registry lease,
// the queue named by it; it leaves the registry, with its claim, its
// queue set, its info and its slots.
func TestWorkerRegistryScripts(t *testing.T) {
	t.Parallel()
	e := newScriptEnv(t, "register.lua", "serve.lua", "join.lua", "deregister.lua")
	w := e.worker()
	before := e.clockMs()
	require.NoError(t, e.s.RegisterWorker(e.ctx, w, time.Minute))
	got := e.dump()
	expiry := e.within(int64(got["workers"].(zset)[w]), before+60_000, e.clockMs()+60_000, "the registry lease")
	host, _ := os.Hostname()
	info := got["winfo"].(hash)[w]
	parts := strings.SplitN(info, "\n", 3)
	require.Len(t, parts, 3, info)
	started, err := strconv.ParseInt(parts[1], 10, 64)
	require.NoError(t, err)
	e.within(started, before, e.clockMs(), "the start")
	e.same(keyState{"workers": zset{w: float64(expiry)},
		"winfo": hash{w: strconv.Itoa(os.Getpid()) + "\n" + parts[1] + "\n" + host}}, got)

	live, err := e.s.LiveWorkers(e.ctx)
	require.NoError(t, err)
	require.Len(t, live, 1)
	assert.Equal(t, WorkerLease{ID: w, LeftMsec: live[0].LeftMsec, PID: os.Getpid(), Host: host, StartedMs: started}, live[0])

	unregistered, err := e.s.JoinQueue(e.ctx, "q", w)
	require.NoError(t, err)
	assert.True(t, unregistered)
	e.expect(keyState{
		"workers": zset{w: float64(expiry)},
		"winfo":   hash{w: info},
		"wq:" + w: set{"q"},
		"leases":  zset{w: float64(expiry)},
		"meta":    hash{"name": "q"},
	})

	e.seed(keyState{"reclaiming": zset{w: 1}, "wslots": hash{w: "4,1:q"}})
	ok, err := e.s.Deregister(e.ctx, w, true)
	require.NoError(t, err)
	assert.False(t, ok, "a reclaimer is refused while the lease is live")
	ok, err = e.s.Deregister(e.ctx, w, false)
	require.NoError(t, err)
	assert.True(t, ok)
	e.expect(keyState{
		"leases": zset{w: float64(expiry)},
		"meta":   hash{"name": "q"},
	})
}

// live.lua: the live workers with the time their lease has left, their
// info and their slots; one registered without info or slots (an older
// release) reads with none; expired ones are left out.
func TestLiveScript(t *testing.T) {
	t.Parallel()
	e := newScriptEnv(t, "live.lua")
	w, old, gone := e.worker(), e.worker(), e.worker()
	now := e.clockMs()
	seeded := keyState{
		"workers": zset{w: float64(now + 60_000), old: float64(now + 30_000), gone: float64(now - 1)},
		"winfo":   hash{w: "42\n1700000000000\nhost\nwith a newline", gone: "7\n1\nx"},
		"wslots":  hash{w: "8,5:a,1:b3,0:", gone: "1,1:q"},
	}
	e.seed(seeded)
	live, err := e.s.LiveWorkers(e.ctx)
	require.NoError(t, err)
	require.Len(t, live, 2)
	assert.Equal(t, old, live[0].ID, "by expiry")
	assert.Equal(t, WorkerLease{ID: old, LeftMsec: live[0].LeftMsec}, live[0])
	assert.InDelta(t, 30_000, live[0].LeftMsec, 5_000)
	assert.Equal(t, WorkerLease{ID: w, LeftMsec: live[1].LeftMsec, PID: 42, StartedMs: 1700000000000, Host: "host\nwith a newline",
		Slots: []QueueSlots{{Queue: "a,1:b", Slots: 8}, {Queue: "", Slots: 3}}}, live[1])
	e.expect(seeded)
}

// A worker whose registry lease ran out cannot serve a queue.
func TestJoinAfterTheRegistryLease(t *testing.T) {
	t.Parallel()
	e := newScriptEnv(t, "serve.lua")
	w := e.worker()
	seeded := keyState{"workers": zset{w: float64(e.clockMs() - 1)}}
	e.seed(seeded)
	_, err := e.s.JoinQueue(e.ctx, "q", w)
	require.ErrorIs(t, err, ErrLeaseGone)
	e.expect(seeded)
}

// worker_slots.lua: a live worker's slots record is written whole, and
// removed when empty; nothing is written for a worker whose lease is gone.
func TestWorkerSlotsScript(t *testing.T) {
	t.Parallel()
	e := newScriptEnv(t, "worker_slots.lua")
	w, other, gone := e.worker(), e.worker(), e.worker()
	now := e.clockMs()
	workers := zset{w: float64(now + 60_000), other: float64(now + 60_000), gone: float64(now - 1)}
	e.seed(keyState{"workers": workers, "wslots": hash{other: "1,1:x"}})

	qs := []QueueSlots{{Queue: "emails", Slots: 10}, {Queue: "q:{x}\n,9:", Slots: 4}}
	require.NoError(t, e.s.SetWorkerSlots(e.ctx, w, qs))
	e.expect(keyState{"workers": workers, "wslots": hash{other: "1,1:x", w: "10,6:emails4,9:q:{x}\n,9:"}})
	assert.Equal(t, qs, decodeWorkerSlots(encodeWorkerSlots(qs)), "read back whole, whatever the names hold")

	require.NoError(t, e.s.SetWorkerSlots(e.ctx, w, qs[1:]))
	e.expect(keyState{"workers": workers, "wslots": hash{other: "1,1:x", w: "4,9:q:{x}\n,9:"}})
	require.NoError(t, e.s.SetWorkerSlots(e.ctx, w, nil))
	e.expect(keyState{"workers": workers, "wslots": hash{other: "1,1:x"}})

	require.ErrorIs(t, e.s.SetWorkerSlots(e.ctx, gone, qs), ErrLeaseGone)
	require.ErrorIs(t, e.s.SetWorkerSlots(e.ctx, e.worker(), qs), ErrLeaseGone, "never registered")
	e.expect(keyState{"workers": workers, "wslots": hash{other: "1,1:x"}})
}

// keepalive.lua reads the registry's first two leases before renewing:
// where a call renews several workers, one of which was among them, the
// next lease to run out is read again after the renewals, so a worker is
// not told of a peer's lease that has just been renewed.
func TestKeepaliveTellsTheNextLeaseAfterTheRenewals(t *testing.T) {
	t.Parallel()
	e := newScriptEnv(t, "keepalive.lua")
	a, b, c := e.worker(), e.worker(), e.worker()
	now := e.clockMs()
	e.seed(keyState{"workers": zset{a: float64(now + 10_000), b: float64(now + 20_000), c: float64(now + 30_000)}})
	out, err := e.s.Keepalive(e.ctx, time.Minute, []Keepalive{{Worker: b}, {Worker: a}})
	require.NoError(t, err)
	require.Len(t, out, 2)
	assert.False(t, out[0].Gone)
	assert.False(t, out[1].Gone)
	// For both, the next lease to run out is c's: a's and b's now run out
	// in a minute.
	for i, o := range out {
		assert.LessOrEqual(t, o.Next, 30*time.Second, i)
		assert.Greater(t, o.Next, 25*time.Second, i)
	}
	got := e.dump()
	expiry := float64(e.within(int64(got["workers"].(zset)[a]), now+60_000, e.clockMs()+60_000, "the renewed leases"))
	require.Equal(t, keyState{"workers": zset{a: expiry, b: expiry, c: float64(now + 30_000)}}, got)
}

// keepalive.lua, one worker alone: whether it held the first, the second
// or a later lease in the registry, it learns the next peer's.
func TestKeepaliveOfOneWorkerTellsTheNextPeer(t *testing.T) {
	t.Parallel()
	e := newScriptEnv(t, "keepalive.lua")
	a, b, c := e.worker(), e.worker(), e.worker()
	now := e.clockMs()
	leases := zset{a: float64(now + 10_000), b: float64(now + 20_000), c: float64(now + 30_000)}
	e.seed(keyState{"workers": leases})
	for _, tc := range []struct {
		w    string
		next time.Duration // from the seeding
	}{{a, 20 * time.Second}, {b, 30 * time.Second}, {c, time.Minute}} {
		// After a's renewal the first two are b and c; after b's, c and a
		// (in a minute).
		out, err := e.s.Keepalive(e.ctx, time.Minute, []Keepalive{{Worker: tc.w}})
		require.NoError(t, err)
		require.False(t, out[0].Gone)
		assert.LessOrEqual(t, out[0].Next, tc.next, tc.w)
		assert.Greater(t, out[0].Next, tc.next-5*time.Second, tc.w)
	}
	got := e.dump()
	assert.Len(t, got["workers"].(zset), 3)
}
