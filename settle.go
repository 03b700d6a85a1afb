package worqr

import (
	"fmt"
	"time"

	"github.com/worqr/worqr/internal/engine"
	"github.com/worqr/worqr/internal/proc"
)

// The retry policy (RetryPolicy, its backoffs, RetryAfter). Its decision
// for a handler that failed, and the scripts that end a process, are
// internal/engine's (the settler, engine.Settler).

// Retry defaults.
const (
	// DefaultMaxAttempts is a task's attempt budget when neither
	// RetryPolicy.MaxAttempts nor the MaxAttempts enqueue option sets one.
	DefaultMaxAttempts = 10
	// DefaultBackoffBase and DefaultBackoffCap shape DefaultBackoff.
	DefaultBackoffBase = time.Second
	DefaultBackoffCap  = 10 * time.Minute
)

// RetryPolicy says how a Handle runtime retries a task whose handler
// failed. The zero value is the default: DefaultMaxAttempts attempts,
// DefaultBackoff between them.
type RetryPolicy struct {
	// MaxAttempts is the attempt budget: a task whose MaxAttempts-th
	// attempt failed goes to the dead letters. Only attempts that failed
	// count (the handler returned an error, or Retry was called): a start
	// whose worker died or was fenced, or that shutdown or StopWork gave
	// back, does not, so persistent tasks survive any number of restarts.
	// A task's own MaxAttempts enqueue option overrides it. 0 means
	// DefaultMaxAttempts; negative means no limit.
	MaxAttempts int
	// Backoff is the delay before the next attempt, given the attempt that
	// failed (1 for the first) and its error. Nil means DefaultBackoff. A
	// handler's RetryAfter error overrides it for that retry.
	Backoff func(attempt int, err error) time.Duration
}

// DefaultBackoff is exponential with jitter and a cap: about
// DefaultBackoffBase after the first failure, doubling with each, at most
// DefaultBackoffCap, each delay drawn between half and all of that so that
// tasks that failed together do not come back together. It is
// ExponentialBackoff(DefaultBackoffBase, DefaultBackoffCap, 0.5).
func DefaultBackoff(attempt int, err error) time.Duration {
	return defaultBackoff(attempt, err)
}

var defaultBackoff = ExponentialBackoff(DefaultBackoffBase, DefaultBackoffCap, 0.5)

// ExponentialBackoff returns a RetryPolicy.Backoff: base after the first
// failed attempt, doubling with each one after, never more than limit
// (however many attempts), with up to jitter (0 to 1) of each delay taken
// off at random: a delay is drawn between (1-jitter) and all of it, never
// 0, so that tasks that failed together do not all come back together.
// A jitter of 0 gives exactly base, 2·base, 4·base... It panics, with an
// error that errors.Is matches to ErrInvalidOptions, unless
// 0 < base <= limit and 0 <= jitter <= 1: like a regular expression
// given to regexp.MustCompile, its arguments are the program's own.
func ExponentialBackoff(base, limit time.Duration, jitter float64) func(attempt int, err error) time.Duration {
	if base <= 0 || limit < base || !(jitter >= 0 && jitter <= 1) {
		panic(fmt.Errorf("worqr: ExponentialBackoff(%v, %v, %v): %w: want 0 < base <= limit and 0 <= jitter <= 1", base, limit, jitter, ErrInvalidOptions))
	}
	return proc.Exponential(base, limit, jitter)
}

// RetryAfter wraps a handler's error so the task is retried after d (an
// outside service said "retry after 30 s"), instead of after the policy's
// backoff. It still counts against the attempt budget. A nil err gives nil.
func RetryAfter(d time.Duration, err error) error {
	return engine.RetryAfter(d, err)
}

// RetryAfterDelay reports the delay err asks for with RetryAfter (the
// outermost, if it was wrapped more than once), and whether it asks for
// one.
func RetryAfterDelay(err error) (time.Duration, bool) { return engine.RetryAfterDelay(err) }

// delay is the policy's delay before the attempt after attempt.
func (r RetryPolicy) delay(attempt int, err error) time.Duration {
	if d, ok := RetryAfterDelay(err); ok {
		return d
	}
	if r.Backoff != nil {
		return max(r.Backoff(attempt, err), 0)
	}
	return DefaultBackoff(attempt, err)
}
