// Package outage is a client's account, for its logs, of Redis being out
// of reach.
package outage

import (
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/worqr/worqr/internal/clock"
)

// Outage is the client's account, for its logs, of Redis being out of
// reach. The calls worqr makes on its own (dequeues of the runtimes,
// outcome writes, lease renewals, reclaims, registering again...) retry
// through an outage: a 3 s one fails dozens of them. Rather than each
// logging its failure, they report here: the first to fail on the
// connection after Redis answered logs one WARN, the ones after it are
// only counted, and the first answer after them logs one INFO line, with
// how long Redis was away and the failed calls by name. A failure that
// is not an outage (an error reply) is the caller's to log.
type Outage struct {
	log   *slog.Logger
	clock clock.Clock
	// retryable says whether an error is an outage (no answer), rather
	// than an error reply.
	retryable func(error) bool
	// epoch counts the outages begun and ended: it is odd while one
	// lasts. A call reads it before it is sent (begin) and reports with
	// it, so that calls in flight across a change, which return in any
	// order, cannot flap the state: an answer to a call sent before the
	// outage began does not end it, and a failure of one sent before it
	// ended does not begin another.
	epoch atomic.Uint64

	mu    sync.Mutex     // guards the fields below, and the changes of epoch
	since time.Time      // when the outage began
	fails map[string]int // the calls failed in it, by name
}

// New is an Outage that logs on log, times on clk, and takes the errors
// retryable says yes to for an outage.
func New(log *slog.Logger, clk clock.Clock, retryable func(error) bool) *Outage {
	return &Outage{log: log, clock: clk, retryable: retryable}
}

// Begin is read before a call is sent; ok or failed are given it after.
func (o *Outage) Begin() uint64 { return o.epoch.Load() }

// OK records that Redis answered a call sent at epoch sent: if that was
// during an outage that still lasts, the outage is over.
func (o *Outage) OK(sent uint64) {
	if sent%2 == 0 {
		return // sent while Redis answered: nothing to end
	}
	o.mu.Lock()
	if o.epoch.Load() != sent {
		o.mu.Unlock()
		return // ended already
	}
	o.epoch.Add(1)
	down, fails := o.clock.Since(o.since), o.fails
	o.fails = nil
	o.mu.Unlock()
	counts := make([]any, 0, len(fails))
	for _, k := range slices.Sorted(maps.Keys(fails)) {
		counts = append(counts, slog.Int(k, fails[k]))
	}
	// A short outage (a connection killed and made again) is told in ms,
	// not rounded to nothing.
	if down < time.Second {
		down = down.Round(time.Millisecond)
	} else {
		down = down.Round(100 * time.Millisecond)
	}
	o.log.Info(fmt.Sprintf("worqr: Redis back after %v", down), "down", down, slog.Group("failed", counts...))
}

// Failed records a call ("dequeue", "renewal", "finish"...),
// sent at epoch sent, that failed with err. It reports whether err is an
// outage (retryable: ErrUnavailable, or no answer before a deadline), which it has
// logged or counted; any other error is the caller's to log.
func (o *Outage) Failed(sent uint64, call string, err error) bool {
	if !o.retryable(err) {
		return false
	}
	o.mu.Lock()
	switch now := o.epoch.Load(); {
	case now%2 == 1:
		o.fails[call]++
		o.mu.Unlock()
		return true
	case now != sent:
		// Sent during an outage that has ended since: stale news.
		o.mu.Unlock()
		return true
	}
	o.epoch.Add(1)
	o.since, o.fails = o.clock.Now(), map[string]int{call: 1}
	o.mu.Unlock()
	o.log.Warn("worqr: Redis unreachable; retrying until it answers", "call", call, "err", err)
	return true
}

// Counts returns the calls failed in the outage under way, by name (nil
// when there is none).
func (o *Outage) Counts() map[string]int {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.epoch.Load()%2 == 0 {
		return nil
	}
	return maps.Clone(o.fails)
}
