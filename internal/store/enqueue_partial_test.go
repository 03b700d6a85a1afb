package store

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"

	"github.com/google/uuid"
	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"
)

// resetOnce fails the first pipeline of at least calls commands
// without running it, as a connection reset before the write would; later
// pipelines go through, as they would on rueidis's new connection.
type resetOnce struct {
	rueidis.Client
	calls int
	mu    sync.Mutex
	done  bool
}

func (c *resetOnce) DoMulti(ctx context.Context, cmds ...rueidis.Completed) []rueidis.RedisResult {
	c.mu.Lock()
	fail := !c.done && len(cmds) >= c.calls
	c.done = c.done || fail
	c.mu.Unlock()
	if fail {
		out := make([]rueidis.RedisResult, len(cmds))
		for i := range out {
			out[i] = rueidis.NewErrorResult(errors.New("connection reset"))
		}
		return out
	}
	return c.Client.DoMulti(ctx, cmds...)
}

// A batch of 3 script calls goes in two round trips (2 + 1). When the
// first fails, the second is not sent: otherwise the batch's tail would
// wait ahead of its head, and a caller told of the error and retrying
// the batch would enqueue the tail twice.
func TestEnqueueBulkStopsAtAFailedRoundTrip(t *testing.T) {
	t.Parallel()
	rdb := testRedis(t)
	s := New(&resetOnce{Client: rdb, calls: 2}, "worqrtest-"+uuid.NewString()[:8], false, false)
	s.bulkCalls = 2
	payloads := make([][]byte, 3*MaxTasksPerScript)
	for i := range payloads {
		payloads[i] = []byte("p" + strconv.Itoa(i))
	}
	_, err := s.Enqueue(context.Background(), "q", payloads, EnqueueArgs{})
	require.Error(t, err)
	waiting := s.queueKeys("q").Waiting
	t.Cleanup(func() { rdb.Do(context.Background(), rdb.B().Del().Key(waiting).Build()) })
	n, err := rdb.Do(context.Background(), rdb.B().Llen().Key(waiting).Build()).AsInt64()
	require.NoError(t, err)
	require.Zero(t, n, "the batch's tail was stored after its head failed")
}
