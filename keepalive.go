package worqr

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/worqr/worqr/internal/scripts"
)

// The keepalive renews the worker's leases, one in the registry and one in
// each queue it serves, every RenewInterval, and judges its own liveness on
// its own monotonic clock: the leases Redis holds were set when Redis ran
// the renewal, which is after the worker sent it, so a worker that counts
// TTL from the send time of its last successful renewal always believes
// itself dead no later than Redis does. fenceMargin adds room for the
// timer firing late and for clocks that run at slightly different rates.

// fenceMargin is how long before the lease's earliest expiry a worker
// fences itself.
func (w *Worker) fenceMargin() time.Duration { return w.opts.TTL / 10 }

// extendDeadline moves the fencing deadline to TTL minus the margin after
// sent, the time a renewal that succeeded was sent. Callers hold w.mu.
func (w *Worker) extendDeadline(sent time.Time) {
	w.deadlineAt = sent.Add(w.opts.TTL - w.fenceMargin())
	w.deadline.Reset(time.Until(w.deadlineAt))
}

// onDeadline fences the worker under its current id, unless a renewal has
// moved the deadline since the timer was set (a stale firing).
func (w *Worker) onDeadline() {
	w.mu.Lock()
	if w.closed || w.fenced || time.Now().Before(w.deadlineAt) {
		w.mu.Unlock()
		return
	}
	id := w.id
	w.mu.Unlock()
	w.fence(id, errors.New("lease not renewed in time"))
}

func (w *Worker) keepalive(ctx context.Context) {
	defer w.wg.Done()
	// A ticker keeps renewals on a fixed schedule however long each takes.
	t := time.NewTicker(w.opts.RenewInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-w.kick:
		}
		w.mu.Lock()
		fenced := w.fenced
		w.mu.Unlock()
		if fenced {
			if w.opts.StayFenced || !w.reregister(ctx) {
				return
			}
		} else {
			w.renew(ctx)
		}
	}
}

// renew extends every lease the worker holds in one round trip. It extends
// the local deadline only when all of them were extended.
func (w *Worker) renew(ctx context.Context) {
	c := w.c
	w.mu.Lock()
	id, ss := w.id, w.served()
	w.mu.Unlock()

	ttl := ms(w.opts.TTL)
	calls := make([]scripts.Call, 0, 1+len(ss))
	calls = append(calls, scripts.Call{Script: c.scripts.Renew, Keys: []string{c.keys.workers()}, Args: []string{id, ttl}})
	for _, s := range ss {
		calls = append(calls, scripts.Call{Script: c.scripts.Renew, Keys: []string{s.keys.leases}, Args: []string{id, ttl}})
	}
	// A renewal answered after the deadline is useless: do not wait longer.
	rctx, cancel := context.WithTimeout(ctx, w.opts.TTL)
	defer cancel()
	sent := time.Now()
	left := false
	for i, res := range scripts.ExecMulti(rctx, c.rdb, calls) {
		expiry, err := res.AsInt64()
		if err != nil {
			if ctx.Err() == nil {
				w.logger().Warn("worqr: lease renewal failed", "err", err)
			}
			return
		}
		if expiry < 0 {
			if i == 0 {
				w.fence(id, errors.New("renewal found the registry lease gone"))
				return
			}
			if w.leaseLostOn(id, ss[i-1].name, ss[i-1], nil, fmt.Errorf("renewal found the lease on %q gone", ss[i-1].name)) {
				return
			}
			left = true
		}
	}
	if left {
		// The worker left a queue while this renewal was on its way: no
		// evidence of death, but not every lease it holds now was renewed
		// (a queue it started work on again is missing). Renew again at
		// once, rather than let its deadline pass.
		select {
		case w.kick <- struct{}{}:
		default:
		}
		return
	}
	w.mu.Lock()
	if w.id == id && !w.fenced && !w.closed {
		w.extendDeadline(sent)
	}
	w.mu.Unlock()
	w.reconcile(ctx, id, ss)
}

// leaseLost handles evidence from a script that the lease of worker id on
// a queue is gone: the worker is dead in Redis's eyes, so it fences itself.
// It is no evidence when the worker has left the queue, or is leaving it,
// since leaving drops the lease.
func (w *Worker) leaseLost(id, queue string, cause error) {
	_ = w.leaseLostOn(id, queue, nil, nil, cause)
}

// leaseLostOn is leaseLost for a script sent for one service of the queue
// (sent) or about one process (p), when the caller knows them. Then it is
// no evidence either when that service has ended or no longer holds the
// process: the worker left the queue while the script was on its way, and
// may have started work on it again since, under a new lease.
// It reports whether it took the script's answer as evidence.
func (w *Worker) leaseLostOn(id, queue string, sent *serving, p *Process, cause error) bool {
	w.mu.Lock()
	s := w.serving[queue]
	left := s == nil || s.leaving || (sent != nil && s != sent) || (p != nil && s.procs[p.id] != p)
	w.mu.Unlock()
	if left {
		return false
	}
	w.fence(id, cause)
	return true
}

// fence makes the worker treat itself as dead: it takes no more work under
// id, ends every process it holds, tells the application, and wakes the
// keepalive to register again under a new id.
func (w *Worker) fence(id string, cause error) {
	w.mu.Lock()
	if w.id != id || w.fenced || w.closed {
		w.mu.Unlock()
		return
	}
	w.fenced = true
	w.deadline.Stop()
	var lost []*Process
	for _, s := range w.serving {
		for _, p := range s.procs {
			lost = append(lost, p)
		}
		s.procs = make(map[string]*Process)
		s.unsure = 0 // the peers reclaim everything under id
	}
	w.mu.Unlock()

	reason := fmt.Errorf("%w: %w", ErrProcessLost, ErrWorkerFenced)
	for _, p := range lost {
		p.end(reason, true)
	}
	w.logger().Warn("worqr: worker fenced itself; its processes are lost", "cause", cause, "processes", len(lost))
	if w.opts.OnFenced != nil {
		ev := FenceEvent{WorkerID: id, Cause: fmt.Errorf("%w: %w", ErrWorkerFenced, cause), Lost: lost}
		go w.opts.OnFenced(ev)
	}
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

// reregister registers the worker under a new id and takes leases on its
// queues again, retrying with backoff until Redis answers or ctx ends.
// It reports whether the worker is registered again.
func (w *Worker) reregister(ctx context.Context) bool {
	b := newBackoff(50*time.Millisecond, w.opts.RenewInterval)
	for {
		ok, err := w.tryReregister(ctx)
		if ok {
			return true
		}
		if ctx.Err() != nil {
			return false
		}
		w.logger().Warn("worqr: registering again failed; retrying", "err", err)
		if !b.wait(ctx) {
			return false
		}
	}
}

func (w *Worker) tryReregister(ctx context.Context) (bool, error) {
	w.membership.Lock()
	defer w.membership.Unlock()
	if ctx.Err() != nil {
		return false, ctx.Err()
	}
	id, sent, err := w.register(ctx)
	if err != nil {
		return false, err
	}
	w.mu.Lock()
	ss := w.served()
	w.mu.Unlock()
	for _, s := range ss {
		if err := w.join(ctx, id, s.name); err != nil {
			// The new id is abandoned: its lease expires and the
			// reclaimers remove it; it never held a process.
			return false, err
		}
	}
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return false, ErrWorkerClosed
	}
	old := w.id
	w.id, w.fenced = id, false
	w.extendDeadline(sent)
	w.mu.Unlock()
	w.logger().Info("worqr: worker registered again after fencing", "previous", old)
	for _, s := range ss {
		s.sub.box.push(event{kind: eventSubscribed})
	}
	return true, nil
}

// unsurePasses is how many renewals look for processes after a dequeue's
// reply was lost.
const unsurePasses = 3

// reconcile gives back processes that Redis says this worker holds but the
// worker does not know of: a dequeue whose reply was lost. Dequeues on the
// queue wait meanwhile, so no process is in between.
func (w *Worker) reconcile(ctx context.Context, id string, ss []*serving) {
	for _, s := range ss {
		w.mu.Lock()
		unsure := s.unsure > 0
		w.mu.Unlock()
		if !unsure {
			continue
		}
		if err := w.reconcileQueue(ctx, id, s); err != nil {
			w.logger().Warn("worqr: reconciling processes failed; will retry", "queue", s.name, "err", err)
		}
	}
}

func (w *Worker) reconcileQueue(ctx context.Context, id string, s *serving) error {
	s.gate.Lock()
	defer s.gate.Unlock()
	w.mu.Lock()
	if w.id != id || w.fenced {
		w.mu.Unlock()
		return nil
	}
	args := []string{id, s.keys.channel, "orphans"}
	for pid := range s.procs {
		args = append(args, pid)
	}
	w.mu.Unlock()
	c := w.c
	n, err := c.scripts.Release.Exec(ctx, c.rdb, s.keys.forRelease(), args).AsInt64()
	if err != nil {
		return c.fail("reconcile", s.name, err)
	}
	w.mu.Lock()
	s.unsure--
	w.mu.Unlock()
	if n > 0 {
		w.logger().Info("worqr: returned processes whose dequeue reply was lost", "queue", s.name, "tasks", n)
	}
	return nil
}
