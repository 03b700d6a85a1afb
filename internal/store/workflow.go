package store

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/worqr/worqr/internal/scripts"
)

// A workflow's state lives in a slot of its own, {wf:<id>} (see
// WorkflowKeys), and its tasks in their queues' slots: the scripts here
// run in the workflow's slot, except FlowNotices and ForgetNotices, which
// run in a queue's. How the two meet is described in wf_release.lua and in
// docs/workflows.md.

// workflowOp is the name a Fault is told for a workflow's calls.
func workflowOp(id string) string { return "wf:" + id }

// WorkflowStep is one step of a workflow to create.
type WorkflowStep struct {
	Name string
	// Spec is what its task is enqueued with, as the caller encodes it;
	// the scripts store and return it as it is.
	Spec string
	// Parents are the steps it waits for; Kids the steps that wait for
	// it, each with a '+' before it if it runs whatever this step's end.
	Parents []string
	Kids    []string
	// Place is its place in the order WorkflowSteps lists the steps in,
	// from 0: each place once.
	Place int
}

// ReadyStep is a step whose parents have all ended so that it may run, to
// be enqueued with its spec.
type ReadyStep struct {
	Name, Spec string
}

// QueuedStep is a step whose task is in a queue (or was), with its id.
type QueuedStep struct {
	Name, TaskID, Spec string
}

// Workflow creation outcomes (CreateWorkflow).
const (
	WorkflowNew   = "new"   // created
	WorkflowSame  = "same"  // existed with the same checksum: a retried call
	WorkflowTaken = "taken" // existed with another checksum
)

// CreateWorkflow creates a workflow with its steps (wf_create.lua), unless
// one of that id exists; each step's Place is kept, the order
// WorkflowSteps reads them in. It returns what it did and the steps that are
// ready to be enqueued: those without parents (or, for WorkflowSame, those
// still not marked queued).
func (s *Store) CreateWorkflow(ctx context.Context, id, sum string, keep time.Duration, steps []WorkflowStep) (string, []ReadyStep, error) {
	args := make([]string, 0, 2+6*len(steps))
	args = append(args, sum, strconv.FormatInt(max(keep.Milliseconds(), 1), 10))
	for _, st := range steps {
		args = append(args, st.Name, st.Spec, strings.Join(st.Parents, ","), strings.Join(st.Kids, ","), strconv.Itoa(len(st.Parents)), strconv.Itoa(st.Place))
	}
	vals, err := s.workflowCall(ctx, id, "wf_create.lua", s.scripts.WorkflowCreate, args)
	if err != nil {
		return "", nil, err
	}
	if len(vals) == 0 || len(vals)%2 != 1 {
		return "", nil, fmt.Errorf("wf_create.lua answered %d values", len(vals))
	}
	return vals[0], readySteps(vals[1:]), nil
}

// StepEnd is the end of a step's task (of id Task; Status "ok" with its
// Result, "dead" or "cancelled"), or its revival ("revived": requeued from the dead
// letters), as its notice, written at At (µs, Redis clock), told it.
type StepEnd struct {
	Step, Task, Status, Result string
	At                         int64
}

// ReleaseStep records one step's end (ReleaseSteps).
func (s *Store) ReleaseStep(ctx context.Context, id, step, task, status, result string, at int64) ([]ReadyStep, error) {
	return s.ReleaseSteps(ctx, id, []StepEnd{{Step: step, Task: task, Status: status, Result: result, At: at}})
}

// ReleaseSteps records the ends of a workflow's steps, in order
// (wf_release.lua, called until their children are all settled), and
// returns the steps those ends made ready and that are not yet marked
// queued, each once. Idempotent: a second call records nothing and
// returns those steps again.
func (s *Store) ReleaseSteps(ctx context.Context, id string, ends []StepEnd) ([]ReadyStep, error) {
	var out []ReadyStep
	enqueued := false
	for {
		ready, more, err := s.ReleaseChunk(ctx, id, ends, enqueued)
		if err != nil {
			return nil, err
		}
		out = append(out, ready...)
		if !more {
			return out, nil
		}
		enqueued = true
	}
}

// ReleaseChunk records the ends of a workflow's steps, in order, in one
// call (wf_release.lua), which settles at most a thousand of their
// children (those of a release under way of a step named first, from
// where it stands); more tells that children are left, for a next call
// with the same ends. It returns the steps made ready and not yet marked
// queued: with enqueued (the caller enqueued what the call before
// returned), only those this call made ready; else also those the ends
// made ready before (a replay after a crash).
func (s *Store) ReleaseChunk(ctx context.Context, id string, ends []StepEnd, enqueued bool) (ready []ReadyStep, more bool, err error) {
	args := make([]string, 0, 2+5*len(ends))
	args = append(args, s.keys.Workflow(id).Channel, "0")
	if enqueued {
		args[1] = "1"
	}
	for _, e := range ends {
		args = append(args, e.Step, e.Status, e.Result, strconv.FormatInt(e.At, 10), e.Task)
	}
	vals, err := s.workflowCall(ctx, id, "wf_release.lua", s.scripts.WorkflowRelease, args)
	if err != nil {
		return nil, false, err
	}
	if len(vals)%2 != 1 {
		return nil, false, fmt.Errorf("wf_release.lua answered %d values", len(vals))
	}
	return readySteps(vals[1:]), vals[0] == "1", nil
}

// StepsEnqueued marks steps queued with their tasks' ids (wf_enqueued.lua),
// and returns those that were cancelled meanwhile, whose tasks the caller
// cancels.
func (s *Store) StepsEnqueued(ctx context.Context, id string, queued []QueuedStep) ([]QueuedStep, error) {
	if len(queued) == 0 {
		return nil, nil
	}
	args := make([]string, 0, 2*len(queued))
	for _, q := range queued {
		args = append(args, q.Name, q.TaskID)
	}
	vals, err := s.workflowCall(ctx, id, "wf_enqueued.lua", s.scripts.WorkflowEnqueued, args)
	if err != nil {
		return nil, err
	}
	return queuedSteps("wf_enqueued.lua", vals)
}

// CancelWorkflow cancels a running workflow's steps that have not ended
// (wf_cancel.lua). It returns the workflow's state before ("" for none;
// "running" if it cancelled it) and the steps whose tasks are queued, for
// the caller to cancel in their queues.
func (s *Store) CancelWorkflow(ctx context.Context, id string) (string, []QueuedStep, error) {
	w := s.keys.Workflow(id)
	vals, err := s.workflowCall(ctx, id, "wf_cancel.lua", s.scripts.WorkflowCancel, []string{w.Channel})
	if err != nil {
		return "", nil, err
	}
	if len(vals) == 0 {
		return "", nil, fmt.Errorf("wf_cancel.lua answered nothing")
	}
	if vals[0] != "running" {
		return vals[0], nil, nil
	}
	q, err := queuedSteps("wf_cancel.lua", vals[1:])
	return vals[0], q, err
}

// WorkflowRecord is a workflow's state as stored.
type WorkflowRecord struct {
	State   string // running, succeeded, failed, cancelled
	Created int64  // Unix ms, Redis clock
	Ended   int64  // Unix ms, Redis clock; 0 while running
	Steps   []StepRecord
}

// StepRecord is one step's state as stored.
type StepRecord struct {
	Name    string
	State   string // w, r, q, ok, dead, x (see StepStates)
	TaskID  string // "" until queued
	Parents []string
	Spec    string
}

// statePage is the most steps one paged call of a workflow's state read
// (wf_state.lua) reads: a read of ten thousand steps holds Redis a page's
// time a call (some 9 M Redis instructions, against 190 M for the
// whole in one call), not the whole read's.
const statePage = 500

// stateReads bounds the reads of a workflow's state that WorkflowState
// makes: those before the last in pages, the last in one call.
const stateReads = 3

// WorkflowState reads a workflow's state and every step's
// (wf_state.lua), a page of statePage steps a call; false if the
// workflow is unknown, or ended and expired.
// The pages are read one after another, each step after its children
// (the order kept at create, from its end), so that a step whose end
// released a child between two pages is read ended, though each step's
// state is the one its own page found. Only a revival moves a step back:
// a read that a revival went between, or that saw the workflow's own
// state change (it ended, or is another of the same id), is read again,
// so that an ended workflow reads with its steps as they ended. After
// stateReads-1 such reads in pages, the last reads the whole workflow in
// one call, which holds Redis for it but answers a state that was.
func (s *Store) WorkflowState(ctx context.Context, id string) (WorkflowRecord, bool, error) {
	return readState(func(q stateQuery) (statePart, bool, error) {
		return s.readStatePage(ctx, id, q)
	})
}

// stateQuery is what one call of wf_state.lua reads.
type stateQuery struct {
	Brief  bool   // the workflow's fields only
	Cursor string // where the page starts: "0" for the first
	Size   int    // the most steps of the page; 0 for every step
}

// statePart is one call of wf_state.lua's answer: the workflow's fields
// with the steps of the page.
type statePart struct {
	WorkflowRecord
	Revived string // how many revivals the workflow has had
	Next    string // the cursor of the next page; "" after the last
}

// sameFields says whether two pages of a read found the workflow the
// same: no revival, end or new workflow of the id between them.
func (p statePart) sameFields(q statePart) bool {
	return p.State == q.State && p.Created == q.Created && p.Ended == q.Ended && p.Revived == q.Revived
}

// readState is WorkflowState over read, a call of wf_state.lua.
func readState(read func(stateQuery) (statePart, bool, error)) (WorkflowRecord, bool, error) {
	for range stateReads - 1 {
		r, ok, moved, err := readPages(read)
		if err != nil || !ok || !moved {
			return r, ok, err
		}
	}
	p, ok, err := read(stateQuery{Cursor: "0"})
	return p.WorkflowRecord, ok, err
}

// readPages reads a workflow's state a page at a time with read, each
// step once; moved tells that the workflow's fields changed between the
// pages, whose steps it then stops reading.
func readPages(read func(stateQuery) (statePart, bool, error)) (r WorkflowRecord, ok, moved bool, err error) {
	var first statePart
	seen := make(map[string]bool) // HSCAN, for a workflow kept with no order, may answer a step twice
	for cursor := "0"; ; {
		page, ok, err := read(stateQuery{Cursor: cursor, Size: statePage})
		if err != nil || !ok {
			return WorkflowRecord{}, ok, false, err
		}
		if cursor == "0" {
			first = page
			r = WorkflowRecord{State: page.State, Created: page.Created, Ended: page.Ended}
		} else if !first.sameFields(page) {
			return WorkflowRecord{}, true, true, nil
		}
		for _, st := range page.Steps {
			if !seen[st.Name] {
				seen[st.Name] = true
				r.Steps = append(r.Steps, st)
			}
		}
		if page.Next == "" {
			return r, true, false, nil
		}
		cursor = page.Next
	}
}

// WorkflowBrief reads a workflow's state without its steps', as
// WorkflowState does (Steps is nil), at a cost that does not grow with
// the steps: for a waiter that needs its steps only once it has ended.
func (s *Store) WorkflowBrief(ctx context.Context, id string) (WorkflowRecord, bool, error) {
	p, ok, err := s.readStatePage(ctx, id, stateQuery{Brief: true, Cursor: "0"})
	return p.WorkflowRecord, ok, err
}

// readStatePage runs wf_state.lua for q.
func (s *Store) readStatePage(ctx context.Context, id string, q stateQuery) (statePart, bool, error) {
	brief := "0"
	if q.Brief {
		brief = "1"
	}
	vals, err := s.workflowCall(ctx, id, "wf_state.lua", s.scripts.WorkflowState, []string{brief, q.Cursor, strconv.Itoa(q.Size)})
	if err != nil {
		return statePart{}, false, err
	}
	if len(vals) == 0 {
		return statePart{}, false, nil
	}
	if len(vals) < 5 || (len(vals)-5)%5 != 0 {
		return statePart{}, false, fmt.Errorf("wf_state.lua answered %d values", len(vals))
	}
	p := statePart{WorkflowRecord: WorkflowRecord{State: vals[0]}, Revived: vals[3], Next: vals[4]}
	p.Created, _ = strconv.ParseInt(vals[1], 10, 64)
	p.Ended, _ = strconv.ParseInt(vals[2], 10, 64)
	for i := 5; i < len(vals); i += 5 {
		st := StepRecord{Name: vals[i], State: vals[i+1], TaskID: vals[i+2], Spec: vals[i+4]}
		if vals[i+3] != "" {
			st.Parents = strings.Split(vals[i+3], ",")
		}
		p.Steps = append(p.Steps, st)
	}
	return p, true, nil
}

// StepsPage is part of a workflow's steps, as stored (WorkflowSteps).
type StepsPage struct {
	State   string
	Created int64 // Unix ms, Redis clock
	Ended   int64 // Unix ms, Redis clock; 0 while running
	// Total counts its steps; -1 for a workflow created before their
	// order was kept, whose Steps are empty: read it whole.
	Total      int
	Open       int // steps not ended
	Dead       int // steps dead
	Steps      []StepRecord
	MoreOfEach []int // per step of Steps, its parents not in its Parents
}

// WorkflowSteps reads limit steps of a workflow from place from, in the
// order kept at create, each with at most maxParents parents
// (wf_steps.lua); the cost is that of the part, not of the workflow.
// Each step's Spec holds its queue only. False if the workflow is
// unknown, or ended and expired.
func (s *Store) WorkflowSteps(ctx context.Context, id string, from, limit, maxParents int) (StepsPage, bool, error) {
	vals, err := s.workflowCall(ctx, id, "wf_steps.lua", s.scripts.WorkflowSteps,
		[]string{strconv.Itoa(from), strconv.Itoa(limit), strconv.Itoa(maxParents)})
	if err != nil {
		return StepsPage{}, false, err
	}
	return parseStepsPage(vals)
}

// parseStepsPage reads wf_steps.lua's answer.
func parseStepsPage(vals []string) (StepsPage, bool, error) {
	if len(vals) == 0 {
		return StepsPage{}, false, nil
	}
	if len(vals) < 6 || (len(vals)-6)%6 != 0 {
		return StepsPage{}, false, fmt.Errorf("wf_steps.lua answered %d values", len(vals))
	}
	p := StepsPage{State: vals[0], Total: -1}
	p.Created, _ = strconv.ParseInt(vals[1], 10, 64)
	p.Ended, _ = strconv.ParseInt(vals[2], 10, 64)
	if vals[3] != "" {
		p.Total, _ = strconv.Atoi(vals[3])
	}
	p.Open, _ = strconv.Atoi(vals[4])
	p.Dead, _ = strconv.Atoi(vals[5])
	for i := 6; i < len(vals); i += 6 {
		st := StepRecord{Name: vals[i], State: vals[i+1], TaskID: vals[i+2], Spec: vals[i+5]}
		if vals[i+3] != "" {
			st.Parents = strings.Split(vals[i+3], ",")
		}
		more, _ := strconv.Atoi(vals[i+4])
		p.Steps = append(p.Steps, st)
		p.MoreOfEach = append(p.MoreOfEach, more)
	}
	return p, true, nil
}

// StepResults reads the results of a step's parents that succeeded
// (wf_results.lua), by parent; false if the workflow has no such step.
func (s *Store) StepResults(ctx context.Context, id, step string) (map[string][]byte, bool, error) {
	vals, err := s.workflowCall(ctx, id, "wf_results.lua", s.scripts.WorkflowResults, []string{step})
	if err != nil {
		return nil, false, err
	}
	if len(vals) == 0 || len(vals)%2 != 1 {
		return nil, false, fmt.Errorf("wf_results.lua answered %d values", len(vals))
	}
	if vals[0] != "1" {
		return nil, false, nil
	}
	out := make(map[string][]byte, len(vals)/2)
	for i := 1; i < len(vals); i += 2 {
		out[vals[i]] = []byte(vals[i+1])
	}
	return out, true, nil
}

// workflowCall runs one of a workflow's scripts, on all its keys, and
// reads its reply as strings.
func (s *Store) workflowCall(ctx context.Context, id, name string, sc *scripts.Script, args []string) ([]string, error) {
	if err := s.enter(ctx, OpWorkflow, workflowOp(id)); err != nil {
		return nil, err
	}
	vals, err := sc.Exec(ctx, s.rdb, s.keys.Workflow(id).all(), args).AsStrSlice()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return vals, nil
}

func readySteps(vals []string) []ReadyStep {
	out := make([]ReadyStep, 0, len(vals)/2)
	for i := 0; i+1 < len(vals); i += 2 {
		out = append(out, ReadyStep{Name: vals[i], Spec: vals[i+1]})
	}
	return out
}

func queuedSteps(script string, vals []string) ([]QueuedStep, error) {
	if len(vals)%3 != 0 {
		return nil, fmt.Errorf("%s answered %d values", script, len(vals))
	}
	out := make([]QueuedStep, 0, len(vals)/3)
	for i := 0; i < len(vals); i += 3 {
		out = append(out, QueuedStep{Name: vals[i], TaskID: vals[i+1], Spec: vals[i+2]})
	}
	return out, nil
}

// Notice is a queue's notice of a workflow task's end, or of its
// requeue from the dead letters (flow_notice in common/workflows.lua):
// '<workflow id>.<step>,<task id>,<ok|dead|cancelled|revived>'.
type Notice struct {
	Raw                  string // as stored: the member to remove; "" for an end carried with no notice stored
	Workflow, Step, Task string
	Status               string // "ok", "dead", "cancelled" or "revived"
	// Read is what reading the notice (FlowRead) would answer, when the
	// script that wrote it told its stamp and the client knows its
	// task's result: the worker that finished the task carries it
	// without reading it. Nil when it is to be read.
	Read *NoticeRead
}

// ParseNotice reads a notice; false if it is not one.
func ParseNotice(raw string) (Notice, bool) {
	flow, rest, ok1 := strings.Cut(raw, ",")
	task, status, ok2 := strings.Cut(rest, ",")
	wf, step, ok3 := strings.Cut(flow, ".")
	if !ok1 || !ok2 || !ok3 || wf == "" || step == "" || task == "" || !knownStatus(status) {
		return Notice{}, false
	}
	return Notice{Raw: raw, Workflow: wf, Step: step, Task: task, Status: status}, true
}

// knownStatus says whether a notice's status is one flow_notice writes.
func knownStatus(status string) bool {
	switch status {
	case "ok", "dead", "cancelled", "revived":
		return true
	}
	return false
}

// FlowNotices lists a queue's notices written at least age ago, oldest
// first, up to limit (flow_notices.lua).
func (s *Store) FlowNotices(ctx context.Context, queue string, age time.Duration, limit int) ([]string, error) {
	k := s.queueKeys(queue)
	res, err := s.run(ctx, OpRead, queue, s.scripts.FlowNotices, []string{k.Flows}, []string{strconv.FormatInt(age.Milliseconds(), 10), strconv.Itoa(limit)})
	if err != nil {
		return nil, err
	}
	return res.AsStrSlice()
}

// NoticeRead is what carrying a notice needs (FlowRead): when it was
// written (µs, Redis clock), false if it is gone (carried already), and
// its task's outcome, if one is kept.
type NoticeRead struct {
	At     int64
	Found  bool
	Result Result
	Kept   bool
}

// FlowRead reads what carrying notices needs, for all of them in one call
// (flow_read.lua), in their order.
func (s *Store) FlowRead(ctx context.Context, queue string, notices []Notice) ([]NoticeRead, error) {
	k := s.queueKeys(queue)
	args := make([]string, 0, 2*len(notices))
	for _, n := range notices {
		args = append(args, n.Raw, n.Task)
	}
	res, err := s.run(ctx, OpRead, queue, s.scripts.FlowRead, []string{k.Flows, k.Results}, args)
	if err != nil {
		return nil, err
	}
	vals, err := res.AsStrSlice()
	if err != nil {
		return nil, err
	}
	if len(vals) != 2*len(notices) {
		return nil, fmt.Errorf("flow_read.lua answered %d values for %d notices", len(vals), len(notices))
	}
	out := make([]NoticeRead, len(notices))
	for i := range out {
		when := vals[2*i]
		if when == "" {
			continue
		}
		at, err := strconv.ParseInt(when, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("flow_read.lua answered %q", when)
		}
		r, kept := ParseResult(vals[2*i+1])
		out[i] = NoticeRead{At: at, Found: true, Result: r, Kept: kept}
	}
	return out, nil
}

// ForgetNotices removes a queue's notices once their workflows have
// recorded them (flow_forget.lua).
func (s *Store) ForgetNotices(ctx context.Context, queue string, notices []string) error {
	if len(notices) == 0 {
		return nil
	}
	k := s.queueKeys(queue)
	res, err := s.run(ctx, OpFinish, queue, s.scripts.FlowForget, []string{k.Flows}, notices)
	if err != nil {
		return err
	}
	return res.Error()
}

// EnqueueSteps enqueues workflow steps released together, each with a
// unique key of its own (Args.Unique, required), as EnqueueEach does, but
// in one flow_enqueue.lua call per queue (and per MaxTasksPerScript
// steps) rather than one enqueue.lua call per task, all in one round trip
// (one per node on a cluster). It returns each step's task id, and an
// error per step: ErrDuplicate (with the holder's id) for a step whose
// key is held.
// A step whose workflow is at home in its queue's slot (MarkedOnEnqueue)
// holds no unique key: it is enqueued only while ready, and marked
// queued with its task's id in the same call; one queued before answers
// ErrDuplicate with its id, one not ready (cancelled, ended)
// ErrStepNotReady; one ready whose unique key is held (a client that
// takes the key enqueued it, not yet marked) is marked queued with the
// holder's id and answers ErrDuplicate with it.
func (s *Store) EnqueueSteps(ctx context.Context, tasks []EnqueueOne) ([]string, []error) {
	ids, errs := make([]string, len(tasks)), make([]error, len(tasks))
	// A call per queue, and per home workflow in it (whose keys it takes).
	type group struct{ queue, home string }
	byGroup := make(map[group][]int)
	var groups []group
	homes := make(map[group]bool) // by workflow and queue: MarkedOnEnqueue, judged once
	for i, t := range tasks {
		g := group{queue: t.Queue}
		wf, _, _ := strings.Cut(t.Args.Flow, ".")
		home, ok := homes[group{t.Queue, wf}]
		if !ok {
			home = s.MarkedOnEnqueue(t)
			homes[group{t.Queue, wf}] = home
		}
		if home {
			g.home = wf
		}
		if _, ok := byGroup[g]; !ok {
			groups = append(groups, g)
		}
		byGroup[g] = append(byGroup[g], i)
	}
	var calls []scripts.Call
	var of [][]int // the steps of each call
	for _, g := range groups {
		q := g.queue
		if err := s.enter(ctx, OpEnqueue, q); err != nil {
			for _, i := range byGroup[g] {
				errs[i] = err
			}
			continue
		}
		k := s.queueKeys(q)
		keys := []string{k.Waiting, k.Meta, k.Idle, k.Delayed, k.Unique, k.UniqueTTL, k.Stats, k.Leases, k.Procs, k.Waiting, k.High, k.Low, k.Retained, k.GroupWait, k.GroupReady}
		if g.home != "" {
			keys = append(keys, s.keys.Workflow(g.home).all()...)
		}
		for chunk := range slices.Chunk(byGroup[g], MaxTasksPerScript) {
			// A call of one step may hand it off, as an enqueue of one
			// task may (a chain's next step starts without a dequeue).
			hand := "0"
			if len(chunk) == 1 {
				hand = handOff([][]byte{tasks[chunk[0]].Payload})
			}
			args := make([]string, 0, 3+7*len(chunk))
			args = append(args, k.Channel, q, hand)
			for _, i := range chunk {
				if g.home != "" {
					_, step, _ := strings.Cut(tasks[i].Args.Flow, ".")
					args = append(args, homeStepArgs(step, tasks[i])...)
				} else {
					args = append(args, stepArgs(tasks[i])...)
				}
			}
			calls = append(calls, scripts.Call{Script: s.scripts.FlowEnqueue, Keys: keys, Args: args})
			of = append(of, chunk)
		}
	}
	for c, res := range scripts.ExecMulti(ctx, s.rdb, calls) {
		chunk := of[c]
		q := tasks[chunk[0]].Queue
		vals, err := res.AsStrSlice()
		if err == nil && len(vals) != 1+2*len(chunk) {
			err = fmt.Errorf("flow_enqueue.lua answered %d values for %d steps", len(vals), len(chunk))
		}
		if err == nil && vals[0] == "1" {
			err = s.RegisterQueue(ctx, q)
		}
		if err != nil {
			for _, i := range chunk {
				errs[i] = fmt.Errorf("flow_enqueue.lua: %w", err)
			}
			continue
		}
		added := 0
		for j, i := range chunk {
			ids[i] = vals[1+2*j]
			switch vals[2+2*j] {
			case "1":
				errs[i] = ErrDuplicate
			case "2":
				errs[i] = ErrStepNotReady
			default:
				added++
			}
		}
		s.stats.enqueued(q, added)
	}
	return ids, errs
}

// MarkedOnEnqueue says whether EnqueueSteps marks step task t queued in
// its workflow itself (no StepsEnqueued after it): a task whose workflow
// (Args.Flow) is at home in its queue's slot (see Keys.WorkflowHome).
func (s *Store) MarkedOnEnqueue(t EnqueueOne) bool {
	wf, _, ok := strings.Cut(t.Args.Flow, ".")
	return ok && s.keys.WorkflowHome(wf, t.Queue)
}

// stepArgs are the arguments of one step's task as flow_enqueue.lua (and
// check_step_requeue.lua) take them: its unique key's sha1, how long that
// is held, its header fields, due time, delay, front flag and payload.
func stepArgs(t EnqueueOne) []string {
	return taskArgs(uniqueSum(t.Args.Unique), strconv.FormatInt(max(t.Args.UniqueTTL.Milliseconds(), 0), 10), t)
}

// homeStepArgs are stepArgs for a step of a home workflow (see
// MarkedOnEnqueue): its name in place of a unique key, never held, and
// its unique key's sha1 in place of the hold, so that a task a client
// enqueued under the key (one that takes the key for every step) is
// found the step's.
func homeStepArgs(step string, t EnqueueOne) []string {
	return taskArgs(step, uniqueSum(t.Args.Unique), t)
}

// taskArgs are stepArgs with the key (or step) and its hold given.
func taskArgs(key, hold string, t EnqueueOne) []string {
	a := t.Args
	fields := a.fields()
	switch a.Priority {
	case "h":
		fields += ",ph"
	case "l":
		fields += ",pl"
	}
	front := "0"
	if a.Front {
		front = "1"
	}
	return []string{key, hold, fields,
		strconv.FormatInt(a.DueAt, 10), strconv.FormatInt(a.Delay.Microseconds(), 10), front, string(t.Payload)}
}

// uniqueSum is a unique key as the queue's unique hash holds it.
func uniqueSum(key string) string {
	sum := sha1.Sum([]byte(key))
	return hex.EncodeToString(sum[:])
}
