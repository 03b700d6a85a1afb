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

// Member is one queue of a pool (the root's QueueSpec) as the pool's
// checks see it.
type Member struct {
	Queue          string
	Handler, Batch bool // which handlers are set
	// BatchOptions and Options say whether those options are set (not
	// zero); BatchProblem is what is wrong with the batch handler's
	// options, "" if nothing.
	BatchOptions, Options bool
	BatchProblem          string
	Share, MaxSlots       int
	Concurrency           int // its own options' Concurrency
}

// CheckPool checks a pool's queues and options (HandleQueues') and
// returns its slots: concurrency, or def for zero. An order not known is
// named in its error.
func CheckPool(queues []Member, concurrency, def int, order fmt.Stringer, known bool) (int, error) {
	if len(queues) == 0 {
		return 0, fmt.Errorf("worqr: handle queues: no queue: %w", errs.ErrInvalidOptions)
	}
	size, err := Slots(concurrency, def)
	if err != nil {
		return 0, fmt.Errorf("worqr: handle queues: %w", err)
	}
	if !known {
		return 0, fmt.Errorf("worqr: handle queues: unknown order %v: %w", order, errs.ErrInvalidOptions)
	}
	seen := make(map[string]bool, len(queues))
	for _, q := range queues {
		switch {
		case !q.Handler && !q.Batch:
			return 0, fmt.Errorf("worqr: handle queues: %q: nil handler: %w", q.Queue, errs.ErrInvalidOptions)
		case q.Handler && q.Batch:
			return 0, fmt.Errorf("worqr: handle queues: %q: both Handler and Batch are set: %w", q.Queue, errs.ErrInvalidOptions)
		case !q.Batch && q.BatchOptions:
			return 0, fmt.Errorf("worqr: handle queues: %q: BatchOptions without Batch: %w", q.Queue, errs.ErrInvalidOptions)
		case q.Batch && q.Options:
			// One set of options per queue: a batched queue's are its
			// BatchOptions, as for HandleBatch.
			return 0, fmt.Errorf("worqr: handle queues: %q: Options set on a batched queue (its options are BatchOptions): %w", q.Queue, errs.ErrInvalidOptions)
		case q.Batch && q.BatchProblem != "":
			return 0, fmt.Errorf("worqr: handle queues: %q: batch: %s: %w", q.Queue, q.BatchProblem, errs.ErrInvalidOptions)
		case q.Share < 0:
			return 0, fmt.Errorf("worqr: handle queues: %q: negative share: %w", q.Queue, errs.ErrInvalidOptions)
		case q.MaxSlots < 0:
			return 0, fmt.Errorf("worqr: handle queues: %q: negative max slots: %w", q.Queue, errs.ErrInvalidOptions)
		case q.Concurrency != 0:
			// The pool's slots are its own Concurrency; a queue's share
			// of them is MaxSlots.
			return 0, fmt.Errorf("worqr: handle queues: %q: Options.Concurrency is set (a queue's cap in a pool is MaxSlots): %w", q.Queue, errs.ErrInvalidOptions)
		case seen[q.Queue]:
			return 0, fmt.Errorf("worqr: handle queues: %q given twice: %w", q.Queue, errs.ErrInvalidOptions)
		}
		seen[q.Queue] = true
	}
	return size, nil
}
