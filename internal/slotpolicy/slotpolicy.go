// Package slotpolicy is the slot scheduler's policy, apart from its state: how
// many slots are free, how free slots are shared among the queues of a
// pool, and what a failed dequeue makes of its queue; and a Concurrency
// option's slots (pool.go). The
// scheduler (the engine's Scheduler, internal/engine) holds the counts
// and calls these.
package slotpolicy

import (
	"errors"

	"github.com/worqr/worqr/internal/errs"
)

// Free is how many of size slots are free with busy handlers running and
// settling outcomes being written: a slot frees when its handler returns,
// while at most size outcomes are being written (a Redis that answers
// slowly holds new starts back rather than gathering unwritten outcomes).
func Free(size, busy, settling int) int {
	return min(size-busy, 2*size-busy-settling)
}

// Share is a number of slots planned for a member (its index).
type Share struct {
	Member int
	N      int
}

// Plan shares n free slots among members with room for them (room, per
// member: 0 for one that has no work or cannot take it), in the order the
// dequeues are to be made, appended to out. Strict fills the first member
// with room first; otherwise each member's part is parts (its share), and
// current is the smooth weighted round robin's state, which Plan updates.
func Plan(strict bool, n int, room, parts, current []int, out []Share) []Share {
	if strict {
		for i := range room {
			if k := min(n, room[i]); k > 0 {
				out = append(out, Share{i, k})
				n -= k
			}
			if n == 0 {
				break
			}
		}
		return out
	}
	// Smooth weighted round robin by tasks: the next slot goes to the
	// member SWRR would give it to, and so do as many more as it has room
	// for, in one dequeue; every member with room is credited its share
	// for each of them and the chosen one debited the total. One slot at a
	// time this is SWRR exactly; in batches the shares stay proportional
	// over time, and each member planned costs one dequeue. A member
	// without room is taken out of the round (its state reset, so it does
	// not come back with a burst).
	chosen := make([]bool, len(room))
	for n > 0 {
		total, best := 0, -1
		for i := range room {
			if room[i] <= 0 || chosen[i] {
				if room[i] <= 0 {
					current[i] = 0
				}
				continue
			}
			total += parts[i]
			if best < 0 || current[i]+parts[i] > current[best]+parts[best] {
				best = i
			}
		}
		if best < 0 {
			break
		}
		k := min(n, room[best])
		for i := range room {
			if room[i] > 0 && !chosen[i] {
				current[i] += k * parts[i]
			}
		}
		current[best] -= k * total
		chosen[best] = true
		out = append(out, Share{best, k})
		n -= k
	}
	return out
}

// Failure is what a failed dequeue makes of its member.
type Failure uint8

const (
	// Empty: no task waits, or the rate limit allows none yet. The
	// member's work flag is cleared until the next work event (a rate
	// limit's wake-up is one).
	Empty Failure = iota
	// Blocked: the worker or the queue is fenced, the worker closed, or
	// the queue no longer served. The member is passed over until the
	// next work event: a rejoin or re-registration raises one.
	Blocked
	// Retry: Redis failed. The member is passed over, while the others
	// are served, and looks again after its backoff.
	Retry
)

// Decide is the one policy for a failed dequeue, whatever the member.
func Decide(err error) Failure {
	switch {
	case errors.Is(err, errs.ErrNoTask), errors.Is(err, errs.ErrRateLimited):
		return Empty
	case errors.Is(err, errs.ErrWorkerFenced), errors.Is(err, errs.ErrWorkerClosed), errors.Is(err, errs.ErrNotServing):
		return Blocked
	}
	return Retry
}
