package main

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"

	"github.com/google/uuid"
	"golang.org/x/sync/errgroup"

	"github.com/worqr/worqr"
)

// groupsCase is one workload of the groups scenario, drained against the
// same tasks without groups.
type groupsCase struct {
	name   string
	groups int
	limit  int
	turns  int // of every other group, from tenant-0
	size   int // the queues' turn size (SetGroupTurnSize), 0 for the default
}

// runGroups measures groups (worqr.Group): the throughput of tasks spread
// over few groups and over many groups with no limit that binds, and over
// fewer groups each
// limited to one task at a time, against the same tasks without groups,
// drained by one worker of -concurrency no-op handlers in ABBA order
// (plain, grouped, grouped, plain) to cancel drift; the memory a waiting
// grouped task costs against a plain one; and the fairness of the turns:
// one group floods the queue, then 99 groups enqueue 10 tasks each, and
// the flooder's starts before the last small group's task starts are
// counted (start order is process id order, which is the dequeue
// script's). Two variants give groups turns (worqr.SetGroupTurns): 10
// groups, half of them of 3 turns, for what turns cost, and a group of 3
// turns against one of 1, whose starts while both have work should be
// 3:1. Two more take turns of 8 tasks (worqr.SetGroupTurnSize), and
// fair_turn8 is the fairness measure under them. With -groups-variant only
// that variant runs (fair and fair_turn8: the fairness measure alone).
func runGroups(ctx context.Context, b *bench) (*result, error) {
	total := b.pick(50_000, 600) / len(b.queues) * len(b.queues)
	conc := b.cfg.concurrency
	run := uuid.NewString()[:8]
	res := &result{}
	opts := worqr.HandleOptions{Concurrency: conc}

	variants := []groupsCase{{"groups10", 10, 0, 0, 0}, {"turns_groups10", 10, 0, 3, 0}, {"groups10k", b.pick(10_000, 100), 0, 0, 0},
		{"limit1_groups1k", b.pick(1_000, 50), 1, 0, 0}, {"groups10k_turn8", b.pick(10_000, 100), 0, 0, 8}, {"limit1_groups1k_turn8", b.pick(1_000, 50), 1, 0, 8}}
	only := b.cfg.groupsVariant
	switch {
	case only == "fair" || only == "fair_turn8":
		size := 0
		if only == "fair_turn8" {
			size = 8
		}
		return res, groupsFairness(ctx, b, res, run, size)
	case only != "" && !slices.ContainsFunc(variants, func(v groupsCase) bool { return v.name == only }):
		return nil, fmt.Errorf("-groups-variant %q: no such variant", only)
	}
	for _, v := range variants {
		if only != "" && v.name != only {
			continue
		}
		// Redis per task: its CPU (INFO), the scripts' execution time and
		// the calls the scripts made (INFO commandstats), load-proof where
		// the rate is not.
		var cost [2]struct{ cpu, exec, calls, scripts float64 }
		variant := func(groups int) (float64, error) {
			sp, err := drainLoaded(ctx, b, b.queues, 1, int64(total), nil, opts, func(c *worqr.Client) error {
				if groups == 0 {
					return fill(ctx, c, b.queues, total/len(b.queues), run)
				}
				for _, q := range b.queues {
					if v.size > 0 {
						if err := c.SetGroupTurnSize(ctx, q, v.size, worqr.CreateQueue()); err != nil {
							return err
						}
					}
				}
				if v.limit > 0 {
					for _, q := range b.queues {
						if err := c.SetGroupConcurrency(ctx, q, "", v.limit, worqr.CreateQueue()); err != nil {
							return err
						}
					}
				}
				for k := 0; v.turns > 0 && k < groups; k += 2 {
					for _, q := range b.queues {
						if err := c.SetGroupTurns(ctx, q, "tenant-"+strconv.Itoa(k), v.turns, worqr.CreateQueue()); err != nil {
							return err
						}
					}
				}
				return fillGroups(ctx, c, b.queues, total/len(b.queues), groups, run)
			})
			if err == nil && sp.serverOK {
				c := &cost[min(groups, 1)]
				c.cpu += float64(sp.serverCPU.Microseconds()) / float64(total) / 2
				for name, n := range sp.calls {
					switch name {
					case "evalsha", "eval":
						c.exec += float64(sp.usec[name]) / float64(total) / 2
						c.scripts += float64(n) / float64(total) / 2
					case "info":
					default:
						c.calls += float64(n) / float64(total) / 2
					}
				}
			}
			return float64(total) / sp.elapsed.Seconds(), err
		}
		var plain, grouped float64
		for _, g := range []int{0, v.groups, v.groups, 0} {
			rate, err := variant(g)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", v.name, err)
			}
			if g == 0 {
				plain += rate / 2
			} else {
				grouped += rate / 2
			}
		}
		res.add(v.name+"_tasks_per_s", "tasks/s", grouped)
		res.add(v.name+"_plain_tasks_per_s", "tasks/s", plain)
		res.add(v.name+"_ratio", "×", grouped/plain)
		for i, kind := range []string{"_plain", ""} {
			res.add(v.name+kind+"_redis_cpu_us_per_task", "µs", cost[i].cpu)
			res.add(v.name+kind+"_script_us_per_task", "µs", cost[i].exec)
			res.add(v.name+kind+"_calls_per_task", "calls", cost[i].calls)
			res.add(v.name+kind+"_scripts_per_task", "calls", cost[i].scripts)
		}
	}
	if only != "" {
		return res, nil
	}
	if err := groupsMemory(ctx, b, res, total, run); err != nil {
		return nil, err
	}
	if err := groupsFairness(ctx, b, res, run, 0); err != nil {
		return nil, err
	}
	if err := groupsFairness(ctx, b, res, run, 8); err != nil {
		return nil, err
	}
	if err := groupsTurns(ctx, b, res, run); err != nil {
		return nil, err
	}
	return res, nil
}

// groupsTurns reports the starts of a group of 3 turns for each of a
// group of 1, in start (process id) order, while both have work: the
// starts up to the last of the group that runs out first.
func groupsTurns(ctx context.Context, b *bench, res *result, run string) error {
	each := b.pick(20_000, 400)
	q := b.queues[0]
	c, prefix, err := b.newClient()
	if err != nil {
		return err
	}
	defer func() { _ = c.Close(ctx); _ = cleanup(ctx, b.rdb, prefix) }()
	if err := c.SetGroupTurns(ctx, q, "premium", 3, worqr.CreateQueue()); err != nil {
		return err
	}
	for _, g := range []string{"premium", "basic"} {
		tasks := make([][]byte, each)
		for i := range tasks {
			tasks[i] = []byte(g)
		}
		if _, err := c.EnqueueBatch(ctx, q, tasks, worqr.Group(g)); err != nil {
			return err
		}
	}
	starts, err := startOrder(ctx, b, c, q, 2*each)
	if err != nil {
		return fmt.Errorf("turns: %w", err)
	}
	premium, basic := 0, 0
	for _, g := range starts {
		if g == "premium" {
			premium++
		} else {
			basic++
		}
		if premium == each || basic == each {
			break
		}
	}
	res.add("turns3_starts_per_turns1_start", "×", float64(premium)/float64(max(basic, 1)))
	return nil
}

// fillGroups enqueues perQueue tasks on each queue, task i in group
// i mod groups, untimed: one batch per group, 16 at a time.
func fillGroups(ctx context.Context, c *worqr.Client, queues []string, perQueue, groups int, run string) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(16)
	for qi, q := range queues {
		for k := range min(groups, perQueue) {
			g.Go(func() error {
				var tasks [][]byte
				for i := k; i < perQueue; i += groups {
					tasks = append(tasks, payload(run, qi*perQueue+i))
				}
				_, err := c.EnqueueBatch(gctx, q, tasks, worqr.Group("tenant-"+strconv.Itoa(k)))
				return err
			})
		}
	}
	return g.Wait()
}

// groupsMemory reports the Redis memory (MEMORY USAGE of the keys, summed)
// of n waiting tasks in 10,000 groups (at most n/10) against n plain ones.
func groupsMemory(ctx context.Context, b *bench, res *result, n int, run string) error {
	if b.embedded {
		res.note("memory skipped: miniredis reports no memory")
		return nil
	}
	usage := func(groups int) (int64, error) {
		c, prefix, err := b.newClient()
		if err != nil {
			return 0, err
		}
		defer func() { _ = c.Close(ctx); _ = cleanup(ctx, b.rdb, prefix) }()
		if groups == 0 {
			err = fill(ctx, c, b.queues, n/len(b.queues), run)
		} else {
			err = fillGroups(ctx, c, b.queues, n/len(b.queues), groups, run)
		}
		if err != nil {
			return 0, err
		}
		return keysUsage(ctx, b.rdb, prefix)
	}
	plain, err := usage(0)
	if err != nil {
		return err
	}
	groups := min(10_000, n/10)
	grouped, err := usage(groups)
	if err != nil {
		return err
	}
	res.add("waiting_bytes_per_plain_task", "B", float64(plain)/float64(n))
	res.add("waiting_bytes_per_grouped_task", "B", float64(grouped)/float64(n))
	return nil
}

// groupsFairness floods one group, then gives 99 groups 10 tasks each,
// and reports how many of the flooder's tasks started before the last
// small group's task did, under a turn size of size (0: the default).
func groupsFairness(ctx context.Context, b *bench, res *result, run string, size int) error {
	flood, small, each := b.pick(100_000, 500), b.pick(99, 9), 10
	q := b.queues[0]
	c, prefix, err := b.newClient()
	if err != nil {
		return err
	}
	defer func() { _ = c.Close(ctx); _ = cleanup(ctx, b.rdb, prefix) }()
	name := "fair"
	if size > 0 {
		name += "_turn" + strconv.Itoa(size)
		if err := c.SetGroupTurnSize(ctx, q, size, worqr.CreateQueue()); err != nil {
			return err
		}
	}
	if err := fillGroups(ctx, c, []string{q}, flood, 1, run); err != nil {
		return err
	}
	for g := range small {
		tasks := make([][]byte, each)
		for i := range tasks {
			tasks[i] = []byte("s")
		}
		if _, err := c.EnqueueBatch(ctx, q, tasks, worqr.Group("small-"+strconv.Itoa(g))); err != nil {
			return err
		}
	}
	starts, err := startOrder(ctx, b, c, q, flood+small*each)
	if err != nil {
		return fmt.Errorf("fairness: %w", err)
	}
	floods, seen := 0, 0
	for _, t := range starts {
		if t != "s" {
			floods++
			continue
		}
		if seen++; seen == small*each {
			break
		}
	}
	res.add(name+"_flood_starts_before_last_small", "tasks", float64(floods))
	return nil
}

// startOrder handles want tasks of queue q with one worker of the
// bench's concurrency and returns their payloads in the order Redis
// started them (by process id, which counts up at each start).
func startOrder(ctx context.Context, b *bench, c *worqr.Client, q string, want int) ([]string, error) {
	type start struct {
		pid     uint64
		payload string
	}
	var mu sync.Mutex
	starts := make([]start, 0, want)
	p, err := startPoolWith(ctx, c, []string{q}, 1, int64(want), func(proc *worqr.Process) error {
		pid, _ := strconv.ParseUint(proc.ID(), 16, 64)
		mu.Lock()
		starts = append(starts, start{pid, string(proc.Task())})
		mu.Unlock()
		return nil
	}, worqr.HandleOptions{Concurrency: b.cfg.concurrency})
	if err != nil {
		return nil, err
	}
	err = p.wait(ctx, c, []string{q}, timeout(b.cfg.short))
	p.close(ctx)
	if err != nil {
		return nil, err
	}
	slices.SortFunc(starts, func(a, b start) int { return cmp.Compare(a.pid, b.pid) })
	out := make([]string, len(starts))
	for i, s := range starts {
		out[i] = s.payload
	}
	return out, nil
}
