package worqr

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/worqr/worqr/internal/store"
)

// Workers of one client share its pub/sub connection, where a channel's
// subscription is the connection's: a worker leaving a queue must not end
// it for the others (each would subscribe again, and a fleet of workers in
// one process closing one by one would do so quadratically often).
func TestLeavingAQueueKeepsThePeersSubscription(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	var subscribes atomic.Int64
	c.store.SetFault(func(_ context.Context, op store.Op, queue string) error {
		if op == store.OpSubscribe && queue == "q" {
			subscribes.Add(1)
		}
		return nil
	})
	stay := newWorker(t, c, WorkerOptions{})
	done := make(chan string, 10)
	require.NoError(t, stay.Handle(ctx, "q", func(_ context.Context, p *Process) error {
		done <- string(p.Task())
		return nil
	}, HandleOptions{}))
	leave := newWorker(t, c, WorkerOptions{})
	require.NoError(t, leave.StartWork(ctx, "q", Events{}))
	require.EqualValues(t, 2, subscribes.Load())

	require.NoError(t, leave.Close(ctx))
	// A task enqueued now reaches the staying worker; by the time it has
	// run, a subscription the leaver ended would have been made again.
	require.NoError(t, second(c.Enqueue(ctx, "q", []byte("after"))))
	require.Equal(t, "after", recv(t, done, 5*time.Second, "the staying worker runs the task"))
	require.EqualValues(t, 2, subscribes.Load(), "the staying worker subscribed again")

	// The last one to leave ends the subscription on the server.
	require.NoError(t, stay.Close(ctx))
	eventually(t, 5*time.Second, "no subscriber left on the channel", func() bool {
		channel := c.store.Keys().Queue("q").Channel
		cmd := c.rdb.B().PubsubNumsub().Channel(channel).Build()
		if c.store.Sharded() {
			cmd = c.rdb.B().PubsubShardnumsub().Channel(channel).Build()
		}
		n, err := c.rdb.Do(ctx, cmd).AsIntMap()
		return err == nil && n[channel] == 0
	})
}
