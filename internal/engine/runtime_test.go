package engine

// The runtime on its own: a member's periods of taking work and the
// signal that ends each, its room, its drain and its cancel, with no
// scheduler loop.

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
)

// idleMember is a member of a scheduler that is not ready, so its loop
// never starts: StartLoop and StopTaking change only the member.
func idleMember(t *testing.T, size int) *Runtime {
	s := NewScheduler(newTestWorker(t), size, true, false)
	return s.Add("q", func(context.Context, *Proc) error { return nil }, MemberOptions{}, 0, 1)
}

// stopping is closed at once for a member that does not take work; for
// one that does, it is closed when it stops, for every observer; a
// member started again has a new signal, and the old one stays closed.
func TestRuntimeStoppingSignal(t *testing.T) {
	t.Parallel()
	r := idleMember(t, 2)
	assert.True(t, isClosed(r.Stopping()), "not taking work yet")

	r.StartLoop()
	first, second := r.Stopping(), r.Stopping()
	assert.False(t, isClosed(first), "taking work")
	r.StartLoop() // started again while taking: the same period
	assert.Equal(t, first, r.Stopping())

	r.StopTaking()
	assert.True(t, isClosed(first) && isClosed(second), "both observers told")
	r.StopTaking() // a second stop closes nothing twice

	r.StartLoop()
	next := r.Stopping()
	assert.False(t, isClosed(next), "a new period")
	assert.True(t, isClosed(first))
	r.StopTaking()
	assert.True(t, isClosed(next))
}

// A member's room: none unless it takes work, may have tasks and is not
// blocked; then its MaxSlots less what it holds or asks for, or the
// scheduler's size.
func TestRuntimeRoom(t *testing.T) {
	t.Parallel()
	r := idleMember(t, 8)
	room := func() int {
		r.sched.mu.Lock()
		defer r.sched.mu.Unlock()
		return r.roomLocked()
	}
	assert.Zero(t, room(), "not taking work")
	r.StartLoop()
	assert.Equal(t, 8, room(), "taking work, may have tasks: the scheduler's size")
	r.sched.mu.Lock()
	r.blocked = true
	r.sched.mu.Unlock()
	assert.Zero(t, room(), "blocked")
	r.WorkArrived()
	assert.Equal(t, 8, room(), "a work event unblocks it")
	r.sched.mu.Lock()
	r.maxSlots, r.busy, r.asking = 5, 2, 1
	r.sched.mu.Unlock()
	assert.Equal(t, 2, room(), "MaxSlots less the busy and asking slots")
	r.sched.mu.Lock()
	r.more = false
	r.sched.mu.Unlock()
	assert.Zero(t, room(), "no more tasks")
	r.StopTaking()
	r.WorkArrived()
	assert.Zero(t, room(), "stopped: a work event gives no room")
}

// A waiter for a runtime's handlers waits for them all to end once:
// handlers started after that concern later waiters only, and one started
// while it waits delays it.
func TestRuntimeDrainedWaitsForTheHandlersOnce(t *testing.T) {
	r := idleMember(t, 3)
	select {
	case <-r.Drained():
	default:
		t.Fatal("nothing running: drained at once")
	}
	start := func(n int) {
		r.sched.mu.Lock()
		r.busy += n
		r.sched.busy += n
		r.sched.mu.Unlock()
	}
	start(1)
	first := r.Drained()
	start(2) // while first waits
	r.count(-1, 0)
	r.count(-1, 0)
	select {
	case <-first:
		t.Fatal("drained with one still running")
	default:
	}
	r.count(-1, 0)
	recv(t, first, "drained once none runs")
	start(1) // a restarted loop's handler: the old waiter is long gone
	second := r.Drained()
	select {
	case <-second:
		t.Fatal("a new waiter waits for the new handler")
	default:
	}
	r.count(-1, 0)
	recv(t, second, "the new waiter drained")
}

// CancelAll ends the handler contexts of the session's processes with
// its cause; a worker that is not serving (closing) also gives up their
// outcome writes.
func TestRuntimeCancelAll(t *testing.T) {
	t.Parallel()
	for _, closing := range []bool{false, true} {
		r := idleMember(t, 1)
		w := r.host.(*fakeWorker)
		s := w.handle("q", r)
		p := &Proc{ID: "1"}
		s.Books.procs[p.ID] = p
		ctx, cancel := context.WithCancelCause(context.Background())
		p.St.OnEnd(cancel)
		if closing {
			w.state.ToDraining()
		}
		cause := errors.New("stop (test)")
		r.CancelAll(cause)
		assert.ErrorIs(t, context.Cause(ctx), cause)
		assert.Equal(t, closing, isClosed(p.St.Stopped()), "writes given up while closing: %v", closing)
	}
}
