package worqr

// Why a task died, and what its queue keeps of it: the reasons of dead
// letters (WithReason, ReasonOf), the bounds of a queue's dead letters,
// and the poison limit. When a failed task dies is the
// retry policy's (settle.go) and its settler's (internal/engine).

import (
	"time"

	"github.com/worqr/worqr/internal/engine"
	"github.com/worqr/worqr/internal/store"
)

// WithReason gives a handler's error a reason: a short word ("timeout",
// "bad-input", "smtp-5xx") that says why its task failed, under which
// dead letters are grouped. A task's kind says what the task is; its
// reason says why it died. A reason is at most 64 bytes of letters,
// digits and "-_."; other bytes become "_". A nil err gives nil.
func WithReason(reason string, err error) error { return engine.WithReason(reason, err) }

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
func ReasonOf(err error) string { return engine.Reason(err, "") }

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
