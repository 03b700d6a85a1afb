package worqr

import (
	"context"
	"fmt"
	"io"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/worqr/worqr/internal/reclaim"
	"github.com/worqr/worqr/internal/store"
	"github.com/worqr/worqr/internal/wiring"
)

// A peer comes back for a dead worker when its lease runs out, not at its
// own next check: with a check interval of a minute, the dead worker's
// tasks are still back within a few seconds of its 1 s lease's expiry.
func TestReclaimerWakesAtThePeersLeaseExpiry(t *testing.T) {
	t.Parallel()
	k := setupClocked(t)
	c, ctx := k.c, k.ctx
	// The dead worker joins first: a peer learns of a new worker at its
	// next pass, and here that is a minute away.
	dead := newWorker(t, c, fast)
	slow := WorkerOptions{TTL: 3 * time.Minute, RenewInterval: time.Minute}
	pc := k.client()
	pc.core.Signals.Looked.Init(t)
	peer := newWorker(t, pc, slow)
	require.Zero(t, pc.core.Signals.Looked.WaitOrTimeout(), "the peer's first pass")
	require.NoError(t, dead.StartWork(ctx, "q", Events{}))
	enqueueNumbered(t, c, "q", 3)
	dequeueAll(t, dead, "q", 2)
	// The peer's first pass saw the dead worker's lease, which runs out
	// 1 s after it registered (it never renewed).
	crash(dead)
	k.advance(fast.TTL + 10*time.Millisecond)
	require.Equal(t, int64(2), pc.core.Signals.Looked.WaitOrTimeout(), "the peer looked at the expiry")
	assert.Equal(t, []string{"t0000", "t0001", "t0002"}, waiting(t, c, "q"))
	ws, err := c.Workers(ctx)
	require.NoError(t, err)
	require.Len(t, ws, 1, "the dead worker is deregistered")
	assert.Equal(t, peer.ID(), ws[0].ID)
}

// Every peer woken by one expiry asks the registry; only one is handed the
// dead worker, the rest hear of nobody until the claim runs out, and
// deregistering the worker drops its claim.
func TestExpiredWorkerIsClaimedByOnePeer(t *testing.T) {
	t.Parallel()
	k := setupTimed(t, nil)
	c, ctx := k.c, k.ctx
	dead := newWorker(t, c, fast)
	id := dead.ID()
	crash(dead)
	k.idle(fast.TTL + time.Millisecond)
	require.False(t, leaseLive(t, c, id), "the lease expires")

	const peers = 8
	var mu sync.Mutex
	var got [][]string
	var wg sync.WaitGroup
	for range peers {
		rc := k.client()
		wg.Go(func() {
			exp, err := rc.core.Store.ExpiredWorkers(ctx, reclaim.Batch, "", time.Minute)
			assert.NoError(t, err)
			mu.Lock()
			got = append(got, exp.Dead)
			mu.Unlock()
		})
	}
	wg.Wait()
	var handed []string
	for _, dead := range got {
		handed = append(handed, dead...)
	}
	assert.Equal(t, []string{id}, handed, "one peer of %d is handed the dead worker", peers)

	// The claimer deregisters it; nothing is left claimed.
	r, err := c.core.Reclaimers.Worker(ctx, c.core.Log, id, 0, false)
	require.NoError(t, err)
	require.True(t, r.Done)
	n, err := c.core.Redis.Do(ctx, c.core.Redis.B().Zcard().Key(c.core.Store.Keys().Reclaiming()).Build()).AsInt64()
	require.NoError(t, err)
	assert.Zero(t, n, "deregistering drops the claim")
}

// A claim lasts as long as asked: a claimer that dies leaves the worker to
// the next peer that looks after the claim has run out.
func TestClaimOfADeadReclaimerRunsOut(t *testing.T) {
	t.Parallel()
	k := setupTimed(t, nil)
	c, ctx := k.c, k.ctx
	dead := newWorker(t, c, fast)
	id := dead.ID()
	crash(dead)
	k.idle(fast.TTL + time.Millisecond)
	require.False(t, leaseLive(t, c, id), "the lease expires")
	exp, err := c.core.Store.ExpiredWorkers(ctx, reclaim.Batch, "", 300*time.Millisecond)
	require.NoError(t, err)
	require.Equal(t, []string{id}, exp.Dead)
	exp, err = c.core.Store.ExpiredWorkers(ctx, reclaim.Batch, "", time.Minute)
	require.NoError(t, err)
	require.Empty(t, exp.Dead, "claimed")
	k.idle(300*time.Millisecond + time.Millisecond)
	exp, err = c.core.Store.ExpiredWorkers(ctx, reclaim.Batch, "", time.Minute)
	require.NoError(t, err)
	assert.Equal(t, []string{id}, exp.Dead, "the claim runs out")
}

// The registry tells a reclaimer when the next peer's lease runs out, and
// never counts the caller's own lease as a peer's.
func TestExpiredWorkersTellsTheNextPeerExpiry(t *testing.T) {
	t.Parallel()
	b, c, ctx := setup(t)
	self := newWorker(t, c, lasting) // shorter than the peer's, and not let run out
	exp, err := c.core.Store.ExpiredWorkers(ctx, reclaim.Batch, self.ID(), time.Second)
	require.NoError(t, err)
	assert.Zero(t, exp.Next, "no peer: nothing to wait for")

	peer := newWorker(t, b.client(), WorkerOptions{TTL: time.Minute, RenewInterval: 20 * time.Second})
	exp, err = c.core.Store.ExpiredWorkers(ctx, reclaim.Batch, self.ID(), time.Second)
	require.NoError(t, err)
	assert.Empty(t, exp.Dead)
	assert.Greater(t, exp.Next, 50*time.Second, "the peer's lease, not the caller's shorter one")
	assert.LessOrEqual(t, exp.Next, time.Minute)

	exp, err = c.core.Store.ExpiredWorkers(ctx, reclaim.Batch, peer.ID(), time.Second)
	require.NoError(t, err)
	assert.LessOrEqual(t, exp.Next, lasting.TTL, "from the peer's side, the caller's shorter lease is next")
	assert.Greater(t, exp.Next, time.Duration(0))
}

// A reclaim refused because the dead worker's queue lease outlives its
// registry lease says how long it has left, so the reclaimer can come
// back then.
func TestRefusedReclaimSaysWhenTheQueueLeaseEnds(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	w := newWorker(t, c, WorkerOptions{TTL: time.Minute, RenewInterval: 20 * time.Second})
	require.NoError(t, w.StartWork(ctx, "q", Events{}))
	r, err := c.core.Reclaimers.Worker(ctx, c.core.Log, w.ID(), 0, false)
	require.NoError(t, err)
	assert.False(t, r.Done)
	assert.Greater(t, r.Left, 50*time.Second)
	assert.LessOrEqual(t, r.Left, time.Minute)
}

// The workers of a client share one reclaimer: a peer's death costs the
// client a look or two, not one per worker. (Each worker had its own, and
// every one of them woke at the peer's expiry and looked: a client of
// 10,000 workers sent 10,000 scripts for every peer that died.)
func TestWorkersOfAClientShareOneReclaimer(t *testing.T) {
	t.Parallel()
	b, c, ctx := setup(t)
	looks := countCalls(c, store.OpExpired)
	const n = 20
	// The client's workers at lasting's TTL: one fenced by a stall of the
	// test process would be a peer to reclaim, whose looks count. The
	// peer that dies is at fast's, which bounds the wait for its reclaim.
	for range n {
		newWorker(t, c, lasting)
	}
	// Another RenewInterval, another reclaimer.
	other := newWorker(t, c, WorkerOptions{TTL: lasting.TTL, RenewInterval: 500 * time.Millisecond})
	r, members := c.reclaimerOf(t, lasting)
	assert.NotSame(t, other.parts.Reclaimer, r)
	assert.Equal(t, n, members)

	dead := newWorker(t, b.client(), fast)
	id := dead.ID()
	// Every worker of c has heard of the peer's lease by now: each renews
	// every 250 ms, and the peer's lease runs out first once it stops.
	eventually(t, 5*time.Second, "the first looks", func() bool { return looks.Load() >= 2 })
	before := looks.Load()
	crash(dead)
	eventually(t, fast.TTL+5*time.Second, "the dead peer is reclaimed", func() bool {
		ws, err := c.Workers(ctx)
		require.NoError(t, err)
		for _, w := range ws {
			if w.ID == id {
				return false
			}
		}
		return true
	})
	// One look at the expiry; one more if a renewal saw the dead worker
	// before it was claimed; not one per worker.
	assert.LessOrEqual(t, looks.Load()-before, int64(3), "looks for one dead peer by a client of %d workers", n)
}

// reclaimerOf is the client's reclaimer for workers with opts, and how
// many members it has.
func (c *Client) reclaimerOf(t *testing.T, opts WorkerOptions) (*reclaim.Reclaimer[wiring.Member], int) {
	t.Helper()
	r, n := c.core.Reclaimers.Lookup(opts.TTL, opts.RenewInterval)
	require.NotNil(t, r)
	return r, n
}

// Whether a dead worker waits unclaimed costs a renewal a few calls
// however many dead workers are claimed: under CPU starvation a fleet
// whose workers kept fencing themselves once piled up hundreds of claims,
// and a call per claim in every renewal starved Redis in turn. The
// reclaimer's own look reads the claims in one call too.
func TestDeadWorkersCostRenewalsAFewCallsHoweverManyAreClaimed(t *testing.T) {
	t.Parallel()
	b, c, ctx := setup(t)
	keys := c.core.Store.Keys()
	require.NoError(t, c.core.Store.RegisterWorker(ctx, "live", time.Minute))
	const dead = 500
	expired, claims := c.core.Redis.B().Zadd().Key(keys.Workers()).ScoreMember(), c.core.Redis.B().Zadd().Key(keys.Reclaiming()).ScoreMember()
	for i := range dead {
		id := fmt.Sprintf("dead-%03d", i)
		expired = expired.ScoreMember(float64(1+i), id)
		if i < dead-1 { // all but the last, which sorts last
			claims = claims.ScoreMember(float64(time.Now().Add(time.Hour).UnixMilli()), id)
		}
	}
	require.NoError(t, c.core.Redis.Do(ctx, expired.Build()).Error())
	require.NoError(t, c.core.Redis.Do(ctx, claims.Build()).Error())

	// calls counts the Redis calls f makes (0 where only f's results can
	// be checked: see commandsOf).
	calls := func(f func()) int {
		n, _ := b.commandsOf(f)
		return n
	}
	renew := func() store.KeptAlive {
		kept, err := c.core.Store.Keepalive(ctx, time.Minute, []store.Keepalive{{Worker: "live"}})
		require.NoError(t, err)
		require.Len(t, kept, 1)
		require.False(t, kept[0].Gone)
		return kept[0]
	}
	// renewalCalls counts the calls of a renewal, the fewest of three:
	// the server's count also takes in what the client sends of its own
	// (a connection's first commands, rueidis's keep-alive PING), which
	// may land among one renewal's calls, hardly among each of three's.
	var kept store.KeptAlive
	renewalCalls := func() int {
		n := math.MaxInt
		for range 3 {
			n = min(n, calls(func() { kept = renew() }))
		}
		return n
	}
	// Counted from the second call on: the first of a script on a new
	// server may be sent twice (EVALSHA refused, then EVAL).
	kept = renew()
	assert.True(t, kept.Dead, "one of %d dead workers is unclaimed", dead)
	n := renewalCalls()
	assert.True(t, kept.Dead, "one of %d dead workers is unclaimed", dead)
	assert.LessOrEqual(t, n, 12, "calls of one renewal")

	var exp store.Expired
	_, err := c.core.Store.ExpiredWorkers(ctx, 0, "live", time.Hour) // loads the script
	require.NoError(t, err)
	n = calls(func() {
		exp, err = c.core.Store.ExpiredWorkers(ctx, reclaim.Batch, "live", time.Hour)
		require.NoError(t, err)
	})
	assert.Equal(t, []string{fmt.Sprintf("dead-%03d", dead-1)}, exp.Dead, "the unclaimed one is handed out")
	assert.LessOrEqual(t, n, 16, "calls of one look")

	n = renewalCalls()
	assert.False(t, kept.Dead, "every dead worker is claimed")
	assert.LessOrEqual(t, n, 12, "calls of one renewal")
}

// A look that fails comes back in about a RenewInterval, also when the
// peer's expiry it was for has passed: a reclaimer once looked again at
// once, thousands of times a second, for as long as its looks failed (a
// script its ACL user may not run; Redis down).
func TestFailingLooksDoNotSpin(t *testing.T) {
	t.Parallel()
	k := setupClocked(t)
	c, h := k.hooked()
	ctx := k.ctx
	expiredSHA := c.core.Store.Scripts().Expired.SHA1()
	var failing atomic.Bool
	var failed atomic.Int64
	h.set(func(h *hooked) {
		h.do = func(ctx context.Context, cmd rueidis.Completed, next func() rueidis.RedisResult) rueidis.RedisResult {
			if failing.Load() && scriptOf(cmd) == expiredSHA {
				failed.Add(1)
				return rueidis.NewErrorResult(io.ErrUnexpectedEOF)
			}
			return next()
		}
	})
	k.c = c // the clock runs beat by beat on the reclaimer's client
	k.beats()
	c.core.Signals.Looked.Init(t)
	newWorker(t, c, fast)
	// The first look, at once, ends before the looks fail: one still on
	// its way could run after the peer's expiry and reclaim it.
	c.core.Signals.Looked.WaitOrTimeout()
	peer := newWorker(t, k.client(), fast)
	id := peer.ID()
	failing.Store(true)
	crash(peer)
	// beat moves the clock on by a RenewInterval and, unless done, waits
	// for a look to end after the beat's renewal, which heard of the dead
	// peer: the looks run on the reclaimer's goroutine, and a clock that
	// ran on without them could pass many beats during one look on a busy
	// machine (the renewals a look outlasts ask for no look of their
	// own), and so leave the looks behind. (A look that ends later than
	// the renewal sends its signal after the signals are emptied.)
	beat := func(done func() bool) {
		t.Helper()
		for len(c.core.Signals.Looked.C()) > 0 {
			<-c.core.Signals.Looked.C()
		}
		k.run(fast.RenewInterval)
		if done == nil || !done() {
			c.core.Signals.Looked.WaitOrTimeout()
		}
	}
	// The reclaimer wakes at the peer's expiry and its look fails; from
	// then on it may look about every RenewInterval (and once more for
	// each renewal that sees the dead worker).
	k.run(fast.TTL + fast.RenewInterval)
	untilLooked(t, c, "a look fails", func() bool { return failed.Load() > 0 })
	from := failed.Load()
	const took = 2 * time.Second
	for range took / fast.RenewInterval {
		beat(nil)
	}
	looks := failed.Load() - from
	assert.GreaterOrEqual(t, looks, int64(3), "the looks go on failing")
	assert.LessOrEqual(t, float64(looks), 2*took.Seconds()/fast.RenewInterval.Seconds()+4,
		"%d failed looks in %v", looks, took)

	// Once the looks succeed the dead peer is reclaimed: by the look that
	// ends after the second beat at the latest (the one after the first
	// may have begun while the looks still failed).
	failing.Store(false)
	reclaimed := func() bool {
		n, err := c.core.Redis.Do(ctx, c.core.Redis.B().Zscore().Key(c.core.Store.Keys().Workers()).Member(id).Build()).AsFloat64()
		return rueidis.IsRedisNil(err) && n == 0
	}
	for beats := 0; !reclaimed(); beats++ {
		require.Less(t, beats, 2, "the dead peer is not reclaimed")
		beat(reclaimed)
	}
}
