// Package beat renews the leases of a client's workers that share a TTL
// and a RenewInterval, on the client's beat, in as few scripts as it can.
package beat

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/worqr/worqr/internal/clock"
	"github.com/worqr/worqr/internal/members"
	"github.com/worqr/worqr/internal/outage"
	"github.com/worqr/worqr/internal/startstop"
	"github.com/worqr/worqr/internal/store"
	"github.com/worqr/worqr/internal/testsignal"
)

// Env is what the beats take of their client.
type Env struct {
	Clock  clock.Clock
	Store  *store.Store
	Outage *outage.Outage
	Log    *slog.Logger
	// Fail wraps an error of the call op as the client's errors say it.
	Fail func(op, queue string, err error) error
	// Born is when the client was made: its beats count from it.
	Born time.Time
	// Beat is the test signal of a round's end (the workers it renewed).
	Beat *testsignal.Signal[int]
}

// Member is a worker a beat renews; R is its part of a round.
type Member[R any] interface {
	comparable
	// Renewal reads which leases the member renews now, unless it renews
	// none (it left, is fenced or closed).
	Renewal() (R, store.Keepalive, bool)
	// Renewed takes in the answer to its renewal r, sent at sent: err, or
	// k.
	Renewed(r R, sent time.Time, k store.KeptAlive, err error)
}

// Beats are a client's beats, one per TTL and RenewInterval.
type Beats[R any, M Member[R]] struct {
	*Env
	mu sync.Mutex
	m  map[key]*Beat[R, M] // guarded by mu
}

// New makes a client's set of beats.
func New[R any, M Member[R]](env *Env) *Beats[R, M] {
	return &Beats[R, M]{Env: env, m: make(map[key]*Beat[R, M])}
}

// key groups the workers of a client that one beat serves.
type key struct{ ttl, every time.Duration }

// Grid is the step of the wall clock on which every client's beats fall
// (for a RenewInterval that is a multiple of it): the clients of a fleet
// renew in bursts, at most one a Grid, rather than each at a moment of its
// own. On a VM a request to an otherwise idle Redis costs it a wake-up of
// some 50 µs, several times the renewal itself, and Redis answers the
// requests that arrive together in one wake-up: 1,000 one-worker
// processes renewing every second cost it 40 % less (4.4 % of a core, not
// 7.0–7.5 %; BENCHMARKS.md, Idle). A step of 10 ms saved 25 %, and one of
// 100 ms little more than 50 ms, for bursts twice as large. A burst holds
// the clients born in the same step of the interval (and whose clocks
// agree to within a step): about 50 of 1,000 processes, which stall other
// calls for a millisecond or two.
const Grid = 50 * time.Millisecond

// In is how long until the client's next beat of period every: the
// workers of one client that share a RenewInterval renew at the same
// moments, counted from the client's birth cut down to the Grid.
func (c *Env) In(every time.Duration) time.Duration {
	born := c.Born.Add(-time.Duration(c.Born.UnixNano() % int64(Grid)))
	return every - c.Clock.Since(born)%every
}

// Beat renews the leases of a client's workers that share a TTL and a
// RenewInterval, every RenewInterval on the client's beat (see In): one
// loop reads what each worker holds, renews them all in scripts of up to
// store.MaxWorkersPerKeepalive workers, sent at once (rueidis pipelines
// them), and hands each worker its answer. An idle worker thus costs
// Redis a share of one short script a RenewInterval, and its process no
// timer or goroutine wake-up of its own.
type Beat[R any, M Member[R]] struct {
	c    *Beats[R, M]
	key  key
	loop *startstop.Loop
	// members are the workers it renews; it stops with the last.
	members members.Set[M]
}

// Join makes w a member of its client's beat for its TTL and
// RenewInterval (every), starting one if there is none.
func (c *Beats[R, M]) Join(w M, ttl, every time.Duration) *Beat[R, M] {
	k := key{ttl: ttl, every: every}
	c.mu.Lock()
	defer c.mu.Unlock()
	b := c.m[k]
	if b != nil {
		b.members.Add(w)
		return b
	}
	b = &Beat[R, M]{c: c, key: k}
	b.members.Add(w)
	c.m[k] = b
	// The first beat's timer is set here, not in the loop's goroutine: a
	// clock that moves on before that goroutine runs must still find it.
	t := c.Clock.NewTimer(c.In(k.every))
	b.loop = startstop.NewLoop(func(ctx context.Context) { b.run(ctx, t) })
	_ = b.loop.Start(context.Background()) // a Loop's Start does not fail
	return b
}

// Leave removes w from the members, and stops the beat (waiting for its
// loop) when w was the last.
func (b *Beat[R, M]) Leave(w M) {
	c := b.c
	c.mu.Lock()
	last := b.members.Remove(w)
	if last && c.m[b.key] == b {
		delete(c.m, b.key)
	}
	c.mu.Unlock()
	if last {
		b.loop.Stop()
	}
}

// run is the beat's loop: a round on every beat, the first when t fires.
func (b *Beat[R, M]) run(ctx context.Context, t clock.Timer) {
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
		n, failed := b.round(ctx)
		// On the client's beat however long the round took; a round that
		// took longer than a RenewInterval skips the beats it overran.
		in := b.c.In(b.key.every)
		if failed {
			// A renewal that failed at once (a connection reset, a Redis
			// loading) is tried again a Retry later, not a RenewInterval:
			// at a RenewInterval of half the TTL the next beat comes after
			// the worker fenced itself (at 0.9 TTL).
			in = min(in, Retry(b.key.every))
		}
		t.Reset(in)
		b.c.Beat.Signal(n)
	}
}

// renewal is one member's part of a round.
type renewal[R any, M Member[R]] struct {
	m         M
	r         R
	keepalive store.Keepalive
}

// Retry is how long after a round that failed the beat tries again: a
// quarter of the RenewInterval, so that a worker renewing every half TTL
// has two more tries before it fences itself (at 0.9 TTL).
func Retry(every time.Duration) time.Duration { return every / 4 }

// round renews every member's leases once, and says how many it renewed
// and whether a renewal failed at once (within a Retry; not for the beat
// stopping).
func (b *Beat[R, M]) round(ctx context.Context) (int, bool) {
	ws := b.members.List()
	rs := make([]renewal[R, M], 0, len(ws))
	for _, w := range ws {
		if r, k, ok := w.Renewal(); ok {
			rs = append(rs, renewal[R, M]{m: w, r: r, keepalive: k})
		}
	}
	var wg sync.WaitGroup
	var failed atomic.Bool
	for chunk := range slices.Chunk(rs, store.MaxWorkersPerKeepalive) {
		wg.Go(func() {
			ks := make([]store.Keepalive, len(chunk))
			for i, r := range chunk {
				ks[i] = r.keepalive
			}
			sent, at := b.c.Clock.Now(), b.c.Outage.Begin()
			kept, err := b.c.keepaliveJoined(ctx, b.key.ttl, ks)
			switch {
			case err == nil:
				b.c.Outage.OK(at)
			case ctx.Err() != nil: // the beat stopped
			default:
				// Only a renewal that failed at once is tried again soon:
				// one that failed slowly (a Redis too busy to answer in
				// time) would be sent again into the same queue, by every
				// process of a fleet, four times as often.
				if b.c.Clock.Since(sent) < Retry(b.key.every) {
					failed.Store(true)
				}
				err = b.c.Fail("renew", "", err)
				if !b.c.Outage.Failed(at, "renewal", err) {
					b.c.Log.Warn("worqr: lease renewal failed", "err", err, "workers", len(chunk))
				}
			}
			for i, r := range chunk {
				var k store.KeptAlive
				if err == nil {
					k = kept[i]
				}
				r.m.Renewed(r.r, sent, k, err)
			}
		})
	}
	wg.Wait()
	return len(rs), failed.Load()
}

// keepaliveJoined renews the leases of workers that share a TTL in one
// call (see keepalive.lua), bounded by the TTL: an answer after it is
// useless.
func (c *Env) keepaliveJoined(ctx context.Context, ttl time.Duration, ks []store.Keepalive) ([]store.KeptAlive, error) {
	ctx, cancel := context.WithTimeout(ctx, ttl)
	defer cancel()
	return c.Store.Keepalive(ctx, ttl, ks)
}
