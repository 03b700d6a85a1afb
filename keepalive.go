package worqr

// The keepalive: a worker's lease, in the registry and on each queue it
// serves, lasts WorkerOptions.TTL and is renewed every
// WorkerOptions.RenewInterval. The client's beat (internal/beat) sends
// the renewals of all its workers of the same options together, in one
// script call a round on a single Redis (keepalive.lua); each worker's
// lease keeper (internal/engine, renew.go) reads what it renews and takes
// in the answers, which move its fencing deadline and tell the reclaimer
// when the next peer's lease runs out. docs/guarantees.md tells what a
// lease promises.

import "time"

// Worker defaults and limits.
const (
	// DefaultTTL is how long a worker's lease lasts without renewal.
	DefaultTTL = 3 * time.Second
	// DefaultRenewInterval is how often the lease is renewed: half the
	// DefaultTTL.
	DefaultRenewInterval = 1500 * time.Millisecond
	// MinTTL is the shortest TTL accepted.
	MinTTL = time.Second
)
