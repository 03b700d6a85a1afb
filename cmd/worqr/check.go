package main

import (
	"fmt"

	"github.com/worqr/worqr"
)

func maintenanceCommands() []*command {
	return []*command{
		{name: "check", synopsis: "[--repair]", group: "Maintenance", summary: "consistency check, and repair", run: cmdCheck, help: `
Compares every key under the prefix with worqr's registries (a SCAN of each
Redis node, never KEYS) and lists what does not add up: orphaned
processes, dead or unregistered workers, unlisted, unregistered, stale,
broken or miscounted queues, miscounted groups, controls it cannot read,
stale progress reports, gatherings without a deadline, stale turn fields,
unknown keys, workflows' leftover or lasting keys, broken workflows,
stalled, lost and vanished steps, and stalled releases. With --repair it
also fixes what it can, as a peer would: orphaned tasks back to the
front of their queues, dead workers reclaimed, registries mended,
workflows' leftover keys deleted and lasting ones set to expire, stalled
steps enqueued, vanished ones enqueued anew, stalled releases carried
on; broken queues and workflows, lost steps, unreadable controls and
unknown keys are only reported. Safe while workers run. Its cost grows with the whole
keyspace: a large one may need a longer --timeout.

It exits 1 when it found problems, repaired or not, after printing the
report, so that "worqr check" can alert.`},
		helpCommand(),
	}
}

// checkJSON is a CheckReport, with empty lists as [] rather than null.
type checkJSON struct {
	Problems            int                `json:"problems"`
	OrphanedProcesses   []processRow       `json:"orphanedProcesses"`
	DeadWorkers         []string           `json:"deadWorkers"`
	UnregisteredWorkers []string           `json:"unregisteredWorkers"`
	UnlistedQueues      []workerQueueJSON  `json:"unlistedQueues"`
	UnregisteredQueues  []string           `json:"unregisteredQueues"`
	StaleQueues         []string           `json:"staleQueues"`
	BrokenQueues        []string           `json:"brokenQueues"`
	UnknownKeys         []string           `json:"unknownKeys"`
	MiscountedQueues    []string           `json:"miscountedQueues"`
	MiscountedGroups    []groupCountJSON   `json:"miscountedGroups"`
	UnreadableControls  []controlJSON      `json:"unreadableControls"`
	StaleProgress       int64              `json:"staleProgress"`
	UndueGatherings     int64              `json:"undueGatherings"`
	StaleTurns          int64              `json:"staleTurns"`
	LeftoverWorkflows   []string           `json:"leftoverWorkflows"`
	LastingWorkflows    []string           `json:"lastingWorkflows"`
	StalledSteps        []workflowStepJSON `json:"stalledSteps"`
	LostSteps           []workflowStepJSON `json:"lostSteps"`
	VanishedSteps       []workflowStepJSON `json:"vanishedSteps"`
	StalledReleases     []workflowStepJSON `json:"stalledReleases"`
	BrokenWorkflows     []string           `json:"brokenWorkflows"`
	NodesScanned        int                `json:"nodesScanned"`
	KeysScanned         int                `json:"keysScanned"`
	QueuesChecked       int                `json:"queuesChecked"`
	WorkflowsChecked    int                `json:"workflowsChecked"`
	Repaired            *repairsJSON       `json:"repaired,omitempty"`
}

type workerQueueJSON struct {
	Worker string `json:"worker"`
	Queue  string `json:"queue"`
}

type workflowStepJSON struct {
	Workflow string `json:"workflow"`
	Step     string `json:"step"`
	Task     string `json:"task,omitempty"`
}

func workflowSteps(steps []worqr.WorkflowStep) []workflowStepJSON {
	out := make([]workflowStepJSON, len(steps))
	for i, st := range steps {
		out[i] = workflowStepJSON(st)
	}
	return out
}

type groupCountJSON struct {
	Queue   string `json:"queue"`
	Group   string `json:"group"`
	Counted int64  `json:"counted"`
	Held    int64  `json:"held"`
}

type controlJSON struct {
	Queue   string `json:"queue"`
	Control string `json:"control"`
	Value   string `json:"value"`
}

type repairsJSON struct {
	Requeued              int64              `json:"requeued"`
	Dropped               int64              `json:"dropped"`
	LeasesRemoved         int64              `json:"leasesRemoved"`
	AdoptedWorkers        []string           `json:"adoptedWorkers"`
	ListedQueues          []workerQueueJSON  `json:"listedQueues"`
	ReclaimedWorkers      []string           `json:"reclaimedWorkers"`
	PendingWorkers        []string           `json:"pendingWorkers"`
	RegisteredQueues      []string           `json:"registeredQueues"`
	RemovedQueues         []string           `json:"removedQueues"`
	RecountedQueues       []string           `json:"recountedQueues"`
	RecountedGroups       int64              `json:"recountedGroups"`
	RescheduledGatherings int64              `json:"rescheduledGatherings"`
	ClearedTurns          int64              `json:"clearedTurns"`
	DeletedWorkflows      []string           `json:"deletedWorkflows"`
	ExpiringWorkflows     []string           `json:"expiringWorkflows"`
	EnqueuedSteps         []workflowStepJSON `json:"enqueuedSteps"`
	RequeuedSteps         []workflowStepJSON `json:"requeuedSteps"`
	ResumedReleases       []workflowStepJSON `json:"resumedReleases"`
}

func list(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func workerQueues(wq []worqr.WorkerQueue) []workerQueueJSON {
	out := make([]workerQueueJSON, len(wq))
	for i, x := range wq {
		out[i] = workerQueueJSON(x)
	}
	return out
}

func checkReportJSON(r worqr.CheckReport, repaired bool) checkJSON {
	j := checkJSON{
		Problems: r.Problems(), OrphanedProcesses: make([]processRow, len(r.OrphanedProcesses)),
		DeadWorkers: list(r.DeadWorkers), UnregisteredWorkers: list(r.UnregisteredWorkers), UnlistedQueues: workerQueues(r.UnlistedQueues),
		UnregisteredQueues: list(r.UnregisteredQueues), StaleQueues: list(r.StaleQueues), BrokenQueues: list(r.BrokenQueues), UnknownKeys: list(r.UnknownKeys),
		MiscountedQueues: list(r.MiscountedQueues), MiscountedGroups: make([]groupCountJSON, len(r.MiscountedGroups)), UnreadableControls: make([]controlJSON, len(r.UnreadableControls)),
		LeftoverWorkflows: list(r.LeftoverWorkflows), LastingWorkflows: list(r.LastingWorkflows), StalledSteps: workflowSteps(r.StalledSteps),
		LostSteps: workflowSteps(r.LostSteps), VanishedSteps: workflowSteps(r.VanishedSteps), StalledReleases: workflowSteps(r.StalledReleases),
		StaleProgress: r.StaleProgress, UndueGatherings: r.UndueGatherings, StaleTurns: r.StaleTurns,
		BrokenWorkflows: list(r.BrokenWorkflows),
		NodesScanned:    r.NodesScanned, KeysScanned: r.KeysScanned, QueuesChecked: r.QueuesChecked, WorkflowsChecked: r.WorkflowsChecked,
	}
	for i, u := range r.UnreadableControls {
		j.UnreadableControls[i] = controlJSON(u)
	}
	for i, g := range r.MiscountedGroups {
		j.MiscountedGroups[i] = groupCountJSON(g)
	}
	for i, p := range r.OrphanedProcesses {
		j.OrphanedProcesses[i] = processRow{ID: p.ID, Queue: p.Queue, TaskID: p.TaskID, Attempt: p.Attempt, Owner: p.Owner, State: string(p.State), payloadJSON: payloadOf(p.Task)}
	}
	if repaired {
		p := r.Repaired
		j.Repaired = &repairsJSON{Requeued: p.Requeued, Dropped: p.Dropped, LeasesRemoved: p.LeasesRemoved,
			AdoptedWorkers: list(p.AdoptedWorkers), ListedQueues: workerQueues(p.ListedQueues), ReclaimedWorkers: list(p.ReclaimedWorkers),
			PendingWorkers: list(p.PendingWorkers), RegisteredQueues: list(p.RegisteredQueues), RemovedQueues: list(p.RemovedQueues),
			RecountedQueues: list(p.RecountedQueues), RecountedGroups: p.RecountedGroups, RescheduledGatherings: p.RescheduledGatherings, ClearedTurns: p.ClearedTurns,
			DeletedWorkflows: list(p.DeletedWorkflows), ExpiringWorkflows: list(p.ExpiringWorkflows), EnqueuedSteps: workflowSteps(p.EnqueuedSteps),
			RequeuedSteps: workflowSteps(p.RequeuedSteps), ResumedReleases: workflowSteps(p.ResumedReleases)}
	}
	return j
}

func cmdCheck(e *env, args []string) error {
	fs := e.flags()
	repair := fs.Bool("repair", false, "fix what the check finds")
	if _, err := e.parse(fs, args, 0, 0); err != nil {
		return err
	}
	c, err := e.client()
	if err != nil {
		return err
	}
	rep, err := c.Check(e.ctx, worqr.CheckOptions{Repair: *repair})
	if err != nil {
		// The report holds what was found and repaired until then.
		if rep.Problems() > 0 || rep.Repaired.Requeued+rep.Repaired.Dropped > 0 {
			e.note("before the error: %s", rep)
		}
		return err
	}
	if e.g.json {
		err = e.printJSON(checkReportJSON(rep, *repair))
	} else {
		err = e.printCheck(rep, *repair)
	}
	if err != nil {
		return err
	}
	if n := rep.Problems(); n > 0 {
		if *repair {
			return fmt.Errorf("%d problems found (see the report for what was repaired)", n)
		}
		return fmt.Errorf("%d problems found (worqr check --repair fixes what it can)", n)
	}
	return nil
}

// printCheck prints a report as a table of findings, then what was
// repaired, then the one-line summary.
func (e *env) printCheck(r worqr.CheckReport, repaired bool) error {
	if r.Problems() > 0 {
		t := e.table("FINDING", "WHAT")
		for _, p := range r.OrphanedProcesses {
			t.row("orphaned process", fmt.Sprintf("queue %q process %s task %s owner %s", escape(p.Queue), p.ID, p.TaskID, p.Owner))
		}
		rows := func(finding string, items []string) {
			for _, s := range items {
				t.row(finding, escape(s))
			}
		}
		rows("dead worker", r.DeadWorkers)
		rows("unregistered worker", r.UnregisteredWorkers)
		for _, wq := range r.UnlistedQueues {
			t.row("unlisted queue", fmt.Sprintf("queue %q worker %s", escape(wq.Queue), wq.Worker))
		}
		rows("unregistered queue", r.UnregisteredQueues)
		rows("stale queue", r.StaleQueues)
		rows("broken queue", r.BrokenQueues)
		rows("miscounted queue", r.MiscountedQueues)
		for _, g := range r.MiscountedGroups {
			t.row("miscounted group", fmt.Sprintf("queue %q group %q counted %d held %d", escape(g.Queue), escape(g.Group), g.Counted, g.Held))
		}
		for _, u := range r.UnreadableControls {
			t.row("unreadable control", fmt.Sprintf("queue %q %s = %q", escape(u.Queue), u.Control, escape(u.Value)))
		}
		if r.StaleProgress > 0 {
			t.row("stale progress report", fmt.Sprintf("%d, of processes gone (--repair removes them)", r.StaleProgress))
		}
		if r.UndueGatherings > 0 {
			t.row("gathering without a deadline", fmt.Sprintf("%d, never flushed by time (--repair gives each a deadline of now)", r.UndueGatherings))
		}
		if r.StaleTurns > 0 {
			t.row("stale turn fields", fmt.Sprintf("%d, read for nothing or never (--repair removes them)", r.StaleTurns))
		}
		rows("unknown key", r.UnknownKeys)
		rows("leftover workflow", r.LeftoverWorkflows)
		rows("lasting workflow", r.LastingWorkflows)
		for _, st := range r.StalledSteps {
			t.row("stalled step", fmt.Sprintf("workflow %s step %q", st.Workflow, escape(st.Step)))
		}
		steps := func(finding string, items []worqr.WorkflowStep) {
			for _, st := range items {
				t.row(finding, fmt.Sprintf("workflow %s step %q task %s", st.Workflow, escape(st.Step), st.Task))
			}
		}
		steps("lost step", r.LostSteps)
		steps("vanished step", r.VanishedSteps)
		steps("stalled release", r.StalledReleases)
		rows("broken workflow", r.BrokenWorkflows)
		if err := t.flush(); err != nil {
			return err
		}
		fmt.Fprintln(e.stdout)
	}
	if p := r.Repaired; repaired {
		err := writeLines(e.stdout,
			"requeued", itoa(p.Requeued), "dropped", itoa(p.Dropped), "leases removed", itoa(p.LeasesRemoved),
			"workers adopted", itoa(len(p.AdoptedWorkers)), "queues listed", itoa(len(p.ListedQueues)),
			"workers reclaimed", itoa(len(p.ReclaimedWorkers)), "workers pending", itoa(len(p.PendingWorkers)),
			"queues registered", itoa(len(p.RegisteredQueues)), "queues removed", itoa(len(p.RemovedQueues)), "queues recounted", itoa(len(p.RecountedQueues)),
			"groups recounted", itoa(p.RecountedGroups), "gatherings rescheduled", itoa(p.RescheduledGatherings), "turn fields removed", itoa(p.ClearedTurns),
			"workflows deleted", itoa(len(p.DeletedWorkflows)), "workflows set to expire", itoa(len(p.ExpiringWorkflows)),
			"steps enqueued", itoa(len(p.EnqueuedSteps)), "steps requeued", itoa(len(p.RequeuedSteps)), "releases resumed", itoa(len(p.ResumedReleases)))
		if err != nil {
			return err
		}
		fmt.Fprintln(e.stdout)
	}
	_, err := fmt.Fprintln(e.stdout, r)
	return err
}
