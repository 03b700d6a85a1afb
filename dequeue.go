package worqr

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/rueidis"
	"github.com/worqr/worqr/internal/engine"
	"github.com/worqr/worqr/internal/slotpolicy"
	"github.com/worqr/worqr/internal/store"
)

// Dequeue takes the task at the front of a queue the worker serves. It
// returns ErrNoTask when none is waiting, and ErrWorkerFenced when the
// worker's lease is not live.
func (w *Worker) Dequeue(ctx context.Context, queue string) (*Process, error) {
	ps, _, err := w.dequeue(ctx, queue, 1, false)
	if err != nil {
		return nil, err
	}
	return processOf(ps[0]), nil
}

// DequeueN takes up to n tasks from the front of a queue in one script
// call, in queue order. It returns ErrNoTask when none is waiting.
func (w *Worker) DequeueN(ctx context.Context, queue string, n int) ([]*Process, error) {
	ps, _, err := w.dequeue(ctx, queue, n, false)
	if err != nil {
		return nil, err
	}
	return processesOf(ps), nil
}

// dequeue is DequeueN for the application or, with runtime set, for the
// Handle runtime of the queue.
func (w *Worker) dequeue(ctx context.Context, queue string, n int, runtime bool) ([]*engine.Proc, int64, error) {
	c := w.c
	if err := c.validate(ctx, "dequeue", queue); err != nil {
		return nil, 0, err
	}
	if n < 1 {
		return nil, 0, fmt.Errorf("worqr: dequeue %q: count %d: %w", queue, n, ErrInvalidOptions)
	}
	w.mu.Lock()
	s, ok := w.sessions[queue]
	id, refused := w.state.ID(), w.state.TakesWork()
	fenced := errors.Is(refused, ErrWorkerFenced)
	if ok {
		fenced = fenced || s.IsFenced()
	}
	w.mu.Unlock()
	switch {
	case errors.Is(refused, ErrWorkerClosed):
		return nil, 0, fmt.Errorf("worqr: dequeue %q: %w", queue, ErrWorkerClosed)
	case !ok:
		return nil, 0, fmt.Errorf("worqr: dequeue %q: %w", queue, ErrNotServing)
	case s.runner != nil && !runtime:
		return nil, 0, fmt.Errorf("worqr: dequeue %q: %w", queue, ErrHandledQueue)
	case fenced:
		return nil, 0, fmt.Errorf("worqr: dequeue %q: %w", queue, ErrWorkerFenced)
	}
	s.Gate.RLock()
	defer s.Gate.RUnlock()
	w.mu.Lock()
	left := w.sessions[queue] != s
	w.mu.Unlock()
	if left { // StopWork ran while this call waited at the gate
		return nil, 0, fmt.Errorf("worqr: dequeue %q: %w", queue, ErrNotServing)
	}
	// A runtime parks in the idle set, where enqueues hand it tasks in
	// events, only once it hears the queue's events.
	sent := c.clock.Now()
	sps, until, now, err := c.store.Dequeue(ctx, queue, id, n, runtime && s.Sub.IsReady())
	got := c.clock.Now() // also when the processes started
	if now > 0 {
		// The rate limit's wake-up (pacer.WakeAt) is timed by the
		// estimate: one that ran ahead of Redis would wake before until,
		// be told until again, and find it past, again and again.
		w.clock.Observe(now, sent, got)
	}
	if errors.Is(err, store.ErrLeaseGone) {
		w.lease.leaseLost(id, queue, s, nil, fmt.Errorf("dequeue found the lease on %q gone", queue))
		return nil, 0, fmt.Errorf("worqr: dequeue %q: %w", queue, ErrWorkerFenced)
	}
	if err != nil {
		if _, isReply := rueidis.IsRedisErr(err); !isReply {
			// The script may have run and its reply been lost: reconcile
			// once Redis answers, so no process stays ours unknowingly.
			s.MarkUnsure(unsurePasses, false)
		}
		return nil, 0, c.fail("dequeue", queue, err)
	}
	if len(sps) == 0 && until > 0 {
		return nil, until, fmt.Errorf("worqr: dequeue %q: the next start is allowed at %s: %w", queue, time.UnixMicro(until).Format(time.RFC3339Nano), ErrRateLimited)
	}
	if len(sps) == 0 {
		return nil, 0, fmt.Errorf("worqr: dequeue %q: %w", queue, ErrNoTask)
	}
	ps := make([]*engine.Proc, len(sps))
	for i, sp := range sps {
		ps[i] = &newProcessAt(w, queue, sp, got).rec
		c.obs.started(ctx, ps[i]) // before anything can end it
	}
	w.mu.Lock()
	adopted := w.state.ID() == id && !w.state.IsFenced() && w.sessions[queue] == s && s.AdoptAll(ps)
	w.mu.Unlock()
	if !adopted {
		// The worker fenced itself while the script ran: these processes
		// are already the peers'. (Leaving the queue cannot overlap a
		// dequeue: it holds the gate.)
		for _, p := range ps {
			p.End(ErrProcessLost, true)
		}
		return nil, 0, fmt.Errorf("worqr: dequeue %q: %w", queue, ErrWorkerFenced)
	}
	return ps, until, nil
}

// What a runtime member's dequeue makes of it (slotScheduler.take sends
// it): an empty queue clears its work flag; the queue's limits (a
// concurrency limit at its bound answers as an empty queue, a rate limit
// used up with when the next start is allowed) wait for the next work
// event or the limit's wake-up (pacer.WakeAt); a failed call passes it
// over for a backoff (pacer.retryLater).

// afterDequeue applies decision to the member whose dequeue, sent at
// outage epoch sent with gen work events counted, failed with err.
func (r *runner) afterDequeue(decision slotpolicy.Failure, sent uint64, gen uint64, err error) {
	switch decision {
	case slotpolicy.Empty:
		r.w.c.outage.OK(sent)
		r.clearMore(gen)
	case slotpolicy.Blocked:
		r.block(gen)
	case slotpolicy.Retry:
		if !r.w.c.outage.Failed(sent, "dequeue", err) {
			r.w.logger().Warn("worqr: dequeue failed; retrying", "queue", r.queue, "err", err)
		}
		r.block(gen)
		r.pace.RetryLater()
	}
}

// clearMore records that the queue looked empty, unless a work event
// came since gen was read.
func (r *runner) clearMore(gen uint64) {
	r.sched.mu.Lock()
	if r.gen == gen {
		r.more = false
	}
	r.sched.mu.Unlock()
}

// block passes the member over until the next work event, unless one
// came since gen was read.
func (r *runner) block(gen uint64) {
	r.sched.mu.Lock()
	if r.gen == gen {
		r.blocked = true
	}
	r.sched.mu.Unlock()
}
