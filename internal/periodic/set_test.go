package periodic

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/worqr/worqr/internal/clock"
	"github.com/worqr/worqr/internal/delayed"
)

// The worker's set of schedules on its own: one runs per queue and name;
// once closed (the worker drains) it stops those running and starts none.
// The schedules wait for their first tick on a clock that never moves.
func TestSetClosedStartsNone(t *testing.T) {
	start := time.Date(2026, 3, 4, 10, 0, 0, 0, time.UTC)
	log := slog.New(slog.DiscardHandler)
	env := &Env{Clock: clock.NewFake(start), Redis: &delayed.RedisClock{}, Log: func() *slog.Logger { return log }}
	mk := func(name string) *Periodic {
		return New(env, "q", name, every(time.Hour), nil, Options{})
	}
	life := context.Background()
	var ps Set
	a := Key{"q", "a"}
	ok, closed := ps.Start(a, mk("a"), life, start)
	require.True(t, ok)
	require.False(t, closed)
	ok, _ = ps.Start(a, mk("a"), life, start)
	assert.False(t, ok, "a second schedule under the same key")
	assert.True(t, ps.Has(a))

	ps.Close()
	assert.False(t, ps.Has(a), "stopped by the close")
	assert.False(t, ps.Stop(a))
	ok, closed = ps.Start(Key{"q", "b"}, mk("b"), life, start)
	assert.False(t, ok)
	assert.True(t, closed, "none starts once closed")
}
