package proc

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/worqr/worqr/internal/clock"
)

// flusher tells of each time the throttle's timer fired (on a goroutine
// of the fake clock's).
type flusher chan struct{}

func (f flusher) FlushProgress() { f <- struct{}{} }

// The throttle writes the first report at once, holds the ones that come
// within the interval (the last wins), writes the held one when the
// interval has passed, and never once the process ended.
func TestProgressThrottle(t *testing.T) {
	clk := clock.NewFake(time.Unix(1000, 0))
	th := Throttle{Clock: clk, Interval: 100 * time.Millisecond}
	f := make(flusher, 1)
	var s State

	write, ended := s.ReportProgress(th, f, 10, "first")
	require.NoError(t, ended)
	assert.True(t, write, "the first report is written at once")
	write, _ = s.ReportProgress(th, f, 20, "during the write")
	assert.False(t, write, "held: a write is in flight")
	assert.False(t, s.ProgressArmed())
	s.ProgressWritten(th, f)
	assert.True(t, s.ProgressArmed(), "the write that ended rearms for the report held")

	write, _ = s.ReportProgress(th, f, 30, "coalesced")
	assert.False(t, write)
	clk.Advance(100 * time.Millisecond)
	select {
	case <-f:
	case <-time.After(10 * time.Second):
		t.Fatal("the timer did not fire")
	}
	percent, note, ok := s.FlushingProgress(th)
	require.True(t, ok)
	assert.Equal(t, 30, percent)
	assert.Equal(t, "coalesced", note)
	s.ProgressWritten(th, f)
	assert.False(t, s.ProgressArmed(), "nothing held")

	write, _ = s.ReportProgress(th, f, 40, "soon after")
	assert.False(t, write)
	assert.True(t, s.ProgressArmed(), "held until the interval since the last write passed")
	s.End(errA, true)
	assert.False(t, s.ProgressArmed(), "the end disarmed the throttle")
	_, _, ok = s.FlushingProgress(th)
	assert.False(t, ok)
	write, ended = s.ReportProgress(th, f, 50, "after the end")
	assert.False(t, write)
	assert.Equal(t, errA, ended)
	percent, note, ok = s.Progress()
	assert.True(t, ok)
	assert.Equal(t, 50, percent, "kept all the same")
	assert.Equal(t, "after the end", note)
}
