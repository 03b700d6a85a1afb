package slotpolicy

import (
	"fmt"

	"github.com/worqr/worqr/internal/errs"
)

// Slots is the slots of a Concurrency option (a Handle's or a pool's):
// def for zero.
func Slots(concurrency, def int) (int, error) {
	switch {
	case concurrency == 0:
		return def, nil
	case concurrency < 0:
		return 0, fmt.Errorf("negative concurrency: %w", errs.ErrInvalidOptions)
	}
	return concurrency, nil
}
