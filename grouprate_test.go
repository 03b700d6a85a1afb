package worqr

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/worqr/worqr/internal/engine"
	"github.com/worqr/worqr/internal/store"
)

// A group's rate allows so many starts in any window across the fleet, by
// the Redis clock: a group that used it up waits while the others go on,
// a group's own rate wins over the default, and a runtime with nothing
// else to start sleeps until the group's next start is allowed instead of
// polling. On miniredis both clocks move a window at a time; on a real
// Redis, whose clock is the point, the windows pass in real time.
func TestGroupRate(t *testing.T) {
	t.Parallel()
	k := setupTimed(t, nil)
	c, ctx := k.c, k.ctx
	const rate, per, n = 2, 300 * time.Millisecond, 6
	require.NoError(t, c.SetGroupRate(ctx, "q", "", rate, per, CreateQueue()))
	require.NoError(t, c.SetGroupRate(ctx, "q", "fast", 100, per))

	var mu sync.Mutex
	starts := map[string][]uint64{} // per group, the processes' ids: the Redis clock (µs) at each dequeue
	began := make(chan struct{}, 2*n)
	wc := k.client()
	dequeues := countCalls(wc, store.OpDequeue)
	var runtimes []*engine.Runtime
	for range 2 {
		w := newWorker(t, wc, WorkerOptions{})
		require.NoError(t, w.Handle(ctx, "q", func(_ context.Context, p *Process) error {
			at, err := strconv.ParseUint(p.ID(), 16, 64)
			group, _, _ := strings.Cut(string(p.Task()), "-")
			mu.Lock()
			starts[group] = append(starts[group], at)
			mu.Unlock()
			began <- struct{}{}
			return err
		}, HandleOptions{Concurrency: 5}))
		runtimes = append(runtimes, runnerOf(w, "q"))
	}
	for _, g := range []string{"slow", "fast"} {
		tasks := make([][]byte, n)
		for i := range tasks {
			tasks[i] = fmt.Appendf(nil, "%s-%d", g, i)
		}
		require.NoError(t, second(c.EnqueueBatch(ctx, "q", tasks, Group(g))))
	}
	// The fast group whole and the slow one's rate, then the slow one's
	// rate a window at a time.
	k.windows(runtimes, began, per, n+rate, rate, rate)
	mu.Lock()
	defer mu.Unlock()
	slow, fast := starts["slow"], starts["fast"]
	slices.Sort(slow)
	slices.Sort(fast)
	for i := rate; i < len(slow); i++ {
		// By the clock the rate counts by (a process id is the Redis clock
		// at its dequeue): the (i-rate)-th start left the window before the
		// i-th began.
		assert.GreaterOrEqual(t, slow[i]-slow[i-rate], uint64(per.Microseconds()), "start %d", i)
	}
	assert.Less(t, fast[n-1], slow[rate], "the fast group's own rate: all its tasks start while the slow one waits")
	assert.Less(t, dequeues.Load(), int64(40), "dequeues: woken by the window, not polling")

	// Held back by its rate, a group shows as such.
	require.NoError(t, c.SetGroupRate(ctx, "r", "", 1, time.Hour, CreateQueue()))
	require.NoError(t, second(c.EnqueueBatch(ctx, "r", [][]byte{[]byte("1"), []byte("2")}, Group("g"))))
	mw := newWorker(t, c, WorkerOptions{})
	require.NoError(t, mw.StartWork(ctx, "r", Events{}))
	ps, err := mw.DequeueN(ctx, "r", 5)
	require.NoError(t, err)
	require.Len(t, ps, 1)
	_, err = mw.Dequeue(ctx, "r")
	require.ErrorIs(t, err, ErrRateLimited, "a manual Dequeue is told")
	rep, err := c.Groups(ctx, "r", 10)
	require.NoError(t, err)
	require.Len(t, rep.HeldBack, 1)
	g := rep.HeldBack[0]
	assert.Equal(t, "g", g.Key)
	assert.Equal(t, 1, g.Rate)
	assert.Equal(t, time.Hour, g.Per)
	assert.InDelta(t, time.Hour.Seconds(), time.Until(g.RateHeldUntil).Seconds(), 60, "held until its start leaves the window")
	assert.EqualValues(t, 0, rep.Ready)
	// A new rate gives it a turn again at once.
	require.NoError(t, c.SetGroupRate(ctx, "r", "g", 5, time.Hour))
	ps, err = mw.DequeueN(ctx, "r", 5)
	require.NoError(t, err)
	assert.Len(t, ps, 1)

	assert.ErrorIs(t, c.SetGroupRate(ctx, "r", "", 1, 0), ErrInvalidOptions)
	assert.ErrorIs(t, c.SetGroupRate(ctx, "r", "", 1, 1500*time.Microsecond), ErrInvalidOptions, "Redis would keep 1ms")
	assert.ErrorIs(t, c.SetGroupRate(ctx, "r", "", -1, time.Second), ErrInvalidOptions)
	assert.ErrorIs(t, c.SetGroupRate(ctx, "r", strings.Repeat("x", MaxGroupLen+1), 1, time.Second), ErrInvalidOptions)
	assert.ErrorIs(t, c.SetGroupRate(ctx, "nosuch", "", 1, time.Second), ErrNoQueue)
}
