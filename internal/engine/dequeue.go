package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/rueidis"

	"github.com/worqr/worqr/internal/errs"
	"github.com/worqr/worqr/internal/slotpolicy"
	"github.com/worqr/worqr/internal/store"
)

// Dequeue takes up to n tasks from the front of a queue the worker h
// serves, for the application (the root's Dequeue and DequeueN) or, with
// runtime set, for the runtime serving it; it returns their processes,
// in the session's books and told to the observer, and, when the queue's
// rate limit is used up, when the next start is allowed (Unix µs, Redis
// clock).
func Dequeue(ctx context.Context, h RuntimeHost, queue string, n int, runtime bool) ([]*Proc, int64, error) {
	if err := h.Validate(ctx, "dequeue", queue); err != nil {
		return nil, 0, err
	}
	if n < 1 {
		return nil, 0, fmt.Errorf("worqr: dequeue %q: count %d: %w", queue, n, errs.ErrInvalidOptions)
	}
	env := h.Env()
	h.Lock()
	s := h.Session(queue)
	st := h.Worker()
	id, refused := st.ID(), st.TakesWork()
	fenced := errors.Is(refused, errs.ErrWorkerFenced)
	if s != nil {
		fenced = fenced || s.Lease.IsFenced()
	}
	h.Unlock()
	switch {
	case errors.Is(refused, errs.ErrWorkerClosed):
		return nil, 0, fmt.Errorf("worqr: dequeue %q: %w", queue, errs.ErrWorkerClosed)
	case s == nil:
		return nil, 0, fmt.Errorf("worqr: dequeue %q: %w", queue, errs.ErrNotServing)
	case s.Runtime != nil && !runtime:
		return nil, 0, fmt.Errorf("worqr: dequeue %q: %w", queue, errs.ErrHandledQueue)
	case fenced:
		return nil, 0, fmt.Errorf("worqr: dequeue %q: %w", queue, errs.ErrWorkerFenced)
	}
	s.Gate.RLock()
	defer s.Gate.RUnlock()
	h.Lock()
	cur := h.Session(queue)
	h.Unlock()
	if cur != s { // StopWork ran while this call waited at the gate
		return nil, 0, fmt.Errorf("worqr: dequeue %q: %w", queue, errs.ErrNotServing)
	}
	// A runtime parks in the idle set, where enqueues hand it tasks in
	// events, only once it hears the queue's events.
	sent := env.Clock.Now()
	sps, until, now, err := env.Store.Dequeue(ctx, queue, id, n, runtime && s.Sub.IsReady())
	got := env.Clock.Now() // also when the processes started
	if now > 0 {
		// The rate limit's wake-up (pacer.WakeAt) is timed by the
		// estimate: one that ran ahead of Redis would wake before until,
		// be told until again, and find it past, again and again.
		env.Redis.Observe(now, sent, got)
	}
	if errors.Is(err, store.ErrLeaseGone) {
		h.LeaseLost(id, s, fmt.Errorf("dequeue found the lease on %q gone", queue))
		return nil, 0, fmt.Errorf("worqr: dequeue %q: %w", queue, errs.ErrWorkerFenced)
	}
	if err != nil {
		if _, isReply := rueidis.IsRedisErr(err); !isReply {
			// The script may have run and its reply been lost: reconcile
			// once Redis answers, so no process stays ours unknowingly.
			s.Books.MarkUnsure(env.UnsurePasses, false)
		}
		return nil, 0, env.Fail("dequeue", queue, err)
	}
	if len(sps) == 0 && until > 0 {
		return nil, until, fmt.Errorf("worqr: dequeue %q: the next start is allowed at %s: %w", queue, time.UnixMicro(until).Format(time.RFC3339Nano), errs.ErrRateLimited)
	}
	if len(sps) == 0 {
		return nil, 0, fmt.Errorf("worqr: dequeue %q: %w", queue, errs.ErrNoTask)
	}
	ps := make([]*Proc, len(sps))
	for i, sp := range sps {
		ps[i] = h.NewProc(queue, sp, got)
		h.Started(ctx, ps[i]) // before anything can end it
	}
	h.Lock()
	st = h.Worker()
	cur = h.Session(queue)
	adopted := st.ID() == id && !st.IsFenced() && cur == s && s.AdoptAll(ps)
	h.Unlock()
	if !adopted {
		// The worker fenced itself while the script ran: these processes
		// are already the peers'. (Leaving the queue cannot overlap a
		// dequeue: it holds the gate.)
		for _, p := range ps {
			p.End(errs.ErrProcessLost, true)
		}
		return nil, 0, fmt.Errorf("worqr: dequeue %q: %w", queue, errs.ErrWorkerFenced)
	}
	return ps, until, nil
}

// What a runtime member's dequeue makes of it (Scheduler.take sends
// it): an empty queue clears its work flag; the queue's limits (a
// concurrency limit at its bound answers as an empty queue, a rate limit
// used up with when the next start is allowed) wait for the next work
// event or the limit's wake-up (pacer.WakeAt); a failed call passes it
// over for a backoff (pacer.RetryLater).

// afterDequeue applies decision to the member whose dequeue, sent at
// outage epoch sent with gen work events counted, failed with err.
func (r *Runtime) afterDequeue(decision slotpolicy.Failure, sent uint64, gen uint64, err error) {
	env := r.sched.env
	switch decision {
	case slotpolicy.Empty:
		env.Writer.Outage().OK(sent)
		r.clearMore(gen)
	case slotpolicy.Blocked:
		r.block(gen)
	case slotpolicy.Retry:
		if !env.Writer.Outage().Failed(sent, "dequeue", err) {
			env.logger().Warn("worqr: dequeue failed; retrying", "queue", r.queue, "err", err)
		}
		r.block(gen)
		r.pace.RetryLater()
	}
}

// clearMore records that the queue looked empty, unless a work event
// came since gen was read.
func (r *Runtime) clearMore(gen uint64) {
	r.sched.mu.Lock()
	if r.gen == gen {
		r.more = false
	}
	r.sched.mu.Unlock()
}

// block passes the member over until the next work event, unless one
// came since gen was read.
func (r *Runtime) block(gen uint64) {
	r.sched.mu.Lock()
	if r.gen == gen {
		r.blocked = true
	}
	r.sched.mu.Unlock()
}
