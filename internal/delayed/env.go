package delayed

import (
	"log/slog"
	"time"

	"github.com/worqr/worqr/internal/clock"
	"github.com/worqr/worqr/internal/outage"
	"github.com/worqr/worqr/internal/store"
	"github.com/worqr/worqr/internal/testsignal"
)

// Env is what a worker's timers take of it.
type Env struct {
	Clock  clock.Clock // the client's
	Redis  *RedisClock // the worker's estimate of the Redis clock
	Store  *store.Store
	Outage *outage.Outage
	// Fail wraps an error of the call op on queue as the client's errors
	// say it.
	Fail func(op, queue string, err error) error
	// Log is the worker's logger.
	Log func() *slog.Logger
	// TTL bounds a promotion: an answer after it is useless.
	TTL time.Duration
	// Armed and Promoted are the test signals of a timer set (the due
	// time) and of a promotion run (the queue).
	Armed    *testsignal.Signal[int64]
	Promoted *testsignal.Signal[string]
}
