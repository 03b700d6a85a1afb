package worqr

import "context"

// service runs one background loop of a worker, with a start and a stop:
// the lease keeper and the reclaimer are services.
type service struct {
	cancel context.CancelFunc
	done   chan struct{}
}

// startService runs loop on a goroutine of its own until parent ends or
// the service is stopped.
func startService(parent context.Context, loop func(ctx context.Context)) *service {
	ctx, cancel := context.WithCancel(parent)
	s := &service{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		loop(ctx)
	}()
	return s
}

// stop ends the loop and waits for it to return. It is safe on a nil
// service (never started) and to call twice.
func (s *service) stop() {
	if s == nil {
		return
	}
	s.cancel()
	<-s.done
}
