package worqr

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Whether events go out sharded was decided per client from the number of
// nodes its rueidis client saw when it was made, so clients of one
// cluster could disagree: a one-master cluster (or one whose replica was
// down at the time) gives plain PUBLISH/SUBSCRIBE, the same cluster with
// a replica online SPUBLISH/SSUBSCRIBE, and neither hears the other. A
// worker then never learns of tasks its producer enqueued (the runtime
// does not poll). WORQR_TEST_GROW_CLUSTER is "master,spare": a cluster of
// one master holding every slot, and a cluster-enabled node in no cluster
// yet, which the test makes the master's replica (see the commit message
// for a script that sets them up).
func TestClientsOfAGrowingClusterHearEachOther(t *testing.T) {
	addrs := os.Getenv("WORQR_TEST_GROW_CLUSTER")
	if addrs == "" {
		t.Skip("WORQR_TEST_GROW_CLUSTER not set")
	}
	master, spare, _ := strings.Cut(addrs, ",")
	ctx := ctxT(t)
	b := &backend{t: t, addr: master, seeds: []string{master}, real: true, cluster: true, prefix: "worqrtest-grow"}
	t.Cleanup(b.deleteKeys)
	before := b.client()
	require.Len(t, before.core.Redis.Nodes(), 1)

	// The spare joins as the master's replica.
	admin := b.redis()
	masterID, err := admin.Do(ctx, admin.B().Arbitrary("CLUSTER", "MYID").Build()).ToString()
	require.NoError(t, err)
	sp, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{spare}, ForceSingleClient: true, DisableCache: true})
	require.NoError(t, err)
	defer sp.Close()
	host, port, _ := strings.Cut(master, ":")
	require.NoError(t, sp.Do(ctx, sp.B().Arbitrary("CLUSTER", "MEET", host, port).Build()).Error())
	eventually(t, 10*time.Second, "spare knows the master", func() bool {
		return sp.Do(ctx, sp.B().Arbitrary("CLUSTER", "REPLICATE", masterID).Build()).Error() == nil
	})
	eventually(t, 20*time.Second, "replica attached", func() bool {
		info, _ := sp.Do(ctx, sp.B().Info().Section("replication").Build()).ToString()
		return strings.Contains(info, "master_link_status:up")
	})
	var after *Client
	eventually(t, 10*time.Second, "a new client sees two nodes", func() bool {
		after = b.client()
		return len(after.core.Redis.Nodes()) == 2
	})
	t.Logf("sharded: client made before %v, after %v", before.core.Store.Sharded(), after.core.Store.Sharded())

	for _, pair := range []struct {
		name               string
		producer, consumer *Client
	}{{"before->after", before, after}, {"after->before", after, before}} {
		work := make(chan int64, 10)
		w := newWorker(t, pair.consumer, WorkerOptions{})
		q := "q-" + strings.ReplaceAll(pair.name, ">", "")
		require.NoError(t, w.StartWork(ctx, q, Events{Work: func(_ string, n int64) { work <- n }}))
		require.NoError(t, second(pair.producer.Enqueue(ctx, q, []byte("x"))))
		select {
		case <-work:
		case <-time.After(3 * time.Second):
			assert.Fail(t, "no work event", "%s: the consumer never heard of the task", pair.name)
		}
	}
}
