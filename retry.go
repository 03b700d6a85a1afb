package worqr

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/worqr/worqr/internal/store"
)

// Retry defaults.
const (
	// DefaultMaxAttempts is a task's attempt budget when neither
	// RetryPolicy.MaxAttempts nor the MaxAttempts enqueue option sets one.
	DefaultMaxAttempts = 10
	// DefaultBackoffBase and DefaultBackoffCap shape DefaultBackoff.
	DefaultBackoffBase = time.Second
	DefaultBackoffCap  = 10 * time.Minute
	// maxErrorLen bounds the error text recorded with a task.
	maxErrorLen = 4096
	// maxReasonLen bounds a reason.
	maxReasonLen = 64
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
	return func(attempt int, _ error) time.Duration {
		d := limit
		if n := max(attempt-1, 0); base <= limit>>n { // base<<n <= limit, without overflowing
			d = base << n
		}
		span := d // what jitter may take off: d·jitter, at most d
		if f := float64(d) * jitter; f < float64(d) {
			span = time.Duration(f)
		}
		if span <= 0 {
			return d
		}
		return d - time.Duration(rand.Int64N(int64(span))) // in (d-span, d]
	}
}

// retryAfterError asks for a retry after a given delay.
type retryAfterError struct {
	err   error
	after time.Duration
}

func (e retryAfterError) Error() string { return e.err.Error() }
func (e retryAfterError) Unwrap() error { return e.err }

// RetryAfter wraps a handler's error so the task is retried after d (an
// outside service said "retry after 30 s"), instead of after the policy's
// backoff. It still counts against the attempt budget. A nil err gives nil.
func RetryAfter(d time.Duration, err error) error {
	if err == nil {
		return nil
	}
	return retryAfterError{err: err, after: max(d, 0)}
}

// RetryAfterDelay reports the delay err asks for with RetryAfter (the
// outermost, if it was wrapped more than once), and whether it asks for
// one.
func RetryAfterDelay(err error) (time.Duration, bool) {
	var ra retryAfterError
	if errors.As(err, &ra) {
		return ra.after, true
	}
	return 0, false
}

// reasonError gives an error a reason.
type reasonError struct {
	reason string
	err    error
}

func (e reasonError) Error() string { return e.err.Error() }
func (e reasonError) Unwrap() error { return e.err }

// WithReason gives a handler's error a reason: a short word ("timeout",
// "bad-input", "smtp-5xx") that says why its task failed, under which
// dead letters are grouped. A task's kind says what the task is; its
// reason says why it died. A reason is at most 64 bytes of letters,
// digits and "-_."; other bytes become "_". A nil err gives nil.
func WithReason(reason string, err error) error {
	if err == nil {
		return nil
	}
	return reasonError{reason: cleanReason(reason), err: err}
}

// Reasons worqr gives a dead letter whose error has none of its own.
const (
	// ReasonPermanent: the handler returned a Permanent error.
	ReasonPermanent = "permanent"
	// ReasonExhausted: the task failed on its last allowed attempt.
	ReasonExhausted = "exhausted"
	// ReasonPanic: the handler panicked (with PanicIsPermanent, or on its
	// last attempt).
	ReasonPanic = "panic"
	// ReasonManual: DeadLetter was called with an error of no reason.
	ReasonManual = "manual"
	// ReasonTimeout: the task's last attempt ran out of time.
	ReasonTimeout = "timeout"
	// ReasonPoison: its holders died soon after starting it, PoisonLimit
	// times (see Options.PoisonLimit).
	ReasonPoison = "poison"
	// ReasonDecode: its payload did not decode into its typed handler's
	// type (see Typed).
	ReasonDecode = "decode"
	// ReasonUnroutable: a Router had no handler for its task's kind (see
	// ErrUnroutable).
	ReasonUnroutable = "unroutable"
)

// ReasonOf returns the reason err carries, as a dead letter would record
// it: the reason WithReason gave it (the outermost), ReasonPanic for a
// handler's panic (ErrHandlerPanicked), or "" for an error of no reason
// (a dead letter then gets ReasonPermanent, ReasonExhausted or
// ReasonManual, from how it died). A handler whose time ran out fails
// with ReasonTimeout, unless its error gave one.
func ReasonOf(err error) string { return reasonOf(err, "") }

func cleanReason(reason string) string {
	if len(reason) > maxReasonLen {
		reason = reason[:maxReasonLen]
	}
	if reason == "" {
		return "_"
	}
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_', r == '.':
			return r
		}
		return '_'
	}, reason)
}

// Dead-letter defaults.
const (
	// DefaultDeadLetterMaxCount is how many dead letters a queue keeps
	// when DeadLetterOptions.MaxCount is zero; the oldest go first.
	DefaultDeadLetterMaxCount = 10_000
	// DefaultDeadLetterMaxAge is how long a dead letter is kept when
	// DeadLetterOptions.MaxAge is zero.
	DefaultDeadLetterMaxAge = 30 * 24 * time.Hour
)

// DeadLetterOptions bound each queue's dead letters. They are applied
// whenever a task dies: the oldest beyond MaxCount, and those older than
// MaxAge, are removed then.
type DeadLetterOptions struct {
	// MaxCount is the most dead letters a queue keeps. Default
	// DefaultDeadLetterMaxCount.
	MaxCount int
	// MaxAge is how long a dead letter is kept. Default
	// DefaultDeadLetterMaxAge.
	MaxAge time.Duration
}

func (o DeadLetterOptions) bounds() store.DeadBounds {
	b := store.DeadBounds{MaxCount: o.MaxCount, MaxAge: o.MaxAge}
	if b.MaxCount == 0 {
		b.MaxCount = DefaultDeadLetterMaxCount
	}
	if b.MaxAge == 0 {
		b.MaxAge = DefaultDeadLetterMaxAge
	}
	return b
}

// DefaultPoisonLimit is Options.PoisonLimit's default.
const DefaultPoisonLimit = 3

// poisonLimit is the limit the scripts get: 0 turns the guard off.
func poisonLimit(opt int) int {
	switch {
	case opt == 0:
		return DefaultPoisonLimit
	case opt < 0:
		return 0
	}
	return opt
}
