package engine

// ServePool racing the worker's close: a pool is served whole and then
// stopped by the close, or refused and undone, never half served, and no
// goroutine of it outlives the close.

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/worqr/worqr/internal/errs"
	"github.com/worqr/worqr/internal/testsignal"
)

// poolCloseHost is the test's worker as both ServePool and its closer
// take it: its life is the one the closer ends, and the closer's taking
// of its pools is signalled.
type poolCloseHost struct {
	*serveHost
	took testsignal.Signal[int]
	// recorded, if set, is called with the count of the records of the
	// worker's slots so far, each made once a member is served.
	recorded func(n int)
	records  int
}

func (h *poolCloseHost) RecordSlots(context.Context, string) {
	h.records++ // under the registry's lock
	if h.recorded != nil {
		h.recorded(h.records)
	}
}

func (h *poolCloseHost) TakePools() []*Scheduler {
	ps := h.pools
	h.pools = nil
	h.took.Signal(len(ps))
	return ps
}
func (h *poolCloseHost) Services() []func()    { return nil }
func (h *poolCloseHost) StopTicks()            {}
func (h *poolCloseHost) Left()                 {}
func (h *poolCloseHost) Flush(context.Context) {}

// TestServePoolRacingClose closes the worker at each step of ServePool:
// before it, while it serves its second member (holding the registry's
// lock), once its last member is served but before the pool is recorded,
// and after it returned. Each ends with nothing served, the pool's loop
// ended and no goroutine of the pool's or its sessions' left; a pool is
// either served whole and stopped by the close, or refused.
//
// It does not run in parallel: goleak counts the goroutines of the whole
// process.
func TestServePoolRacingClose(t *testing.T) {
	for _, tc := range []struct {
		name string
		// at is the member whose session is made when the close begins;
		// slots is set when it begins once the last member is served.
		at     string
		slots  bool
		before bool
		served bool // ServePool succeeds
	}{
		{name: "before", before: true},
		{name: "mid pool", at: "b"},
		{name: "all served, not recorded", slots: true},
		{name: "after", served: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := &poolCloseHost{serveHost: newServeHost(t)}
			current := goleak.IgnoreCurrent()
			h.took.Init(t)
			life, end := context.WithCancel(h.life)
			h.life = life
			k := &Closer{}
			k.Init(h, &h.env, end)
			call := func(context.Context, *Proc) error { return nil }
			pool := NewScheduler(h.fakeWorker, 2, true, false)
			for _, q := range []string{"a", "b", "c"} {
				pool.Add(q, call, MemberOptions{}, 0, 1)
			}
			closed := make(chan error, 1)
			closeNow := func() {
				go func() { closed <- k.Close(context.Background(), "close") }()
				h.took.WaitOrTimeout() // the worker is closed and its life over
			}
			if tc.at != "" {
				h.made = func(s *Session) {
					if s.Name == tc.at {
						closeNow()
					}
				}
			}
			if tc.slots {
				h.recorded = func(n int) {
					if n == 3 { // c, the last member
						closeNow()
					}
				}
			}
			if tc.before {
				closeNow()
			}

			err := ServePool(context.Background(), h, &h.env, pool, []Events{{}, {}, {}})
			if tc.served {
				require.NoError(t, err)
				for _, q := range []string{"a", "b", "c"} {
					assert.True(t, h.serving(q), "a pool was half served: not %s", q)
				}
				h.mu.Lock()
				assert.Equal(t, []*Scheduler{pool}, h.pools, "the pool served was not recorded")
				h.mu.Unlock()
				closeNow()
			} else {
				require.ErrorIs(t, err, errs.ErrWorkerClosed)
				h.mu.Lock()
				assert.Empty(t, h.pools, "a refused pool was recorded")
				h.mu.Unlock()
			}
			require.NoError(t, recv(t, closed, "close"))

			for _, q := range []string{"a", "b", "c"} {
				assert.False(t, h.serving(q), "%s is still served", q)
			}
			if !tc.served {
				// Refused, whether its members were served or not: none
				// takes work, for none has a loop to dequeue for it, and
				// a hand-off would start a handler for it.
				for _, r := range pool.Members() {
					assert.False(t, r.Taking(), "%s, of a refused pool, takes work", r.Queue())
				}
			}
			pool.mu.Lock()
			quit := pool.quit
			pool.mu.Unlock()
			assert.True(t, isClosed(quit), "the pool's loop still runs")
			// The client's connections, and the server's ends of them,
			// outlive the close: they are the client's, which the test
			// closes.
			goleak.VerifyNone(t, current,
				goleak.IgnoreAnyFunction("github.com/redis/rueidis.(*pipe)._background"),
				goleak.IgnoreAnyFunction("github.com/redis/rueidis.(*pipe)._background.func1"),
				goleak.IgnoreAnyFunction("github.com/redis/rueidis.(*pipe)._backgroundWrite"),
				goleak.IgnoreAnyFunction("github.com/redis/rueidis.(*pipe)._backgroundRead"),
				goleak.IgnoreAnyFunction("github.com/alicebob/miniredis/v2/server.(*Server).servePeer"),
				goleak.IgnoreAnyFunction("github.com/alicebob/miniredis/v2/server.(*Server).servePeer.func2"))
		})
	}
}
