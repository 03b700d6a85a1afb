package worqr

// The lease deadline (engine.Deadline), the renewals that move it and the
// fences and rejoins they lead to (engine.Keeper, engine.Session), driven
// by a Fake clock: the tests move the client's clock and miniredis's
// together, and wait on the components' test signals.

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/worqr/worqr/internal/beat"
	"github.com/worqr/worqr/internal/clock"
	"github.com/worqr/worqr/internal/lifecycle"
	"github.com/worqr/worqr/internal/store"
	"github.com/worqr/worqr/internal/testsignal"
)

// clocked is a test whose client runs on a Fake clock, and whose Redis (a
// miniredis) reads the same time: advance moves both. On a real Redis
// (setupTimed) the clock is the system's and run waits for the time to
// pass.
type clocked struct {
	t     *testing.T
	b     *backend
	clk   *clock.Fake // nil on a real Redis
	c     *Client
	ctx   context.Context
	start time.Time
	// beating are the clients whose beats run waits for (beats).
	beating []*Client
}

// setupTimed is setupClockedWith, or, on a real Redis, whose clock a test
// cannot move, a client on the system clock: for the tests that only let
// time pass (run), which then waits for it.
func setupTimed(t *testing.T, opt func(*Options)) *clocked {
	t.Helper()
	b := newBackend(t)
	if b.mini != nil {
		return setupClockedOn(t, b, opt)
	}
	opts := Options{Redis: b.redis(), Prefix: b.prefix, Logger: testLogger(t)}
	if opt != nil {
		opt(&opts)
	}
	c, err := New(opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	return &clocked{t: t, b: b, c: c, ctx: ctxT(t), start: time.Now()}
}

// beats turns on the beat signal of the client k.c, which run waits on,
// on a Fake clock.
func (k *clocked) beats() { k.beatsOf(k.c) }

// beatsOf is beats for c, another client of the test's (client): run
// waits for its beats too, which keep its workers alive.
func (k *clocked) beatsOf(c *Client) {
	if k.clk != nil {
		c.core.Signals.Beat.Init(k.t)
		k.beating = append(k.beating, c)
	}
}

// stopBeats makes run wait no more for c's beats: its workers are dead or
// cut off.
func (k *clocked) stopBeats(c *Client) {
	k.beating = slices.DeleteFunc(k.beating, func(b *Client) bool { return b == c })
}

// reclaimingPeer is a live worker of fast's options on a client of its
// own, whose beats run waits for and whose looks reclaimed counts.
func (k *clocked) reclaimingPeer() (*Client, *Worker) {
	k.t.Helper()
	pc := k.client()
	k.beatsOf(pc)
	pc.core.Signals.Looked.Init(k.t)
	return pc, newWorker(k.t, pc, fast)
}

// reclaimed waits for the reclaimers of cs to have sent back n tasks in
// all, over one look or several, on their looked signals (each turned on
// before its client's first worker joined; a look that finds nothing
// counts none). Several clients whose workers may each wake for the same
// expiry share the work as the registry hands it out.
func reclaimed(t *testing.T, n int64, cs ...*Client) {
	t.Helper()
	cases := make([]reflect.SelectCase, 0, len(cs)+1)
	for _, c := range cs {
		cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(c.core.Signals.Looked.C())})
	}
	timeout := time.After(testsignal.Wait)
	cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(timeout)})
	var got int64
	for got < n {
		i, v, _ := reflect.Select(cases)
		if i == len(cs) {
			t.Fatalf("reclaimed %d tasks of %d in %v", got, n, testsignal.Wait)
		}
		got += v.Int()
	}
	require.Equal(t, n, got, "tasks sent back")
}

// untilLooked waits for cond to hold, looking again after each look of
// c's reclaimers (their looked signal, turned on before c's first worker
// joined), for a reclaim whose result tells no count of tasks sent back.
func untilLooked(t *testing.T, c *Client, what string, cond func() bool) {
	t.Helper()
	timeout := time.After(testsignal.Wait)
	for !cond() {
		select {
		case <-c.core.Signals.Looked.C():
		case <-timeout:
			t.Fatalf("not within %v of looks: %s", testsignal.Wait, what)
		}
	}
}

// until waits for cond to hold, looking again after each value of s (a
// signal turned on before the component that sends it started): for an
// outcome that a component's event brings about without telling what it
// did.
func until[T any](t *testing.T, s *testsignal.Signal[T], what string, cond func() bool) {
	t.Helper()
	timeout := time.After(testsignal.Wait)
	for !cond() {
		select {
		case <-s.C():
		case <-timeout:
			t.Fatalf("not within %v of signals: %s", testsignal.Wait, what)
		}
	}
}

// setupClocked is setup on a Fake clock. It skips the test on a real
// Redis, whose clock a test cannot move.
func setupClocked(t *testing.T) *clocked { t.Helper(); return setupClockedWith(t, nil) }

// setupClockedWith is setupClocked with the client's options changed by
// opt (when set).
func setupClockedWith(t *testing.T, opt func(*Options)) *clocked {
	t.Helper()
	b := newBackend(t)
	if b.mini == nil {
		t.Skip("a Fake clock needs a Redis whose clock the test moves (miniredis)")
	}
	return setupClockedOn(t, b, opt)
}

func setupClockedOn(t *testing.T, b *backend, opt func(*Options)) *clocked {
	t.Helper()
	// Near the real time, as logs and ids read it. On a step of the
	// beats' grid, so that the clients' beats fall at the
	// start and every RenewInterval after it (see run).
	start := time.Now().UTC().Truncate(beat.Grid)
	clk := clock.NewFake(start)
	b.mini.SetTime(start)
	opts := Options{Redis: b.redis(), Prefix: b.prefix, Logger: testLogger(t), clock: clk}
	if opt != nil {
		opt(&opts)
	}
	c, err := New(opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	return &clocked{t: t, b: b, clk: clk, c: c, ctx: ctxT(t), start: start}
}

// client is another client on the same Redis and the same Fake clock.
func (k *clocked) client() *Client {
	k.t.Helper()
	c, err := New(k.options(k.b.redis()))
	require.NoError(k.t, err)
	k.t.Cleanup(func() { _ = c.Close(context.Background()) })
	return c
}

// options are those of a client on rdb with the test's prefix and clock.
func (k *clocked) options(rdb rueidis.Client) Options {
	opts := Options{Redis: rdb, Prefix: k.b.prefix, Logger: testLogger(k.t)}
	if k.clk != nil { // not a nil *Fake in the interface
		opts.clock = k.clk
	}
	return opts
}

// clientVia is another client on the same Redis and Fake clock whose
// connections go through px.
func (k *clocked) clientVia(px *proxy) *Client {
	k.t.Helper()
	c, err := New(k.options(k.b.redisWith("", px)))
	require.NoError(k.t, err)
	k.t.Cleanup(func() { _ = c.Close(context.Background()) })
	return c
}

// hooked is a client on the same Redis and Fake clock whose commands go
// through a hook (see hookedClient).
func (k *clocked) hooked() (*Client, *hooked) {
	k.t.Helper()
	h := &hooked{Client: k.b.redis()}
	c, err := New(k.options(h))
	require.NoError(k.t, err)
	k.t.Cleanup(func() { _ = c.Close(context.Background()) })
	return c, h
}

// advance moves Redis's clock, then the client's (whose timers fire), by d.
func (k *clocked) advance(d time.Duration) {
	k.b.mini.SetTime(k.clk.Now().Add(d))
	k.clk.Advance(d)
}

// run moves the clocks on by d as time would pass for workers renewing
// every fast.RenewInterval: beat by beat (from the clients' start),
// waiting at each for the round of the beats the test turned on (beats),
// so that the workers renew their leases on the way. Each of those
// clients keeps a worker of that RenewInterval alive.
func (k *clocked) run(d time.Duration) {
	k.t.Helper()
	if k.clk == nil {
		deadline := time.Now().Add(d)
		eventually(k.t, 2*d, "the time passes", func() bool { return !time.Now().Before(deadline) })
		return
	}
	every := fast.RenewInterval
	end := k.clk.Now().Add(d)
	for {
		now := k.clk.Now()
		next := k.start.Add((now.Sub(k.start)/every + 1) * every)
		if next.After(end) {
			if end.After(now) {
				k.advance(end.Sub(now))
			}
			return
		}
		k.advance(next.Sub(now))
		for _, c := range k.beating {
			c.core.Signals.Beat.WaitOrTimeout()
		}
	}
}

// idle moves the clocks on by d while the client has no live worker (no
// beat to wait for), or on a real Redis waits for d to pass.
func (k *clocked) idle(d time.Duration) {
	k.t.Helper()
	if k.clk == nil {
		k.run(d)
		return
	}
	k.advance(d)
}

// advanceOnceSet moves the clocks on by d once n of the client's timers
// are pending, on a goroutine of its own: for a call of the test's that
// returns only after a timer it sets has fired. It gives up when the test
// ends.
func (k *clocked) advanceOnceSet(n int, d time.Duration) {
	go func() {
		if k.clk.WaitTimers(k.ctx, n) == nil {
			k.advance(d)
		}
	}()
}

// at is the time d after the test's start.
func (k *clocked) at(d time.Duration) time.Time { return k.start.Add(d) }

// waitTimers waits until n of the client's timers are pending.
func (k *clocked) waitTimers(n int) {
	k.t.Helper()
	ctx, cancel := context.WithTimeout(k.ctx, testsignal.Wait)
	defer cancel()
	require.NoError(k.t, k.clk.WaitTimers(ctx, n), "timers set")
}

// failing makes the client's store calls of kind op fail (on queue, or
// every queue when queue is "") while on is set; it returns the switch.
func failing(c *Client, op store.Op, queue string) (set func(bool)) {
	on := new(atomic.Bool)
	c.core.Store.SetFault(func(_ context.Context, got store.Op, q string) error {
		if on.Load() && got == op && (queue == "" || q == queue) {
			return errors.New("renewal refused (test)")
		}
		return nil
	})
	return on.Store
}

// registryDeadline is the worker's registry lease deadline.
func registryDeadline(w *Worker) time.Time {
	w.core.Lock()
	defer w.core.Unlock()
	return w.core.Lease.At()
}

// noFence fails the test if a fence event waits.
func noFence(t *testing.T, fences <-chan FenceEvent) {
	t.Helper()
	select {
	case ev := <-fences:
		t.Fatalf("fenced: queue %q, cause %v", ev.Queue, ev.Cause)
	default:
	}
}

// A worker that cannot renew fences itself when TTL less the margin (0.9
// TTL) has passed since it registered, by its own clock, and not before.
func TestWorkerThatCannotRenewFencesItselfAtTheMargin(t *testing.T) {
	t.Parallel()
	k := setupClocked(t)
	k.c.core.Signals.Beat.Init(t)
	refuse := failing(k.c, store.OpRenew, "")
	refuse(true)
	w, fences := fencingWorker(t, k.c)
	id := w.ID()
	require.Equal(t, k.at(900*time.Millisecond), registryDeadline(w))
	k.waitTimers(2) // the deadline, the beat

	k.advance(899 * time.Millisecond)
	require.Equal(t, 1, k.c.core.Signals.Beat.WaitOrTimeout(), "the beat tried to renew the worker")
	noFence(t, fences)
	_, err := currentID(w)
	require.NoError(t, err, "fenced before its deadline")

	k.advance(time.Millisecond)
	ev := recv(t, fences, testsignal.Wait, "the worker fenced itself")
	assert.Equal(t, id, ev.WorkerID)
	assert.Empty(t, ev.Queue)
	assert.ErrorIs(t, ev.Cause, ErrWorkerFenced)
	assert.ErrorContains(t, ev.Cause, "lease not renewed in time")
	w.core.Lock()
	fencedAt := w.core.Worker().FencedAt()
	w.core.Unlock()
	assert.Equal(t, k.at(900*time.Millisecond), fencedAt)
}

// A renewal that succeeds moves the deadline to 0.9 TTL after it was
// sent: the worker outlives its first deadline, and fences itself at the
// renewal's.
func TestRenewalMovesTheDeadline(t *testing.T) {
	t.Parallel()
	k := setupClocked(t)
	k.c.core.Signals.Beat.Init(t)
	refuse := failing(k.c, store.OpRenew, "")
	w, fences := fencingWorker(t, k.c)
	k.waitTimers(2)

	k.advance(250 * time.Millisecond) // the first beat
	require.Equal(t, 1, k.c.core.Signals.Beat.WaitOrTimeout())
	require.Equal(t, k.at(1150*time.Millisecond), registryDeadline(w), "sent at 250 ms, renewed to 250 + 900 ms")

	refuse(true)
	k.advance(899 * time.Millisecond) // past the first deadline (900 ms)
	require.Equal(t, 1, k.c.core.Signals.Beat.WaitOrTimeout(), "the beat of 500 ms tried")
	require.Equal(t, k.at(1150*time.Millisecond), registryDeadline(w), "a failed renewal moved the deadline")

	k.advance(time.Millisecond)
	ev := recv(t, fences, testsignal.Wait, "the worker fenced itself")
	assert.ErrorContains(t, ev.Cause, "lease not renewed in time")
	w.core.Lock()
	fencedAt := w.core.Worker().FencedAt()
	w.core.Unlock()
	assert.Equal(t, k.at(1150*time.Millisecond), fencedAt, "fenced at the renewal's deadline, not the first")
}

// A queue lease that cannot be renewed (its node unreachable, on a
// Cluster) fences that queue alone at its deadline: the worker keeps its
// id and its other queue. Once the old lease has surely run out (TTL
// after the last renewal that reached it) and the node answers, the
// worker takes the queue's lease again.
func TestQueueLeaseLostFencesOnlyThatQueueAndRejoins(t *testing.T) {
	t.Parallel()
	k := setupClocked(t)
	k.c.core.Store.RenewApart() // as on a Cluster
	k.c.core.Signals.Beat.Init(t)
	k.c.core.Signals.QueueRenewed.Init(t)
	k.c.core.Signals.Rejoined.Init(t)
	refuse := failing(k.c, store.OpRenewQueue, "a")
	w, fences := fencingWorker(t, k.c)
	id := w.ID()
	require.NoError(t, w.StartWork(k.ctx, "a", Events{}))
	require.NoError(t, w.StartWork(k.ctx, "b", Events{}))
	refuse(true)
	k.waitTimers(2)

	k.advance(250 * time.Millisecond)
	require.Equal(t, 1, k.c.core.Signals.Beat.WaitOrTimeout())
	renewedQueues := []string{k.c.core.Signals.QueueRenewed.WaitOrTimeout(), k.c.core.Signals.QueueRenewed.WaitOrTimeout()}
	require.ElementsMatch(t, []string{"a", "b"}, renewedQueues)
	var da, db time.Time
	da = sessionOf(w, "a").Lease.View().Deadline
	db = sessionOf(w, "b").Lease.View().Deadline
	require.Equal(t, k.at(900*time.Millisecond), da, "a's failed renewal moved its deadline")
	require.Equal(t, k.at(1150*time.Millisecond), db)
	noFence(t, fences)

	k.advance(650 * time.Millisecond) // a's deadline: 900 ms
	ev := recv(t, fences, testsignal.Wait, "queue a fenced")
	assert.Equal(t, "a", ev.Queue)
	assert.Equal(t, id, ev.WorkerID)
	assert.ErrorContains(t, ev.Cause, `lease on "a" not renewed in time`)
	_, err := currentID(w)
	require.NoError(t, err, "the whole worker fenced itself")
	assert.Equal(t, id, w.ID())
	a, b := sessionOf(w, "a"), sessionOf(w, "b")
	var fencedA, fencedB bool
	fencedA = a.Lease.View().State == lifecycle.SessionFenced
	fencedB = b.Lease.View().State == lifecycle.SessionFenced
	assert.True(t, fencedA)
	assert.False(t, fencedB, "queue b fenced")

	// The rejoin waits for the old lease to run out: 900 ms + the margin.
	refuse(false)
	k.advance(99 * time.Millisecond)
	select {
	case q := <-k.c.core.Signals.Rejoined.C():
		t.Fatalf("%s rejoined before its old lease ran out", q)
	default:
	}
	k.advance(time.Millisecond)
	require.Equal(t, "a", k.c.core.Signals.Rejoined.WaitOrTimeout())
	fencedA = a.Lease.View().State == lifecycle.SessionFenced
	assert.False(t, fencedA, "a is still fenced after the rejoin")
	assert.Equal(t, id, w.ID())
	noFence(t, fences)
}
