// Package controls is what a change of a queue's controls (pause,
// limits, rates, a group's settings, aggregation) is given and checked
// with: a control's options (the root's ControlOption values set them),
// the check of a rate limit, and the run of one change, whose store call
// is told whether to make the queue and whose errors are said once. The
// store's scripts do the change.
package controls

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/worqr/worqr/internal/errs"
	"github.com/worqr/worqr/internal/store"
)

// MaxLimit is the largest concurrency or rate limit a queue takes (the
// root's, by the same name).
const MaxLimit = 1<<53 - 1

// Options are a control call's options.
type Options struct {
	Create bool // make the queue if it does not exist
}

// CheckRate refuses a rate limit Redis could not keep as given: a count
// outside 0..MaxLimit, or a window under a millisecond or not a whole
// number of them (Redis keeps whole milliseconds: 1.5ms would be 1ms).
func CheckRate(n int, per time.Duration) error {
	if n < 0 || int64(n) > MaxLimit || (n > 0 && (per < time.Millisecond || per%time.Millisecond != 0)) {
		return fmt.Errorf("%d per %v (the count in 0..%d, the window whole milliseconds, at least 1ms): %w", n, per, int64(MaxLimit), errs.ErrInvalidOptions)
	}
	return nil
}

// Run runs one change op of queue's controls, after validate passed it
// (set: the store's call, told whether to make the queue), and says its
// error once.
func Run[O ~func(*Options)](ctx context.Context, validate func(ctx context.Context, op, queue string) error, op, queue string, opts []O, set func(create bool) error) error {
	if err := validate(ctx, op, queue); err != nil {
		return err
	}
	var o Options
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	err := set(o.Create)
	switch {
	case errors.Is(err, store.ErrNoQueue):
		return fmt.Errorf("worqr: %s %q: %w (CreateQueue makes it)", op, queue, errs.ErrNoQueue)
	case err != nil:
		return store.Fail(op, queue, err)
	}
	return nil
}
