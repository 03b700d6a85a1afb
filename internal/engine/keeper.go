package engine

// The lease keeper, its start and stop, and its decisions over the whole
// worker: its fence, the evidence that its lease is gone, and the pass
// that reconciles the sessions unsure of their processes. Its deadline is
// the Deadline it holds, its renewals (its membership of the client's
// beat, the reading and the answers) renew.go's, its re-registration and
// the loop that runs it reregister.go's.

import (
	"context"
	"sync"
	"time"

	"github.com/worqr/worqr/internal/beat"
	"github.com/worqr/worqr/internal/clock"
	"github.com/worqr/worqr/internal/startstop"
)

// KeeperHost is the worker whose leases a Keeper keeps: its mu and what
// the mu guards (its lifecycle and sessions), its tasks, and what the
// keeper tells the reclaimer and the application.
type KeeperHost interface {
	DeadlineHost
	// Go runs f on a goroutine of the worker's tasks, with the worker's
	// life.
	Go(f func(life context.Context))
	// Fenced tells the application (and the observer) that worker id
	// fenced itself (queue is empty) for cause, ending lost.
	Fenced(id, queue string, cause error, lost []*Proc)
	// Heard tells the reclaimer what a registry renewal heard: when the
	// next peer's lease runs out, whether a dead worker waits, and how
	// many workers the registry holds.
	Heard(next time.Duration, dead bool, workers int64)
}

// Keeper is the worker's lease keeper, as far as the engine holds it: the
// fencing deadline (Deadline, guarded by the worker's mu), the renewals'
// reading and answers (renew.go), the decisions over the whole worker and
// its re-registration (reregister.go). Its host, environment, clock and
// registry entry are set by Init and never change.
type Keeper struct {
	Deadline
	host     KeeperHost
	env      *Env
	clock    clock.Clock
	registry *Registry
	// beatMu is held while the beat reads what to renew or takes in an
	// answer; left, guarded by it, is set when the keeper leaves the
	// beat, after which the beat does neither.
	beatMu sync.Mutex
	left   bool
	// beat renews the leases, with those of the client's other workers
	// of the same options (see internal/beat); set by Start.
	beat *beat.Beat[Renewal, BeatMember]
	// loop registers the worker again once it was fenced
	// (reregister.go); kick wakes it.
	loop *startstop.Loop
	kick chan struct{}
}

// Init sets up the keeper of host's leases, each env.TTL long, on
// env.Clock; reg is the worker's registry entry, which it registers
// again once fenced.
func (k *Keeper) Init(host KeeperHost, env *Env, reg *Registry) {
	k.host, k.env, k.clock, k.registry = host, env, env.Clock, reg
	k.kick = make(chan struct{}, 1)
	k.loop = startstop.NewLoop(k.run)
	k.Deadline.Init(host, env.Clock, env.TTL, k.Fence)
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

// LeaseLost handles evidence from a script that the lease of worker id on
// a queue is gone: the worker is dead in Redis's eyes, so it fences itself.
// It is no evidence when the worker has left the queue, or is leaving it,
// since leaving drops the lease, nor when it has fenced the queue: it gave
// that lease up already, and a call sent before the fence may well reach
// Redis after the lease ran out. Nor is it when the script was sent for a
// session of the queue (sent) that has since ended, or about a process (p)
// the session no longer holds: the worker left the queue while the script
// was on its way, and may have started work on it again, under a new lease.
func (k *Keeper) LeaseLost(id, queue string, sent *Session, p *Proc, cause error) {
	h := k.host
	h.Lock()
	s := h.Session(queue)
	left := s == nil || (sent != nil && s != sent)
	if !left {
		// Leaving, fenced or left: the lease was given up, or is being.
		left = !s.Holds(p)
	}
	h.Unlock()
	if !left {
		k.Fence(id, cause)
	}
}

// Fence makes the worker treat itself as dead: it takes no more work under
// id, ends every process it holds, tells the application, and wakes the
// keeper's loop to register again under a new id. The deadline timer
// stops: nothing under id is left to fence.
func (k *Keeper) Fence(id string, cause error) {
	h := k.host
	h.Lock()
	if !h.Worker().ToFenced(id, k.clock.Now()) {
		h.Unlock()
		return
	}
	k.Disarm()
	var lost []*Proc
	for _, s := range h.Sessions(nil) {
		// The peers reclaim everything under id: nothing to reconcile.
		lost = append(lost, s.Books.TakeAll()...)
	}
	h.Unlock()

	EndLost(lost)
	next := "registering again"
	if k.env.StayFenced {
		next = "staying fenced"
	}
	// An ordinary outage longer than the TTL ends here: nothing is lost,
	// the peers run the tasks again, and so does this worker once back.
	log := k.env.logger()
	log.Warn("worqr: worker fenced itself: its handlers stop, and their tasks go back to their queues to run again",
		"cause", cause, "processes", len(lost), "next", next)
	LogDropped(log, lost)
	h.Fenced(id, "", cause, lost)
	k.Wake()
}

// Reconcile gives back (Session.Reconcile), in each session of ss that
// has processes to look for, the processes that Redis says worker id
// holds but the worker does not know of: a dequeue whose reply was lost,
// or a hand-off whose event was missed or is still on its way.
func (k *Keeper) Reconcile(ctx context.Context, id string, ss []*Session) {
	out := k.env.Writer.Outage()
	for _, s := range ss {
		if !s.Books.IsUnsure() {
			continue
		}
		sent := out.Begin()
		switch err := s.Reconcile(ctx, id); {
		case err == nil:
			out.OK(sent)
		case !out.Failed(sent, "reconcile", err):
			k.env.logger().Warn("worqr: reconciling processes failed; will retry", "queue", s.Name, "err", err)
		}
	}
}

// AnyUnsure reports whether one of ss has processes to look for.
func AnyUnsure(ss []*Session) bool {
	for _, s := range ss {
		if s.Books.IsUnsure() {
			return true
		}
	}
	return false
}
