package lifecycle

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/worqr/worqr/internal/errs"
)

// A worker's identity, phase and fence: a fence is taken only under the
// current id, a registration ends it under a new one, and the phases only
// move forward; what the worker may do follows from them.
func TestWorkerTransitions(t *testing.T) {
	var w Worker
	now := time.Unix(1_700_000_000, 0)
	require.True(t, w.ToRegistered("a"))
	assert.True(t, w.IsCurrent("a"))
	assert.False(t, w.IsCurrent("b"))
	assert.NoError(t, w.TakesWork())
	assert.Equal(t, 24*time.Hour, w.FencedSince(now), "never fenced")

	assert.False(t, w.ToFenced("b", now), "not the current id")
	require.True(t, w.ToFenced("a", now))
	assert.False(t, w.ToFenced("a", now), "fenced already")
	assert.True(t, w.IsFenced())
	assert.False(t, w.IsCurrent("a"))
	assert.ErrorIs(t, w.TakesWork(), errs.ErrWorkerFenced)
	_, err := w.Current("dequeue")
	assert.ErrorIs(t, err, errs.ErrWorkerFenced)
	assert.Equal(t, time.Second, w.FencedSince(now.Add(time.Second)))

	require.True(t, w.ToRegistered("b"))
	assert.Equal(t, "b", w.ID())
	assert.True(t, w.IsCurrent("b"))
	assert.Equal(t, now, w.FencedAt(), "the last fence is remembered")

	w.ToDraining()
	assert.Equal(t, Draining, w.Phase())
	assert.ErrorIs(t, w.TakesWork(), errs.ErrWorkerClosed)
	assert.True(t, w.IsCurrent("b"), "a draining worker still holds its lease")
	id, err := w.Current("finish")
	assert.NoError(t, err)
	assert.Equal(t, "b", id)

	require.True(t, w.ToClosed())
	assert.False(t, w.ToClosed(), "closed already")
	w.ToDraining()
	assert.Equal(t, Closed, w.Phase(), "phases only move forward")
	assert.True(t, w.IsClosed())
	assert.False(t, w.IsCurrent("b"))
	assert.False(t, w.ToRegistered("c"), "a closed worker registers no more")
	_, err = w.Current("finish")
	assert.ErrorIs(t, err, errs.ErrWorkerClosed)
}
