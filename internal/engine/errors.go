package engine

import (
	"errors"
	"strings"
	"time"

	"github.com/worqr/worqr/internal/errs"
)

// The reasons the engine gives a dead letter whose error has none of its
// own; the root package documents them (ReasonPermanent...).
const (
	ReasonPermanent = "permanent"
	ReasonExhausted = "exhausted"
	ReasonPanic     = "panic"
	ReasonTimeout   = "timeout"
)

// reasonError gives an error a reason.
type reasonError struct {
	reason string
	err    error
}

func (e reasonError) Error() string { return e.err.Error() }
func (e reasonError) Unwrap() error { return e.err }

// WithReason gives err the reason reason, cleaned (the root's
// WithReason tells how); nil for a nil err.
func WithReason(reason string, err error) error {
	if err == nil {
		return nil
	}
	return reasonError{reason: cleanReason(reason), err: err}
}

// maxReasonLen bounds a reason.
const maxReasonLen = 64

// cleanReason is reason cut to maxReasonLen bytes, each byte other than
// a letter, a digit or "-_." made '_', and "_" for "".
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

// Reason is err's reason, or fallback.
func Reason(err error, fallback string) string {
	var r reasonError
	if errors.As(err, &r) {
		return r.reason
	}
	if errors.Is(err, errs.ErrHandlerPanicked) {
		return ReasonPanic
	}
	return fallback
}

// permanentError marks a handler error that must not be retried. Its
// text is err's: the dead letter's reason says it was permanent.
type permanentError struct{ err error }

func (e permanentError) Error() string { return e.err.Error() }
func (e permanentError) Unwrap() error { return e.err }

// Permanent marks err as not to be retried; nil for a nil err.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return permanentError{err}
}

// IsPermanent reports whether err was marked with Permanent.
func IsPermanent(err error) bool {
	var p permanentError
	return errors.As(err, &p)
}

// retryAfterError asks for a retry after a given delay.
type retryAfterError struct {
	err   error
	after time.Duration
}

func (e retryAfterError) Error() string { return e.err.Error() }
func (e retryAfterError) Unwrap() error { return e.err }

// RetryAfter asks for err's task to be retried after d (at least 0); nil
// for a nil err.
func RetryAfter(d time.Duration, err error) error {
	if err == nil {
		return nil
	}
	return retryAfterError{err: err, after: max(d, 0)}
}

// RetryAfterDelay reports the delay err asks for with RetryAfter (the
// outermost), and whether it asks for one.
func RetryAfterDelay(err error) (time.Duration, bool) {
	var ra retryAfterError
	if errors.As(err, &ra) {
		return ra.after, true
	}
	return 0, false
}
