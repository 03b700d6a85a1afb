package worqr

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A worker records its handler slots per queue (a Handle's concurrency,
// a HandleQueues pool's size) as it starts and stops handling a queue, so
// that another process's client reads them in Workers; a queue served
// with StartWork alone has none, and the record goes with the worker.
func TestWorkersShowSlotsAcrossProcesses(t *testing.T) {
	t.Parallel()
	b, c, ctx := setup(t)
	other := b.client() // another process, as far as Redis can tell
	w, err := c.NewWorker(ctx, WorkerOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = w.Close(context.WithoutCancel(ctx)) })
	slotsOf := func(id string) ([]QueueSlots, bool) {
		t.Helper()
		ws, err := other.Workers(ctx)
		require.NoError(t, err)
		for _, wi := range ws {
			if wi.ID == id {
				return wi.Slots, true
			}
		}
		return nil, false
	}
	h := func(context.Context, *Process) error { return nil }

	require.NoError(t, w.StartWork(ctx, "manual", Events{}))
	got, ok := slotsOf(w.ID())
	require.True(t, ok)
	assert.Empty(t, got, "StartWork alone: no handler slots")

	require.NoError(t, w.Handle(ctx, "a", h, HandleOptions{Concurrency: 3}))
	require.NoError(t, w.HandleQueues(ctx, []QueueSpec{{Queue: "c", Handler: h}, {Queue: "b", Handler: h}}, PoolOptions{Concurrency: 5}))
	got, _ = slotsOf(w.ID())
	assert.Equal(t, []QueueSlots{{Queue: "a", Slots: 3}, {Queue: "b", Slots: 5}, {Queue: "c", Slots: 5}}, got)

	require.NoError(t, w.StopWork(ctx, "a"))
	got, _ = slotsOf(w.ID())
	assert.Equal(t, []QueueSlots{{Queue: "b", Slots: 5}, {Queue: "c", Slots: 5}}, got)
	require.NoError(t, w.StopWork(ctx, "manual"))
	got, _ = slotsOf(w.ID())
	assert.Equal(t, []QueueSlots{{Queue: "b", Slots: 5}, {Queue: "c", Slots: 5}}, got, "stopping a queue without handlers changes nothing")

	require.NoError(t, w.Handle(ctx, "d", h, HandleOptions{}))
	got, _ = slotsOf(w.ID())
	assert.Equal(t, []QueueSlots{{Queue: "b", Slots: 5}, {Queue: "c", Slots: 5}, {Queue: "d", Slots: DefaultConcurrency}}, got)

	id := w.ID()
	require.NoError(t, w.Close(ctx))
	_, ok = slotsOf(id)
	assert.False(t, ok)
	n, err := b.redis().Do(ctx, b.redis().B().Hlen().Key(c.core.Store.Keys().WorkerSlots()).Build()).AsInt64()
	require.NoError(t, err)
	assert.Zero(t, n, "the record goes with the worker")
}
