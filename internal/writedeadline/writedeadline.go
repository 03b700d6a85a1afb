// Package writedeadline gives the outcome writes after handlers a shared
// context with a deadline.
package writedeadline

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/worqr/worqr/internal/clock"
)

// Deadline hands the outcome writes after handlers a context that
// ends with the worker and gives each write at least the worker's TTL
// (and at most an eighth more) to get its answer. The writes share the
// context, which is replaced once less than a TTL is left on it: one
// timer, context and Done channel an eighth of a TTL instead of one of
// each per task (about four allocations and a timer-heap insert and
// delete). A context that is replaced is left to end on its own.
type Deadline struct {
	cur atomic.Pointer[sharedDeadline]
}

type sharedDeadline struct {
	ctx    context.Context
	cancel context.CancelFunc // never called before the deadline: writes may still use it
	// until is the last moment a write may start under ctx and still
	// have a TTL left.
	until time.Time
}

// Ctx returns the context for a write that starts now. It reads the
// system clock, not the client's: the context's deadline is the runtime's,
// which only the system clock moves.
func (d *Deadline) Ctx(life context.Context, ttl time.Duration) context.Context {
	now := clock.Real().Now()
	if s := d.cur.Load(); s != nil && !now.After(s.until) {
		return s.ctx
	}
	slack := ttl / 8
	ctx, cancel := context.WithDeadline(life, now.Add(ttl+slack))
	s := &sharedDeadline{ctx: ctx, cancel: cancel, until: now.Add(slack)}
	d.cur.Store(s)
	return ctx
}
