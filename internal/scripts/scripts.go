// Package scripts holds worqr's Lua scripts, one file per operation.
//
// Every state change in worqr is one script whose keys are all passed in
// KEYS and share one hash tag, so each runs atomically on one Redis node,
// including on Redis Cluster, where events go out with SPUBLISH on a shard
// channel in the same slot. The helpers the scripts share (server time,
// lease checks, process encoding) exist once, in common/, a subject to a
// file, and each script is prepended the ones it uses (prelude.go).
package scripts

import (
	"context"
	"crypto/sha1"
	"embed"
	"encoding/hex"
	"strings"
	"sync"

	"github.com/redis/rueidis"
)

//go:embed *.lua common/*.lua
var files embed.FS

// Set is every script worqr runs.
type Set struct {
	Enqueue       *Script
	EnqueueOne    *Script // one plain task, enqueue.lua's work without the rest of it
	Dequeue       *Script
	Finish        *Script
	Stop          *Script
	Cancel        *Script
	CancelID      *Script
	CancelWaiting *Script
	Delete        *Script
	Promote       *Script
	RunNow        *Script
	Control       *Script
	QueueInfo     *Script
	Retry         *Script
	RetryPlain    *Script // retries at once of plain tasks, retry.lua's usual work without the rest of it
	Bury          *Script
	Release       *Script
	Join          *Script
	Registered    *Script
	Renew         *Script
	Keepalive     *Script
	Register      *Script
	Serve         *Script
	Deregister    *Script
	Expired       *Script
	Live          *Script
	WorkerSlots   *Script // a worker's handler slots, for inspection
	States        *Script
	Tick          *Script // periodic tasks
	PeriodicList  *Script // the periodic schedules, for inspection
	Progress      *Script // a handler's progress report
	Stats         *Script // a client's stats counts, when no other call carried them
	Outcome       *Script // a task's retained outcome, or whether one will come
	OutcomeList   *Script // the kept outcomes, latest to expire first
	OutcomeCut    *Script // one kept outcome, its body cut
	// Inspection with payloads cut to a prefix, and a task found by id.
	WaitingList *Script
	DelayedList *Script
	ProcsList   *Script
	TaskFind    *Script
	GroupsList  *Script // a queue's groups, for operators
	GatherList  *Script // a queue's open gatherings, for operators
	// Dead letters: list, requeue one or all, delete one or all.
	DeadList       *Script
	DeadRequeue    *Script
	DeadRequeueAll *Script
	DeadDelete     *Script
	DeadPurge      *Script
	// Workflows: in the workflow's slot, create, record a step's end,
	// mark steps queued, cancel, read (whole, or a part); in a queue's, list and remove
	// the notices of its workflow tasks' ends, and enqueue released steps.
	WorkflowCreate   *Script
	WorkflowRelease  *Script
	WorkflowEnqueued *Script
	WorkflowCancel   *Script
	WorkflowState    *Script
	WorkflowSteps    *Script
	WorkflowResults  *Script
	FlowNotices      *Script
	FlowRead         *Script
	FlowForget       *Script
	FlowEnqueue      *Script
}

// Load returns the script set: a fresh Set, so every client owns its
// choice of scripts, of Scripts (which never change) built once per
// process for each sharded and stats. Building a set, each script's
// source and SHA1, takes about 0.4 MB and a millisecond or two: a process
// of many clients (a fleet's simulation, tests) would spend them for each.
// sharded selects SPUBLISH for events (Redis Cluster) instead of PUBLISH;
// the two sets differ only in that line, and so in their SHA1s. stats
// makes the scripts keep each queue's stats (the common helpers' STATS); without
// it they skip that work.
func Load(sharded, stats bool) *Set {
	k := setKey{sharded, stats}
	built, ok := sets.Load(k)
	if !ok {
		built, _ = sets.LoadOrStore(k, build(sharded, stats))
	}
	set := *built.(*Set)
	return &set
}

// setKey picks one of the sets Load builds.
type setKey struct{ sharded, stats bool }

// sets are the sets Load built, by setKey.
var sets sync.Map

// build makes a script set.
func build(sharded, stats bool) *Set {
	// Even the scripts that only read are sent as EVAL, not EVAL_RO:
	// they call TIME, which miniredis refuses in read-only scripts.
	load := loader(sharded, stats)
	return &Set{
		Enqueue:       load("enqueue.lua"),
		EnqueueOne:    load("enqueue_one.lua"),
		Dequeue:       load("dequeue.lua"),
		Finish:        load("finish.lua"),
		Stop:          load("stop.lua"),
		Cancel:        load("cancel.lua"),
		CancelID:      load("cancel_id.lua"),
		CancelWaiting: load("cancel_waiting.lua"),
		Delete:        load("delete.lua"),
		Promote:       load("promote.lua"),
		RunNow:        load("run_now.lua"),
		Control:       load("control.lua"),
		QueueInfo:     load("queue_info.lua"),
		Retry:         load("retry.lua"),
		RetryPlain:    load("retry_plain.lua"),
		Bury:          load("bury.lua"),
		Release:       load("release.lua"),
		Join:          load("join.lua"),
		Registered:    load("registered.lua"),
		Renew:         load("renew.lua"),
		Keepalive:     load("keepalive.lua"),
		Register:      load("register.lua"),
		Serve:         load("serve.lua"),
		Deregister:    load("deregister.lua"),
		Expired:       load("expired.lua"),
		Live:          load("live.lua"),
		WorkerSlots:   load("worker_slots.lua"),
		States:        load("states.lua"),
		Tick:          load("tick.lua"),
		PeriodicList:  load("periodic_list.lua"),
		Progress:      load("progress.lua"),
		Stats:         load("stats.lua"),
		Outcome:       load("outcome.lua"),
		OutcomeList:   load("outcome_list.lua"),
		OutcomeCut:    load("outcome_cut.lua"),

		WaitingList: load("waiting_list.lua"),
		DelayedList: load("delayed_list.lua"),
		ProcsList:   load("procs_list.lua"),
		TaskFind:    load("task_find.lua"),
		GroupsList:  load("groups_list.lua"),
		GatherList:  load("gather_list.lua"),

		DeadList:       load("dead_list.lua"),
		DeadRequeue:    load("dead_requeue.lua"),
		DeadRequeueAll: load("dead_requeue_all.lua"),
		DeadDelete:     load("dead_delete.lua"),
		DeadPurge:      load("dead_purge.lua"),

		WorkflowCreate:   load("wf_create.lua"),
		WorkflowRelease:  load("wf_release.lua"),
		WorkflowEnqueued: load("wf_enqueued.lua"),
		WorkflowCancel:   load("wf_cancel.lua"),
		WorkflowState:    load("wf_state.lua"),
		WorkflowSteps:    load("wf_steps.lua"),
		WorkflowResults:  load("wf_results.lua"),
		FlowNotices:      load("flow_notices.lua"),
		FlowRead:         load("flow_read.lua"),
		FlowForget:       load("flow_forget.lua"),
		FlowEnqueue:      load("flow_enqueue.lua"),
	}
}

// WithCommon is a script of body after the whole of the common helpers
// (with stats on), for tests of the helpers.
func WithCommon(body string) *Script { return newScript("", commonFor(false, true)+body) }

// loader makes each script from its file and the common parts it uses,
// with the publish command events use and the stats switch.
func loader(sharded, stats bool) func(name string) *Script {
	parts := commonParts(sharded, stats)
	return func(name string) *Script {
		body := source(name)
		return newScript(name, prelude(parts, body)+body)
	}
}

// commonFiles are the files of common/, the helpers the scripts share, in
// the order their parts are carried: a part names only parts above it
// (see prelude), so a file comes after those whose helpers it uses.
func commonFiles() []string {
	return []string{
		"base.lua",        // the clock, events, numbers
		"entries.lua",     // a task's entry and its header fields
		"queue.lua",       // the meta hash, unique keys
		"leases.lua",      // workers' leases, the registry's front
		"waiting.lua",     // the waiting lists, waking runtimes
		"groups.lua",      // groups; push_waiting
		"aggregation.lua", // AGG
		"stats.lua",       // STATS and its counts
		"failures.lua",    // errors, attempt histories, dead letters
		"processes.lua",   // the procs hash: start, settle, give back
		"find.lua",        // tasks found by id
		"outcomes.lua",    // retained outcomes
		"workflows.lua",   // workflow notices, steps and ends
	}
}

// commonParts are the parts of the common files, in order, after the
// publish command events use and the stats switch.
func commonParts(sharded, stats bool) []part {
	publish := "PUBLISH"
	if sharded {
		publish = "SPUBLISH"
	}
	on := "false"
	if stats {
		on = "true"
	}
	parts := splitCommon("local PUBLISH_COMMAND = '" + publish + "'\nlocal STATS = " + on + "\n")
	for _, name := range commonFiles() {
		parts = append(parts, splitCommon(source("common/"+name))...)
	}
	return parts
}

// commonFor is the whole of the common parts, in order, as one text.
func commonFor(sharded, stats bool) string {
	var b strings.Builder
	for _, p := range commonParts(sharded, stats) {
		b.WriteString(p.src)
	}
	return b.String()
}

func source(name string) string {
	b, err := files.ReadFile(name)
	if err != nil {
		panic("worqr: missing embedded script " + name) // a build error, not a runtime one
	}
	return string(b) + "\n"
}

// Script is one Lua script, sent as EVALSHA and, where the server does not
// know it yet (NOSCRIPT), again as EVAL. Unlike rueidis.Lua.ExecMulti it
// pipelines many calls without a SCRIPT LOAD to every node on each batch.
// Write scripts are never retried by rueidis: a retry after a lost reply
// could run a state change twice.
type Script struct {
	name string
	src  string
	sha  string
}

func newScript(name, src string) *Script {
	sum := sha1.Sum([]byte(src))
	return &Script{name: name, src: src, sha: hex.EncodeToString(sum[:])}
}

// SHA1 is the digest sent in EVALSHA.
func (s *Script) SHA1() string { return s.sha }

// Name is the script's file ("finish.lua"), "" for one of WithCommon.
func (s *Script) Name() string { return s.name }

// Files are the names of every embedded script (not the common helpers of
// common/, which are no scripts of their own): the list a test of each
// script checks against.
func Files() []string {
	entries, err := files.ReadDir(".")
	if err != nil {
		panic("worqr: embedded scripts unreadable: " + err.Error()) // a build error
	}
	var out []string
	for _, e := range entries {
		if name := e.Name(); !e.IsDir() && strings.HasSuffix(name, ".lua") {
			out = append(out, name)
		}
	}
	return out
}

// Call is one execution of a script, for ExecMulti.
type Call struct {
	Script *Script
	Keys   []string
	Args   []string
}

// Exec runs the script once.
func (s *Script) Exec(ctx context.Context, c rueidis.Client, keys, args []string) rueidis.RedisResult {
	res := c.Do(ctx, s.command(c, keys, args, false))
	if isNoScript(res) {
		res = c.Do(ctx, s.command(c, keys, args, true))
	}
	return res
}

// ExecMulti pipelines several script calls in one round trip per node.
func ExecMulti(ctx context.Context, c rueidis.Client, calls []Call) []rueidis.RedisResult {
	cmds := make(rueidis.Commands, len(calls))
	for i, call := range calls {
		cmds[i] = call.Script.command(c, call.Keys, call.Args, false)
	}
	results := c.DoMulti(ctx, cmds...)
	var retry []int
	for i, res := range results {
		if isNoScript(res) {
			retry = append(retry, i)
		}
	}
	if len(retry) > 0 {
		again := make(rueidis.Commands, len(retry))
		for j, i := range retry {
			again[j] = calls[i].Script.command(c, calls[i].Keys, calls[i].Args, true)
		}
		for j, res := range c.DoMulti(ctx, again...) {
			results[retry[j]] = res
		}
	}
	return results
}

// command builds the EVALSHA or EVAL. Like every command worqr builds, it
// is pinned so rueidis never recycles it: after a connection breaks, the
// dead connection's writer may still read a command whose Do has already
// returned on a new connection (the race detector reports it).
func (s *Script) command(c rueidis.Client, keys, args []string, eval bool) rueidis.Completed {
	n := int64(len(keys))
	if eval {
		return c.B().Eval().Script(s.src).Numkeys(n).Key(keys...).Arg(args...).Build().Pin()
	}
	return c.B().Evalsha().Sha1(s.sha).Numkeys(n).Key(keys...).Arg(args...).Build().Pin()
}

func isNoScript(res rueidis.RedisResult) bool {
	err, ok := rueidis.IsRedisErr(res.Error())
	return ok && err.IsNoScript()
}
