package worqr

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A group with a limit of 1 is a sequence: across two workers, its tasks
// run one at a time and finish in enqueue order, through failures retried
// with a delay (the failing task holds the group until it succeeds), while
// another group goes on meanwhile.
func TestSequenceRunsInOrderThroughDelayedRetries(t *testing.T) {
	t.Parallel()
	b, c, ctx := setup(t)
	const n = 8
	require.NoError(t, c.SetGroupConcurrency(ctx, "q", "seq", 1, CreateQueue()))
	var mu sync.Mutex
	var done, otherDone []string
	running, most := 0, 0
	failed := map[string]int{}
	for range 2 {
		w := newWorker(t, b.client(), WorkerOptions{})
		require.NoError(t, w.Handle(ctx, "q", func(_ context.Context, p *Process) error {
			name := string(p.Task())
			mu.Lock()
			defer mu.Unlock()
			if name[0] != 's' {
				otherDone = append(otherDone, name)
				return nil
			}
			running++
			most = max(most, running)
			defer func() { running-- }()
			// s2 and s5 fail twice each before they succeed.
			if (name == "s2" || name == "s5") && failed[name] < 2 {
				failed[name]++
				return errors.New("not yet")
			}
			done = append(done, name)
			return nil
		}, HandleOptions{Concurrency: 4, Retry: RetryPolicy{Backoff: func(int, error) time.Duration { return 30 * time.Millisecond }}}))
	}
	var want []string
	tasks := make([][]byte, n)
	for i := range tasks {
		want = append(want, fmt.Sprintf("s%d", i))
		tasks[i] = []byte(want[i])
	}
	require.NoError(t, second(c.EnqueueBatch(ctx, "q", tasks, Group("seq"))))
	require.NoError(t, second(c.EnqueueBatch(ctx, "q", [][]byte{[]byte("o1"), []byte("o2")}, Group("other"))))
	eventually(t, 10*time.Second, "all done", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(done) == n && len(otherDone) == 2
	})
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, want, done, "in enqueue order, retried tasks included")
	assert.Equal(t, 1, most, "one at a time")
}
