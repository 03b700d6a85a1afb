package engine

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/worqr/worqr/internal/errs"
)

// A reason is the outermost one given, through any wrapping; a panic
// that carries none has the panic's; anything else the fallback.
func TestReasonOutermostThenPanicThenFallback(t *testing.T) {
	t.Parallel()
	base := errors.New("boom")
	assert.Equal(t, "outer", Reason(fmt.Errorf("w: %w", WithReason("outer", WithReason("inner", base))), "f"))
	assert.Equal(t, ReasonPanic, Reason(fmt.Errorf("%w: x", errs.ErrHandlerPanicked), "f"))
	assert.Equal(t, "given", Reason(WithReason("given", fmt.Errorf("%w: x", errs.ErrHandlerPanicked)), "f"))
	assert.Equal(t, "f", Reason(base, "f"))
	assert.NoError(t, WithReason("r", nil))
}

// Permanent is seen through wrapping, keeps its error's text and chain,
// and a nil error stays nil.
func TestPermanentThroughWrapping(t *testing.T) {
	t.Parallel()
	base := errors.New("bad input")
	p := Permanent(base)
	assert.True(t, IsPermanent(fmt.Errorf("w: %w", p)))
	assert.False(t, IsPermanent(base))
	assert.Equal(t, "bad input", p.Error())
	assert.ErrorIs(t, p, base)
	assert.NoError(t, Permanent(nil))
}

// RetryAfterDelay gives the outermost delay asked for, never negative,
// and nothing for an error that asks none.
func TestRetryAfterDelayOutermost(t *testing.T) {
	t.Parallel()
	base := errors.New("busy")
	d, ok := RetryAfterDelay(fmt.Errorf("w: %w", RetryAfter(time.Second, RetryAfter(time.Minute, base))))
	assert.True(t, ok)
	assert.Equal(t, time.Second, d)
	d, ok = RetryAfterDelay(RetryAfter(-time.Second, base))
	assert.True(t, ok)
	assert.Equal(t, time.Duration(0), d)
	_, ok = RetryAfterDelay(base)
	assert.False(t, ok)
	assert.ErrorIs(t, RetryAfter(time.Second, base), base)
	assert.NoError(t, RetryAfter(time.Second, nil))
}
