package worqr

import (
	"context"

	"github.com/redis/rueidis"

	"github.com/worqr/worqr/internal/slotpolicy"
	"github.com/worqr/worqr/internal/store"
)

// A hand-off is an enqueue that put its task straight into a process of
// an idle runtime (enqueue.lua says when it may): the work event carries
// the process, so the runtime starts it without a dequeue, a round trip
// saved on the path from enqueue to handler. In Redis the process is the
// worker's from the enqueue on, as if its runtime had dequeued it: if the
// worker dies before it hears of it, its lease covers the process as it
// covers every other.
//
// The worker hears of it on the queue's dispatcher (handedOff) and either
// starts it, in a slot of the runtime's it claims (claim), or gives it
// back to the front of the queue (store.GiveBack): the runtime stops
// taking work, or has no free slot (its dequeue, or other queues of its
// pool, took them first). This file holds the whole of that decision;
// the start itself is a dequeue's (runner.launch).
// Three things keep a handed process from being lost or run twice:
//   - a runtime parks only once its queue's channel is subscribed (see
//     dequeue), and a subscription that comes back may have missed events:
//     the queue is then reconciled (see handle), which gives back what
//     Redis says the worker holds that it does not know of;
//   - a reconciliation, or a rejoin, gives back every such process up to
//     the queue's last process id (session.releasedUpTo): an event for one
//     of them that arrives later is ignored, never started;
//   - events naming another worker, or an id the worker no longer has
//     (fenced, registered again), are ignored: that id's lease covers them.

// handedOff takes a process an enqueue handed to this worker's runtime
// for the queue. It runs on the queue's dispatcher.
func (s *session) handedOff(ctx context.Context, e store.Event) {
	r := s.runner
	quit, ok := r.claim()
	if !ok {
		s.giveBack(ctx, e)
		// The task waits now: the scheduler plans for it when a slot
		// frees, as after a work event, rather than when the give-back's
		// own event comes.
		r.workArrived()
		return
	}
	p := s.adoptHanded(e)
	if p == nil {
		r.unclaim()
		r.workArrived() // look again (see runner.runJob)
		return
	}
	c := s.w.c
	c.store.Started(s.name, e.HandedProc()) // the stats' started and wait, as a dequeue's
	c.obs.started(ctx, p)                   // before anything can end it
	r.launch(quit, p, true)
}

// adoptHanded puts a handed process in the session's books, as dequeue
// does with those it took, unless the event came too late for it (see
// above): the worker is fenced, closed, or left the queue, the queue is
// fenced, or the process went back with others it did not know of. It
// holds the queue's gate, so no reconciliation, rejoin or leaving overlaps
// it, and the worker's mu, so no fence of the worker does.
func (s *session) adoptHanded(e store.Event) *Process {
	w := s.w
	s.gate.RLock()
	defer s.gate.RUnlock()
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.state.IsCurrent(e.To) || w.sessions[s.name] != s {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state.IsFenced() || store.PIDSeq(e.PID) <= s.releasedUpTo || s.procs[e.PID] != nil {
		return nil
	}
	p := newProcess(w, s.name, e.HandedProc())
	s.procs[p.id] = p
	return p
}

// giveBack returns a handed process the runtime cannot start to the front
// of the queue, where the next dequeue takes it: not behind tasks enqueued
// after it. A fenced, closed or departed worker leaves it to its lease, its
// rejoin or the release that leaving made, which cover it. If Redis may
// not have had the give-back, the queue is reconciled.
func (s *session) giveBack(ctx context.Context, e store.Event) {
	w := s.w
	w.mu.Lock()
	s.mu.Lock()
	mine := w.state.IsCurrent(e.To) && !s.state.IsFenced() && w.sessions[s.name] == s
	s.mu.Unlock()
	w.mu.Unlock()
	if !mine {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, w.opts.TTL)
	defer cancel()
	sent := w.c.outage.Begin()
	_, err := w.c.store.GiveBack(ctx, s.name, store.ProcRef{Worker: e.To, PID: e.PID})
	if err == nil {
		// Any outcome will do: given back; or no longer the worker's
		// (reconciled, or its lease gone: the peers reclaim it).
		w.c.outage.OK(sent)
		return
	}
	if _, isReply := rueidis.IsRedisErr(err); !isReply {
		s.markUnsure(unsurePasses, false)
	}
	if err = w.c.fail("give back", s.name, err); !w.c.outage.Failed(sent, "give back", err) {
		w.logger().Warn("worqr: could not give back a task handed over by its enqueue; reconciling", "queue", s.name, "process", e.PID, "err", err)
	}
}

// claim takes a slot for a process an enqueue handed the member, if it
// takes work and one is free that no dequeue in flight asked for (and the
// member is under its maxSlots): a hand-off never runs more handlers than
// the slots allow. It returns what the handler goroutine leaves on
// (launch).
func (r *runner) claim() (quit <-chan struct{}, ok bool) {
	s := r.sched
	s.mu.Lock()
	defer s.mu.Unlock()
	ok = r.takes && slotpolicy.Free(s.size, s.busy+s.asking, s.settling) > 0 &&
		(r.maxSlots == 0 || r.busy+r.asking < r.maxSlots)
	if !ok {
		return nil, false
	}
	// Under mu: stopTaking clears taking under mu, so a handler counted
	// here is waited for, and none starts after.
	r.busy++
	s.busy++
	return s.quit, true
}

// unclaim gives back the slot claim took, for a process not adopted.
func (r *runner) unclaim() { r.count(-1, 0) }
