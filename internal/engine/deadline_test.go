package engine

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/worqr/worqr/internal/clock"
	"github.com/worqr/worqr/internal/subscription"
	"github.com/worqr/worqr/internal/testsignal"
)

// The timer fences, at its own deadline, a session whose lease on its
// queue may have run out while the registry lease is fine, and not the
// worker.
func TestDeadlineFencesADueSession(t *testing.T) {
	t.Parallel()
	w := newFakeWorker(t, testID)
	t0 := w.clk.Now()
	var d Deadline
	d.Init(w, w.clk, time.Second, func(id string, _ error) { w.workerFenced.Signal(id) })
	var events testsignal.Signal[subscription.Event]
	s := w.serve(t, "q", t0.Add(500*time.Millisecond), &events)
	w.Lock()
	d.Extend(t0) // the registry lease: 900 ms
	w.Unlock()

	w.clk.Advance(499 * time.Millisecond)
	assert.Equal(t, 1, w.clk.Timers(), "the timer fired before the session's deadline")
	w.clk.Advance(time.Millisecond)
	told := w.fenced.WaitOrTimeout()
	assert.Equal(t, "q", told.queue)
	assert.Equal(t, testID, told.id)
	assert.True(t, s.Lease.IsFenced())
	assert.Empty(t, w.workerFenced.C(), "the worker fenced itself for a session's lease")
}

// The registry lease's deadline is TTL less the margin after the last
// renewal that succeeded was sent, and the timer fences the whole worker
// then, under its current id.
func TestDeadlineFencesTheWorker(t *testing.T) {
	t.Parallel()
	w := newFakeWorker(t, testID)
	t0 := w.clk.Now()
	var d Deadline
	d.Init(w, w.clk, time.Second, func(id string, _ error) { w.workerFenced.Signal(id) })
	w.Lock()
	d.Extend(t0)
	d.Extend(t0.Add(200 * time.Millisecond)) // a later renewal
	at := d.At()
	w.Unlock()
	require.Equal(t, t0.Add(1100*time.Millisecond), at)

	w.clk.Advance(1099 * time.Millisecond)
	assert.Equal(t, 1, w.clk.Timers(), "the timer fired before the deadline")
	assert.Empty(t, w.workerFenced.C())
	w.clk.Advance(time.Millisecond)
	assert.Equal(t, testID, w.workerFenced.WaitOrTimeout())
}

// Arming the timer allocates nothing: it runs on every renewal answered,
// under the worker's mu.
func TestDeadlineArmAllocatesNothing(t *testing.T) {
	w := newFakeWorker(t, testID)
	// Every deadline an hour off on the Deadline's own clock: a session's
	// on the fake worker's clock would be long past by the real one, and
	// the timer would fence the sessions while the test ends.
	far := time.Now().Add(time.Hour)
	var d Deadline
	d.Init(w, clock.Real(), time.Hour, func(string, error) {})
	defer d.Disarm()
	w.Lock()
	defer w.Unlock()
	for _, q := range []string{"a", "b", "c"} {
		s := &Session{}
		s.Init(w, &w.env, q, Events{}, nil, far, nil)
		w.sessions[q] = s
	}
	d.at = far
	d.Arm()
	assert.Zero(t, testing.AllocsPerRun(100, d.Arm), "arming the deadline timer allocated")
}
