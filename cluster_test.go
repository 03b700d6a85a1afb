package worqr

// Tests that need a real Redis Cluster (WORQR_TEST_CLUSTER, see
// .ci/cluster); the rest of the suite runs on the cluster unchanged.

import (
	"context"
	"fmt"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func clusterBackend(t *testing.T) *backend {
	t.Helper()
	b := newBackend(t)
	if !b.cluster {
		t.Skip("needs a Redis Cluster: set " + envCluster + " (see .ci/cluster)")
	}
	return b
}

// masterOf is the address of the master that serves key's slot.
func masterOf(t *testing.T, rdb rueidis.Client, key string) string {
	t.Helper()
	ctx := context.Background()
	slot, err := rdb.Do(ctx, rdb.B().ClusterKeyslot().Key(key).Build()).AsInt64()
	require.NoError(t, err)
	ranges, err := rdb.Do(ctx, rdb.B().ClusterSlots().Build()).ToArray()
	require.NoError(t, err)
	for _, r := range ranges {
		f, err := r.ToArray()
		require.NoError(t, err)
		lo, _ := f[0].AsInt64()
		hi, _ := f[1].AsInt64()
		if slot < lo || slot > hi {
			continue
		}
		node, err := f[2].ToArray()
		require.NoError(t, err)
		host, _ := node[0].ToString()
		port, _ := node[1].AsInt64()
		return fmt.Sprintf("%s:%d", host, port)
	}
	t.Fatalf("no master serves slot %d", slot)
	return ""
}

// queuePerShard names one queue on each master, and returns them with the
// master serving each.
func queuePerShard(t *testing.T, c *Client) (names []string, masters map[string]string) {
	t.Helper()
	masters = map[string]string{}
	seen := map[string]bool{}
	for i := 0; len(seen) < 3 && i < 1000; i++ {
		name := fmt.Sprintf("shard-%d", i)
		m := masterOf(t, c.core.Redis, c.core.Store.Keys().Queue(name).Waiting)
		if !seen[m] {
			seen[m] = true
			names = append(names, name)
			masters[name] = m
		}
	}
	require.Len(t, names, 3, "a queue on each of the 3 masters")
	return names, masters
}

// Queues whose names hash to different masters each live on their own
// master, with their events on a shard channel there.
func TestClusterQueuesOnEveryShard(t *testing.T) {
	t.Parallel()
	b := clusterBackend(t)
	c, ctx := b.client(), ctxT(t)
	require.True(t, c.core.Store.Sharded(), "a cluster uses sharded pub/sub")
	names, masters := queuePerShard(t, c)

	var mu sync.Mutex
	handled := map[string][]string{}
	w := newWorker(t, b.client(), WorkerOptions{})
	for _, q := range names {
		require.NoError(t, w.Handle(ctx, q, func(_ context.Context, p *Process) error {
			mu.Lock()
			defer mu.Unlock()
			handled[p.Queue()] = append(handled[p.Queue()], string(p.Task()))
			return nil
		}, HandleOptions{}))
	}
	for _, q := range names {
		require.NoError(t, second(c.EnqueueBatch(ctx, q, [][]byte{[]byte(q + "/1"), []byte(q + "/2")})))
	}
	eventually(t, 5*time.Second, "every shard's tasks handled", func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, q := range names {
			if len(handled[q]) != 2 {
				return false
			}
		}
		return true
	})
	for _, q := range names {
		assert.ElementsMatch(t, []string{q + "/1", q + "/2"}, handled[q])
		// Every key of the queue, and its channel, is on its master.
		k := c.core.Store.Keys().Queue(q)
		for _, key := range []string{k.Waiting, k.Procs, k.Leases, k.Meta, k.Channel} {
			assert.Equal(t, masters[q], masterOf(t, c.core.Redis, key), key)
		}
		node := c.core.Redis.Nodes()[masters[q]]
		require.NotNil(t, node, masters[q])
		shard, err := node.Do(ctx, node.B().PubsubShardnumsub().Channel(k.Channel).Build()).AsIntMap()
		require.NoError(t, err)
		assert.EqualValues(t, 1, shard[k.Channel], "the worker's shard subscription on %s", masters[q])
		plain, err := node.Do(ctx, node.B().PubsubNumsub().Channel(k.Channel).Build()).AsIntMap()
		require.NoError(t, err)
		assert.Zero(t, plain[k.Channel], "no plain subscription")
	}
	queues, err := c.Queues(ctx)
	require.NoError(t, err)
	assert.ElementsMatch(t, names, queues)
}

// A dead worker that served a queue on every master is reclaimed on every
// master, and leaves nothing behind in the registry.
func TestClusterDeadWorkerOnEveryShardIsReclaimed(t *testing.T) {
	t.Parallel()
	b := clusterBackend(t)
	c, ctx := b.client(), ctxT(t)
	names, _ := queuePerShard(t, c)

	victim := newWorker(t, b.client(), fast)
	for _, q := range names {
		require.NoError(t, victim.StartWork(ctx, q, Events{}))
		require.NoError(t, second(c.EnqueueBatch(ctx, q, [][]byte{[]byte(q + "/held"), []byte(q + "/next")})))
		p, err := victim.Dequeue(ctx, q)
		require.NoError(t, err)
		require.Equal(t, q+"/held", string(p.Task()))
	}
	id := victim.ID()
	crash(victim)
	newWorker(t, b.client(), fast) // a peer, which reclaims

	eventually(t, 5*time.Second, "reclaimed on every shard", func() bool {
		for _, q := range names {
			procs, err := c.Processes(ctx, q)
			require.NoError(t, err)
			if len(procs) > 0 {
				return false
			}
		}
		return !leaseLive(t, c, id)
	})
	for _, q := range names {
		assert.Equal(t, []string{q + "/held", q + "/next"}, waiting(t, c, q), "held task back at the front of %s", q)
	}
	eventually(t, 5*time.Second, "deregistered", func() bool {
		n, err := c.core.Redis.Do(ctx, c.core.Redis.B().Exists().Key(c.core.Store.Keys().WorkerQueues(id)).Build()).AsInt64()
		require.NoError(t, err)
		ws, err := c.Workers(ctx)
		require.NoError(t, err)
		for _, w := range ws {
			if w.ID == id {
				return false
			}
		}
		return n == 0
	})
}

// A master is killed while a worker serves a queue on every shard; its
// replica takes over. The queues on the other shards go on being served
// through the outage, the worker keeps its id (only its lease on the dead
// shard's queue is lost, and taken again), and the killed shard's queue is
// served again after the promotion. The killed node is started again from
// its config file and rejoins as a replica. Not parallel: it takes a shard
// away from every test.
func TestClusterMasterKilledReplicaPromoted(t *testing.T) {
	b := clusterBackend(t)
	c, ctx := b.client(), ctxT(t)
	names, masters, doomed := victimShard(t, c)
	addr := masters[doomed]
	pid, config := nodeProcess(t, c, addr)
	if config == "" {
		t.Skip("the master was not started from a config file (as .ci/cluster does), so it cannot be restarted")
	}

	var mu sync.Mutex
	handled := map[string]map[string]int{}
	for _, q := range names {
		handled[q] = map[string]int{}
	}
	count := func(q string) int {
		mu.Lock()
		defer mu.Unlock()
		return len(handled[q])
	}
	// TTL 1 s: shorter than the failover, so the lease on the dead shard runs out
	w, fences := fencingWorker(t, b.client())
	id := w.ID()
	for _, q := range names {
		require.NoError(t, w.Handle(ctx, q, func(_ context.Context, p *Process) error {
			mu.Lock()
			defer mu.Unlock()
			handled[p.Queue()][string(p.Task())]++
			return nil
		}, HandleOptions{}))
	}

	// A producer enqueues to every queue all along; what it was told
	// succeeded is what must be handled.
	var enqMu sync.Mutex
	enqueued := map[string][]string{}
	var stopProducing atomic.Bool
	produced := make(chan struct{})
	go func() {
		defer close(produced)
		for i := 0; !stopProducing.Load(); i++ {
			for _, q := range names {
				task := fmt.Sprintf("%s/%d", q, i)
				cctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
				_, err := c.Enqueue(cctx, q, []byte(task))
				cancel()
				if err == nil {
					enqMu.Lock()
					enqueued[q] = append(enqueued[q], task)
					enqMu.Unlock()
				}
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	eventually(t, 5*time.Second, "work flows on every shard", func() bool {
		for _, q := range names {
			if count(q) < 5 {
				return false
			}
		}
		return true
	})

	killed := time.Now()
	require.NoError(t, syscall.Kill(pid, syscall.SIGKILL))
	t.Cleanup(func() { restartNode(t, config, addr) })

	// While the shard is down, the other shards' queues are served.
	before := map[string]int{}
	for _, q := range names {
		before[q] = count(q)
	}
	promoted := false
	eventually(t, 30*time.Second, "the replica promoted and the queue served again", func() bool {
		if !promoted {
			cctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
			defer cancel()
			promoted = c.core.Redis.Do(cctx, c.core.Redis.B().Set().Key(c.core.Store.Keys().Queue(doomed).Meta+"-probe").Value("x").Build()).Error() == nil
		}
		return promoted && count(doomed) > before[doomed]
	})
	t.Logf("queue on the killed master served again %v after the kill", time.Since(killed).Round(time.Millisecond))
	for _, q := range names {
		if q != doomed {
			assert.Greater(t, count(q), before[q], "%s served while another shard failed over", q)
		}
	}

	stopProducing.Store(true)
	<-produced
	// Everything the producer was told was enqueued is handled, except
	// on the killed shard what its replica had not received yet
	// (replication is asynchronous): that is reported, not failed.
	eventually(t, 15*time.Second, "every enqueued task on the surviving shards handled", func() bool {
		enqMu.Lock()
		defer enqMu.Unlock()
		mu.Lock()
		defer mu.Unlock()
		for _, q := range names {
			if q == doomed {
				continue
			}
			for _, task := range enqueued[q] {
				if handled[q][task] == 0 {
					return false
				}
			}
		}
		return true
	})
	settled := func() bool {
		for _, q := range names {
			n, err := c.QueueLen(ctx, q)
			if err != nil || n > 0 {
				return false
			}
			procs, err := c.Processes(ctx, q)
			if err != nil || len(procs) > 0 {
				return false
			}
		}
		return true
	}
	eventually(t, 15*time.Second, "every queue drained", settled)
	mu.Lock()
	lost, twice := 0, 0
	for _, task := range enqueued[doomed] {
		if handled[doomed][task] == 0 {
			lost++
		}
	}
	for _, q := range names {
		for task, n := range handled[q] {
			if n > 1 {
				twice++
				// At least once: a finish the dead master never ran.
				assert.Equal(t, doomed, q, "%s handled %d times on a surviving shard", task, n)
			}
		}
	}
	mu.Unlock()
	t.Logf("killed shard: %d of %d acknowledged enqueues lost by the failover; %d tasks handled twice in all",
		lost, len(enqueued[doomed]), twice)
	assert.Equal(t, id, w.ID(), "the worker kept its id: it never fenced itself as a whole")
	for len(fences) > 0 {
		ev := <-fences
		assert.Equal(t, doomed, ev.Queue, "only the dead shard's queue was fenced")
	}
}

// victimShard is queuePerShard plus the queue whose master a failure test
// may take away: one that does not hold the worker registry ({r}). Losing
// that one fences every worker whose TTL is shorter than the failover (see
// docs/cluster.md), which other tests cover as a lost connection.
func victimShard(t *testing.T, c *Client) (names []string, masters map[string]string, victim string) {
	t.Helper()
	names, masters = queuePerShard(t, c)
	registry := masterOf(t, c.core.Redis, c.core.Store.Keys().Workers())
	for _, q := range names {
		if masters[q] != registry {
			return names, masters, q
		}
	}
	t.Fatal("every queue's master holds the registry")
	return
}

// nodeProcess is the process id of the node at addr, and the config file
// it was started from ("" if none).
func nodeProcess(t *testing.T, c *Client, addr string) (pid int, config string) {
	t.Helper()
	node := c.core.Redis.Nodes()[addr]
	info, err := node.Do(context.Background(), node.B().Info().Section("server").Build()).ToString()
	require.NoError(t, err)
	pid, err = strconv.Atoi(infoField(info, "process_id"))
	require.NoError(t, err)
	return pid, infoField(info, "config_file")
}

func infoField(info, field string) string {
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), field+":"); ok {
			return v
		}
	}
	return ""
}

// restartNode starts a killed cluster node again from its config file and
// waits until the cluster is whole: it rejoins as a replica and syncs.
func restartNode(t *testing.T, config, addr string) {
	out, err := exec.Command("redis-server", config).CombinedOutput()
	require.NoError(t, err, "restarting %s: %s", addr, out)
	var rdb rueidis.Client // redis-server daemonizes before it listens
	defer func() {
		if rdb != nil {
			rdb.Close()
		}
	}()
	eventually(t, 30*time.Second, addr+" back as a synced replica", func() bool {
		if rdb == nil {
			if rdb, err = rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: true, ForceSingleClient: true}); err != nil {
				return false
			}
		}
		info, err := rdb.Do(context.Background(), rdb.B().Info().Section("replication").Build()).ToString()
		return err == nil && infoField(info, "role") == "slave" && infoField(info, "master_link_status") == "up"
	})
}

// A queue's slot is migrated to another master while a worker serves the
// queue and holds one of its tasks: all the queue's keys move together,
// the shard drops the worker's subscription and the worker subscribes
// again on the new master, and the held process is finished there. Not
// parallel: it changes the cluster's layout under every test.
func TestClusterSlotMigration(t *testing.T) {
	b := clusterBackend(t)
	c, ctx := b.client(), ctxT(t)
	rec := newRecorder()
	w := newWorker(t, b.client(), WorkerOptions{})
	require.NoError(t, w.StartWork(ctx, "moving", rec.events()))
	require.NoError(t, second(c.EnqueueBatch(ctx, "moving", [][]byte{[]byte("held"), []byte("a"), []byte("b")})))
	require.NoError(t, c.core.Store.FlushStats(ctx, "moving")) // the enqueue count: the stats hash exists
	held, err := w.Dequeue(ctx, "moving")
	require.NoError(t, err)
	require.Equal(t, "held", string(held.Task()))

	k := c.core.Store.Keys().Queue("moving")
	slot, err := c.core.Redis.Do(ctx, c.core.Redis.B().ClusterKeyslot().Key(k.Waiting).Build()).AsInt64()
	require.NoError(t, err)
	from := masterOf(t, c.core.Redis, k.Waiting)
	var to string
	for _, q := range []string{"m0", "m1", "m2", "m3", "m4", "m5", "m6", "m7", "m8", "m9"} {
		if m := masterOf(t, c.core.Redis, c.core.Store.Keys().Queue(q).Waiting); m != from {
			to = m
			break
		}
	}
	require.NotEmpty(t, to, "another master")
	migrateSlot(t, c.core.Redis, slot, from, to)
	// Every key of the queue moved with the slot (no other test uses this
	// queue name, whose tag alone decides the slot).
	keysIn := func(addr string) int64 {
		n := c.core.Redis.Nodes()[addr]
		count, err := n.Do(ctx, n.B().ClusterCountkeysinslot().Slot(slot).Build()).AsInt64()
		require.NoError(t, err)
		return count
	}
	assert.Zero(t, keysIn(from))
	assert.EqualValues(t, 5, keysIn(to), "waiting, procs, leases, meta and stats")

	// The worker hears events on the new master and its process there is
	// still its own.
	dst := c.core.Redis.Nodes()[to]
	eventually(t, 10*time.Second, "subscribed on the new master", func() bool {
		n, err := dst.Do(ctx, dst.B().PubsubShardnumsub().Channel(k.Channel).Build()).AsIntMap()
		require.NoError(t, err)
		return n[k.Channel] == 1
	})
	for len(rec.work) > 0 {
		<-rec.work
	}
	require.NoError(t, second(c.Enqueue(ctx, "moving", []byte("c"))))
	recv(t, rec.work, 5*time.Second, "work event from the new master")
	require.NoError(t, afterOutage(t, func() error { return held.Finish(ctx) }))
	assert.Equal(t, []string{"a", "b", "c"}, tasksOf(dequeueAll(t, w, "moving", 3)))
}

// migrateSlot moves one slot and its keys from one master to another, the
// way redis-cli --cluster reshard does it.
func migrateSlot(t *testing.T, rdb rueidis.Client, slot int64, from, to string) {
	t.Helper()
	ctx := context.Background()
	src, dst := rdb.Nodes()[from], rdb.Nodes()[to]
	id := func(n rueidis.Client) string {
		s, err := n.Do(ctx, n.B().Arbitrary("CLUSTER", "MYID").Build()).ToString()
		require.NoError(t, err)
		return s
	}
	srcID, dstID := id(src), id(dst)
	s := strconv.FormatInt(slot, 10)
	do := func(n rueidis.Client, args ...string) {
		require.NoError(t, n.Do(ctx, n.B().Arbitrary(args...).Build()).Error(), "%v", args)
	}
	do(dst, "CLUSTER", "SETSLOT", s, "IMPORTING", srcID)
	do(src, "CLUSTER", "SETSLOT", s, "MIGRATING", dstID)
	host, port, _ := strings.Cut(to, ":")
	for {
		keys, err := src.Do(ctx, src.B().Arbitrary("CLUSTER", "GETKEYSINSLOT", s, "100").Build()).AsStrSlice()
		require.NoError(t, err)
		if len(keys) == 0 {
			break
		}
		do(src, append([]string{"MIGRATE", host, port, "", "0", "5000", "KEYS"}, keys...)...)
	}
	do(dst, "CLUSTER", "SETSLOT", s, "NODE", dstID)
	do(src, "CLUSTER", "SETSLOT", s, "NODE", dstID)
}

// A master that hangs (SIGSTOP: it neither answers nor closes its
// connections, as a paused VM or a partition) costs a worker only its
// queue on that shard, as a killed one does: its lease there is fenced,
// its processes on the other shards go on and it keeps its id. The
// worker's lease is lasting's, so that only the pause fences it, not a
// stall of the loaded test process; the pause outlasts that TTL, longer
// than the cluster takes to fail over, so the paused master's replicas
// are kept from taking over meanwhile: the master hangs rather than
// being replaced. Not parallel: it takes a shard away from every test
// for about a TTL.
func TestClusterPausedMasterFencesOnlyItsQueue(t *testing.T) {
	b := clusterBackend(t)
	c, ctx := b.client(), ctxT(t)
	names, masters, paused := victimShard(t, c)
	pid, _ := nodeProcess(t, c, masters[paused])
	noFailover(t, c, masters[paused])

	w, fences := fencingWorkerWith(t, b.client(), lasting)
	id := w.ID()
	held := map[string]*Process{}
	for _, q := range names {
		require.NoError(t, w.StartWork(ctx, q, Events{}))
		if q != paused {
			require.NoError(t, second(c.Enqueue(ctx, q, []byte(q))))
			p, err := w.Dequeue(ctx, q)
			require.NoError(t, err)
			held[q] = p
		}
	}

	require.NoError(t, syscall.Kill(pid, syscall.SIGSTOP))
	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			_ = syscall.Kill(pid, syscall.SIGCONT)
		}
	}
	t.Cleanup(resume)
	ev := recv(t, fences, 3*lasting.TTL, "a fence")
	resume()
	assert.Equal(t, paused, ev.Queue, "the first fence was not of the paused shard's queue only: %v", ev.Cause)
	assert.Equal(t, id, ev.WorkerID)
	for q, p := range held {
		assert.NoError(t, p.Err(), "the process on %s (another shard) ended", q)
	}
	assert.Equal(t, id, w.ID())
}

// noFailover keeps master's replicas from failing over until the test
// ends: a master paused for longer than the cluster's node timeout stays
// the master of its slots. Failover is allowed again once no replica
// flags master as failing any more (it was resumed): a replica allowed it
// before would take over from a master that answers again, under the
// tests that come next. The replicas are those master itself streams to
// (its INFO replication), each reached on a connection of its own: a
// node killed by an earlier test rejoins as a replica before the
// cluster's gossip says so, so CLUSTER NODES may not list it yet, and a
// master with no replica online yet is waited for.
func noFailover(t *testing.T, c *Client, master string) {
	t.Helper()
	ctx := context.Background()
	replicas := map[string]rueidis.Client{}
	t.Cleanup(func() {
		for _, rdb := range replicas {
			rdb.Close()
		}
	})
	node := c.core.Redis.Nodes()[master]
	var online []string
	eventually(t, 30*time.Second, master+" streams to a replica", func() bool {
		info, err := node.Do(ctx, node.B().Info().Section("replication").Build()).ToString()
		if err != nil {
			return false
		}
		online = onlineReplicas(info)
		return len(online) > 0
	})
	for _, addr := range online {
		rdb, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: true, ForceSingleClient: true})
		require.NoError(t, err)
		replicas[addr] = rdb
	}
	set := func(rdb rueidis.Client, v string) error {
		return rdb.Do(ctx, rdb.B().ConfigSet().ParameterValue().ParameterValue("cluster-replica-no-failover", v).Build()).Error()
	}
	for addr, rdb := range replicas {
		require.NoError(t, set(rdb, "yes"), "failover kept off on %s", addr)
	}
	t.Cleanup(func() {
		eventually(t, 10*time.Second, "no replica flags the resumed master as failing", func() bool {
			for _, rdb := range replicas {
				for _, n := range clusterNodes(t, rdb) {
					if n.addr == master && (slices.Contains(n.flags, "fail") || slices.Contains(n.flags, "fail?")) {
						return false
					}
				}
			}
			return true
		})
		for addr, rdb := range replicas {
			assert.NoError(t, set(rdb, "no"), "failover allowed again on %s", addr)
		}
	})
}

// onlineReplicas is the addresses of the replicas a master's INFO
// replication lists as online ("slave0:ip=…,port=…,state=online,…").
func onlineReplicas(info string) []string {
	var addrs []string
	for _, line := range strings.Split(info, "\n") {
		name, fields, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || !strings.HasPrefix(name, "slave") || name == "slave_read_repl_offset" || name == "slave_repl_offset" {
			continue
		}
		kv := map[string]string{}
		for _, f := range strings.Split(fields, ",") {
			k, v, _ := strings.Cut(f, "=")
			kv[k] = v
		}
		if kv["state"] == "online" && kv["ip"] != "" && kv["port"] != "" {
			addrs = append(addrs, kv["ip"]+":"+kv["port"])
		}
	}
	return addrs
}

// clusterNode is a line of CLUSTER NODES: a node's id, address, flags
// and, for a replica, its master's id.
type clusterNode struct {
	id, addr, master string
	flags            []string
}

// clusterNodes is rdb's view of the cluster's nodes.
func clusterNodes(t *testing.T, rdb rueidis.Client) []clusterNode {
	t.Helper()
	view, err := rdb.Do(context.Background(), rdb.B().ClusterNodes().Build()).ToString()
	require.NoError(t, err)
	var nodes []clusterNode
	for _, line := range strings.Split(view, "\n") {
		f := strings.Fields(line)
		if len(f) < 4 {
			continue
		}
		addr, _, _ := strings.Cut(f[1], "@")
		nodes = append(nodes, clusterNode{id: f[0], addr: addr, flags: strings.Split(f[2], ","), master: f[3]})
	}
	return nodes
}

// A workflow whose steps are on queues of three masters, its own state
// in a slot of a fourth tag: each release crosses from a queue's slot to
// the workflow's and back, and the diamond and the fan-in run in order,
// each step once.
func TestClusterWorkflowAcrossShards(t *testing.T) {
	t.Parallel()
	b := clusterBackend(t)
	c := b.client()
	ctx := ctxT(t)
	names, masters := queuePerShard(t, c)
	w := newWorker(t, c, WorkerOptions{})
	log := &stepLog{}
	for _, q := range names {
		require.NoError(t, w.Handle(ctx, q, flowHandler(t, log), HandleOptions{Concurrency: 4}))
	}
	steps := []Step{
		{Name: "top", Queue: names[0]},
		{Name: "left", Queue: names[1], After: []string{"top"}},
		{Name: "right", Queue: names[2], After: []string{"top"}},
	}
	var fan []string
	for i := range 12 {
		name := fmt.Sprintf("part-%02d", i)
		fan = append(fan, name)
		steps = append(steps, Step{Name: name, Queue: names[i%3], After: []string{"left", "right"}})
	}
	steps = append(steps, Step{Name: "summary", Queue: names[0], After: fan})
	id, err := c.EnqueueWorkflow(ctx, steps, WorkflowOptions{})
	require.NoError(t, err)
	flowMaster := masterOf(t, c.core.Redis, c.core.Store.Keys().Workflow(id).Flow)
	t.Logf("queues on %v, the workflow on %s", masters, flowMaster)
	info, err := c.WaitWorkflow(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, WorkflowSucceeded, info.State)
	order := log.order()
	require.Len(t, order, 16, "every step once")
	assert.Equal(t, "top", order[0])
	assert.ElementsMatch(t, []string{"left", "right"}, order[1:3])
	assert.Equal(t, "summary", order[15])
	assert.Len(t, log.parentsOf("summary"), 12)
	for _, q := range names {
		notices, err := c.core.Store.FlowNotices(ctx, q, 0, 10)
		require.NoError(t, err)
		assert.Empty(t, notices, "every notice carried and removed")
	}
}
