package delayed

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/worqr/worqr/internal/clock"
	"github.com/worqr/worqr/internal/outage"
	"github.com/worqr/worqr/internal/store"
	"github.com/worqr/worqr/internal/testsignal"
)

// timers is a store on miniredis whose clock, and the Env's, the test
// moves by hand.
type timers struct {
	m     *miniredis.Miniredis
	clk   *clock.Fake
	store *store.Store
	env   *Env
}

func newTimers(t *testing.T) *timers {
	t.Helper()
	m := miniredis.RunT(t)
	start := time.Now().Truncate(time.Millisecond)
	m.SetTime(start)
	rdb, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{m.Addr()}, DisableCache: true, AlwaysRESP2: true, ForceSingleClient: true})
	require.NoError(t, err)
	t.Cleanup(rdb.Close)
	clk := clock.NewFake(start)
	s := store.New(rdb, "delayedtest", false, false)
	log := slog.New(slog.DiscardHandler)
	env := &Env{
		Clock:  clk,
		Redis:  &RedisClock{},
		Store:  s,
		Outage: outage.New(log, clk, func(error) bool { return false }),
		Fail:   func(op, _ string, err error) error { return errors.Join(errors.New(op), err) },
		Log:    func() *slog.Logger { return log },
		TTL:    time.Minute,

		Armed:    new(testsignal.Signal[int64]),
		Promoted: new(testsignal.Signal[string]),
	}
	env.Armed.Init(t)
	env.Promoted.Init(t)
	return &timers{m: m, clk: clk, store: s, env: env}
}

// advance moves both clocks on by d.
func (k *timers) advance(d time.Duration) {
	k.m.SetTime(k.clk.Now().Add(d))
	k.clk.Advance(d)
}

// A delayed task is moved to its queue when the clock passes its due
// time, and not before: the promotion run when the queue is first served
// learns the due time, and the timer is set for it.
func TestDelayedTaskIsPromotedWhenTheClockPassesItsTime(t *testing.T) {
	k := newTimers(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, err := k.store.Enqueue(ctx, "q", [][]byte{[]byte("later")}, store.EnqueueArgs{Delay: time.Hour})
	require.NoError(t, err)
	sc := New(k.env, ctx, "q")
	defer sc.Stop()
	require.NoError(t, sc.Promote(ctx))
	due := k.clk.Now().Add(time.Hour).UnixMicro()
	require.Equal(t, due, k.env.Armed.WaitOrTimeout(), "the timer is set for the due time")

	k.advance(time.Hour - time.Millisecond)
	k.env.Promoted.RequireEmpty()
	n, err := k.store.QueueLen(ctx, "q")
	require.NoError(t, err)
	assert.Zero(t, n, "promoted early")

	k.advance(time.Millisecond)
	require.Equal(t, "q", k.env.Promoted.WaitOrTimeout())
	n, err = k.store.QueueLen(ctx, "q")
	require.NoError(t, err)
	assert.EqualValues(t, 1, n)
}

// A scheduler that heard of no delayed task has no loop and no timer.
func TestSchedulerOfAQueueWithNoDelayedTaskArmsNothing(t *testing.T) {
	k := newTimers(t)
	ctx := context.Background()
	sc := New(k.env, ctx, "q")
	defer sc.Stop()
	require.NoError(t, sc.Promote(ctx))
	sc.mu.Lock()
	started, at := sc.started, sc.at
	sc.mu.Unlock()
	assert.False(t, started, "the scheduler's loop started")
	assert.Zero(t, at)
	assert.Zero(t, k.clk.Timers())
}

// A promotion that fails is logged once as an outage's, and tried again
// a while later on the timer.
func TestFailedPromotionIsTriedAgain(t *testing.T) {
	k := newTimers(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sc := New(k.env, ctx, "q")
	defer sc.Stop()
	k.m.SetError("LOADING Redis is loading the dataset in memory")
	sc.runOnce(ctx)
	require.Equal(t, "q", k.env.Promoted.WaitOrTimeout())
	k.env.Armed.WaitOrTimeout() // armed to try again
	k.m.SetError("")
	k.advance(retryPromoteAfter)
	require.Equal(t, "q", k.env.Promoted.WaitOrTimeout(), "tried again")
}

// The estimate of the Redis clock is the offset seen at the midpoint of
// the last round trip.
func TestRedisClockTakesTheMidpoint(t *testing.T) {
	var c RedisClock
	local := time.Unix(1000, 0)
	assert.Equal(t, local, c.At(local), "the clocks agree until told")
	c.Observe(local.Add(5*time.Second).UnixMicro(), local, local.Add(2*time.Second))
	assert.Equal(t, local.Add(4*time.Second), c.At(local), "5 s ahead at the midpoint, 1 s in")
}
