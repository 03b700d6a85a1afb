package beat

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
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

// member is a worker as the tests give it to a beat: it renews its
// registry lease, unless off, and keeps the answers.
type member struct {
	id   string
	mu   sync.Mutex
	off  bool
	got  []store.KeptAlive
	err  []error
	sent []time.Time
}

func (m *member) Renewal() (string, store.Keepalive, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.id, store.Keepalive{Worker: m.id}, !m.off
}

func (m *member) Renewed(r string, sent time.Time, k store.KeptAlive, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if r != m.id {
		panic("another member's renewal")
	}
	m.got = append(m.got, k)
	m.err = append(m.err, err)
	m.sent = append(m.sent, sent)
}

func (m *member) sentAt() []time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]time.Time(nil), m.sent...)
}

func (m *member) answers() ([]store.KeptAlive, []error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]store.KeptAlive(nil), m.got...), append([]error(nil), m.err...)
}

// slowClient takes slow of the fake clock's time for each call.
type slowClient struct {
	rueidis.Client
	clk  *clock.Fake
	slow atomic.Int64 // ns
}

func (c *slowClient) Do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	c.clk.Advance(time.Duration(c.slow.Load()))
	return c.Client.Do(ctx, cmd)
}

func newBeats(t *testing.T) (*Beats[string, *member], *clock.Fake, *miniredis.Miniredis) {
	bs, clk, m, _ := newSlowBeats(t)
	return bs, clk, m
}

// newSlowBeats is newBeats, with calls that take the fake clock's time.
func newSlowBeats(t *testing.T) (*Beats[string, *member], *clock.Fake, *miniredis.Miniredis, *slowClient) {
	t.Helper()
	m := miniredis.RunT(t)
	rdb, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{m.Addr()}, DisableCache: true, AlwaysRESP2: true, ForceSingleClient: true})
	require.NoError(t, err)
	t.Cleanup(rdb.Close)
	clk := clock.NewFake(time.Unix(1000, 0))
	slow := &slowClient{Client: rdb, clk: clk}
	log := slog.New(slog.DiscardHandler)
	env := &Env{
		Clock:  clk,
		Store:  store.New(slow, "beattest", false, false),
		Outage: outage.New(log, clk, func(error) bool { return true }),
		Log:    log,
		Fail:   func(op, _ string, err error) error { return errors.Join(errors.New(op), err) },
		Born:   clk.Now().Add(-300 * time.Millisecond),
		Beat:   new(testsignal.Signal[int]),
	}
	env.Beat.Init(t)
	return New[string, *member](env), clk, m, slow
}

// The members of one TTL and RenewInterval share a beat, which renews
// them all in one round on the client's beat and hands each its answer; a
// member that renews nothing now is left out; the beat stops with its
// last member.
func TestMembersShareOneBeatOnTheClientsBeat(t *testing.T) {
	bs, clk, _ := newBeats(t)
	ctx := context.Background()
	a, b, idle := &member{id: "a"}, &member{id: "b"}, &member{id: "idle", off: true}
	for _, m := range []*member{a, b, idle} {
		require.NoError(t, bs.Store.RegisterWorker(ctx, m.id, time.Minute))
	}
	const ttl, every = 3 * time.Second, time.Second
	ba := bs.Join(a, ttl, every)
	assert.Same(t, ba, bs.Join(b, ttl, every), "one beat for one TTL and RenewInterval")
	other := bs.Join(idle, 2*ttl, every)
	assert.NotSame(t, ba, other)
	assert.Equal(t, 700*time.Millisecond, bs.In(every), "on the client's beat, counted from its birth")

	require.NoError(t, clk.WaitTimers(ctx, 2))
	clk.Advance(700 * time.Millisecond)
	assert.Equal(t, 2, bs.Beat.WaitOrTimeout()+bs.Beat.WaitOrTimeout(), "a and b renewed, idle not")
	for _, m := range []*member{a, b} {
		got, errs := m.answers()
		require.Len(t, got, 1, m.id)
		assert.NoError(t, errs[0])
		assert.False(t, got[0].Gone, "%s's lease is there", m.id)
	}
	got, _ := idle.answers()
	assert.Empty(t, got)

	ba.Leave(a)
	ba.Leave(b)
	other.Leave(idle)
	assert.Zero(t, clk.Timers(), "the beats stopped with their last members")
}

// Clients born within one Grid step renew at the same moments, on a step
// of the wall clock's Grid, so that a fleet's renewals reach Redis in
// bursts.
func TestBeatsFallOnTheWallClocksGrid(t *testing.T) {
	bs, clk, _ := newBeats(t)
	const every = time.Second
	for _, off := range []time.Duration{0, time.Millisecond, Grid - time.Nanosecond} {
		bs.Born = time.Unix(999, 0).Add(off) // the clock reads 1000 s
		in := bs.In(every)
		assert.Equal(t, time.Second, in, "born %v after a step", off)
		assert.Zero(t, clk.Now().Add(in).UnixNano()%int64(Grid), "born %v after a step", off)
	}
}

// A round that fails hands each member the error.
func TestAFailedRoundTellsEveryMember(t *testing.T) {
	bs, clk, m := newBeats(t)
	ctx := context.Background()
	a := &member{id: "a"}
	b := bs.Join(a, 3*time.Second, time.Second)
	defer b.Leave(a)
	require.NoError(t, clk.WaitTimers(ctx, 1))
	m.SetError("LOADING Redis is loading the dataset in memory")
	clk.Advance(time.Second)
	assert.Equal(t, 1, bs.Beat.WaitOrTimeout())
	_, errs := a.answers()
	require.Len(t, errs, 1)
	assert.ErrorContains(t, errs[0], "renew")
}

// A round that fails is tried again a Retry later, before the next beat:
// at a RenewInterval of half the TTL, the next beat would come after the
// worker fenced itself.
func TestAFailedRoundIsTriedAgainSoon(t *testing.T) {
	bs, clk, m := newBeats(t)
	ctx := context.Background()
	a := &member{id: "a"}
	require.NoError(t, bs.Store.RegisterWorker(ctx, a.id, time.Minute))
	const every = 1500 * time.Millisecond
	b := bs.Join(a, 2*every, every)
	defer b.Leave(a)
	require.NoError(t, clk.WaitTimers(ctx, 1))
	m.SetError("LOADING Redis is loading the dataset in memory")
	clk.Advance(bs.In(every))
	assert.Equal(t, 1, bs.Beat.WaitOrTimeout())
	m.SetError("")
	require.NoError(t, clk.WaitTimers(ctx, 1))
	clk.Advance(Retry(every))
	assert.Equal(t, 1, bs.Beat.WaitOrTimeout(), "tried again")
	got, errs := a.answers()
	require.Len(t, errs, 2)
	assert.Error(t, errs[0])
	require.NoError(t, errs[1])
	assert.False(t, got[1].Gone)
}

// A round that failed slowly (Redis too busy to answer within a Retry)
// is not tried again soon: the next renewal is the next beat's, so that a
// fleet does not send a busy Redis its renewals four times as often.
func TestASlowFailureWaitsForTheNextBeat(t *testing.T) {
	bs, clk, m, slow := newSlowBeats(t)
	ctx := context.Background()
	a := &member{id: "a"}
	require.NoError(t, bs.Store.RegisterWorker(ctx, a.id, time.Minute))
	const every = 1500 * time.Millisecond
	b := bs.Join(a, 2*every, every)
	defer b.Leave(a)
	require.NoError(t, clk.WaitTimers(ctx, 1))
	m.SetError("BUSY Redis is busy running a script")
	slow.slow.Store(int64(Retry(every)))
	first := clk.Now().Add(bs.In(every))
	clk.Advance(bs.In(every))
	assert.Equal(t, 1, bs.Beat.WaitOrTimeout())
	m.SetError("")
	slow.slow.Store(0)
	require.NoError(t, clk.WaitTimers(ctx, 1))
	clk.Advance(Retry(every))
	// A retry would have fired and be running: wait for it to arm the
	// timer again, so that it reads the clock before the next Advance.
	require.NoError(t, clk.WaitTimers(ctx, 1))
	clk.Advance(first.Add(every).Sub(clk.Now()))
	assert.Equal(t, 1, bs.Beat.WaitOrTimeout())
	sent := a.sentAt()
	require.Len(t, sent, 2)
	assert.Equal(t, first.Add(every), sent[1], "the next renewal is the next beat's")
}
