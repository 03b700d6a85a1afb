package worqr

// The lease keeper: the client's beat renews the worker's leases, one in
// the registry and one in each queue it serves, every RenewInterval,
// together with the client's other workers of the same options; the
// keeper's loop registers a fenced worker again. All of it is the
// engine's (engine.Keeper): here is its wiring.

import "github.com/worqr/worqr/internal/engine"

// leaseKeeper is the worker's lease component (engine.Keeper): its
// client's beat renews the leases every RenewInterval, its loop registers
// the worker again once it was fenced, and its timer fences the worker,
// or one of its queues, when a lease may have run out. Its deadlines are
// guarded by the worker's mu. The root adds what the worker's own types
// take of it (fence.go, reconcile.go).
type leaseKeeper struct {
	engine.Keeper
}

func newLeaseKeeper(w *Worker) *leaseKeeper {
	k := &leaseKeeper{}
	k.Init((*workerHost)(w), &w.env, &w.registry)
	return k
}
