package worqr

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// FindOutcome reads one kept outcome as Outcomes lists it: its result or
// its error cut to the prefix asked, with the whole size; whole without
// one; ErrNoTask for a task that has not ended, one not retained, and an
// unknown id.
func TestFindOutcome(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	w, err := c.NewWorker(ctx, WorkerOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = w.Close(context.Background()) })
	require.NoError(t, w.StartWork(ctx, "q", Events{}))
	done, err := c.Enqueue(ctx, "q", []byte("a"), Retain(time.Hour))
	require.NoError(t, err)
	dead, err := c.Enqueue(ctx, "q", []byte("b"), Retain(time.Hour))
	require.NoError(t, err)
	plain, err := c.Enqueue(ctx, "q", []byte("c")) // not retained
	require.NoError(t, err)
	pending, err := c.Enqueue(ctx, "q", []byte("d"), Retain(time.Hour))
	require.NoError(t, err)
	result := strings.Repeat("r", 100_000)
	for range 3 {
		p, err := w.Dequeue(ctx, "q")
		require.NoError(t, err)
		switch p.TaskID() {
		case dead:
			require.NoError(t, p.DeadLetter(ctx, errors.New("a long error text")))
		default:
			p.SetResult([]byte(result))
			require.NoError(t, p.Finish(ctx))
		}
	}

	o, err := c.FindOutcome(ctx, "q", done, PayloadPrefix(10))
	require.NoError(t, err)
	assert.Equal(t, done, o.ID)
	assert.Equal(t, "q", o.Queue)
	assert.Equal(t, OutcomeSucceeded, o.Status)
	assert.Equal(t, result[:10], string(o.Result))
	assert.Equal(t, len(result), o.Size)
	assert.Equal(t, 1, o.Attempts)
	assert.WithinDuration(t, time.Now().Add(time.Hour), o.ExpiresAt, time.Minute)
	whole, err := c.TaskResult(ctx, "q", done)
	require.NoError(t, err)
	o.Result = whole.Result
	assert.Equal(t, whole, o.TaskOutcome, "TaskResult's outcome, but for the cut")

	o, err = c.FindOutcome(ctx, "q", done)
	require.NoError(t, err)
	assert.Equal(t, result, string(o.Result), "whole without a prefix")
	o, err = c.FindOutcome(ctx, "q", done, PayloadPrefix(0))
	require.NoError(t, err)
	assert.Empty(t, o.Result)
	assert.Equal(t, len(result), o.Size)

	o, err = c.FindOutcome(ctx, "q", dead, PayloadPrefix(4))
	require.NoError(t, err)
	assert.Equal(t, OutcomeDead, o.Status)
	assert.Equal(t, "a lo", o.Error)
	assert.Equal(t, len("a long error text"), o.Size)

	for _, id := range []string{plain, pending, "nope"} {
		_, err = c.FindOutcome(ctx, "q", id, PayloadPrefix(4))
		assert.ErrorIs(t, err, ErrNoTask, id)
	}
	_, err = c.FindOutcome(ctx, "q", "", PayloadPrefix(4))
	assert.ErrorIs(t, err, ErrInvalidOptions)
	_, err = c.FindOutcome(ctx, "q", done, PayloadPrefix(-1))
	assert.ErrorIs(t, err, ErrInvalidOptions)
}
