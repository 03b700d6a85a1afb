package engine

// The renewals of the worker's leases, one in the registry and one in
// each queue it serves, as the client's beat sends them every
// RenewInterval with those of the client's other workers of the same
// options (the keeper is the beat's member), and the answers that move
// the deadlines and tell the reclaimer what the registry heard.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/worqr/worqr/internal/store"
)

// Renewal is one worker's part of a round of its client's beat: the
// leases it renews.
type Renewal struct {
	ID        string
	Keepalive store.Keepalive
	With      []QueueRenewal // the queue leases renewed with the registry lease
}

// QueueRenewal is the answer to the renewal of the lease on the queue of
// session S, sent while its lease generation was Gen.
type QueueRenewal struct {
	S    *Session
	Gen  uint64
	Gone bool // the lease was gone
}

// BeatMember is a worker's lease keeper as a member of its client's beat.
type BeatMember struct{ k *Keeper }

// Renewal reads which leases the worker renews this round.
func (m BeatMember) Renewal() (Renewal, store.Keepalive, bool) {
	r, ok := m.k.Renewal()
	return r, r.Keepalive, ok
}

// Renewed takes in the answer to the round sent at sent.
func (m BeatMember) Renewed(r Renewal, sent time.Time, kept store.KeptAlive, err error) {
	m.k.Renewed(r, sent, kept, err)
}

// Renewal reads which leases the worker renews, unless the keeper has
// left the beat (Leave), the worker's life has ended, or it is fenced
// (its loop registers it again) or closed. Each deadline moves only with
// its own lease. On a single Redis one script renews them all (see
// store.JointRenewals), with those of the client's other workers on the
// beat: an idle worker costs Redis a share of one short script a
// RenewInterval. On a Cluster a shard that cannot be reached must cost
// the worker its work on that shard's queues, not the rest: so each queue
// lease is renewed on a goroutine of its own, which the registry renewal
// and the next round do not wait for. A pipeline answers when its slowest
// node does, and a node that hangs (rather than refusing) would otherwise
// hold up the answers about every other lease, the registry's included,
// until the worker fenced itself as a whole. (rueidis pipelines
// concurrent calls to one node, so this costs no extra round trips.)
func (k *Keeper) Renewal() (Renewal, bool) {
	h := k.host
	k.beatMu.Lock()
	defer k.beatMu.Unlock()
	if k.left || k.env.Writer.Life().Err() != nil {
		return Renewal{}, false
	}
	joint := k.env.Store.JointRenewals()
	h.Lock()
	defer h.Unlock()
	if w := h.Worker(); w.IsFenced() || w.IsClosed() {
		return Renewal{}, false
	}
	r := Renewal{ID: h.Worker().ID()}
	var names []string
	for _, s := range h.Sessions(nil) {
		leased, gen := s.Lease.Leased()
		switch {
		case !leased: // its lease is abandoned until the queue is rejoined
		case joint:
			r.With = append(r.With, QueueRenewal{S: s, Gen: gen})
			names = append(names, s.Name)
		default:
			id := r.ID
			h.Go(func(life context.Context) { k.renewQueue(life, s, id, gen) })
		}
	}
	r.Keepalive = store.Keepalive{Worker: r.ID, Queues: names}
	return r, true
}

// Renewed takes in the answer to a renewal sent at sent (err, or kept),
// unless the keeper has left the beat meanwhile.
//
// The registry renewal also tells the reclaimer when the next peer's lease
// runs out, and whether a dead worker waits (see internal/reclaim): a
// healthy fleet makes no other call.
func (k *Keeper) Renewed(r Renewal, sent time.Time, kept store.KeptAlive, err error) {
	h := k.host
	k.beatMu.Lock()
	defer k.beatMu.Unlock()
	if k.left {
		return
	}
	id, with := r.ID, r.With
	switch {
	case err != nil: // logged by the beat, once for its workers
		return
	case kept.Gone:
		k.Fence(id, errors.New("renewal found the registry lease gone"))
		return
	}
	h.Lock()
	if h.Worker().IsCurrent(id) {
		k.Extend(sent)
	}
	h.Unlock()
	h.Heard(kept.Next, kept.Dead, kept.Workers)
	if len(with) == 0 {
		return
	}
	for i := range with {
		with[i].Gone = kept.QueueGone[i]
	}
	if renewed := k.QueuesRenewed(id, sent, with); AnyUnsure(renewed) {
		// Not on the beat's goroutine: a reconciliation waits for the
		// dequeues on its queue. (The worker is not closed: closing
		// leaves the beat first, and this runs under beatMu.)
		h.Go(func(life context.Context) { k.Reconcile(life, id, renewed) })
	}
}

// Leave makes the keeper leave the beat: once it returns, Renewal and
// Renewed do nothing.
func (k *Keeper) Leave() {
	k.beatMu.Lock()
	k.left = true
	k.beatMu.Unlock()
}

// renewQueue extends the worker's lease on the queue of s, whose lease
// generation was gen when the round began, then reconciles the queue.
func (k *Keeper) renewQueue(ctx context.Context, s *Session, id string, gen uint64) {
	env := k.env
	out := env.Writer.Outage()
	defer env.Signals.QueueRenewed.Signal(s.Name)
	rctx, cancel := context.WithTimeout(ctx, env.TTL)
	defer cancel()
	sent, at := k.clock.Now(), out.Begin()
	err := env.Store.RenewQueueLease(rctx, s.Name, id, env.TTL)
	gone := errors.Is(err, store.ErrLeaseGone)
	if err != nil && !gone {
		if ctx.Err() == nil {
			if err = env.Fail("renew", s.Name, err); !out.Failed(at, "renewal", err) {
				env.logger().Warn("worqr: lease renewal failed", "queue", s.Name, "err", err)
			}
		}
		return
	}
	out.OK(at)
	k.Reconcile(ctx, id, k.QueuesRenewed(id, sent, []QueueRenewal{{S: s, Gen: gen, Gone: gone}}))
}

// QueuesRenewed takes the answers to renewals of queue leases sent at
// sent, and returns the sessions whose lease was renewed. A renewal may
// still be in flight when the next round sends another, so a deadline only
// ever moves later, and an answer about a lease the worker has since given
// up (a session's fence) is ignored. A lease found gone fences the worker,
// unless the worker left the queue meanwhile (see LeaseLost).
func (k *Keeper) QueuesRenewed(id string, sent time.Time, rs []QueueRenewal) []*Session {
	h := k.host
	var renewed, lost []*Session
	h.Lock()
	current, deadline := h.Worker().IsCurrent(id), k.Of(sent)
	for _, r := range rs {
		switch ok, gone := r.S.Lease.Renewed(current, r.Gen, r.Gone, deadline); {
		case gone:
			lost = append(lost, r.S)
		case ok:
			renewed = append(renewed, r.S)
		}
	}
	if len(renewed) > 0 {
		k.Arm()
	}
	h.Unlock()
	for _, s := range lost {
		// Sent for this session of the queue: if the worker left the queue
		// meanwhile (and maybe started on it again), it is no evidence.
		k.LeaseLost(id, s.Name, s, nil, fmt.Errorf("renewal found the lease on %q gone", s.Name))
	}
	return renewed
}
