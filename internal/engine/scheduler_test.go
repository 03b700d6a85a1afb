package engine

// The slot scheduler on its own: its plan, its counts, its wake-ups and
// one pass of its loop (fill), with no loop running.

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/worqr/worqr/internal/slotpolicy"
)

// schedulerOf makes a slot scheduler of size slots, not started, with a
// member per weight (named A, B, ...; maxSlots from caps), each taking
// work and marked as maybe having tasks.
func schedulerOf(t *testing.T, strict bool, size int, weights, caps []int) *Scheduler {
	s := NewScheduler(newTestWorker(t), size, strict, false)
	for i, weight := range weights {
		r := s.Add(string(rune('A'+i)), nil, MemberOptions{}, caps[i], weight)
		r.takes, r.more = true, true
	}
	return s
}

// planned is the scheduler's plan for n free slots, as "A2 B3".
func planned(s *Scheduler, n int) string {
	s.mu.Lock()
	room := make([]int, len(s.members))
	for i, r := range s.members {
		room[i] = r.roomLocked()
	}
	s.mu.Unlock()
	var parts []string
	for _, sh := range slotpolicy.Plan(s.strict, n, room, s.parts, s.current, nil) {
		parts = append(parts, fmt.Sprintf("%s%d", s.members[sh.Member].queue, sh.N))
	}
	return strings.Join(parts, " ")
}

// The plan of a scheduler's members: a member's room is what it may take
// (its MaxSlots), and none for one that does not take work, has none, or
// is blocked; the sharing itself is internal/slotpolicy's.
func TestSchedulerPlan(t *testing.T) {
	t.Parallel()
	s := schedulerOf(t, true, 5, []int{1, 1, 1}, []int{2, 0, 0})
	assert.Equal(t, "A2 B3", planned(s, 5), "strict: the first queue up to its MaxSlots, the rest to the next")
	s.members[0].more = false
	assert.Equal(t, "B5", planned(s, 5), "strict: a queue without work is passed over")
	s.members[1].blocked = true
	assert.Equal(t, "C5", planned(s, 5), "strict: a blocked queue is passed over")
	s.members[2].takes = false
	assert.Empty(t, planned(s, 5), "a queue that stopped taking has no room")

	s = schedulerOf(t, false, 4, []int{3, 1}, []int{0, 0})
	var seq []string
	for range 4 {
		seq = append(seq, planned(s, 1))
	}
	assert.Equal(t, "A1 A1 B1 A1", strings.Join(seq, " "), "shared: by the members' shares")
}

// One set of counts: a member's share and the scheduler's move together,
// the free slots are bounded by the handlers running and by the outcomes
// being written, a hand-off's claim never takes a slot a dequeue in flight
// asked for nor goes past the member's MaxSlots, and a member's drain
// waits for its own handlers only.
func TestSchedulerCounts(t *testing.T) {
	t.Parallel()
	s := schedulerOf(t, true, 2, []int{1, 1}, []int{0, 1})
	a, b := s.members[0], s.members[1]
	counts := func() string {
		s.mu.Lock()
		defer s.mu.Unlock()
		return fmt.Sprintf("%+v a%+v b%+v", s.slots, a.slots, b.slots)
	}

	room := make([]int, 2)
	n := s.reserve(room)
	assert.Equal(t, 2, n, "both slots free")
	assert.Equal(t, []int{2, 1}, room, "b's MaxSlots is 1")
	_, ok := a.starter.claim()
	assert.False(t, ok, "a hand-off does not take a slot a dequeue asked for")
	s.mu.Lock()
	s.asking -= n // the dequeues came back with nothing
	s.mu.Unlock()

	_, ok = b.starter.claim()
	require.True(t, ok)
	_, ok = b.starter.claim()
	assert.False(t, ok, "b is at its MaxSlots")
	assert.True(t, b.Full())
	assert.False(t, a.Full())
	_, ok = a.starter.claim()
	require.True(t, ok)
	assert.Equal(t, "{busy:2 settling:0 asking:0} a{busy:1 settling:0 asking:0} b{busy:1 settling:0 asking:0}", counts())
	assert.True(t, a.Full(), "every slot taken")
	assert.Zero(t, a.Free())

	drainedA := a.Drained()
	a.count(-1, +1) // a's handler returned; its outcome is being written
	assert.Equal(t, "{busy:1 settling:1 asking:0} a{busy:0 settling:1 asking:0} b{busy:1 settling:0 asking:0}", counts())
	assert.Equal(t, 1, a.Free(), "a slot frees when its handler returns")
	select {
	case <-drainedA:
		t.Fatal("drained while a's outcome is being written")
	default:
	}
	assert.False(t, a.Idle())

	quit, ok := a.starter.claim()
	require.True(t, ok)
	select {
	case <-quit:
	default:
		t.Fatal("the loop does not run: a new handler goroutine leaves after its job")
	}
	a.count(-1, +1)
	b.count(-1, +1)
	assert.Equal(t, "{busy:0 settling:3 asking:0} a{busy:0 settling:2 asking:0} b{busy:0 settling:1 asking:0}", counts())
	assert.Equal(t, 1, slotpolicy.Free(s.size, s.busy, s.settling), "at most size outcomes unwritten besides the handlers")

	a.starter.settled(job{st: &a.starter, cancel: func(error) {}})
	a.starter.settled(job{st: &a.starter, cancel: func(error) {}})
	recv(t, drainedA, "a drained once its outcomes are written")
	assert.True(t, a.Idle())
	assert.False(t, b.Idle(), "b's outcome is still being written")
	b.starter.settled(job{st: &b.starter, cancel: func(error) {}})
	assert.Equal(t, "{busy:0 settling:0 asking:0} a{busy:0 settling:0 asking:0} b{busy:0 settling:0 asking:0}", counts())
}

// A slot that frees wakes the loop only when a member may take it.
func TestSchedulerWakesOnlyForAMemberWithWork(t *testing.T) {
	t.Parallel()
	s := schedulerOf(t, true, 2, []int{1}, []int{0})
	r := s.members[0]
	woken := func() bool {
		select {
		case <-s.wake:
			return true
		default:
			return false
		}
	}
	_, ok := r.starter.claim()
	require.True(t, ok)
	r.count(-1, +1)
	assert.True(t, woken(), "a slot freed while the queue may hold tasks")
	r.clearMore(r.gen)
	r.starter.settled(job{st: &r.starter, cancel: func(error) {}})
	assert.False(t, woken(), "nothing to plan: the queue looked empty")
	r.WorkArrived()
	assert.True(t, woken(), "a work event")
}

// One pass of the loop (fill): it reserves the free slots, plans them by
// its order and dequeues for each member planned. A member whose dequeue
// is refused (its queue not served) is passed over until a work event,
// and one that got fewer tasks than it asked for (its queue ran out)
// until it may have work again: the next passes plan the slots for the
// others, then for none, and every slot asked for is free again.
func TestSchedulerFillOnce(t *testing.T) {
	t.Parallel()
	s := schedulerOf(t, true, 3, []int{1, 1}, []int{0, 0})
	a, b := s.members[0], s.members[1]
	w := s.host.(*fakeWorker)
	w.refuse = errRefused // B's outcome is looked at, not written
	b.call = func(context.Context, *Proc) error { return nil }
	w.handle("B", b) // A is not served
	joined(t, w, "B", "one")
	flags := func(r *Runtime) string {
		s.mu.Lock()
		defer s.mu.Unlock()
		return fmt.Sprintf("more:%v blocked:%v", r.more, r.blocked)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel() // B's handler goroutine leaves
	assert.True(t, s.fill(ctx), "A took none of its 3 slots: plan again")
	assert.Equal(t, "more:true blocked:true", flags(a))
	assert.Equal(t, "more:true blocked:false", flags(b), "B not planned yet: strict order")
	assert.True(t, s.fill(ctx), "B took 1 of its 3 slots: plan again")
	assert.Equal(t, "more:false blocked:false", flags(b), "B's queue ran out, and B is planned for again")
	assert.False(t, s.fill(ctx), "nothing to plan")
	recv(t, b.Drained(), "B's handler settled")
	s.mu.Lock()
	assert.Equal(t, slots{}, s.slots, "every slot asked for is free again")
	s.mu.Unlock()
}
