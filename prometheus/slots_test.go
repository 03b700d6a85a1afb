package worqrprom_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/worqr/worqr"
	worqrprom "github.com/worqr/worqr/prometheus"
)

const slotsHelp = `
# HELP worqr_handler_slots Handler slots of this program's pools (a Handle or HandleQueues call, named for its queues), by state: "busy" (a handler runs), "free" (a handler could start now), "held" (its handler returned and its outcome is still being written). The states add up to the pool's Concurrency.
# TYPE worqr_handler_slots gauge
`

// worqr_handler_slots: each pool's busy and free slots, exactly, while
// handlers are held; the pools of one name of the program's workers
// summed; past MaxPools, pools are "(other)".
func TestSlotCollectorReportsSaturation(t *testing.T) {
	t.Parallel()
	c := clientOn(t, redisOn(t, backend(t)), nil)
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(worqrprom.NewSlotCollector(c, worqrprom.SlotCollectorOptions{MaxPools: 2}))
	ctx := context.Background()
	started := make(chan struct{}, 10)
	release := make(chan struct{})
	hold := func(ctx context.Context, p *worqr.Process) error {
		started <- struct{}{}
		<-release
		return nil
	}
	w1 := newWorker(t, c, worqr.WorkerOptions{})
	require.NoError(t, w1.Handle(ctx, "a", hold, worqr.HandleOptions{Concurrency: 3}))
	require.NoError(t, w1.HandleQueues(ctx, []worqr.QueueSpec{{Queue: "b", Handler: hold}, {Queue: "c", Handler: hold}}, worqr.PoolOptions{Concurrency: 4}))
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(slotsHelp+`
worqr_handler_slots{pool="a",state="busy"} 0
worqr_handler_slots{pool="a",state="free"} 3
worqr_handler_slots{pool="a",state="held"} 0
worqr_handler_slots{pool="b,c",state="busy"} 0
worqr_handler_slots{pool="b,c",state="free"} 4
worqr_handler_slots{pool="b,c",state="held"} 0
`), "worqr_handler_slots"))

	// A second worker of the program: its pool "a" adds to the first's,
	// its pool "d" is past the bound.
	w2 := newWorker(t, c, worqr.WorkerOptions{})
	require.NoError(t, w2.Handle(ctx, "a", hold, worqr.HandleOptions{Concurrency: 2}))
	require.NoError(t, w2.Handle(ctx, "d", hold, worqr.HandleOptions{Concurrency: 1}))
	for _, q := range []string{"a", "a", "a", "b", "c", "d"} {
		_, err := c.Enqueue(ctx, q, []byte("t"))
		require.NoError(t, err)
	}
	for range 6 {
		select {
		case <-started:
		case <-time.After(5 * time.Second):
			t.Fatal("the handlers did not start")
		}
	}
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(slotsHelp+`
worqr_handler_slots{pool="(other)",state="busy"} 1
worqr_handler_slots{pool="(other)",state="free"} 0
worqr_handler_slots{pool="(other)",state="held"} 0
worqr_handler_slots{pool="a",state="busy"} 3
worqr_handler_slots{pool="a",state="free"} 2
worqr_handler_slots{pool="a",state="held"} 0
worqr_handler_slots{pool="b,c",state="busy"} 2
worqr_handler_slots{pool="b,c",state="free"} 2
worqr_handler_slots{pool="b,c",state="held"} 0
`), "worqr_handler_slots"))
	problems, err := testutil.GatherAndLint(reg)
	require.NoError(t, err)
	require.Empty(t, problems)

	close(release)
	require.NoError(t, w1.Shutdown(ctx))
	require.NoError(t, w2.Shutdown(ctx))
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(""), "worqr_handler_slots"), "no pool once the workers are gone")
}
