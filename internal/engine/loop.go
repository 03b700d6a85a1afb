package engine

// The keeper's membership of its client's beat, which renews the leases,
// and its loop, which registers a fenced worker again.

import (
	"context"
	"time"

	"github.com/worqr/worqr/internal/beat"
	"github.com/worqr/worqr/internal/store"
)

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

// Start joins beats, the client's beats, which renew the leases (each ttl
// long) every interval, and runs the loop that registers a fenced worker
// again, on life.
func (k *Keeper) Start(life context.Context, beats *beat.Beats[Renewal, BeatMember], ttl, interval time.Duration) {
	k.beat = beats.Join(BeatMember{k}, ttl, interval)
	_ = k.loop.Start(life) // a Loop's Start does not fail
}

// Stop disarms the timer, leaves the beat and stops the loop, waiting for
// it. Once it returns, the beat neither sends nor takes in a renewal of
// this worker (one already sent may still reach Redis). Queue renewals
// started before run on, tracked by the worker's tasks.
func (k *Keeper) Stop() {
	k.Disarm()
	k.Leave()
	k.beat.Leave(BeatMember{k})
	k.loop.Stop()
}

// Wake asks the loop to run now.
func (k *Keeper) Wake() {
	select {
	case k.kick <- struct{}{}:
	default:
	}
}

// run is the keeper's loop: it registers the worker again once it fenced
// itself (Fence wakes it), unless it stays fenced. The renewals
// themselves are the beat's.
func (k *Keeper) run(ctx context.Context) {
	h := k.host
	for {
		select {
		case <-ctx.Done():
			return
		case <-k.kick:
		}
		h.Lock()
		fenced := h.Worker().IsFenced()
		h.Unlock()
		if fenced && (k.env.StayFenced || !k.Reregister(ctx)) {
			return
		}
	}
}
