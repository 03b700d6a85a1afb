package worqr

// The timer of delayed tasks (internal/delayed) on a Fake clock: its timer is set for a
// delayed task's due time and fires when the clock passes it. The
// promotion itself is promote.lua, on Redis's clock: the test moves
// miniredis's with the client's.

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// long are worker options whose leases outlive the hours a test moves
// its clock by.
var long = WorkerOptions{TTL: 24 * time.Hour, RenewInterval: 8 * time.Hour}

// A delayed task is moved to its queue when the clock passes its due
// time, and not before.
func TestDelayedTaskIsPromotedWhenTheClockPassesItsTime(t *testing.T) {
	t.Parallel()
	k := setupClocked(t)
	k.c.core.Signals.Armed.Init(t)
	k.c.core.Signals.Promoted.Init(t)
	w := newWorker(t, k.c, long)
	require.NoError(t, w.StartWork(k.ctx, "q", Events{}))
	require.NoError(t, second(k.c.Enqueue(k.ctx, "q", []byte("later"), In(time.Hour))))
	require.Equal(t, k.at(time.Hour).UnixMicro(), k.c.core.Signals.Armed.WaitOrTimeout(), "the timer is set for the due time")

	k.advance(time.Hour - time.Millisecond)
	k.c.core.Signals.Promoted.RequireEmpty()
	assert.Empty(t, waiting(t, k.c, "q"), "promoted early")

	k.advance(time.Millisecond)
	require.Equal(t, "q", k.c.core.Signals.Promoted.WaitOrTimeout())
	assert.Equal(t, []string{"later"}, waiting(t, k.c, "q"))
	info, err := k.c.QueueInfo(k.ctx, "q")
	require.NoError(t, err)
	assert.Zero(t, info.Delayed)
}
