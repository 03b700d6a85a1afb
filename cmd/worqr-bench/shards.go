package main

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/redis/rueidis"

	"github.com/worqr/worqr"
)

// shardWorkers is how many workers the shards scenario runs, each on a
// client of its own, as separate processes would.
const shardWorkers = 3

// runShards measures where Redis's work goes when one workload spreads over
// -queues queues: no-op tasks on every queue, drained by shardWorkers
// workers that each handle every queue with -concurrency handlers. On a
// Cluster it reports each master's CPU per task of the queues it holds, its
// share of the whole, and which master holds the worker registry ({r});
// with -single it runs the same workload, alternated, on that single Redis
// too, so that the cluster's Redis CPU per task has a same-run baseline.
// Absolute throughput says little on a machine whose cores the nodes
// share; CPU per task on each shard is what adding machines would scale.
func runShards(ctx context.Context, b *bench) (*result, error) {
	perQueue := b.pick(max(100_000/len(b.queues), 500), 100)
	res := &result{}
	runs := []*bench{b}
	if b.single != nil {
		runs = append(runs, b.single)
	}
	for _, rb := range runs {
		name := "single_"
		if rb.rdb.Mode() == rueidis.ClientModeCluster {
			name = "cluster_"
		}
		got, err := shardDrain(ctx, rb, perQueue)
		if err != nil {
			return nil, fmt.Errorf("%s%w", name, err)
		}
		total := int64(perQueue * len(rb.queues))
		res.add(name+"tasks_per_s", "tasks/s", float64(total)/got.elapsed.Seconds())
		if !got.ok {
			continue
		}
		var cpu time.Duration
		for _, sh := range got.shards {
			cpu += sh.cpu
		}
		res.add(name+"redis_cpu_us_per_task", "µs", float64(cpu.Microseconds())/float64(total))
		if len(got.shards) < 2 {
			continue
		}
		for i, sh := range got.shards {
			p := fmt.Sprintf("%sshard%d_", name, i)
			res.add(p+"queues", "", float64(sh.queues))
			if sh.queues > 0 {
				res.add(p+"cpu_us_per_task", "µs", float64(sh.cpu.Microseconds())/float64(sh.queues*perQueue))
			}
			res.add(p+"cpu_share", "", sh.cpu.Seconds()/cpu.Seconds())
			if sh.registry {
				res.add(name+"registry_shard", "", float64(i))
			}
		}
	}
	if c, s := res.value("cluster_redis_cpu_us_per_task"), res.value("single_redis_cpu_us_per_task"); c > 0 && s > 0 {
		res.add("cpu_per_task_ratio", "×", c/s)
	}
	res.note("%d workers, each handling %d queues with %d handlers; %d tasks a queue", shardWorkers, len(b.queues), b.cfg.concurrency, perQueue)
	return res, nil
}

// value is the value of the metric named, or 0.
func (r *result) value(name string) float64 {
	for _, m := range r.metrics {
		if m.Name == name {
			return m.Value
		}
	}
	return 0
}

// shardSpan is what a shards drain measured: the time, and each master's
// CPU (in the order of their addresses) with the queues whose slots it
// holds.
type shardSpan struct {
	elapsed time.Duration
	ok      bool
	shards  []shardCost
}

type shardCost struct {
	addr     string
	cpu      time.Duration
	queues   int
	registry bool
}

// shardDrain fills b's queues with perQueue tasks each under a fresh prefix,
// then times shardWorkers workers draining them, reading every master's CPU
// before and after.
func shardDrain(ctx context.Context, b *bench, perQueue int) (shardSpan, error) {
	clients := make([]*worqr.Client, shardWorkers)
	prefix := "wqb-" + uuid.NewString()[:8]
	for i := range clients {
		c, err := worqr.New(worqr.Options{Redis: b.rdb, Prefix: prefix, Logger: b.log})
		if err != nil {
			return shardSpan{}, err
		}
		clients[i] = c
	}
	defer func() {
		for _, c := range clients {
			_ = c.Close(ctx)
		}
		_ = cleanup(ctx, b.rdb, prefix)
	}()
	if err := fill(ctx, clients[0], b.queues, perQueue, uuid.NewString()[:8]); err != nil {
		return shardSpan{}, err
	}
	before, ok := masterCPU(ctx, b.rdb)
	start := time.Now()
	p := &pool{want: int64(perQueue * len(b.queues)), all: make(chan struct{})}
	defer p.close(ctx)
	h := p.handler(nil)
	for _, c := range clients {
		w, err := c.NewWorker(ctx, worqr.WorkerOptions{})
		if err != nil {
			return shardSpan{}, err
		}
		p.workers = append(p.workers, w)
		for _, q := range b.queues {
			if err := w.Handle(ctx, q, h, worqr.HandleOptions{Concurrency: b.cfg.concurrency}); err != nil {
				return shardSpan{}, err
			}
		}
	}
	if err := p.wait(ctx, clients[0], b.queues, timeout(b.cfg.short)); err != nil {
		return shardSpan{}, err
	}
	sp := shardSpan{elapsed: time.Since(start)}
	after, ok2 := masterCPU(ctx, b.rdb)
	if !ok || !ok2 {
		return sp, nil
	}
	owners := slotOwners(ctx, b.rdb)
	for _, addr := range slices.Sorted(maps.Keys(after)) {
		sc := shardCost{addr: addr, cpu: after[addr] - before[addr]}
		for _, q := range b.queues {
			if owner(owners, slot("q:"+q), addr, len(after)) {
				sc.queues++
			}
		}
		sc.registry = owner(owners, slot("r"), addr, len(after))
		sp.shards = append(sp.shards, sc)
	}
	sp.ok = true
	return sp, nil
}

// masterCPU is each master's CPU time (user and system) by address; false
// when a node has no such INFO (miniredis).
func masterCPU(ctx context.Context, rdb rueidis.Client) (map[string]time.Duration, bool) {
	out := map[string]time.Duration{}
	for addr, node := range rdb.Nodes() {
		info, err := infoOf(ctx, node, "cpu", "replication")
		if err != nil || info["used_cpu_user"] == "" {
			return nil, false
		}
		if info["role"] == "slave" {
			continue
		}
		var cpu time.Duration
		for _, k := range []string{"used_cpu_user", "used_cpu_sys"} {
			f, _ := strconv.ParseFloat(info[k], 64)
			cpu += time.Duration(f * float64(time.Second))
		}
		out[addr] = cpu
	}
	return out, len(out) > 0
}

// slotRange is a range of Cluster slots and the address of its master.
type slotRange struct {
	lo, hi int
	addr   string
}

// slotOwners are the Cluster's slot ranges by master (CLUSTER SLOTS), or
// nil on a single server.
func slotOwners(ctx context.Context, rdb rueidis.Client) []slotRange {
	if rdb.Mode() != rueidis.ClientModeCluster {
		return nil
	}
	rows, err := rdb.Do(ctx, rdb.B().ClusterSlots().Build()).ToArray()
	if err != nil {
		return nil
	}
	var out []slotRange
	for _, row := range rows {
		f, err := row.ToArray()
		if err != nil || len(f) < 3 {
			continue
		}
		lo, _ := f[0].AsInt64()
		hi, _ := f[1].AsInt64()
		node, err := f[2].ToArray()
		if err != nil || len(node) < 2 {
			continue
		}
		host, _ := node[0].ToString()
		port, _ := node[1].AsInt64()
		out = append(out, slotRange{lo: int(lo), hi: int(hi), addr: host + ":" + strconv.FormatInt(port, 10)})
	}
	return out
}

// owner says whether the master at addr holds slot s: always, on a single
// server.
func owner(owners []slotRange, s int, addr string, masters int) bool {
	if masters == 1 {
		return true
	}
	for _, r := range owners {
		if s >= r.lo && s <= r.hi {
			return r.addr == addr
		}
	}
	return false
}
