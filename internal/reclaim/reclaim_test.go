package reclaim

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/google/uuid"
	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/worqr/worqr/internal/clock"
	"github.com/worqr/worqr/internal/outage"
	"github.com/worqr/worqr/internal/store"
	"github.com/worqr/worqr/internal/testsignal"
)

// member is a worker as the tests give it to a reclaimer.
type member struct{ id string }

func (m *member) ID() string                          { return m.id }
func (m *member) Logger() *slog.Logger                { return slog.New(slog.DiscardHandler) }
func (m *member) FencedSince(time.Time) time.Duration { return 24 * time.Hour }

// A worker id tells when the worker registered.
func TestJoinedAtReadsTheIDsTime(t *testing.T) {
	at := time.UnixMilli(1_700_000_000_123)
	id, err := uuid.NewV7()
	require.NoError(t, err)
	ms := at.UnixMilli()
	for i := range 6 {
		id[i] = byte(ms >> (40 - 8*i))
	}
	assert.Equal(t, at, joinedAt(id.String()))
	assert.True(t, joinedAt("not-a-uuid").IsZero())
	assert.True(t, joinedAt(uuid.NewString()).IsZero(), "a v4 says nothing")
}

// A renewal that hears of a peer's expiry earlier than the loop's timer
// wakes the loop; one that hears of a later one, or the same, does not
// (the fleet's renewals move the time on every RenewInterval); a dead
// worker waiting wakes it at once.
func TestHeardWakesTheLoopOnlyForAnEarlierLook(t *testing.T) {
	clk := clock.NewFake(time.Unix(1000, 0))
	r := &Reclaimer[*member]{c: New[*member](&Env{Clock: clk}), kick: make(chan struct{}, 1)}
	woken := func() bool {
		select {
		case <-r.kick:
			return true
		default:
			return false
		}
	}
	r.Heard(10*time.Second, false, 1)
	require.True(t, woken(), "nothing armed yet")
	r.armed = r.next()
	r.Heard(20*time.Second, false, 1)
	assert.False(t, woken(), "later than armed")
	r.Heard(5*time.Second, false, 1)
	assert.True(t, woken(), "earlier than armed")
	r.armed = r.next()
	r.Heard(0, true, 1)
	assert.True(t, woken(), "a dead worker waits")
	assert.Equal(t, clk.Now(), r.next())
}

// When a peer's lease runs out, a reclaimer of a large fleet looks only
// if its draw falls within Lookers times its share of the registry's
// workers; otherwise it forgets that expiry (its loop does not spin on a
// time past) until a renewal tells it more, and a renewal that says a
// dead worker still waits is drawn for the same way. A small fleet's
// reclaimers all look; a look it must make (a failed one's retry) is
// made whatever the draw.
func TestOnlyAFewOfALargeFleetLook(t *testing.T) {
	clk := clock.NewFake(time.Unix(1000, 0))
	var drawn float64
	newReclaimer := func(members int) *Reclaimer[*member] {
		r := &Reclaimer[*member]{c: New[*member](&Env{Clock: clk}), kick: make(chan struct{}, 1), draw: func() float64 { return drawn }}
		for range members {
			r.members.Add(&member{id: uuid.NewString()})
		}
		return r
	}
	const expiry = time.Second
	expire := func(r *Reclaimer[*member], dead bool, workers int64) bool {
		r.Heard(expiry, dead, workers)
		clk.Advance(expiry + reclaimMargin)
		return r.due(clk.Now())
	}

	// One of 10,000 one-worker processes: a chance of 8 in 10,000.
	r := newReclaimer(1)
	drawn = 0.5
	assert.False(t, expire(r, false, 10_000), "drawn out")
	assert.True(t, r.next().IsZero(), "the expiry past is forgotten: the loop does not spin on it")
	drawn = 0.0007
	assert.True(t, expire(r, false, 10_000), "drawn in")
	drawn = 0.5
	r.Heard(0, true, 10_000)
	assert.False(t, r.due(clk.Now()), "a dead worker heard of: drawn out")
	assert.True(t, r.next().IsZero())
	drawn = 0.0007
	r.Heard(0, true, 10_000)
	assert.True(t, r.due(clk.Now()), "a dead worker heard of: drawn in")

	// A client of 1,000 of the 10,000 workers: a chance of 0.8.
	r = newReclaimer(1000)
	drawn = 0.79
	assert.True(t, expire(r, false, 10_000))
	drawn = 0.81
	assert.False(t, expire(r, false, 10_000))

	// A fleet of Lookers workers or fewer: every reclaimer looks.
	r = newReclaimer(1)
	drawn = 0.999
	assert.True(t, expire(r, false, Lookers))
	assert.True(t, expire(r, false, 0), "the registry's size not heard yet")

	// A look that must be made again is made whatever the draw.
	r = newReclaimer(1)
	r.Heard(0, false, 10_000)
	r.again = clk.Now()
	assert.True(t, r.due(clk.Now()))
	r.again = clk.Now().Add(time.Second)
	assert.False(t, r.due(clk.Now()), "not yet")
}

// A pass hands the dead it finds to Worker, which deregisters a worker
// that held nothing, and tells the client's observer; a pass that cannot
// reach Redis fails with the client's error.
func TestDeadReclaimsAWorkerWhoseLeaseRanOut(t *testing.T) {
	m := miniredis.RunT(t)
	rdb, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{m.Addr()}, DisableCache: true, AlwaysRESP2: true, ForceSingleClient: true})
	require.NoError(t, err)
	t.Cleanup(rdb.Close)
	ctx := context.Background()
	s := store.New(rdb, "reclaimtest", false, false)
	var looked testsignal.Signal[int64]
	var told []string
	env := &Env{
		Clock:  clock.Real(),
		Store:  s,
		Outage: outage.New(slog.New(slog.DiscardHandler), clock.Real(), func(error) bool { return false }),
		Fail:   func(op, _ string, err error) error { return errors.Join(errors.New(op), err) },
		Reclaimed: func(_ context.Context, dead string, _, _, _ int64) {
			told = append(told, dead)
		},
		Looked:       &looked,
		DefaultClaim: time.Second,
	}
	dead := uuid.NewString()
	require.NoError(t, s.RegisterWorker(ctx, dead, time.Second))
	pass, err := env.Dead(ctx, slog.New(slog.DiscardHandler), Pass{Self: "me", Window: time.Minute})
	require.NoError(t, err)
	assert.Positive(t, pass.Next, "the peer's lease runs out later")
	assert.Empty(t, told)

	m.SetTime(time.Now().Add(time.Minute))
	pass, err = env.Dead(ctx, slog.New(slog.DiscardHandler), Pass{Self: "me", Window: time.Minute})
	require.NoError(t, err)
	assert.Zero(t, pass.Next, "no peer left")
	assert.Equal(t, []string{dead}, told)
	ws, err := s.WorkerQueues(ctx, dead)
	require.NoError(t, err)
	assert.Empty(t, ws)

	m.Close()
	_, err = env.Dead(ctx, slog.New(slog.DiscardHandler), Pass{Self: "me"})
	require.ErrorContains(t, err, "find dead workers")
}

// A look that fails is tried again in about a RenewInterval (within its
// tenth of jitter), not at the peer's expiry it was for, which has
// passed: looking at a time past is looking again at once, and again, for
// as long as the looks fail. Judged on the reclaimer's next look itself:
// a count of looks on a fake clock cannot tell a reclaimer that spins
// between two of its steps from one that waits.
func TestFailedLookComesBackInARenewInterval(t *testing.T) {
	m := miniredis.RunT(t)
	rdb, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{m.Addr()}, DisableCache: true, AlwaysRESP2: true, ForceSingleClient: true})
	require.NoError(t, err)
	t.Cleanup(rdb.Close)
	m.Close() // every look fails
	clk := clock.NewFake(time.Unix(1000, 0))
	env := &Env{
		Clock:        clk,
		Store:        store.New(rdb, "reclaimtest", false, false),
		Outage:       outage.New(slog.New(slog.DiscardHandler), clk, func(error) bool { return false }),
		Fail:         func(op, _ string, err error) error { return errors.Join(errors.New(op), err) },
		Looked:       &testsignal.Signal[int64]{},
		DefaultClaim: time.Second,
	}
	const every = 200 * time.Millisecond
	r := &Reclaimer[*member]{c: New[*member](env), every: every, window: time.Minute, kick: make(chan struct{}, 1)}
	r.members.Add(&member{id: uuid.NewString()})
	for i := range 20 { // the jitter, drawn each time
		r.peer = clk.Now().Add(-time.Second) // the expiry the look was for: past
		r.look(context.Background())
		next := r.next()
		require.False(t, next.IsZero(), "look %d: no look again", i)
		wait := next.Sub(clk.Now())
		require.GreaterOrEqual(t, wait, every-every/10, "look %d: looks again after %v", i, wait)
		require.LessOrEqual(t, wait, every+every/10, "look %d: looks again after %v", i, wait)
	}
}

// A renewal heard while a look is under way may have read the registry
// after the look did, so what it heard stands: a dead worker it reported
// is still due, and an expiry it reported earlier than the look's is
// kept. A look whose older answer overwrote them would put the reclaim
// off to the next renewal's news, and on a clock that jumps (a test's
// fake one, moved on while the look was under way) past the last step.
func TestRenewalHeardDuringALookStands(t *testing.T) {
	m := miniredis.RunT(t)
	rdb, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{m.Addr()}, DisableCache: true, AlwaysRESP2: true, ForceSingleClient: true})
	require.NoError(t, err)
	t.Cleanup(rdb.Close)
	ctx := context.Background()
	start := time.Unix(1000, 0)
	m.SetTime(start)
	clk := clock.NewFake(start)
	s := store.New(rdb, "reclaimtest", false, false)
	env := &Env{
		Clock:        clk,
		Store:        s,
		Outage:       outage.New(slog.New(slog.DiscardHandler), clk, func(error) bool { return false }),
		Fail:         func(op, _ string, err error) error { return errors.Join(errors.New(op), err) },
		Looked:       &testsignal.Signal[int64]{},
		DefaultClaim: time.Second,
	}
	// A peer whose lease runs out a second after start, by the Redis
	// clock, which stays there: every look reads it alive.
	require.NoError(t, s.RegisterWorker(ctx, uuid.NewString(), time.Second))
	r := &Reclaimer[*member]{c: New[*member](env), every: 250 * time.Millisecond, window: time.Minute, kick: make(chan struct{}, 1), draw: func() float64 { return 0 }}
	r.members.Add(&member{id: uuid.NewString()})

	// lookWhile runs a look whose registry read is made, then held until
	// heard has run.
	lookWhile := func(heard func()) {
		read, release := make(chan struct{}), make(chan struct{})
		s.SetFault(func(context.Context, store.Op, string) error {
			close(read)
			<-release
			return nil
		})
		done := make(chan struct{})
		go func() { defer close(done); r.look(ctx) }()
		<-read
		heard()
		close(release)
		<-done
		s.SetFault(nil)
	}

	// The renewal read the peer's lease run out, after the look read it
	// alive.
	lookWhile(func() {
		clk.Advance(time.Second)
		r.Heard(0, true, 1)
	})
	assert.Equal(t, clk.Now(), r.next(), "the dead worker heard of is still due")
	assert.True(t, r.due(clk.Now()))

	// The renewal heard of an expiry sooner than the look's answer.
	lookWhile(func() { r.Heard(100*time.Millisecond, false, 1) })
	assert.Equal(t, clk.Now().Add(100*time.Millisecond+reclaimMargin), r.next(), "the sooner expiry heard is kept")

	// With no renewal heard, the look's answer is the reclaimer's.
	lookWhile(func() {})
	assert.Equal(t, clk.Now().Add(time.Second+reclaimMargin), r.next())
}
