package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/redis/rueidis"

	"github.com/worqr/worqr"
)

// checker runs the checks after the faults: the drain, the consistency of
// what Redis holds, and the probe that every worker still takes work.
type checker struct {
	client *worqr.Client
	admin  rueidis.Client
	prefix string
	fleet  *fleet
	ledger *ledger
	log    io.Writer
	t0     int64
	// conns are the persistent tasks; buried are those the drain found
	// among the dead letters (each a violation the ledger reports): no
	// handler can hold them again, so the checks that follow expect the
	// rest.
	conns  []string
	buried map[string]bool
}

// alive lists the persistent tasks not found among the dead letters.
func (c *checker) alive() []string {
	return slices.DeleteFunc(slices.Clone(c.conns), func(t string) bool { return c.buried[t] })
}

func (c *checker) logf(format string, args ...any) {
	fmt.Fprintf(c.log, "[%7.1fs] %s\n", time.Duration(now()-c.t0).Seconds(), fmt.Sprintf(format, args...))
}

// until polls cond (which says what it still waits for, "" when met)
// until it is met or the deadline passes; it returns what was still
// missing then.
func until(within time.Duration, cond func() string) string {
	deadline := time.Now().Add(within)
	for {
		missing := cond()
		if missing == "" {
			return ""
		}
		if time.Now().After(deadline) {
			return fmt.Sprintf("not within %v: %s", within, missing)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// queueState is one queue in Redis: waiting (or delayed) tasks and
// in-flight processes.
func (c *checker) queueState(ctx context.Context, q string) (int64, []worqr.ProcessInfo, error) {
	n, err := c.client.QueueLen(ctx, q)
	if err != nil {
		return 0, nil, err
	}
	d, err := c.client.DelayedLen(ctx, q)
	if err != nil {
		return 0, nil, err
	}
	ps, err := c.client.Processes(ctx, q)
	return n + d, ps, err
}

// deadLetters reads every dead letter of the run's queues, by payload.
func (c *checker) deadLetters(ctx context.Context) (map[string][]deadLetter, error) {
	out := make(map[string][]deadLetter)
	for _, q := range allQueues() {
		if err := c.deadIn(ctx, q, out); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// deadIn adds a queue's dead letters to out, by payload.
func (c *checker) deadIn(ctx context.Context, q string, out map[string][]deadLetter) error {
	n, err := c.client.DeadLetterCount(ctx, q)
	if err != nil {
		return err
	}
	seen := 0
	// Pages shift only if a task dies meanwhile (while the queues
	// drain); the count read after says so, and the read fails.
	for off := 0; off < int(n); off += 1000 {
		dls, err := c.client.DeadLetters(ctx, q, off, 1000)
		if err != nil {
			return err
		}
		for _, dl := range dls {
			out[string(dl.Payload)] = append(out[string(dl.Payload)], deadLetter{id: dl.ID, reason: dl.Reason, err: dl.Error, attempts: dl.Attempts, died: dl.DiedAt.UnixMicro()})
		}
		seen += len(dls)
	}
	after, err := c.client.DeadLetterCount(ctx, q)
	if err != nil {
		return err
	}
	if seen != int(n) || after != n {
		return fmt.Errorf("%s: read %d dead letters, counted %d before and %d after", q, seen, n, after)
	}
	return nil
}

// registry counts the workers in the registry, and those with a live lease.
func (c *checker) registry(ctx context.Context) (all, live int, err error) {
	ws, err := c.client.Workers(ctx)
	if err != nil {
		return 0, 0, err
	}
	n, err := c.admin.Do(ctx, c.admin.B().Zcard().Key(c.prefix+":{r}:workers").Build()).AsInt64()
	return int(n), len(ws), err
}

// drained waits until every job ran to completion and was finished in
// Redis, or went to the dead letters, every persistent task is held
// exactly once (but those in the dead letters, which it adds to buried),
// no task waits or is delayed, and the registry holds exactly the live
// worker processes (dead ones were reclaimed).
func (c *checker) drained(jobs []string, within time.Duration) string {
	c.buried = make(map[string]bool)
	return until(within, func() string {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		var missing []string
		undone, running := c.ledger.undone(jobs)
		dead := make(map[string][]deadLetter)
		if err := c.deadIn(ctx, connQueue, dead); err != nil {
			return err.Error()
		}
		for t := range dead {
			c.buried[t] = true
		}
		conns := c.alive()
		open := c.ledger.openRuns(conns)
		for _, t := range conns {
			if open[t] != 1 {
				missing = append(missing, fmt.Sprintf("%s held by %d handlers", t, open[t]))
			}
		}
		for _, q := range allQueues() {
			n, ps, err := c.queueState(ctx, q)
			if err != nil {
				return err.Error()
			}
			want := 0
			if q == connQueue {
				want = len(conns)
			}
			if n != 0 || len(ps) != want {
				missing = append(missing, fmt.Sprintf("%s: %d waiting or delayed, %d in flight (want 0, %d)%s", q, n, len(ps), want, describe(q, ps)))
			}
		}
		all, live, err := c.registry(ctx)
		if err != nil {
			return err.Error()
		}
		if procs := len(c.fleet.procs()); all != procs || live != procs {
			missing = append(missing, fmt.Sprintf("registry holds %d workers, %d live, for %d worker processes", all, live, procs))
		}
		if len(undone) > 0 && len(missing) == 0 && running == 0 {
			// Nothing waits or runs: a poison verdict dead-letters a task
			// no handler settled, so look for the rest among the dead
			// letters.
			dead, err := c.deadLetters(ctx)
			if err != nil {
				return err.Error()
			}
			undone = slices.DeleteFunc(undone, func(t string) bool { return len(dead[t]) > 0 })
		}
		if len(undone) > 0 || running > 0 {
			missing = append(missing, fmt.Sprintf("%d jobs neither completed nor dead (e.g. %s), %d handlers running", len(undone), first(undone, 5), running))
		}
		return strings.Join(missing, "; ")
	})
}

// atEnd counts, for each persistent task, the times it is waiting or in
// flight in its queue.
func (c *checker) atEnd() (map[string]int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	waiting, err := c.client.Range(ctx, connQueue, 0, -1)
	if err != nil {
		return nil, err
	}
	ps, err := c.client.Processes(ctx, connQueue)
	if err != nil {
		return nil, err
	}
	out := make(map[string]int)
	for _, t := range waiting {
		out[string(t)]++
	}
	for _, p := range ps {
		out[string(p.Task)]++
	}
	return out, nil
}

// probe checks that no worker is wedged: every worker process, on every
// queue, must fill all its free handler slots with probe tasks. As many
// probes are queued as there are free slots in all, so they are all held
// only if every worker took its full share; a worker that lost its
// subscription, its registration or its dequeue loop, or leaked a slot,
// leaves probes waiting and is named. Then the probes are released and
// must finish. It returns the wedged workers and any other failure.
func (c *checker) probe(tasks map[string]*taskInfo, within time.Duration) (wedged []string, problem string) {
	procs := c.fleet.procs()
	holding := c.ledger.holding()
	var probes []string
	for _, q := range allQueues() {
		free := len(procs) * concurrency(q)
		for _, p := range procs {
			free -= holding[p.name][q]
		}
		batch := make([][]byte, 0, free)
		for i := range free {
			t := fmt.Sprintf("probe-%s-%d", q, i)
			batch = append(batch, []byte(t))
			probes = append(probes, t)
			tasks[t] = &taskInfo{queue: q, kind: "probe", copies: []int64{now()}}
		}
		// Probes are held until released: their own timeout overrides
		// the job queues' jobTimeout.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := c.client.EnqueueBatch(ctx, q, batch, worqr.Timeout(time.Hour))
		cancel()
		if err != nil {
			return nil, err.Error()
		}
	}
	c.logf("probing: %d probe tasks fill every free slot of %d workers", len(probes), len(procs))
	short := func() []string {
		holding := c.ledger.holding()
		var out []string
		for _, p := range procs {
			for _, q := range allQueues() {
				if h := holding[p.name][q]; h != concurrency(q) {
					out = append(out, fmt.Sprintf("%s (%d/%d handlers on %s)", p.name, h, concurrency(q), q))
				}
			}
		}
		return out
	}
	if missing := until(within, func() string { return strings.Join(short(), ", ") }); missing != "" {
		wedged = short()
		problem = "probes not all taken: " + missing
	}
	c.fleet.tell("release")
	if missing := until(within, func() string {
		undone, running := c.ledger.undone(probes)
		if len(undone) > 0 || running > 0 {
			return fmt.Sprintf("%d probes not completed, %d running", len(undone), running)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		for _, q := range allQueues() {
			n, ps, err := c.queueState(ctx, q)
			if err != nil {
				return err.Error()
			}
			want := 0
			if q == connQueue {
				want = len(c.alive())
			}
			if n != 0 || len(ps) != want {
				return fmt.Sprintf("%s: %d waiting or delayed, %d in flight (want 0, %d)", q, n, len(ps), want)
			}
		}
		return ""
	}); missing != "" && problem == "" {
		problem = "probes not finished: " + missing
	}
	return wedged, problem
}

// janitor deals with worker ids that were fenced less than a TTL before
// the last worker shut down: their leases were still live, so no peer
// could reclaim them, and none is left to do it. As worqr intends, the
// next worker to start reclaims them: the janitor starts one (serving no
// queue) and waits until it has, then closes it. It returns how many it
// found, and what is still wrong after the wait.
func (c *checker) janitor(ttl time.Duration) (int, string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	all, _, err := c.registry(ctx)
	if err != nil || all == 0 {
		return 0, errString(err)
	}
	w, err := c.client.NewWorker(ctx, worqr.WorkerOptions{TTL: ttl})
	if err != nil {
		return all, err.Error()
	}
	missing := until(ttl+3*time.Second, func() string {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		n, _, err := c.registry(ctx)
		if err != nil {
			return err.Error()
		}
		if n != 1 {
			return fmt.Sprintf("%d workers registered besides the janitor", n-1)
		}
		return ""
	})
	if err := w.Close(ctx); err != nil && missing == "" {
		missing = err.Error()
	}
	return all, missing
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// finalState checks Redis after every worker shut down gracefully: the
// job queues are empty, the persistent tasks wait in their queue (shutdown
// gave them back), nothing is in flight and no worker is registered.
func (c *checker) finalState() []string {
	conns := len(c.alive())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var bad []string
	for _, q := range allQueues() {
		n, ps, err := c.queueState(ctx, q)
		if err != nil {
			return append(bad, err.Error())
		}
		want := int64(0)
		if q == connQueue {
			want = int64(conns)
		}
		if n != want || len(ps) != 0 {
			bad = append(bad, fmt.Sprintf("after shutdown %s has %d waiting or delayed (want %d) and %d in flight", q, n, want, len(ps)))
		}
	}
	all, _, err := c.registry(ctx)
	if err != nil {
		return append(bad, err.Error())
	}
	if all != 0 {
		bad = append(bad, fmt.Sprintf("after shutdown %d workers are still registered", all))
	}
	return bad
}

// orphans runs worqr's consistency check (read only) and lists what it
// found: processes nobody works on, dead or unregistered workers, queues
// missing from registries or registry entries without queues, and keys
// under the prefix that worqr did not write.
func (c *checker) orphans() (int, []string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rep, err := c.client.Check(ctx, worqr.CheckOptions{})
	if err != nil {
		return 0, nil, err
	}
	var found []string
	for _, p := range rep.OrphanedProcesses {
		found = append(found, fmt.Sprintf("orphaned process %s/%s of %s (%s)", p.Queue, p.ID, p.Owner, p.Task))
	}
	for _, w := range rep.DeadWorkers {
		found = append(found, "dead worker still registered: "+w)
	}
	for _, w := range rep.UnregisteredWorkers {
		found = append(found, "unregistered worker: "+w)
	}
	for _, wq := range rep.UnlistedQueues {
		found = append(found, fmt.Sprintf("queue %s missing from worker %s's queue set", wq.Queue, wq.Worker))
	}
	for _, q := range rep.UnregisteredQueues {
		found = append(found, "unregistered queue: "+q)
	}
	for _, q := range rep.StaleQueues {
		found = append(found, "stale queue registry entry: "+q)
	}
	for _, k := range rep.UnknownKeys {
		found = append(found, "unknown key: "+k)
	}
	if len(found) != rep.Problems() {
		found = append(found, "check report: "+rep.String())
	}
	sort.Strings(found)
	return rep.Problems(), found, nil
}

// describe names a job queue's processes in flight, a few of them.
func describe(q string, ps []worqr.ProcessInfo) string {
	if q == connQueue || len(ps) == 0 {
		return ""
	}
	var names []string
	for _, p := range ps {
		names = append(names, fmt.Sprintf("%s (pid %s, owner %.8s, attempt %d)", p.Task, p.ID, p.Owner, p.Attempt))
	}
	return ": " + first(names, 5)
}

func first(s []string, n int) string {
	s = slices.Clone(s)
	sort.Strings(s)
	if len(s) > n {
		return strings.Join(s[:n], " ") + " …"
	}
	return strings.Join(s, " ")
}
