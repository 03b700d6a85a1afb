package worqr

// The runtime (runtime.go) on its own: a member's periods of taking work
// and the signal that ends each, its room, and its drain, with no
// scheduler loop unless a test starts one.

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/worqr/worqr/internal/clock"
)

// idleMember is a member of a scheduler that is not ready, so its loop
// never starts: startLoop and stopTaking change only the member.
func idleMember(size int) *runner {
	w := &Worker{c: &Client{clock: clock.NewFake(time.Now())}}
	s := newSlotScheduler(w, size, OrderStrict)
	return s.add("q", func(context.Context, *Process) error { return nil }, HandleOptions{}, 0, 1)
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// stopping is closed at once for a member that does not take work; for
// one that does, it is closed when it stops, for every observer; a
// member started again has a new signal, and the old one stays closed.
func TestRuntimeStoppingSignal(t *testing.T) {
	t.Parallel()
	r := idleMember(2)
	assert.True(t, isClosed(r.stopping()), "not taking work yet")

	r.startLoop()
	first, second := r.stopping(), r.stopping()
	assert.False(t, isClosed(first), "taking work")
	r.startLoop() // started again while taking: the same period
	assert.Equal(t, first, r.stopping())

	r.stopTaking()
	assert.True(t, isClosed(first) && isClosed(second), "both observers told")
	r.stopTaking() // a second stop closes nothing twice

	r.startLoop()
	next := r.stopping()
	assert.False(t, isClosed(next), "a new period")
	assert.True(t, isClosed(first))
	r.stopTaking()
	assert.True(t, isClosed(next))
}

// A member's room: none unless it takes work, may have tasks and is not
// blocked; then its MaxSlots less what it holds or asks for, or the
// scheduler's size.
func TestRuntimeRoom(t *testing.T) {
	t.Parallel()
	r := idleMember(8)
	room := func() int {
		r.sched.mu.Lock()
		defer r.sched.mu.Unlock()
		return r.roomLocked()
	}
	assert.Zero(t, room(), "not taking work")
	r.startLoop()
	assert.Equal(t, 8, room(), "taking work, may have tasks: the scheduler's size")
	r.sched.mu.Lock()
	r.blocked = true
	r.sched.mu.Unlock()
	assert.Zero(t, room(), "blocked")
	r.workArrived()
	assert.Equal(t, 8, room(), "a work event unblocks it")
	r.sched.mu.Lock()
	r.maxSlots, r.busy, r.asking = 5, 2, 1
	r.sched.mu.Unlock()
	assert.Equal(t, 2, room(), "MaxSlots less the busy and asking slots")
	r.sched.mu.Lock()
	r.more = false
	r.sched.mu.Unlock()
	assert.Zero(t, room(), "no more tasks")
	r.stopTaking()
	r.workArrived()
	assert.Zero(t, room(), "stopped: a work event gives no room")
}

// drained is closed at once while no handler runs, and, asked while one
// runs, once it has returned and its outcome is written.
func TestRuntimeDrained(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	w := newWorker(t, c, WorkerOptions{})
	started, release := make(chan struct{}), make(chan struct{})
	require.NoError(t, w.Handle(ctx, "q", func(context.Context, *Process) error {
		close(started)
		<-release
		return nil
	}, HandleOptions{Concurrency: 1}))
	r := sessionOf(w, "q").runner
	assert.True(t, isClosed(r.drained()), "no handler yet")

	enqueueNumbered(t, c, "q", 1)
	recv(t, started, 5*time.Second, "the handler")
	d := r.drained()
	assert.False(t, isClosed(d), "a handler runs")
	assert.False(t, r.idle())
	close(release)
	recv(t, d, 5*time.Second, "drained")
	assert.True(t, r.idle())
	assert.Zero(t, queueHolds(t, c, "q"), "its Finish was written before the drain")
}
