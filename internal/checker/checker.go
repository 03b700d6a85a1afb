// Package checker is one run of the consistency check (Client.Check):
// it compares every key under the client's prefix with the registries,
// and repairs what it found.
//
// The consistency check is worqr's deep clean. The peers' reclaim is the
// light one: it finds dead workers through the registry and returns their
// work, which is enough as long as the registry tells the truth. The check
// does not trust the registry: it walks the keyspace with SCAN, on every
// node, and compares what the keys hold with what the registries say.
//
// Invariants it checks (each finding is one kind of problem):
//
//   - a process whose owner holds no live lease on its queue is being
//     worked on by nobody (Report.OrphanedProcesses);
//   - a worker with a lease entry, a process or a queue set is in the
//     worker registry (UnregisteredWorkers), and the queues where it holds
//     a lease or a process are in its queue set (UnlistedQueues): reclaim
//     finds work only that way;
//   - a worker in the registry has a live lease, or a peer is about to
//     reclaim it (DeadWorkers);
//   - a queue that exists, or holds waiting tasks, is in the queue
//     registry (UnregisteredQueues), and a queue in the registry exists
//     (StaleQueues);
//   - every key under the prefix is one of worqr's, of the type worqr
//     writes (UnknownKeys, BrokenQueues);
//   - a queue's count of weight in flight, which its concurrency limit
//     reads, matches the weights of its processes (MiscountedQueues), and
//     so does each group's count of the slots its processes hold, which
//     the group's limit reads (MiscountedGroups);
//   - a queue's stored controls can be read by the scripts
//     (UnreadableControls);
//   - a queue's gathering of aggregated tasks (see Aggregate) has a
//     deadline, without which MaxDelay would never flush it
//     (UndueGatherings);
//   - a queue keeps no field of its groups' turns that no dequeue would
//     read, or that one reads for nothing (StaleTurns);
//   - a workflow's keys exist only with its flow hash (LeftoverWorkflows),
//     an ended workflow's keys all expire (LastingWorkflows), and a
//     running workflow's step released to its queue is on its way there
//     (StalledSteps), and a queued one's task is in its queue or has left
//     a notice of its end (LostSteps), and one not ended is in some place
//     of its queue (VanishedSteps), and a step's end whose children are
//     not all settled has a notice pending that carries its release on
//     (StalledReleases).
//
// Registries live in slot {r} and queues in their own slots, so no look
// at both is atomic, and the state changes under the check. A finding
// that depends on both is confirmed by looking at the queue again after
// reading the registry: a worker seen in a queue before and after a
// registry read that did not list it was unregistered at that read (ids
// are never reused, and a worker holds leases and processes only while
// registered). Repairs never rely on what the check saw: each one judges
// again, atomically, in its own slot, and each is safe to run twice.
package checker

import (
	"cmp"
	"context"
	"errors"
	"maps"
	"slices"
	"strings"

	"github.com/worqr/worqr/internal/reclaim"
	"github.com/worqr/worqr/internal/scripts"
	"github.com/worqr/worqr/internal/store"
)

// Env is what a check takes of its client.
type Env struct {
	Store *store.Store
	// Fail wraps an error of the call op (on queue, if any) as the
	// client's errors say it.
	Fail func(op, queue string, err error) error
	// Valid says whether a queue may have this name.
	Valid func(queue string) bool
	// Reclaim reclaims a dead worker, as peers would.
	Reclaim func(ctx context.Context, id string) (reclaim.Reclaimed, error)
	// StepQueue reads the queue of a workflow step from its spec; false if
	// the spec cannot be read.
	StepQueue func(spec string) (string, bool)
	// EnqueueSteps enqueues a workflow's ready steps and marks them
	// queued, idempotently, as the workflow's carriers do.
	EnqueueSteps func(ctx context.Context, id string, steps []store.ReadyStep) error
	// StepTask is the task that runs a workflow's step, as its release
	// enqueues it.
	StepTask func(id string, step store.ReadyStep) (store.EnqueueOne, error)
	// ResumeRelease carries a workflow's step's end once more, as a
	// replay of its notice would (the notice's queue, the end as the
	// workflow recorded it): the release under way goes on from where it
	// stands until every child is settled, and the children it makes
	// ready are enqueued.
	ResumeRelease func(ctx context.Context, queue, id string, end store.StepEnd) error
	// StepsPage bounds the steps of a workflow one call reads; 0 is the
	// default (a test sets it small).
	StepsPage int
}

// Run checks, and with repair repairs what it found. On error the report
// holds what was found and repaired until then.
func Run(ctx context.Context, env *Env, repair bool) (Report, error) {
	var rep Report
	ck := &checker{c: env, s: env.Store.CheckScripts(), rep: &rep, broken: make(map[string]struct{})}
	if err := ck.run(ctx); err != nil {
		return rep, err
	}
	if repair {
		if err := ck.repair(ctx); err != nil {
			return rep, err
		}
	}
	return rep, nil
}

// checker holds one run of Check.
type checker struct {
	c   *Env
	s   *scripts.CheckSet
	rep *Report

	// What the scan found.
	names  map[string]struct{} // queues, by name
	broken map[string]struct{} // queues that could not be read
	sets   map[string]struct{} // workers with a queue set, by id
	flows  map[string]struct{} // workflows with a key, by id

	first    map[string]*queueLook // queues as first seen
	registry registryLook          // the registries, read after that

	// Findings to repair, beyond those in the report.
	repairQueues []string                     // queues with orphans, dead leases or no record
	adopt        map[string][]string          // worker -> queues to add to its set
	reclaim      map[string]struct{}          // dead workers to reclaim
	listed       map[WorkerQueue]bool         // UnlistedQueues, for the repair report
	unregistered map[string]struct{}          // UnregisteredWorkers
	stalled      map[string][]store.ReadyStep // workflow -> its ready steps nothing carries
	vanished     []vanishedStep               // VanishedSteps, with what their repair needs
	releases     []stalledRelease             // StalledReleases, with what their repair needs
}

// stalledRelease is a release under way that no notice carries on.
type stalledRelease struct {
	WorkflowStep
	queue string
	mark  store.ReleaseMark
}

// vanishedStep is a queued step whose task is gone from its queue.
type vanishedStep struct {
	WorkflowStep
	queue, spec string
}

// queueLook is one queue as check_queue.lua saw it.
type queueLook struct {
	exists  bool            // its meta record holds its name
	waiting int64           // tasks waiting
	owners  map[string]bool // workers with a lease entry or process -> lease live
	orphans []Orphan
	// miscounted is set when the queue's count of weight in flight does
	// not match its processes.
	miscounted bool
	// groups are the groups whose count of slots held does not match
	// their processes.
	groups     []store.GroupCount
	stale      int64       // progress reports whose process is gone
	undue      int64       // gatherings of aggregated tasks without a deadline
	turns      int64       // turn fields no dequeue would read
	unreadable [][2]string // controls the scripts cannot read: name, value
}

// registryLook is the registries as check_registry.lua saw them.
type registryLook = store.RegistryLook

func (ck *checker) fail(err error) error { return ck.c.Fail("consistency check", "", err) }

func (ck *checker) run(ctx context.Context) error {
	c := ck.c
	if err := ck.scan(ctx); err != nil {
		return err
	}
	// Registry names are read before the queues are looked at, so that a
	// registry entry with nothing behind it is looked at too.
	registered, err := c.Store.RegisteredQueueNames(ctx)
	if err != nil {
		return ck.fail(err)
	}
	for _, name := range registered {
		if c.Valid(name) {
			ck.names[name] = struct{}{}
		} else {
			// No queue can have this name (written by hand?): stale.
			ck.rep.StaleQueues = append(ck.rep.StaleQueues, name)
		}
	}
	names := slices.Sorted(maps.Keys(ck.names))
	ck.rep.QueuesChecked = len(names)
	if ck.first, err = ck.look(ctx, names); err != nil {
		return err
	}
	if err := ck.readRegistry(ctx); err != nil {
		return err
	}
	if err := ck.judge(ctx, registered); err != nil {
		return err
	}
	return ck.judgeWorkflows(ctx)
}

// scan walks every node's keyspace under the prefix.
func (ck *checker) scan(ctx context.Context) error {
	c := ck.c
	ck.names = make(map[string]struct{})
	ck.sets = make(map[string]struct{})
	ck.flows = make(map[string]struct{})
	unknown := make(map[string]struct{})
	keys := c.Store.Keys()
	valid := c.Valid
	// Only what is needed is kept, in sets (a replica repeats its master's
	// keys, and SCAN may return a key twice): memory grows with the
	// queues and workers, not with the keys.
	scanned, err := c.Store.ScanKeys(ctx, func(key string) {
		switch kind, val := keys.Parse(key, valid); kind {
		case store.KeyQueue:
			ck.names[val] = struct{}{}
		case store.KeyWorkerQueues:
			ck.sets[val] = struct{}{}
		case store.KeyWorkflow:
			ck.flows[val] = struct{}{}
		case store.KeyUnknown:
			unknown[key] = struct{}{}
		}
	})
	ck.rep.NodesScanned, ck.rep.KeysScanned = scanned.Nodes, scanned.Keys
	if err != nil {
		return ck.c.Fail("consistency check", "", err)
	}
	ck.rep.UnknownKeys = slices.Sorted(maps.Keys(unknown))
	return nil
}

// lookBatch bounds how many queue scripts go in one round trip.
const lookBatch = 256

// look runs check_queue.lua on queues, pipelined.
func (ck *checker) look(ctx context.Context, names []string) (map[string]*queueLook, error) {
	c := ck.c
	out := make(map[string]*queueLook, len(names))
	for start := 0; start < len(names); start += lookBatch {
		batch := names[start:min(start+lookBatch, len(names))]
		looks, err := c.Store.LookQueues(ctx, batch, ck.s)
		if err != nil {
			return nil, ck.fail(err)
		}
		for i, l := range looks {
			switch {
			case l.Broken:
				// A key of the queue holds what worqr never writes there
				// (WRONGTYPE): report it and check the rest.
				ck.broken[batch[i]] = struct{}{}
				continue
			case l.Err != nil:
				return nil, c.Fail("consistency check", batch[i], l.Err)
			}
			q := &queueLook{exists: l.Exists, waiting: l.Waiting, owners: l.Owners, miscounted: l.Counted != l.Held, groups: l.MiscountedGroups, stale: l.StaleProgress, undue: l.UndueGatherings, turns: l.StaleTurns, unreadable: l.Unreadable}
			for _, p := range l.Orphans {
				q.orphans = append(q.orphans, Orphan{Queue: batch[i], Proc: p})
			}
			slices.SortFunc(q.orphans, func(a, b Orphan) int {
				return cmp.Compare(store.PIDSeq(a.Proc.PID), store.PIDSeq(b.Proc.PID))
			})
			out[batch[i]] = q
		}
	}
	return out, nil
}

// readRegistry reads both registries and judges, in the same instant,
// every worker seen in a queue or with a queue set.
func (ck *checker) readRegistry(ctx context.Context) error {
	where := make(map[string][]string) // worker -> queues where it was seen
	for _, name := range slices.Sorted(maps.Keys(ck.first)) {
		for id := range ck.first[name].owners {
			where[id] = append(where[id], name)
		}
	}
	for id := range ck.sets {
		if _, ok := where[id]; !ok {
			where[id] = nil
		}
	}
	reg, err := ck.c.Store.ReadRegistry(ctx, where, ck.s)
	if err != nil {
		return ck.fail(err)
	}
	ck.registry = reg
	return nil
}

// judge turns the looks into findings, confirming those that compare a
// queue with a registry by looking at the queue once more.
func (ck *checker) judge(ctx context.Context, registeredBefore []string) error {
	rep, reg := ck.rep, ck.registry
	ck.adopt = make(map[string][]string)
	ck.reclaim = make(map[string]struct{})
	ck.listed = make(map[WorkerQueue]bool)
	ck.unregistered = make(map[string]struct{})

	before := make(map[string]bool, len(registeredBefore))
	for _, q := range registeredBefore {
		before[q] = true
	}
	// A queue is hidden when it holds tasks or exists but Queues does not
	// list it, and stale when the registry lists it but it holds nothing.
	hidden := func(name string, q *queueLook) bool {
		return (q.exists && !reg.Queues[name]) || (q.waiting > 0 && !q.exists)
	}
	stale := func(name string, q *queueLook) bool {
		return !q.exists && q.waiting == 0 && before[name] && reg.Queues[name]
	}
	// Candidates that need a second look at their queue.
	again := make(map[string]struct{})
	for name, q := range ck.first {
		if hidden(name, q) || stale(name, q) {
			again[name] = struct{}{}
		}
		for id := range q.owners {
			if j := reg.Judged[id]; !j.Registered || slices.Contains(j.Missing, name) {
				again[name] = struct{}{}
			}
		}
	}
	second, err := ck.look(ctx, slices.Sorted(maps.Keys(again)))
	if err != nil {
		return err
	}

	for _, name := range slices.Sorted(maps.Keys(ck.first)) {
		q := ck.first[name]
		for _, o := range q.orphans {
			rep.OrphanedProcesses = append(rep.OrphanedProcesses, o.Proc.Info(o.Queue))
		}
		rep.StaleProgress += q.stale
		rep.UndueGatherings += q.undue
		rep.StaleTurns += q.turns
		live := true
		for _, ok := range q.owners {
			live = live && ok
		}
		if q.miscounted {
			rep.MiscountedQueues = append(rep.MiscountedQueues, name)
		}
		for _, g := range q.groups {
			rep.MiscountedGroups = append(rep.MiscountedGroups, GroupCount{Queue: name, Group: g.Group, Counted: g.Counted, Held: g.Held})
		}
		for _, u := range q.unreadable {
			rep.UnreadableControls = append(rep.UnreadableControls, QueueControl{Queue: name, Control: u[0], Value: u[1]})
		}
		if len(q.orphans) > 0 || !live || (q.waiting > 0 && !q.exists) || q.miscounted || len(q.groups) > 0 || q.stale > 0 || q.undue > 0 || q.turns > 0 {
			ck.repairQueues = append(ck.repairQueues, name)
		}
		q2, ok := second[name]
		if !ok {
			continue
		}
		switch {
		case hidden(name, q) && hidden(name, q2):
			rep.UnregisteredQueues = append(rep.UnregisteredQueues, name)
		case stale(name, q) && stale(name, q2):
			rep.StaleQueues = append(rep.StaleQueues, name)
		}
		for id := range q.owners {
			if _, still := q2.owners[id]; !still {
				continue
			}
			j := reg.Judged[id]
			switch {
			case !j.Registered:
				ck.unregistered[id] = struct{}{}
				ck.adopt[id] = append(ck.adopt[id], name)
			case slices.Contains(j.Missing, name):
				wq := WorkerQueue{Worker: id, Queue: name}
				ck.listed[wq] = true
				rep.UnlistedQueues = append(rep.UnlistedQueues, wq)
				ck.adopt[id] = append(ck.adopt[id], name)
			}
		}
	}
	// A queue set without a registered worker: the judgement read both in
	// one instant, so it needs no second look.
	for id := range ck.sets {
		if j := reg.Judged[id]; !j.Registered && j.HasSet {
			ck.unregistered[id] = struct{}{}
			if _, ok := ck.adopt[id]; !ok {
				ck.adopt[id] = nil
			}
		}
	}
	if err := ck.confirmUnregistered(ctx); err != nil {
		return err
	}
	rep.UnregisteredWorkers = slices.Sorted(maps.Keys(ck.unregistered))
	slices.Sort(rep.StaleQueues)
	rep.BrokenQueues = slices.Sorted(maps.Keys(ck.broken))
	for id, left := range reg.Workers {
		if left <= 0 {
			rep.DeadWorkers = append(rep.DeadWorkers, id)
			ck.reclaim[id] = struct{}{}
		}
	}
	slices.Sort(rep.DeadWorkers)
	slices.SortFunc(rep.UnlistedQueues, func(a, b WorkerQueue) int {
		return strings.Compare(a.Worker+"\x00"+a.Queue, b.Worker+"\x00"+b.Queue)
	})
	return nil
}

// confirmUnregistered asks the queue registry once more about the queues
// found missing from it: a queue is created before it is registered, so
// one whose registration was under way during the check is in it by now.
func (ck *checker) confirmUnregistered(ctx context.Context) error {
	c, names := ck.c, ck.rep.UnregisteredQueues
	if len(names) == 0 {
		return nil
	}
	ins, err := c.Store.InQueueRegistry(ctx, names)
	if err != nil {
		return ck.fail(err)
	}
	still := names[:0]
	for i, in := range ins {
		// A queue the registry listed all along is hidden for another
		// reason: its record is missing.
		if !in || ck.registry.Queues[names[i]] {
			still = append(still, names[i])
		}
	}
	ck.rep.UnregisteredQueues = still
	return nil
}

// repair fixes what run found, in an order where each step leaves things
// no worse if the check stops there: queues first (orphans back in their
// queues), then the worker registry, then the queue registry.
func (ck *checker) repair(ctx context.Context) error {
	c, fixed := ck.c, &ck.rep.Repaired
	var errs []error

	// 1. Orphans back to the front; dead lease entries out.
	for i, r := range c.Store.RepairQueues(ctx, ck.repairQueues, ck.s) {
		if r.Err != nil {
			errs = append(errs, c.Fail("consistency repair", ck.repairQueues[i], r.Err))
			continue
		}
		fixed.Requeued += r.Requeued
		fixed.Dropped += r.Dropped
		fixed.LeasesRemoved += r.LeasesRemoved
		if r.Recounted {
			fixed.RecountedQueues = append(fixed.RecountedQueues, ck.repairQueues[i])
		}
		fixed.RecountedGroups += r.Regrouped
		fixed.RescheduledGatherings += r.Rescheduled
		fixed.ClearedTurns += r.Unturned
	}

	// 2. Workers the registry does not cover, entered so reclaim finds
	// them; 3. dead workers reclaimed as peers would.
	workers := slices.Sorted(maps.Keys(ck.adopt))
	queues := make([][]string, len(workers))
	for i, id := range workers {
		queues[i] = ck.adopt[id]
	}
	for i, a := range c.Store.Adopt(ctx, workers, queues, ck.s) {
		if a.Err != nil {
			errs = append(errs, c.Fail("consistency repair", "", a.Err))
			continue
		}
		id := workers[i]
		entered := a.Entered
		if entered {
			fixed.AdoptedWorkers = append(fixed.AdoptedWorkers, id)
		}
		if _, unreg := ck.unregistered[id]; unreg || entered {
			ck.reclaim[id] = struct{}{}
		}
		for _, q := range ck.adopt[id] {
			if ck.listed[WorkerQueue{Worker: id, Queue: q}] {
				fixed.ListedQueues = append(fixed.ListedQueues, WorkerQueue{Worker: id, Queue: q})
			}
		}
	}
	for _, id := range slices.Sorted(maps.Keys(ck.reclaim)) {
		r, err := c.Reclaim(ctx, id)
		fixed.Requeued += r.Requeued
		switch {
		case err != nil:
			errs = append(errs, err)
		case r.Done:
			fixed.ReclaimedWorkers = append(fixed.ReclaimedWorkers, id)
		default:
			fixed.PendingWorkers = append(fixed.PendingWorkers, id)
		}
	}

	// 4. Workflows: leftovers deleted, ended ones set to expire, ready
	// steps nothing carries enqueued.
	ids := slices.Concat(ck.rep.LeftoverWorkflows, ck.rep.LastingWorkflows)
	for i, r := range c.Store.RepairWorkflows(ctx, ids, ck.s) {
		switch {
		case r.Err != nil:
			errs = append(errs, c.Fail("consistency repair", "", r.Err))
		case r.Deleted:
			fixed.DeletedWorkflows = append(fixed.DeletedWorkflows, ids[i])
		case r.Expiring:
			fixed.ExpiringWorkflows = append(fixed.ExpiringWorkflows, ids[i])
		}
	}
	for _, id := range slices.Sorted(maps.Keys(ck.stalled)) {
		steps := ck.stalled[id]
		if err := c.EnqueueSteps(ctx, id, steps); err != nil {
			errs = append(errs, err)
			continue
		}
		for _, st := range steps {
			fixed.EnqueuedSteps = append(fixed.EnqueuedSteps, WorkflowStep{Workflow: id, Step: st.Name})
		}
	}

	// Steps whose task is gone: enqueued anew in their queue's slot, which
	// judges again and releases the step's unique key only once it finds
	// the old task gone; then the workflow is given the new task's id, and
	// only then the old task's pending mark is dropped, so that a repair
	// cut short between these calls is finished by the next one.
	for _, v := range ck.vanished {
		t, err := c.StepTask(v.Workflow, store.ReadyStep{Name: v.Step, Spec: v.spec})
		if err != nil {
			errs = append(errs, c.Fail("consistency repair", v.queue, err))
			continue
		}
		done, task, err := c.Store.RequeueStep(ctx, v.queue, v.Task, t, ck.s)
		if err != nil {
			errs = append(errs, c.Fail("consistency repair", v.queue, err))
			continue
		}
		if done != store.StepEnqueued && done != store.StepHeld {
			continue
		}
		if _, err := c.Store.SwapStepTask(ctx, v.Workflow, v.Step, v.Task, task, ck.s); err != nil {
			errs = append(errs, c.Fail("consistency repair", "", err))
			continue
		}
		if _, err := c.Store.ForgetTask(ctx, v.queue, v.Task, t.Args.Unique, ck.s); err != nil {
			errs = append(errs, c.Fail("consistency repair", v.queue, err))
			continue
		}
		if done == store.StepEnqueued {
			fixed.RequeuedSteps = append(fixed.RequeuedSteps, WorkflowStep{Workflow: v.Workflow, Step: v.Step, Task: task})
		}
	}

	// Releases under way that nothing carries on: the step's end is
	// carried once more, which settles its children from where its
	// release stands, each once, and enqueues those it makes ready.
	statuses := map[string]string{"ok": "ok", "dead": "dead", "x": "cancelled"}
	for _, r := range ck.releases {
		end := store.StepEnd{Step: r.Step, Task: r.Task, Status: statuses[r.mark.State], At: r.mark.Stamp}
		if err := c.ResumeRelease(ctx, r.queue, r.Workflow, end); err != nil {
			errs = append(errs, err)
			continue
		}
		fixed.ResumedReleases = append(fixed.ResumedReleases, r.WorkflowStep)
	}

	// 5. The queue registry.
	for _, name := range ck.rep.UnregisteredQueues {
		if err := c.Store.RegisterQueue(ctx, name); err != nil {
			errs = append(errs, c.Fail("consistency repair", name, err))
			continue
		}
		fixed.RegisteredQueues = append(fixed.RegisteredQueues, name)
	}
	for _, name := range ck.rep.StaleQueues {
		// Removed first, then the queue is asked whether it exists after
		// all (made meanwhile): the order DeleteQueue uses, so a queue
		// holding tasks is never left out of the registry for good.
		exists, err := c.Store.UnregisterQueue(ctx, name, ck.s)
		if err != nil {
			errs = append(errs, c.Fail("consistency repair", name, err))
			continue
		}
		if exists {
			if err := c.Store.RegisterQueue(ctx, name); err != nil {
				errs = append(errs, c.Fail("consistency repair", name, err))
			}
			continue
		}
		fixed.RemovedQueues = append(fixed.RemovedQueues, name)
	}
	return errors.Join(errs...)
}
