package worqr

import (
	"context"

	"github.com/worqr/worqr/internal/startstop"
)

// service is a background loop of a worker or a client on the one
// lifecycle (startstop.Loop), for the components that start theirs with
// startService: the lease keeper's loop, the beat, the reclaimer and the
// periodic schedules.
type service struct{ *startstop.Loop }

// startService runs loop on a goroutine of its own until parent ends or
// the service is stopped.
func startService(parent context.Context, loop func(ctx context.Context)) *service {
	l := startstop.NewLoop(loop)
	_ = l.Start(parent) // a Loop's Start does not fail
	return &service{l}
}

// stop ends the loop and waits for it to return. It is safe on a nil
// service (never started) and to call twice.
func (s *service) stop() {
	if s == nil {
		return
	}
	s.Stop()
}
