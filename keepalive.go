package worqr

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/worqr/worqr/internal/store"
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
// sent, the time a registry renewal that succeeded was sent. Callers hold
// w.mu.
func (w *Worker) extendDeadline(sent time.Time) {
	w.deadlineAt = w.leaseDeadline(sent)
	w.armDeadline()
}

// leaseDeadline is when a lease renewed at sent may expire, by the worker's
// clock, less the margin.
func (w *Worker) leaseDeadline(sent time.Time) time.Time {
	return sent.Add(w.opts.TTL - w.fenceMargin())
}

// armDeadline sets the fencing timer to the earliest deadline: the
// registry lease's, or that of one of the queue leases still held. Callers
// hold w.mu.
func (w *Worker) armDeadline() {
	earliest := w.deadlineAt
	for _, s := range w.serving {
		if !s.fenced && !s.leaving && s.deadlineAt.Before(earliest) {
			earliest = s.deadlineAt
		}
	}
	w.deadline.Reset(time.Until(earliest))
}

// onDeadline fences the worker under its current id when its registry
// lease may have expired, or just the queues whose lease may have (their
// node could not be reached: on a cluster, a shard failing over), unless
// renewals have moved the deadlines since the timer was set.
func (w *Worker) onDeadline() {
	w.mu.Lock()
	if w.closed || w.fenced {
		w.mu.Unlock()
		return
	}
	id, now := w.id, time.Now()
	if !now.Before(w.deadlineAt) {
		w.mu.Unlock()
		w.fence(id, errors.New("lease not renewed in time"))
		return
	}
	var due []*serving
	for _, s := range w.serving {
		if !s.fenced && !s.leaving && !now.Before(s.deadlineAt) {
			due = append(due, s)
		}
	}
	w.mu.Unlock()
	for _, s := range due {
		w.fenceQueue(id, s, fmt.Errorf("lease on %q not renewed in time", s.name))
	}
	w.mu.Lock()
	if !w.closed {
		w.armDeadline()
	}
	w.mu.Unlock()
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

// renew extends every lease the worker holds. Each deadline moves only
// with its own lease: on a cluster, a shard that cannot be reached costs
// the worker its work on that shard's queues, not the rest. So each queue
// lease is renewed on a goroutine of its own, which the registry renewal
// and the next round do not wait for: a pipeline answers when its slowest
// node does, and a node that hangs (rather than refusing) would otherwise
// hold up the answers about every other lease, the registry's included,
// until the worker fenced itself as a whole. (rueidis pipelines
// concurrent calls to one node, so this costs no extra round trips.)
func (w *Worker) renew(ctx context.Context) {
	c := w.c
	w.mu.Lock()
	id := w.id
	for _, s := range w.serving {
		if !s.fenced { // its lease is abandoned until the queue is rejoined
			w.wg.Add(1) // keepalive's own count is held: never from zero
			go w.renewQueue(ctx, id, s, s.leaseGen)
		}
	}
	w.mu.Unlock()

	// A renewal answered after the deadline is useless: do not wait longer.
	rctx, cancel := context.WithTimeout(ctx, w.opts.TTL)
	defer cancel()
	sent := time.Now()
	err := c.store.RenewWorker(rctx, id, w.opts.TTL)
	switch {
	case errors.Is(err, store.ErrLeaseGone):
		w.fence(id, errors.New("renewal found the registry lease gone"))
		return
	case err != nil:
		if ctx.Err() == nil {
			w.logger().Warn("worqr: lease renewal failed", "err", err)
		}
		return
	}
	w.mu.Lock()
	if w.id == id && !w.fenced && !w.closed {
		w.deadlineAt = w.leaseDeadline(sent)
		w.armDeadline()
	}
	w.mu.Unlock()
}

// renewQueue extends the worker's lease on the queue s, whose lease
// generation was gen when the round began, then reconciles the queue. A
// renewal may still be in flight when the next round sends another, so
// the deadline only ever moves later, and an answer about a lease the
// worker has since given up (fenceQueue) is ignored.
func (w *Worker) renewQueue(ctx context.Context, id string, s *serving, gen uint64) {
	defer w.wg.Done()
	c := w.c
	rctx, cancel := context.WithTimeout(ctx, w.opts.TTL)
	defer cancel()
	sent := time.Now()
	err := c.store.RenewQueueLease(rctx, s.name, id, w.opts.TTL)
	gone := errors.Is(err, store.ErrLeaseGone)
	if err != nil && !gone {
		if ctx.Err() == nil {
			w.logger().Warn("worqr: lease renewal failed", "queue", s.name, "err", err)
		}
		return
	}
	w.mu.Lock()
	current := w.id == id && !w.fenced && !w.closed && !s.fenced && s.leaseGen == gen
	if current && !gone {
		if d := w.leaseDeadline(sent); d.After(s.deadlineAt) {
			s.deadlineAt = d
		}
		w.armDeadline()
	}
	w.mu.Unlock()
	switch {
	case !current:
	case gone:
		// Sent for this service of the queue: if the worker left the queue
		// meanwhile (and maybe started on it again), it is no evidence.
		w.leaseLost(id, s.name, s, nil, fmt.Errorf("renewal found the lease on %q gone", s.name))
	default:
		w.reconcile(ctx, id, []*serving{s})
	}
}

// leaseLost handles evidence from a script that the lease of worker id on
// a queue is gone: the worker is dead in Redis's eyes, so it fences itself.
// It is no evidence when the worker has left the queue, or is leaving it,
// since leaving drops the lease, nor when it has fenced the queue: it gave
// that lease up already, and a call sent before the fence may well reach
// Redis after the lease ran out. Nor is it when the script was sent for a
// service of the queue (sent) that has since ended, or about a process (p)
// the service no longer holds: the worker left the queue while the script
// was on its way, and may have started work on it again, under a new lease.
func (w *Worker) leaseLost(id, queue string, sent *serving, p *Process, cause error) {
	w.mu.Lock()
	s := w.serving[queue]
	left := s == nil || s.leaving || s.fenced || (sent != nil && s != sent) || (p != nil && s.procs[p.id] != p)
	w.mu.Unlock()
	if !left {
		w.fence(id, cause)
	}
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
	ev := FenceEvent{WorkerID: id, Cause: fmt.Errorf("%w: %w", ErrWorkerFenced, cause), Lost: lost}
	w.c.obs.fenced(ev)
	if w.opts.OnFenced != nil {
		go w.opts.OnFenced(ev)
	}
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

// fenceQueue makes the worker treat its lease on one queue as lost, when
// it could not renew that lease in time (its node unreachable) while the
// rest of its leases are fine. It takes no work there and ends the
// processes it held there, like a fence of the whole worker, but keeps its
// id and its other queues; rejoin gives the queue's tasks back and takes a
// new lease once the node answers.
func (w *Worker) fenceQueue(id string, s *serving, cause error) {
	w.mu.Lock()
	if w.id != id || w.fenced || w.closed || s.fenced || s.leaving || w.serving[s.name] != s {
		w.mu.Unlock()
		return
	}
	s.fenced = true
	s.leaseGen++
	lost := make([]*Process, 0, len(s.procs))
	for _, p := range s.procs {
		lost = append(lost, p)
	}
	s.procs = make(map[string]*Process)
	s.unsure = 0 // rejoin gives back everything under id in this queue
	// The lease in Redis may be live until TTL after the last renewal
	// that reached it was sent: give the tasks back no earlier than a peer
	// could have taken them, so handlers have the same time to stop.
	expiresBy := s.deadlineAt.Add(w.fenceMargin())
	w.wg.Add(1)
	go w.rejoin(w.life, id, s, expiresBy)
	w.mu.Unlock()

	reason := fmt.Errorf("%w: %w", ErrProcessLost, ErrWorkerFenced)
	for _, p := range lost {
		p.end(reason, true)
	}
	w.logger().Warn("worqr: lease on a queue lost; its processes are lost", "queue", s.name, "cause", cause, "processes", len(lost))
	ev := FenceEvent{WorkerID: id, Queue: s.name, Cause: fmt.Errorf("%w: %w", ErrWorkerFenced, cause), Lost: lost}
	w.c.obs.fenced(ev)
	if w.opts.OnFenced != nil {
		go w.opts.OnFenced(ev)
	}
}

// rejoin brings a fenced queue back: after the old lease has surely run
// out, it gives back every task the worker still holds there (release,
// mode force) and takes a new lease, retrying with backoff until the
// queue's node answers. It gives up when the worker left the queue, was
// closed, or fenced itself as a whole (re-registration rejoins then).
func (w *Worker) rejoin(ctx context.Context, id string, s *serving, after time.Time) {
	defer w.wg.Done()
	t := time.NewTimer(time.Until(after))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return
	case <-t.C:
	}
	b := newBackoff(50*time.Millisecond, w.opts.RenewInterval)
	for {
		// Each attempt is bounded: it holds the membership lock and the
		// queue's gate, and the node may hang rather than refuse.
		actx, cancel := context.WithTimeout(ctx, w.opts.TTL)
		done, err := w.tryRejoin(actx, id, s)
		cancel()
		if done || ctx.Err() != nil {
			return
		}
		w.logger().Warn("worqr: taking a lease on the queue again failed; retrying", "queue", s.name, "err", err)
		if !b.wait(ctx) {
			return
		}
	}
}

func (w *Worker) tryRejoin(ctx context.Context, id string, s *serving) (done bool, err error) {
	w.membership.Lock()
	defer w.membership.Unlock()
	s.gate.Lock() // no dequeue in between
	defer s.gate.Unlock()
	w.mu.Lock()
	current := w.id == id && !w.fenced && !w.closed && s.fenced && w.serving[s.name] == s
	before := w.deadlineAt // the registry lease the new queue lease derives from
	w.mu.Unlock()
	if !current || ctx.Err() != nil {
		return true, nil
	}
	c := w.c
	if r := c.store.ReleaseOne(ctx, store.Release{Queue: s.name, Worker: id, Mode: store.ReleaseForce}); r.Err != nil {
		return false, c.fail("rejoin", s.name, r.Err)
	}
	if err := w.join(ctx, id, s.name); err != nil {
		return errors.Is(err, ErrWorkerFenced), err
	}
	w.mu.Lock()
	if w.id == id && !w.closed {
		s.fenced, s.deadlineAt = false, before
		w.armDeadline()
	}
	w.mu.Unlock()
	w.logger().Info("worqr: lease on the queue taken again", "queue", s.name)
	s.sub.box.push(event{subscribed: true}) // look for work at once
	return true, nil
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
	var joined, unreachable []*serving
	for _, s := range ss {
		err := w.join(ctx, id, s.name)
		switch {
		case errors.Is(err, ErrWorkerFenced) || ctx.Err() != nil:
			// The new id is abandoned: its lease expires and the
			// reclaimers remove it; it never held a process.
			return false, err
		case err != nil:
			// Its node cannot be reached (on a cluster, a shard failing
			// over): serve the other queues, and rejoin this one once
			// the node answers, as after losing only its lease.
			w.logger().Warn("worqr: could not take a lease on the queue when registering again; will retry", "queue", s.name, "err", err)
			unreachable = append(unreachable, s)
		default:
			joined = append(joined, s)
		}
	}
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return false, ErrWorkerClosed
	}
	old := w.id
	w.id, w.fenced = id, false
	for _, s := range joined {
		s.fenced, s.deadlineAt = false, w.leaseDeadline(sent)
	}
	for _, s := range unreachable {
		s.fenced = true
		s.leaseGen++
		w.wg.Add(1) // on the keepalive goroutine: the count is never zero
		go w.rejoin(w.life, id, s, time.Now())
	}
	w.extendDeadline(sent)
	w.mu.Unlock()
	w.logger().Info("worqr: worker registered again after fencing", "previous", old)
	for _, s := range joined {
		s.sub.box.push(event{subscribed: true})
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
	keep := make([]string, 0, len(s.procs))
	for pid := range s.procs {
		keep = append(keep, pid)
	}
	w.mu.Unlock()
	c := w.c
	r := c.store.ReleaseOne(ctx, store.Release{Queue: s.name, Worker: id, Mode: store.ReleaseOrphans, Keep: keep})
	if r.Err != nil {
		return c.fail("reconcile", s.name, r.Err)
	}
	n := r.Returned
	w.mu.Lock()
	s.unsure--
	w.mu.Unlock()
	if n > 0 {
		w.logger().Info("worqr: returned processes whose dequeue reply was lost", "queue", s.name, "tasks", n)
	}
	return nil
}
