package slotpolicy

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/worqr/worqr/internal/errs"
)

// planned is a plan as "A2 B3", members named A, B, ...
func planned(shares []Share) string {
	var parts []string
	for _, sh := range shares {
		parts = append(parts, fmt.Sprintf("%c%d", 'A'+sh.Member, sh.N))
	}
	return strings.Join(parts, " ")
}

// Strict fills the first member with room first, and passes over one with
// none.
func TestPlanStrict(t *testing.T) {
	parts, current := []int{1, 1, 1}, make([]int, 3)
	assert.Equal(t, "A2 B3", planned(Plan(true, 5, []int{2, 9, 9}, parts, current, nil)))
	assert.Equal(t, "B5", planned(Plan(true, 5, []int{0, 9, 9}, parts, current, nil)))
	assert.Equal(t, "B1 C2", planned(Plan(true, 5, []int{0, 1, 2}, parts, current, nil)), "less room than slots")
	assert.Empty(t, planned(Plan(true, 5, []int{0, 0, 0}, parts, current, nil)))
}

// Shared is smooth weighted round robin one slot at a time, and in batches
// keeps the shares over time; a member without room leaves the round and
// comes back without a burst.
func TestPlanShared(t *testing.T) {
	parts, current := []int{3, 1}, make([]int, 2)
	var seq []string
	for range 8 {
		seq = append(seq, planned(Plan(false, 1, []int{9, 9}, parts, current, nil)))
	}
	assert.Equal(t, "A1 A1 B1 A1 A1 A1 B1 A1", strings.Join(seq, " "), "one slot at a time")

	parts, current = []int{3, 2, 1}, make([]int, 3)
	got := make([]int, 3)
	for i := range 200 {
		for _, sh := range Plan(false, 1+i%5, []int{60, 60, 60}, parts, current, nil) { // batches of 1 to 5
			got[sh.Member] += sh.N
		}
	}
	total := float64(got[0] + got[1] + got[2])
	assert.InDelta(t, 3.0/6, float64(got[0])/total, 0.02, "%v", got)
	assert.InDelta(t, 2.0/6, float64(got[1])/total, 0.02, "%v", got)
	assert.InDelta(t, 1.0/6, float64(got[2])/total, 0.02, "%v", got)

	parts, current = []int{1, 1}, []int{5, -5}
	assert.Equal(t, "B1", planned(Plan(false, 1, []int{0, 9}, parts, current, nil)))
	assert.Zero(t, current[0], "a member without room is out of the round, its credit gone")
}

// At most size outcomes unwritten besides the handlers running.
func TestFree(t *testing.T) {
	assert.Equal(t, 2, Free(2, 0, 0))
	assert.Equal(t, 1, Free(2, 1, 1))
	assert.Equal(t, 1, Free(2, 0, 3), "three outcomes being written")
	assert.Equal(t, 0, Free(2, 0, 4))
	assert.Equal(t, 0, Free(2, 2, 0))
}

// The one policy for a failed dequeue, whatever the member.
func TestDecide(t *testing.T) {
	for err, want := range map[error]Failure{
		fmt.Errorf("worqr: dequeue %q: %w", "q", errs.ErrNoTask):       Empty,
		fmt.Errorf("worqr: dequeue %q: %w", "q", errs.ErrRateLimited):  Empty,
		fmt.Errorf("worqr: dequeue %q: %w", "q", errs.ErrWorkerFenced): Blocked,
		fmt.Errorf("worqr: dequeue %q: %w", "q", errs.ErrWorkerClosed): Blocked,
		fmt.Errorf("worqr: dequeue %q: %w", "q", errs.ErrNotServing):   Blocked,
		fmt.Errorf("worqr: dequeue %q: %w", "q", errs.ErrUnavailable):  Retry,
		errors.New("WRONGTYPE Operation against a key"):                Retry,
	} {
		assert.Equal(t, want, Decide(err), "%v", err)
	}
}
