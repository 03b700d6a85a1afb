package engine

// A member's slots on their own: two shares of one scheduler's slots,
// with no Runtime and no loop.

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
)

// A member's counts move with the scheduler's; what it may start is
// bounded by its cap and by the scheduler's free slots, which the other
// member's handlers and every unwritten outcome take too; its drain waits
// for its own handlers and their outcomes, once.
func TestMemberSlots(t *testing.T) {
	t.Parallel()
	s := NewScheduler(newTestWorker(t), 3, true, false)
	a := &memberSlots{sched: s, maxSlots: 2}
	b := &memberSlots{sched: s}
	state := func() string {
		s.mu.Lock()
		defer s.mu.Unlock()
		return fmt.Sprintf("%+v a%+v b%+v", s.slots, a.slots, b.slots)
	}
	free := func() string {
		return fmt.Sprintf("a:%d/%v b:%d/%v", a.Free(), a.Full(), b.Free(), b.Full())
	}

	assert.True(t, isClosed(a.Drained()), "nothing running: drained at once")
	assert.True(t, a.Idle())
	assert.Equal(t, "a:2/false b:3/false", free(), "a's cap, b the scheduler's size")

	a.count(2, 0)
	assert.Equal(t, "a:0/true b:1/false", free(), "a at its cap; one slot left for b")
	b.count(1, 0)
	assert.Equal(t, "a:0/true b:0/true", free(), "every slot taken")
	assert.Equal(t, "{busy:3 settling:0 asking:0} a{busy:2 settling:0 asking:0} b{busy:1 settling:0 asking:0}", state())

	d := a.Drained()
	assert.False(t, isClosed(d))
	assert.False(t, a.Idle())
	a.count(-2, +2) // a's handlers returned; their outcomes are being written
	busy, settling := a.Counts()
	assert.Equal(t, [2]int{0, 2}, [2]int{busy, settling})
	assert.Equal(t, "a:2/false b:2/false", free(), "a returned handler frees its slot")
	assert.False(t, isClosed(d), "not drained while an outcome is being written")
	b.count(-1, +1)
	assert.Equal(t, "{busy:0 settling:3 asking:0} a{busy:0 settling:2 asking:0} b{busy:0 settling:1 asking:0}", state())
	assert.Equal(t, "a:2/false b:3/false", free(), "at most size outcomes unwritten besides the handlers")

	a.count(0, -1)
	assert.False(t, isClosed(d), "one of a's outcomes still being written")
	a.count(0, -1)
	recv(t, d, "a drained once its outcomes are written")
	assert.True(t, a.Idle())
	assert.False(t, b.Idle(), "b's outcome is still being written")
	assert.True(t, isClosed(a.Drained()), "nothing running: a new waiter is drained at once")
	assert.Equal(t, "{busy:0 settling:1 asking:0} a{busy:0 settling:0 asking:0} b{busy:0 settling:1 asking:0}", state())

	a.count(1, 0)
	again := a.Drained()
	assert.False(t, isClosed(again), "the closed drain is forgotten: a new waiter waits for the new handler")
	a.count(-1, 0)
	recv(t, again, "the new waiter drained")
}
