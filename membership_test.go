package worqr

// Membership (membership.go) on its own: StartWork and StopWork called
// directly, read back from Redis (the worker's queue set, the queue's
// leases) with no handler running.

import (
	"context"
	"errors"
	"testing"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/worqr/worqr/internal/store"
)

// queueLeased reports whether worker id holds a lease on queue in Redis.
func queueLeased(t *testing.T, c *Client, queue, id string) bool {
	t.Helper()
	z := c.core.Store.Keys().Queue(queue).Leases
	err := c.core.Redis.Do(context.Background(), c.core.Redis.B().Zscore().Key(z).Member(id).Build()).Error()
	if rueidis.IsRedisNil(err) {
		return false
	}
	require.NoError(t, err)
	return true
}

// StartWork records the queue and takes a lease on it; a second one is
// refused. StopWork gives the worker's tasks there back to the front,
// ends its processes, drops the lease and the record; a second one is
// refused. A StopWork whose release fails leaves everything as it was.
func TestMembershipStartAndStopWork(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	w := newWorker(t, c, WorkerOptions{})
	id := w.ID()
	require.NoError(t, w.StartWork(ctx, "q", Events{}))
	assert.ErrorIs(t, w.StartWork(ctx, "q", Events{}), ErrAlreadyServing)
	wq, err := c.WorkerQueues(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, []string{"q"}, wq)
	assert.True(t, queueLeased(t, c, "q", id))
	assert.Equal(t, []string{"q"}, w.Queues())

	enqueueNumbered(t, c, "q", 2)
	p := dequeueAll(t, w, "q", 1)[0]

	c.core.Store.SetFault(func(_ context.Context, op store.Op, _ string) error {
		if op == store.OpRelease {
			return errors.New("connection reset (test)")
		}
		return nil
	})
	require.Error(t, w.StopWork(ctx, "q"))
	c.core.Store.SetFault(nil)
	assert.Nil(t, p.Err(), "a failed StopWork keeps the process")
	assert.Equal(t, []string{"q"}, w.Queues())
	assert.True(t, queueLeased(t, c, "q", id))
	assert.Equal(t, []string{"t0001"}, waiting(t, c, "q"))

	require.NoError(t, w.StopWork(ctx, "q"))
	assert.ErrorIs(t, p.Err(), ErrProcessLost)
	assert.Equal(t, []string{"t0000", "t0001"}, waiting(t, c, "q"), "its task back at the front")
	assert.False(t, queueLeased(t, c, "q", id))
	wq, err = c.WorkerQueues(ctx, id)
	require.NoError(t, err)
	assert.Empty(t, wq)
	assert.Empty(t, w.Queues())
	assert.ErrorIs(t, w.StopWork(ctx, "q"), ErrNotServing)
}
