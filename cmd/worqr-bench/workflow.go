package main

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync/atomic"
	"time"

	"github.com/worqr/worqr"
	luascripts "github.com/worqr/worqr/internal/scripts"
)

// runWorkflow measures a workflow of one parent, n children and a fan-in
// back to one (n = 10,000; -short 1,000) against the same n + 2 tasks
// enqueued plain, in the same run: each drained by one worker with
// -concurrency no-op handlers on one queue, from the enqueue until the
// last task finished (WaitWorkflow for the workflow, a count for the
// plain tasks). per_task_ratio is the workflow's time over the plain
// tasks'. fanin_release_ms is from the last child's handler returning to
// the fan-in's handler starting: the child's finish, the carry of its
// notice (the release) and the fan-in's enqueue and dequeue. Each drain's
// Redis CPU and commands (INFO, commands run from Lua counted) per task
// are reported too (redis_cpu_ratio, commands_per_task), which the
// machine's load disturbs less than time. release_p99_ms is the p99, over
// chains of two steps run one after another on the idle worker, from the
// parent's handler returning to the child's handler starting.
// release_longest_call_ms is the longest script call, on any master,
// while a fan-out of n children (-short 2,500) is released, with no
// handler taking them (see releaseLongest); Redis's SLOWLOG measures it,
// so the metric is left out where there is none (miniredis).
func runWorkflow(ctx context.Context, b *bench) (*result, error) {
	n := b.pick(10_000, 1_000)
	queue := b.queues[0]
	opts := worqr.HandleOptions{Concurrency: b.cfg.concurrency}
	res := &result{}

	win := openWindow(ctx, b.rdb)
	plain, err := timeDrain(ctx, b, queue, opts, n+2, func(ctx context.Context, c *worqr.Client) error {
		tasks := make([][]byte, n+2)
		for i := range tasks {
			tasks[i] = []byte("t")
		}
		_, err := c.EnqueueBatch(ctx, queue, tasks)
		return err
	}, nil)
	if err != nil {
		return nil, fmt.Errorf("plain: %w", err)
	}
	plainSpan := win.close(ctx)

	var lastChild, summaryStart atomic.Int64
	var enqueueTook time.Duration
	win = openWindow(ctx, b.rdb)
	flow, err := timeDrain(ctx, b, queue, opts, n+2, func(ctx context.Context, c *worqr.Client) error {
		steps := make([]worqr.Step, 0, n+2)
		steps = append(steps, worqr.Step{Name: "parent", Queue: queue, Task: []byte("t")})
		parts := make([]string, n)
		for i := range parts {
			parts[i] = fmt.Sprintf("c%d", i)
			steps = append(steps, worqr.Step{Name: parts[i], Queue: queue, Task: []byte("t"), After: []string{"parent"}})
		}
		steps = append(steps, worqr.Step{Name: "summary", Queue: queue, Task: []byte("t"), After: parts})
		start := time.Now()
		id, err := c.EnqueueWorkflow(ctx, steps, worqr.WorkflowOptions{Keep: time.Minute})
		enqueueTook = time.Since(start)
		if err != nil {
			return err
		}
		info, err := c.WaitWorkflow(ctx, id)
		if err == nil && info.State != worqr.WorkflowSucceeded {
			err = fmt.Errorf("workflow ended %s", info.State)
		}
		return err
	}, func(p *worqr.Process) {
		now := time.Now().UnixNano()
		switch _, step := p.Workflow(); step {
		case "parent":
		case "summary":
			summaryStart.Store(now)
		default:
			for last := lastChild.Load(); now > last && !lastChild.CompareAndSwap(last, now); last = lastChild.Load() {
			}
		}
	})
	if err != nil {
		return nil, fmt.Errorf("workflow: %w", err)
	}
	flowSpan := win.close(ctx)
	res.add("workflow_s", "s", flow.Seconds())
	res.add("plain_s", "s", plain.Seconds())
	res.add("per_task_ratio", "×", flow.Seconds()/plain.Seconds())
	res.add("enqueue_workflow_ms", "ms", float64(enqueueTook.Microseconds())/1000)
	res.add("fanin_release_ms", "ms", float64(summaryStart.Load()-lastChild.Load())/1e6)
	tasks := int64(n + 2)
	if plainSpan.serverOK && flowSpan.serverOK {
		res.add("redis_cpu_ratio", "×", float64(flowSpan.serverCPU)/float64(plainSpan.serverCPU))
		res.add("plain_commands_per_task", "", float64(commands(plainSpan))/float64(tasks))
		res.add("workflow_commands_per_task", "", float64(commands(flowSpan))/float64(tasks))
	}
	plainSpan.perTask(res, "plain_", tasks, scripts...)
	flowSpan.perTask(res, "workflow_", tasks, scripts...)
	p99, err := releaseP99(ctx, b, queue, b.pick(300, 50))
	if err != nil {
		return nil, fmt.Errorf("release: %w", err)
	}
	res.add("release_p99_ms", "ms", p99)
	longest, script, ok, err := releaseLongest(ctx, b, queue, b.pick(10_000, 2_500))
	switch {
	case err != nil:
		return nil, fmt.Errorf("release's longest call: %w", err)
	case ok:
		res.add("release_longest_call_ms", "ms", longest)
		res.note("release's longest script call: %s", script)
	default:
		res.note("release_longest_call_ms: no SLOWLOG on this Redis")
	}
	return res, nil
}

// releaseLongest creates a workflow of a parent and n children on queue
// (a random id: at home in the queue's slot), dequeues the parent, logs
// every command of every master (slowlog-log-slower-than 0, its log long
// enough to keep them all), clears the log, finishes the parent and waits
// until the n children are in the queue and the parent's notice is gone
// (the carrier forgets it after its last call), then reads the longest
// script call (EVALSHA, EVAL) in the logs, in ms, and the script's
// file name (its SHA1 if it is none of worqr's). The settings are restored. ok is false
// when a master has no SLOWLOG (miniredis): nothing is measured.
func releaseLongest(ctx context.Context, b *bench, queue string, n int) (ms float64, script string, ok bool, err error) {
	nodes := masters(ctx, b.rdb)
	saved := make([][2]string, len(nodes)) // slowlog-log-slower-than, slowlog-max-len
	for i, node := range nodes {
		for j, name := range []string{"slowlog-log-slower-than", "slowlog-max-len"} {
			kv, err := node.Do(ctx, node.B().ConfigGet().Parameter(name).Build()).AsStrMap()
			if err != nil || kv[name] == "" {
				return 0, "", false, nil
			}
			saved[i][j] = kv[name]
		}
		if err := node.Do(ctx, node.B().SlowlogLen().Build()).Error(); err != nil {
			return 0, "", false, nil
		}
	}
	defer func() {
		for i, node := range nodes {
			err = errors.Join(err,
				node.Do(context.WithoutCancel(ctx), node.B().ConfigSet().ParameterValue().ParameterValue("slowlog-log-slower-than", saved[i][0]).ParameterValue("slowlog-max-len", saved[i][1]).Build()).Error())
		}
	}()

	c, prefix, err := b.newClient()
	if err != nil {
		return 0, "", false, err
	}
	defer func() { _ = c.Close(ctx); _ = cleanup(ctx, b.rdb, prefix) }()
	w, err := c.NewWorker(ctx, worqr.WorkerOptions{})
	if err != nil {
		return 0, "", false, err
	}
	defer func() { _ = w.Close(ctx) }()
	steps := make([]worqr.Step, 0, n+1)
	steps = append(steps, worqr.Step{Name: "parent", Queue: queue, Task: []byte("t")})
	for i := range n {
		steps = append(steps, worqr.Step{Name: fmt.Sprintf("c%d", i), Queue: queue, Task: []byte("t"), After: []string{"parent"}})
	}
	if _, err := c.EnqueueWorkflow(ctx, steps, worqr.WorkflowOptions{Keep: time.Minute}); err != nil {
		return 0, "", false, err
	}
	if err := w.StartWork(ctx, queue, worqr.Events{}); err != nil {
		return 0, "", false, err
	}
	p, err := w.Dequeue(ctx, queue)
	if err != nil {
		return 0, "", false, err
	}
	for _, node := range nodes {
		// Long enough to keep every command of the release and of the
		// wait below.
		set := node.B().ConfigSet().ParameterValue().ParameterValue("slowlog-log-slower-than", "0").ParameterValue("slowlog-max-len", "1000000").Build()
		if err := node.Do(ctx, set).Error(); err != nil {
			return 0, "", false, err
		}
		if err := node.Do(ctx, node.B().SlowlogReset().Build()).Error(); err != nil {
			return 0, "", false, err
		}
	}
	if err := p.Finish(ctx); err != nil {
		return 0, "", false, err
	}
	flows := prefix + ":{q:" + queue + "}:flows"
	deadline := time.Now().Add(timeout(b.cfg.short))
	for {
		l, err := c.QueueLen(ctx, queue)
		if err != nil {
			return 0, "", false, err
		}
		left, err := b.rdb.Do(ctx, b.rdb.B().Zcard().Key(flows).Build()).AsInt64()
		if err != nil {
			return 0, "", false, err
		}
		if l == int64(n) && left == 0 {
			break
		}
		if time.Now().After(deadline) {
			return 0, "", false, fmt.Errorf("%d of %d children queued, %d notices left", l, n, left)
		}
		time.Sleep(20 * time.Millisecond) // polled: the release tells no one its end
	}
	named := scriptNames()
	var longest int64
	for _, node := range nodes {
		entries, err := node.Do(ctx, node.B().SlowlogGet().Count(-1).Build()).ToArray()
		if err != nil {
			return 0, "", false, err
		}
		for _, e := range entries {
			parts, err := e.ToArray()
			if err != nil || len(parts) < 4 {
				continue
			}
			took, err1 := parts[2].AsInt64()
			args, err2 := parts[3].AsStrSlice()
			if err1 != nil || err2 != nil || len(args) < 2 {
				continue
			}
			if cmd := strings.ToLower(args[0]); (cmd == "evalsha" || cmd == "eval") && took > longest {
				longest, script = took, args[1]
				if name, ok := named[script]; ok {
					script = name
				}
			}
		}
	}
	return float64(longest) / 1000, script, true, nil
}

// commands counts the commands a span ran but the INFO reads
// that measured it, and the script calls themselves (the commands they
// ran from Lua are counted).
func commands(sp span) int64 {
	var n int64
	for cmd, calls := range sp.calls {
		switch cmd {
		case "info", "evalsha", "eval":
		default:
			n += calls
		}
	}
	return n
}

// releaseP99 runs chains of two steps, a parent and its child, one after
// another on an idle worker, and returns the p99 in ms, from the parent's
// handler returning to the child's handler starting.
func releaseP99(ctx context.Context, b *bench, queue string, chains int) (float64, error) {
	var parentEnd atomic.Int64
	took := make([]time.Duration, 0, chains)
	childStarted := make(chan time.Duration, 1)
	_, err := timeDrain(ctx, b, queue, worqr.HandleOptions{Concurrency: 4}, 2*chains, func(ctx context.Context, c *worqr.Client) error {
		for i := range chains {
			id, err := c.EnqueueWorkflow(ctx, []worqr.Step{
				{Name: "parent", Queue: queue, Task: []byte("t")},
				{Name: "child", Queue: queue, Task: []byte("t"), After: []string{"parent"}},
			}, worqr.WorkflowOptions{Keep: time.Minute})
			if err != nil {
				return err
			}
			select {
			case d := <-childStarted:
				took = append(took, d)
			case <-time.After(timeout(b.cfg.short)):
				return fmt.Errorf("chain %d (%s): no child", i, id)
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	}, func(p *worqr.Process) {
		switch _, step := p.Workflow(); step {
		case "parent":
			// The handler returns right after: its end is this, give or
			// take the counting in timeDrain.
			parentEnd.Store(time.Now().UnixNano())
		case "child":
			childStarted <- time.Duration(time.Now().UnixNano() - parentEnd.Load())
		}
	})
	if err != nil {
		return 0, err
	}
	return float64(pct(took, 99).Microseconds()) / 1000, nil
}

// timeDrain runs one worker on queue with a handler that calls seen (if
// set) and counts, then load, and returns how long load and the handling
// of want tasks took.
func timeDrain(ctx context.Context, b *bench, queue string, opts worqr.HandleOptions, want int,
	load func(context.Context, *worqr.Client) error, seen func(*worqr.Process)) (time.Duration, error) {
	c, prefix, err := b.newClient()
	if err != nil {
		return 0, err
	}
	defer func() { _ = c.Close(ctx); _ = cleanup(ctx, b.rdb, prefix) }()
	w, err := c.NewWorker(ctx, worqr.WorkerOptions{})
	if err != nil {
		return 0, err
	}
	defer func() { _ = w.Close(ctx) }()
	var done atomic.Int64
	all := make(chan struct{})
	err = w.Handle(ctx, queue, func(_ context.Context, p *worqr.Process) error {
		if seen != nil {
			seen(p)
		}
		if done.Add(1) == int64(want) {
			close(all)
		}
		return nil
	}, opts)
	if err != nil {
		return 0, err
	}
	start := time.Now()
	if err := load(ctx, c); err != nil {
		return 0, err
	}
	select {
	case <-all:
	case <-time.After(timeout(b.cfg.short)):
		return 0, fmt.Errorf("%d of %d tasks handled", done.Load(), want)
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	return time.Since(start), nil
}

// scriptNames are worqr's scripts' file names by SHA1, whatever the
// client's settings (a Cluster's or not, with its stats or not).
func scriptNames() map[string]string {
	out := make(map[string]string)
	for _, sharded := range []bool{false, true} {
		for _, stats := range []bool{false, true} {
			set := reflect.ValueOf(luascripts.Load(sharded, stats)).Elem()
			for i := range set.NumField() {
				if sc, ok := set.Field(i).Interface().(*luascripts.Script); ok && sc != nil {
					out[sc.SHA1()] = sc.Name()
				}
			}
		}
	}
	return out
}
