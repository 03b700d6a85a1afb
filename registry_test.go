package worqr

// The registry (registry.go) on its own: the slots a worker records per
// queue, as the queues it handles change, read back from Redis.

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/worqr/worqr/internal/store"
)

// recordedSlots are the slots worker id has recorded, as Workers shows.
func recordedSlots(t *testing.T, c *Client, id string) []QueueSlots {
	t.Helper()
	ws, err := c.Workers(context.Background())
	require.NoError(t, err)
	for _, wi := range ws {
		if wi.ID == id {
			return wi.Slots
		}
	}
	t.Fatalf("worker %s not registered", id)
	return nil
}

// The slots recorded are those of the queues a runtime serves, sorted by
// queue; a queue served with StartWork alone has none. Handle records
// them as it starts, StopWork as it ends one; a write is only ever of the
// whole set.
func TestRegistryRecordsSlots(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	w := newWorker(t, c, WorkerOptions{})
	nop := func(context.Context, *Process) error { return nil }
	require.NoError(t, w.Handle(ctx, "b", nop, HandleOptions{Concurrency: 3}))
	require.NoError(t, w.StartWork(ctx, "c", Events{}))
	require.NoError(t, w.Handle(ctx, "a", nop, HandleOptions{Concurrency: 2}))

	w.mu.Lock()
	qs := w.sessions.slots()
	w.mu.Unlock()
	assert.Equal(t, []store.QueueSlots{{Queue: "a", Slots: 2}, {Queue: "b", Slots: 3}}, qs)
	assert.Equal(t, []QueueSlots{{Queue: "a", Slots: 2}, {Queue: "b", Slots: 3}}, recordedSlots(t, c, w.ID()))

	require.NoError(t, w.StopWork(ctx, "b"))
	assert.Equal(t, []QueueSlots{{Queue: "a", Slots: 2}}, recordedSlots(t, c, w.ID()))
	require.NoError(t, w.StopWork(ctx, "c"), "a queue without a runtime")
	assert.Equal(t, []QueueSlots{{Queue: "a", Slots: 2}}, recordedSlots(t, c, w.ID()))
}
