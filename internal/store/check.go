package store

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"

	"github.com/worqr/worqr/internal/scripts"
)

// This file has the calls of the consistency check (the root package's
// check.go holds its logic), and the probe for sharded pub/sub.

// DetectSharded tells whether events should use sharded pub/sub. On a
// cluster, ordinary PUBLISH is broadcast to every node; a shard channel in
// the queue's slot stays on the queue's shard and follows it through
// failovers and slot migrations. Every client of one cluster must choose
// alike, or none hears the others' events, so the choice must not depend
// on what a client sees of the topology when it is made: on a cluster,
// sharded pub/sub is used whenever the server has it (Redis 7). Servers
// that only emulate a cluster (miniredis answers CLUSTER SLOTS) or predate
// it answer SPUBLISH with an unknown-command error, and keep ordinary
// pub/sub, which is correct on any cluster. The probe publishes an empty
// message on probe, which no worker acts on. It waits at most 5 s, and
// less if ctx ends first.
func DetectSharded(ctx context.Context, rdb rueidis.Client, probe string) bool {
	if rdb.Mode() != rueidis.ClientModeCluster {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	err := rdb.Do(ctx, rdb.B().Spublish().Channel(probe).Message("").Build().Pin()).Error()
	if rerr, ok := rueidis.IsRedisErr(err); ok && strings.Contains(strings.ToLower(rerr.Error()), "unknown command") {
		return false
	}
	return true
}

// errNoAnswer is a read's failure when Redis did not answer it before the
// caller's deadline was near (see ScanKeys): not a context error, so the
// caller reports Redis as unavailable.
var errNoAnswer = errors.New("no answer before the deadline")

// Scanned is what ScanKeys saw.
type Scanned struct {
	Nodes int // nodes scanned, replicas included
	Keys  int // keys seen (a replica repeats its master's)
}

// ScanKeys walks every node's keyspace under the prefix with SCAN and
// calls seen with each key (possibly more than once).
func (s *Store) ScanKeys(ctx context.Context, seen func(key string)) (Scanned, error) {
	var out Scanned
	if err := s.enter(ctx, OpCheck, ""); err != nil {
		return out, err
	}
	match := globEscape(s.keys.prefix) + ":*"
	// rueidis retries a read while the caller's deadline leaves time for
	// it, and a try under way as the deadline passes fails with the
	// deadline: the scans stop a little before it, so that a Redis that
	// does not answer is told as such (unavailable), in time.
	sctx := ctx
	if dl, ok := ctx.Deadline(); ok {
		var cancel context.CancelFunc
		sctx, cancel = context.WithDeadline(ctx, dl.Add(-min(time.Until(dl)/10, 100*time.Millisecond)))
		defer cancel()
	}
	nodes := s.rdb.Nodes()
	for _, addr := range slices.Sorted(maps.Keys(nodes)) {
		node := nodes[addr]
		out.Nodes++
		var cursor uint64
		for {
			e, err := node.Do(sctx, node.B().Scan().Cursor(cursor).Match(match).Count(1000).Build().Pin()).AsScanEntry()
			// Unanswered by the early stop: unavailable, even if a stall of
			// this process let the caller's deadline pass too before this
			// ran (a caller that cancelled gets its own error).
			if err != nil && sctx.Err() != nil && !errors.Is(ctx.Err(), context.Canceled) {
				return out, fmt.Errorf("scan %s: %w", addr, errNoAnswer)
			}
			if err != nil {
				return out, fmt.Errorf("scan %s: %w", addr, err)
			}
			out.Keys += len(e.Elements)
			for _, key := range e.Elements {
				seen(key)
			}
			if cursor = e.Cursor; cursor == 0 {
				break
			}
		}
	}
	return out, nil
}

// QueueLook is one queue as check_queue.lua saw it.
type QueueLook struct {
	Exists  bool            // its meta record holds its name
	Waiting int64           // tasks waiting
	Owners  map[string]bool // workers with a lease entry or process -> lease live
	Orphans []Proc          // processes whose owner holds no live lease
	// Counted is the extra weight in flight the queue's count says
	// (meta 'wx'); Held what its processes hold. They differ only if the
	// count is wrong.
	Counted, Held int64
	// StaleProgress counts progress reports whose process is gone.
	StaleProgress int64
	// UndueGatherings counts the gatherings of aggregated tasks that hold
	// tasks but have no deadline.
	UndueGatherings int64
	// StaleTurns counts the groups' turn fields no dequeue would read.
	StaleTurns int64
	// MiscountedGroups are the groups whose count of slots held does not
	// match the weights of their processes, by group (unescaped).
	MiscountedGroups []GroupCount
	// Unreadable are the controls whose stored value the scripts cannot
	// read (control name, then the value, cut to 64 bytes), in the order
	// limit, rate, per.
	Unreadable [][2]string
	// Err is set when the queue could not be read; Broken when that was
	// because one of its keys holds what worqr never writes there.
	Err    error
	Broken bool
}

// LookQueues runs check_queue.lua on each queue, pipelined.
func (s *Store) LookQueues(ctx context.Context, names []string, sets *scripts.CheckSet) ([]QueueLook, error) {
	calls := make([]scripts.Call, len(names))
	for i, name := range names {
		k := s.keys.Queue(name)
		calls[i] = scripts.Call{Script: sets.Queue, Keys: []string{k.Waiting, k.Procs, k.Leases, k.Meta, k.Delayed, k.High, k.Low, k.Progress, k.GroupWait, k.GroupRunning, k.Gather, k.GatherDue, k.GroupLimits, k.GroupReady}}
	}
	results, err := s.runMulti(ctx, OpCheck, "", calls)
	if err != nil {
		return nil, err
	}
	out := make([]QueueLook, len(names))
	for i, res := range results {
		out[i] = parseQueueLook(res)
	}
	return out, nil
}

func parseQueueLook(res rueidis.RedisResult) QueueLook {
	parts, err := res.ToArray()
	if err != nil {
		_, reply := rueidis.IsRedisErr(err)
		return QueueLook{Err: err, Broken: reply}
	}
	if len(parts) != 10 {
		return QueueLook{Err: fmt.Errorf("check_queue.lua answered %d parts", len(parts))}
	}
	exists, err1 := parts[0].AsInt64()
	waiting, err2 := parts[1].AsInt64()
	owners, err3 := parts[2].ToArray()
	orphans, err4 := parts[3].AsStrSlice()
	weights, err5 := parts[4].AsIntSlice()
	if err5 == nil && len(weights) != 2 {
		err5 = fmt.Errorf("check_queue.lua answered %d weights", len(weights))
	}
	stray, err6 := parts[5].AsInt64()
	unreadable, err7 := parts[6].AsStrSlice()
	groups, err8 := parts[7].ToArray()
	undue, err9 := parts[8].AsInt64()
	turns, err10 := parts[9].AsInt64()
	if err := errors.Join(err1, err2, err3, err4, err5, err6, err7, err8, err9, err10); err != nil {
		return QueueLook{Err: err}
	}
	q := QueueLook{Exists: exists == 1, Waiting: waiting, Owners: make(map[string]bool, len(owners)/2), Counted: weights[0], Held: weights[1], StaleProgress: stray, UndueGatherings: undue, StaleTurns: turns}
	for i := 0; i+1 < len(owners); i += 2 {
		id, err1 := owners[i].ToString()
		live, err2 := owners[i+1].AsInt64()
		if err := errors.Join(err1, err2); err != nil {
			return QueueLook{Err: err}
		}
		q.Owners[id] = live == 1
	}
	for i := 0; i+2 < len(groups); i += 3 {
		g, err1 := groups[i].ToString()
		counted, err2 := groups[i+1].AsInt64()
		held, err3 := groups[i+2].AsInt64()
		if err := errors.Join(err1, err2, err3); err != nil {
			return QueueLook{Err: err}
		}
		if u, err := UnescapeGroup(g); err == nil {
			g = u
		}
		q.MiscountedGroups = append(q.MiscountedGroups, GroupCount{Group: g, Counted: counted, Held: held})
	}
	slices.SortFunc(q.MiscountedGroups, func(a, b GroupCount) int { return strings.Compare(a.Group, b.Group) })
	for i := 0; i+1 < len(unreadable); i += 2 {
		q.Unreadable = append(q.Unreadable, [2]string{unreadable[i], unreadable[i+1]})
	}
	for i := 0; i+3 < len(orphans); i += 4 {
		p := Proc{PID: orphans[i], Owner: orphans[i+1], State: State(orphans[i+2][0])}
		t := TaskOrRaw(orphans[i+3])
		t.Attempts++ // the attempt the process ran
		p.Task = t
		q.Orphans = append(q.Orphans, p)
	}
	return q
}

// GroupCount is a group's count of slots held as stored (-1: not a
// number) and as its processes hold them.
type GroupCount struct {
	Group         string
	Counted, Held int64
}

// RegistryLook is the registries as check_registry.lua saw them.
type RegistryLook struct {
	Queues  map[string]bool
	Workers map[string]int64 // id -> ms of lease left, <= 0 once expired
	Judged  map[string]Judgement
}

// Judgement is what check_registry.lua says of one candidate worker.
type Judgement struct {
	Registered bool
	HasSet     bool
	Missing    []string // queues its set does not list
}

// ReadRegistry reads both registries and judges, in the same instant,
// each candidate worker against the queues where it was seen.
func (s *Store) ReadRegistry(ctx context.Context, where map[string][]string, sets *scripts.CheckSet) (RegistryLook, error) {
	ids := slices.Sorted(maps.Keys(where))
	keys := make([]string, 0, 2+len(ids))
	keys = append(keys, s.keys.Workers(), s.keys.Queues())
	var args []string
	for _, id := range ids {
		keys = append(keys, s.keys.WorkerQueues(id))
		args = append(args, id, strconv.Itoa(len(where[id])))
		args = append(args, where[id]...)
	}
	var reg RegistryLook
	res, err := s.run(ctx, OpCheck, "", sets.Registry, keys, args)
	if err != nil {
		return reg, err
	}
	parts, err := res.ToArray()
	if err != nil {
		return reg, err
	}
	if len(parts) != 3 {
		return reg, fmt.Errorf("check_registry.lua answered %d parts", len(parts))
	}
	queues, err1 := parts[0].AsStrSlice()
	workers, err2 := parts[1].ToArray()
	judged, err3 := parts[2].ToArray()
	if err := errors.Join(err1, err2, err3); err != nil {
		return reg, err
	}
	if len(judged) != len(ids) {
		return reg, fmt.Errorf("check_registry.lua judged %d workers of %d", len(judged), len(ids))
	}
	reg = RegistryLook{Queues: make(map[string]bool, len(queues)), Workers: make(map[string]int64, len(workers)/2), Judged: make(map[string]Judgement, len(ids))}
	for _, q := range queues {
		reg.Queues[q] = true
	}
	for i := 0; i+1 < len(workers); i += 2 {
		id, err1 := workers[i].ToString()
		left, err2 := workers[i+1].AsInt64()
		if err := errors.Join(err1, err2); err != nil {
			return reg, err
		}
		reg.Workers[id] = left
	}
	for i, id := range ids {
		j, err := judged[i].ToArray()
		if err != nil || len(j) != 3 {
			return reg, errors.Join(err, errors.New("check_registry.lua: bad judgement"))
		}
		registered, err1 := j[0].AsInt64()
		hasSet, err2 := j[1].AsInt64()
		missing, err3 := j[2].AsStrSlice()
		if err := errors.Join(err1, err2, err3); err != nil {
			return reg, err
		}
		reg.Judged[id] = Judgement{Registered: registered == 1, HasSet: hasSet == 1, Missing: missing}
	}
	return reg, nil
}

// RegisteredQueueNames lists the queue registry as it is, deleted queues
// included.
func (s *Store) RegisteredQueueNames(ctx context.Context) ([]string, error) {
	if err := s.enter(ctx, OpCheck, ""); err != nil {
		return nil, err
	}
	return s.rdb.Do(ctx, s.b().Smembers().Key(s.keys.Queues()).Build().Pin()).AsStrSlice()
}

// InQueueRegistry reports for each name whether the queue registry has it.
func (s *Store) InQueueRegistry(ctx context.Context, names []string) ([]bool, error) {
	if err := s.enter(ctx, OpCheck, ""); err != nil {
		return nil, err
	}
	cmds := make(rueidis.Commands, len(names))
	for i, name := range names {
		cmds[i] = s.b().Sismember().Key(s.keys.Queues()).Member(name).Build().Pin()
	}
	out := make([]bool, len(names))
	for i, res := range s.rdb.DoMulti(ctx, cmds...) {
		in, err := res.AsBool()
		if err != nil {
			return nil, err
		}
		out[i] = in
	}
	return out, nil
}

// QueueRepair is what check_repair.lua did to one queue.
type QueueRepair struct {
	Requeued, Dropped, LeasesRemoved int64
	// Recounted is set when the count of weight in flight was wrong and
	// was set right.
	Recounted bool
	// Regrouped counts the groups whose count of slots held was wrong and
	// was set right.
	Regrouped int64
	// Rescheduled counts the gatherings without a deadline that were
	// given one.
	Rescheduled int64
	// Unturned counts the turn fields no dequeue would read that were
	// removed.
	Unturned int64
	Err      error
}

// RepairQueues runs check_repair.lua on each queue, pipelined.
func (s *Store) RepairQueues(ctx context.Context, names []string, sets *scripts.CheckSet) []QueueRepair {
	calls := make([]scripts.Call, len(names))
	for i, name := range names {
		k := s.keys.Queue(name)
		calls[i] = scripts.Call{Script: sets.Repair, Keys: append([]string{k.Waiting, k.Procs, k.Leases, k.Meta, k.Delayed, k.Errors, k.Unique, k.Idle, k.High, k.Low, k.Progress}, append(k.groups(), k.Gather, k.GatherDue)...), Args: []string{k.Channel, name}}
	}
	out := make([]QueueRepair, len(names))
	results, err := s.runMulti(ctx, OpCheck, "", calls)
	for i := range out {
		if err != nil {
			out[i].Err = err
			continue
		}
		n, err := results[i].AsIntSlice()
		if err == nil && len(n) != 8 {
			err = fmt.Errorf("check_repair.lua answered %d values", len(n))
		}
		if err != nil {
			out[i].Err = err
			continue
		}
		out[i] = QueueRepair{Requeued: n[0], Dropped: n[1], LeasesRemoved: n[2], Recounted: n[4] == 1, Regrouped: n[5], Rescheduled: n[6], Unturned: n[7]}
	}
	return out
}

// Adopted is what check_adopt.lua did for one worker.
type Adopted struct {
	Entered bool // the worker was entered in the registry (as dead)
	Err     error
}

// Adopt makes the registry cover each worker and the queues where it holds
// work, pipelined; ids and queues are parallel.
func (s *Store) Adopt(ctx context.Context, ids []string, queues [][]string, sets *scripts.CheckSet) []Adopted {
	calls := make([]scripts.Call, len(ids))
	for i, id := range ids {
		calls[i] = scripts.Call{Script: sets.Adopt, Keys: []string{s.keys.Workers(), s.keys.WorkerQueues(id)}, Args: append([]string{id}, queues[i]...)}
	}
	out := make([]Adopted, len(ids))
	results, err := s.runMulti(ctx, OpCheck, "", calls)
	for i := range out {
		if err != nil {
			out[i].Err = err
			continue
		}
		n, err := results[i].AsInt64()
		out[i] = Adopted{Entered: n == 1, Err: err}
	}
	return out
}

// UnregisterQueue removes a queue from the registry, then asks the queue
// whether it exists after all (made meanwhile: the caller registers it
// again), clearing its confirmation: the order DeleteQueue uses.
func (s *Store) UnregisterQueue(ctx context.Context, name string, sets *scripts.CheckSet) (exists bool, err error) {
	if err := s.enter(ctx, OpCheck, ""); err != nil {
		return false, err
	}
	if err := s.rdb.Do(ctx, s.b().Srem().Key(s.keys.Queues()).Member(name).Build().Pin()).Error(); err != nil {
		return false, err
	}
	n, err := sets.Unregister.Exec(ctx, s.rdb, []string{s.keys.Queue(name).Meta}, nil).AsInt64()
	return n == 1, err
}

// CheckScripts builds the check's scripts (rare: built per check).
func (s *Store) CheckScripts() *scripts.CheckSet { return scripts.LoadCheck(s.sharded) }

// WorkflowLook is one workflow as check_workflow.lua saw it.
type WorkflowLook struct {
	// State is the workflow's state; "" when its flow hash is gone, "?"
	// when that holds no state.
	State string
	// Keys counts its keys that exist; Lasting those that do not expire.
	Keys, Lasting int64
	// Steps are, while it runs, its steps ready or queued; Specs the
	// specs of the steps their FreedBy name, by step.
	Steps []LookedStep
	Specs map[string]string
	// Marks are, while it runs and only at a look that names no step,
	// its releases under way: the steps whose end has children left to
	// settle.
	Marks []ReleaseMark
	// Err is set when the workflow could not be read; Broken when that
	// was because one of its keys holds what worqr never writes there.
	Err    error
	Broken bool
}

// ReleaseMark is a step of a running workflow whose end has children
// left to settle (wf_release.lua settles them a thousand a call).
type ReleaseMark struct {
	Step string
	// At is where its release stands: the byte of its list of children
	// where the next one to settle starts.
	At string
	// State is the step's ("ok", "dead" or "x"); TaskID its task's id.
	State, TaskID string
	// Stamp is when the notice of its end the workflow recorded was
	// written (µs), which a replay of that notice carries.
	Stamp int64
	// Spec is the step's spec, cut after its queue.
	Spec string
}

// LookedStep is a workflow's step that is ready (being enqueued) or queued.
type LookedStep struct {
	Name, State string
	// TaskID is its task's id, "" until the workflow knows it.
	TaskID string
	Spec   string
	// FreedBy are the steps whose end made it ready, whose notices carry
	// it: its parents', or, for a step a death's cascade freed (its
	// parent cancelled by the cascade), the step whose end began the
	// cascade; none if it had no parents.
	FreedBy []string
}

// Ended says whether a workflow's state is one of an ended workflow.
func Ended(state string) bool {
	return state == "succeeded" || state == "failed" || state == "cancelled"
}

// AllSteps, as the steps LookWorkflows asks about, asks about every step
// of a workflow created before its steps' order was kept (StepsPage.Total
// is -1), which cannot be read a page at a time.
var AllSteps = []string{"*"}

// LookWorkflows runs check_workflow.lua on each workflow, pipelined,
// asking about steps[i] of workflow ids[i] (none: its state and keys
// only); the specs of those steps are answered whole with full, else cut
// after their queue.
func (s *Store) LookWorkflows(ctx context.Context, ids []string, steps [][]string, full bool, sets *scripts.CheckSet) ([]WorkflowLook, error) {
	calls := make([]scripts.Call, len(ids))
	for i, id := range ids {
		args := []string{"0"}
		if full {
			args[0] = "1"
		}
		if steps != nil {
			args = append(args, steps[i]...)
		}
		calls[i] = scripts.Call{Script: sets.Workflow, Keys: s.keys.Workflow(id).all(), Args: args}
	}
	results, err := s.runMulti(ctx, OpCheck, "", calls)
	if err != nil {
		return nil, err
	}
	out := make([]WorkflowLook, len(ids))
	for i, res := range results {
		out[i] = parseWorkflowLook(res)
	}
	return out, nil
}

// PageAsk asks for a page of a workflow's steps (StepPages).
type PageAsk struct {
	ID          string
	From, Limit int
}

// StepPage is a page of a workflow's steps as StepPages read it: Found
// is false for a workflow unknown, or ended and expired. Err is set when
// it could not be read; Broken when that was because one of its keys
// holds what worqr never writes there.
type StepPage struct {
	StepsPage
	Found  bool
	Err    error
	Broken bool
}

// StepPages reads pages of workflows' steps, pipelined, as WorkflowSteps
// reads one (wf_steps.lua), each step with one parent at most.
func (s *Store) StepPages(ctx context.Context, asks []PageAsk) ([]StepPage, error) {
	calls := make([]scripts.Call, len(asks))
	for i, a := range asks {
		calls[i] = scripts.Call{Script: s.scripts.WorkflowSteps, Keys: s.keys.Workflow(a.ID).all(),
			Args: []string{strconv.Itoa(a.From), strconv.Itoa(a.Limit), "1"}}
	}
	results, err := s.runMulti(ctx, OpCheck, "", calls)
	if err != nil {
		return nil, err
	}
	out := make([]StepPage, len(asks))
	for i, res := range results {
		vals, err := res.AsStrSlice()
		if err != nil {
			_, out[i].Broken = rueidis.IsRedisErr(err)
			out[i].Err = fmt.Errorf("wf_steps.lua: %w", err)
			continue
		}
		out[i].StepsPage, out[i].Found, out[i].Err = parseStepsPage(vals)
	}
	return out, nil
}

func parseWorkflowLook(res rueidis.RedisResult) WorkflowLook {
	parts, err := res.ToArray()
	if err != nil {
		_, reply := rueidis.IsRedisErr(err)
		return WorkflowLook{Err: err, Broken: reply}
	}
	if len(parts) != 6 {
		return WorkflowLook{Err: fmt.Errorf("check_workflow.lua answered %d parts", len(parts))}
	}
	state, err1 := parts[0].ToString()
	keys, err2 := parts[1].AsInt64()
	lasting, err3 := parts[2].AsInt64()
	steps, err4 := parts[3].AsStrSlice()
	named, err5 := parts[4].AsStrSlice()
	marks, err6 := parts[5].AsStrSlice()
	if err := errors.Join(err1, err2, err3, err4, err5, err6); err != nil {
		return WorkflowLook{Err: err}
	}
	w := WorkflowLook{State: state, Keys: keys, Lasting: lasting, Specs: make(map[string]string, len(named)/2)}
	for i := 0; i+1 < len(named); i += 2 {
		w.Specs[named[i]] = named[i+1]
	}
	for i := 0; i+4 < len(steps); i += 5 {
		st := LookedStep{Name: steps[i], State: steps[i+1], TaskID: steps[i+2], Spec: steps[i+3]}
		if steps[i+4] != "" {
			st.FreedBy = strings.Split(steps[i+4], ",")
		}
		w.Steps = append(w.Steps, st)
	}
	slices.SortFunc(w.Steps, func(a, b LookedStep) int { return strings.Compare(a.Name, b.Name) })
	for i := 0; i+5 < len(marks); i += 6 {
		stamp, err := strconv.ParseInt(marks[i+4], 10, 64)
		if err != nil {
			// A step whose end the workflow did not note (written by
			// hand): no replay of its notice can be told.
			stamp = -1
		}
		w.Marks = append(w.Marks, ReleaseMark{Step: marks[i], At: marks[i+1], State: marks[i+2], TaskID: marks[i+3], Stamp: stamp, Spec: marks[i+5]})
	}
	slices.SortFunc(w.Marks, func(a, b ReleaseMark) int { return strings.Compare(a.Step, b.Step) })
	return w
}

// WorkflowRepair is what check_wf_repair.lua did to one workflow.
type WorkflowRepair struct {
	// Deleted is set when its keys were deleted, its flow hash being gone;
	// Expiring when its keys that did not expire were set to. Keys counts
	// the keys changed.
	Deleted, Expiring bool
	Keys              int64
	Err               error
}

// RepairWorkflows runs check_wf_repair.lua on each workflow, pipelined.
func (s *Store) RepairWorkflows(ctx context.Context, ids []string, sets *scripts.CheckSet) []WorkflowRepair {
	calls := make([]scripts.Call, len(ids))
	for i, id := range ids {
		calls[i] = scripts.Call{Script: sets.WfRepair, Keys: s.keys.Workflow(id).all()}
	}
	out := make([]WorkflowRepair, len(ids))
	results, err := s.runMulti(ctx, OpCheck, "", calls)
	for i := range out {
		if err != nil {
			out[i].Err = err
			continue
		}
		parts, err := results[i].ToArray()
		if err == nil && len(parts) != 2 {
			err = fmt.Errorf("check_wf_repair.lua answered %d parts", len(parts))
		}
		if err != nil {
			out[i].Err = err
			continue
		}
		done, err1 := parts[0].ToString()
		n, err2 := parts[1].AsInt64()
		if err := errors.Join(err1, err2); err != nil {
			out[i].Err = err
			continue
		}
		out[i] = WorkflowRepair{Deleted: done == "deleted", Expiring: done == "expiring", Keys: n}
	}
	return out
}

// PendingNotices says, for each notice prefix ("<workflow>.<step>," or
// with the task's id after it), whether a queue's flows set holds a notice
// that starts with it: one that a carry or a sweep will carry.
func (s *Store) PendingNotices(ctx context.Context, queue string, prefixes []string) ([]bool, error) {
	if err := s.enter(ctx, OpCheck, queue); err != nil {
		return nil, err
	}
	key := s.queueKeys(queue).Flows
	out := make([]bool, len(prefixes))
	seen := make(map[string]bool) // a parent's notice is asked about once per child
	for i, p := range prefixes {
		if found, ok := seen[p]; ok {
			out[i] = found
			continue
		}
		var cursor uint64
		for {
			e, err := s.rdb.Do(ctx, s.b().Zscan().Key(key).Cursor(cursor).Match(globEscape(p)+"*").Count(1000).Build()).AsScanEntry()
			if err != nil {
				return nil, err
			}
			if len(e.Elements) > 0 {
				out[i] = true
				break
			}
			if cursor = e.Cursor; cursor == 0 {
				break
			}
		}
		seen[p] = out[i]
	}
	return out, nil
}

// Retained states of a task, as TaskOutcomes reads them.
const (
	RetainedNone    = iota // no outcome listed: never retained, unlisted, expired or lost
	RetainedPending        // listed, not ended yet
	RetainedEnded          // ended, its outcome kept
)

// TaskOutcomes reads, for each task id of a queue, whether its retained
// outcome is listed and whether the task has ended (its score in the
// queue's retained set: +inf until it ends).
func (s *Store) TaskOutcomes(ctx context.Context, queue string, ids []string) ([]int, error) {
	if err := s.enter(ctx, OpCheck, queue); err != nil {
		return nil, err
	}
	key := s.queueKeys(queue).Retained
	cmds := make(rueidis.Commands, len(ids))
	for i, id := range ids {
		cmds[i] = s.b().Zscore().Key(key).Member(id).Build()
	}
	out := make([]int, len(ids))
	for i, res := range s.rdb.DoMulti(ctx, cmds...) {
		score, err := res.ToString()
		switch {
		case rueidis.IsRedisNil(err):
			out[i] = RetainedNone
		case err != nil:
			return nil, err
		case score == "inf" || score == "+inf":
			out[i] = RetainedPending
		default:
			out[i] = RetainedEnded
		}
	}
	return out, nil
}

// Bounds of one search of a queue for workflow steps' tasks (see
// tasks_search in check_step_gone.lua): entries read and their bytes. A
// queue that holds more is not searched whole, so its steps are not
// judged gone. The search costs Redis some microseconds an entry (the
// entries are read into the script), so the bound keeps one call within
// a fraction of a second.
const (
	StepSearchLimit  = 50_000
	StepSearchBudget = 16 << 20
)

// goneBatch bounds the task ids one check_step_gone.lua call looks for.
const goneBatch = 500

// GoneTasks says, for each task id of a queue, whether it is gone: listed
// as pending (not ended) in the queue's retained set, but in none of the
// places a task lives (check_step_gone.lua). A queue too large to search
// within the bounds answers false for each.
func (s *Store) GoneTasks(ctx context.Context, queue string, ids []string, sets *scripts.CheckSet) ([]bool, error) {
	k := s.queueKeys(queue)
	keys := []string{k.Procs, k.Delayed, k.Dead, k.High, k.Waiting, k.Low, k.GroupWait, k.Gather, k.Retained}
	out := make([]bool, 0, len(ids))
	for chunk := range slices.Chunk(ids, goneBatch) {
		args := append([]string{strconv.Itoa(StepSearchLimit), strconv.Itoa(StepSearchBudget)}, chunk...)
		res, err := s.run(ctx, OpCheck, queue, sets.StepGone, keys, args)
		if err != nil {
			return nil, err
		}
		vals, err := res.AsIntSlice()
		if err == nil && len(vals) != 1+len(chunk) {
			err = fmt.Errorf("check_step_gone.lua answered %d values for %d tasks", len(vals), len(chunk))
		}
		if err != nil {
			return nil, err
		}
		for _, v := range vals[1:] {
			out = append(out, v == 1)
		}
	}
	return out, nil
}

// What RequeueStep did.
const (
	StepEnqueued = "enqueued" // the step's task is a new one
	StepHeld     = "held"     // enqueued already: the unique key's holder is the new task
	StepEnded    = "ended"    // the old task is not pending any more: nothing done
	StepPresent  = "present"  // the old task is in its queue: nothing done
	StepPartial  = "partial"  // the queue is too large to search: nothing done
)

// RequeueStep enqueues anew a workflow step whose task old is gone from
// queue (check_step_requeue.lua), t being the step's task as its release
// enqueues it. It answers what it did and the new task's id.
func (s *Store) RequeueStep(ctx context.Context, queue, old string, t EnqueueOne, sets *scripts.CheckSet) (string, string, error) {
	k := s.queueKeys(queue)
	keys := []string{k.Procs, k.Delayed, k.Dead, k.High, k.Waiting, k.Low, k.GroupWait, k.Gather, k.Retained,
		k.Unique, k.UniqueTTL, k.Meta, k.Idle, k.GroupReady}
	args := append([]string{k.Channel, queue, old, strconv.Itoa(StepSearchLimit), strconv.Itoa(StepSearchBudget)}, stepArgs(t)...)
	res, err := s.run(ctx, OpCheck, queue, sets.StepRequeue, keys, args)
	if err != nil {
		return "", "", err
	}
	vals, err := res.AsStrSlice()
	if err == nil && len(vals) != 3 {
		err = fmt.Errorf("check_step_requeue.lua answered %d values", len(vals))
	}
	if err != nil {
		return "", "", err
	}
	if vals[2] == "1" {
		if err := s.RegisterQueue(ctx, queue); err != nil {
			return vals[0], vals[1], err
		}
	}
	return vals[0], vals[1], nil
}

// SwapStepTask gives a queued step of a running workflow the id of the
// task that replaced old (check_step_swap.lua); false if the workflow
// names another task, or the step is not queued, or the workflow ended.
func (s *Store) SwapStepTask(ctx context.Context, id, step, old, task string, sets *scripts.CheckSet) (bool, error) {
	res, err := s.run(ctx, OpCheck, "", sets.StepSwap, s.keys.Workflow(id).all(), []string{step, old, task})
	if err != nil {
		return false, err
	}
	n, err := res.AsInt64()
	return n == 1, err
}

// ForgetTask drops the pending mark of a step's gone task old once the
// step's unique key (unique) has another holder (check_step_forget.lua).
func (s *Store) ForgetTask(ctx context.Context, queue, old, unique string, sets *scripts.CheckSet) (bool, error) {
	k := s.queueKeys(queue)
	res, err := s.run(ctx, OpCheck, queue, sets.StepForget, []string{k.Retained, k.Unique}, []string{old, uniqueSum(unique)})
	if err != nil {
		return false, err
	}
	n, err := res.AsInt64()
	return n == 1, err
}
