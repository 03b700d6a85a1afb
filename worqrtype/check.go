package worqrtype

import (
	"fmt"
	"strings"
)

// CheckReport says what Client.Check found and, with Repair, what it
// changed. One failure can show in several lists: a crashed worker whose
// lease ran out is a dead worker, and each of its processes is orphaned.
type CheckReport struct {
	// OrphanedProcesses are in-flight processes whose owner holds no live
	// lease on their queue: the owner died, fenced itself or lost its
	// registration, and nobody is working on them. A peer's reclaim
	// returns them while the owner is in the registry; otherwise only a
	// repair does.
	OrphanedProcesses []ProcessInfo
	// DeadWorkers are worker registry entries whose lease has expired: a
	// live worker's reclaim removes them within its next pass, so outside
	// a crash they show only when no worker runs.
	DeadWorkers []string
	// UnregisteredWorkers hold a lease entry, a process or a queue set but
	// are missing from the worker registry, so no reclaim would ever find
	// their work.
	UnregisteredWorkers []string
	// UnlistedQueues are queues where a registered worker holds a lease or
	// a process but that its queue set does not list: if it died, reclaim
	// would miss its work there.
	UnlistedQueues []WorkerQueue
	// UnregisteredQueues exist, or hold waiting tasks, but Queues does not
	// list them: missing from the queue registry, or missing their record.
	UnregisteredQueues []string
	// StaleQueues are queue registry entries with no queue behind them.
	StaleQueues []string
	// BrokenQueues could not be read: a key of theirs holds a type worqr
	// never writes there (WRONGTYPE). They are reported, never touched,
	// and every call on them fails until the key is removed.
	BrokenQueues []string
	// StaleProgress counts progress reports (see Process.ReportProgress)
	// whose process is gone. A repair removes them.
	StaleProgress int64
	// UndueGatherings counts gatherings of aggregated tasks (see
	// Aggregate) that hold tasks but have no deadline, so MaxDelay would
	// never flush them. A repair gives each a deadline of now.
	UndueGatherings int64
	// StaleTurns counts the fields of groups' turns (see SetGroupTurns)
	// that no dequeue would read, or that one reads for nothing. A repair
	// removes them.
	StaleTurns int64
	// UnknownKeys are keys under the prefix that worqr did not write (or
	// that a client wrote whose prefix is this one followed by ':' and
	// more). They are reported, never touched.
	UnknownKeys []string
	// MiscountedQueues keep a count of the weight in flight (see Weight
	// and QueueInfo.InFlightWeight) that does not match the weights of
	// their processes. A repair sets the counts from the processes.
	MiscountedQueues []string
	// MiscountedGroups are groups (see Group) whose count of the slots
	// their processes hold, which their concurrency limit reads (see
	// SetGroupConcurrency), does not match the weights of those
	// processes. A repair sets the counts from the processes.
	MiscountedGroups []GroupCount
	// UnreadableControls are queue controls whose stored value the
	// scripts cannot read: not a whole number in 1..MaxLimit (written by
	// hand, or by an older worqr, which stored a limit above 2^53 as a
	// double). Such a control is not enforced and QueueInfo reads it as
	// unset. They are reported, never touched: set the control again
	// (SetConcurrency, SetRateLimit) to replace the value.
	UnreadableControls []QueueControl
	// LeftoverWorkflows are workflows whose keys remain but whose flow
	// hash, the record every call reads first, is gone (lost, evicted or
	// deleted by hand): nothing reads the rest. A repair deletes them.
	LeftoverWorkflows []string
	// LastingWorkflows are ended workflows with keys that do not expire
	// (made persistent by hand, or restored without their expiry), so
	// they outlive their WorkflowOptions.Keep for good. A repair sets them
	// to expire with the workflow's flow hash, or once the keep has passed
	// since its end.
	LastingWorkflows []string
	// StalledSteps are steps of running workflows released to their queue
	// (their parents ended) that nothing carries there, so the workflow
	// never ends. A repair enqueues them as the release would, at most
	// once each.
	StalledSteps []WorkflowStep
	// LostSteps are queued steps of running workflows whose task ended
	// without leaving a notice of its end to carry to the workflow, with
	// their task's id: the workflow never ends. They are reported, never
	// touched: cancel the workflow, or enqueue its work anew.
	LostSteps []WorkflowStep
	// VanishedSteps are queued steps of running workflows whose task has
	// not ended but is in no place of its queue, with their task's id: the
	// workflow never ends. The steps of a queue that holds more than
	// StepSearchLimit entries are not judged. A repair enqueues each anew
	// (see CheckRepairs.RequeuedSteps).
	VanishedSteps []WorkflowStep
	// StalledReleases are steps of running workflows whose end has
	// children left to settle but whose notice of the end is gone, with
	// their task's id: the children past where the release stands wait
	// for good. A repair carries the step's end once more, as a replay of
	// its notice would (see CheckRepairs.ResumedReleases).
	StalledReleases []WorkflowStep
	// BrokenWorkflows could not be read: a key of theirs holds a type
	// worqr never writes there. They are reported, never touched.
	BrokenWorkflows []string

	// NodesScanned is how many Redis nodes the keyspace scan visited.
	NodesScanned int
	// KeysScanned is how many keys under the prefix the scan returned,
	// counting each node's copy of a key (and any key SCAN returned twice).
	KeysScanned int
	// QueuesChecked is how many queues were looked at.
	QueuesChecked int
	// WorkflowsChecked is how many workflows were looked at (those the
	// scan found a key of).
	WorkflowsChecked int

	// Repaired is what Repair changed; zero without it.
	Repaired CheckRepairs
}

// CheckRepairs says what a repair changed.
type CheckRepairs struct {
	// Requeued counts orphaned tasks put back at the front of their queues.
	Requeued int64
	// Dropped counts orphaned processes removed without requeuing, because
	// their task was cancelled or their queue deleted.
	Dropped int64
	// LeasesRemoved counts expired lease entries removed from queues.
	LeasesRemoved int64
	// AdoptedWorkers are unregistered workers entered in the registry as
	// dead, so that reclaim finds their work.
	AdoptedWorkers []string
	// ListedQueues are queues added to workers' queue sets.
	ListedQueues []WorkerQueue
	// ReclaimedWorkers are dead workers whose remaining work was returned
	// and who were removed from the registry.
	ReclaimedWorkers []string
	// PendingWorkers are dead workers left in the registry because they
	// still hold a live lease on some queue: any live worker's reclaim, or
	// the next repair, finishes them once it expires.
	PendingWorkers []string
	// RegisteredQueues were added to the queue registry.
	RegisteredQueues []string
	// RemovedQueues were removed from the queue registry.
	RemovedQueues []string
	// RecountedQueues had their count of weight in flight set to what
	// their processes hold.
	RecountedQueues []string
	// RecountedGroups counts the groups whose count of slots held was set
	// to what their processes hold (a group whose count fell and that has
	// tasks waiting takes its turn again).
	RecountedGroups int64
	// RescheduledGatherings counts the gatherings without a deadline
	// given one of now (see CheckReport.UndueGatherings).
	RescheduledGatherings int64
	// ClearedTurns counts the stale fields of groups' turns removed (see
	// CheckReport.StaleTurns).
	ClearedTurns int64
	// DeletedWorkflows had their leftover keys deleted.
	DeletedWorkflows []string
	// ExpiringWorkflows had their keys that did not expire set to expire
	// with the workflow's flow hash (or its keep, counted from its end).
	ExpiringWorkflows []string
	// EnqueuedSteps were enqueued to their queues and marked queued.
	EnqueuedSteps []WorkflowStep
	// RequeuedSteps are vanished steps (see CheckReport.VanishedSteps)
	// enqueued anew, with their new task's id; the workflow then follows
	// the new task.
	RequeuedSteps []WorkflowStep
	// ResumedReleases are stalled releases (see
	// CheckReport.StalledReleases) carried on to their end: every child
	// of the step settled, and those made ready enqueued.
	ResumedReleases []WorkflowStep
}

// WorkerQueue names a worker and a queue.
type WorkerQueue struct {
	Worker string // the worker's id
	Queue  string // the queue's name
}

// GroupCount is a group's count of the slots its processes hold, for
// CheckReport.
type GroupCount struct {
	Queue string
	Group string
	// Counted is the count as stored (-1 if it is not a number); Held the
	// sum of the weights of the group's processes, whatever their state
	// (a process holds its slots until it ends).
	Counted, Held int64
}

// QueueControl is a queue's control as stored, for CheckReport.
type QueueControl struct {
	Queue string
	// Control is the field of the queue's meta hash: "limit" (the
	// concurrency limit), "rate" or "per" (the rate limit), "glimit" (its
	// groups' default limit), "gturns" (their default turns) or "gsize"
	// (the group turn size).
	Control string
	// Value is the stored value, cut to 64 bytes.
	Value string
}

// WorkflowStep names a workflow and one of its steps, for CheckReport.
type WorkflowStep struct {
	Workflow string // the workflow's id
	Step     string // the step's name
	Task     string // its task's id, in LostSteps, VanishedSteps, RequeuedSteps, StalledReleases and ResumedReleases
}

// Problems is the number of problems the check found, before any repair.
func (r CheckReport) Problems() int {
	return len(r.OrphanedProcesses) + len(r.DeadWorkers) + len(r.UnregisteredWorkers) + len(r.UnlistedQueues) +
		len(r.UnregisteredQueues) + len(r.StaleQueues) + len(r.BrokenQueues) + len(r.UnknownKeys) + len(r.MiscountedQueues) +
		len(r.MiscountedGroups) + len(r.UnreadableControls) + int(r.StaleProgress) + int(r.UndueGatherings) + int(r.StaleTurns) +
		len(r.LeftoverWorkflows) + len(r.LastingWorkflows) + len(r.StalledSteps) + len(r.LostSteps) + len(r.VanishedSteps) + len(r.StalledReleases) + len(r.BrokenWorkflows)
}

// String summarises the report on one line.
func (r CheckReport) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d problems (orphaned processes %d, dead workers %d, unregistered workers %d, unlisted queues %d, unregistered queues %d, stale queues %d, broken queues %d, unknown keys %d, miscounted queues %d, miscounted groups %d, unreadable controls %d, stale progress reports %d, gatherings without a deadline %d, stale turn fields %d, leftover workflows %d, lasting workflows %d, stalled steps %d, lost steps %d, vanished steps %d, stalled releases %d, broken workflows %d) in %d queues, %d workflows, %d keys, %d nodes",
		r.Problems(), len(r.OrphanedProcesses), len(r.DeadWorkers), len(r.UnregisteredWorkers), len(r.UnlistedQueues),
		len(r.UnregisteredQueues), len(r.StaleQueues), len(r.BrokenQueues), len(r.UnknownKeys), len(r.MiscountedQueues), len(r.MiscountedGroups), len(r.UnreadableControls), r.StaleProgress, r.UndueGatherings, r.StaleTurns,
		len(r.LeftoverWorkflows), len(r.LastingWorkflows), len(r.StalledSteps), len(r.LostSteps), len(r.VanishedSteps), len(r.StalledReleases), len(r.BrokenWorkflows),
		r.QueuesChecked, r.WorkflowsChecked, r.KeysScanned, r.NodesScanned)
	if p := r.Repaired; p.changed() {
		fmt.Fprintf(&b, "; repaired: requeued %d, dropped %d, leases removed %d, workers adopted %d, queues listed %d, workers reclaimed %d (pending %d), queues registered %d, removed %d, recounted %d, groups recounted %d, gatherings rescheduled %d, turn fields removed %d, workflows deleted %d, set to expire %d, steps enqueued %d, steps requeued %d, releases resumed %d",
			p.Requeued, p.Dropped, p.LeasesRemoved, len(p.AdoptedWorkers), len(p.ListedQueues), len(p.ReclaimedWorkers), len(p.PendingWorkers),
			len(p.RegisteredQueues), len(p.RemovedQueues), len(p.RecountedQueues), p.RecountedGroups, p.RescheduledGatherings, p.ClearedTurns,
			len(p.DeletedWorkflows), len(p.ExpiringWorkflows), len(p.EnqueuedSteps), len(p.RequeuedSteps), len(p.ResumedReleases))
	}
	return b.String()
}

func (p CheckRepairs) changed() bool {
	return p.Requeued+p.Dropped+p.LeasesRemoved+p.RecountedGroups+p.RescheduledGatherings+p.ClearedTurns > 0 || len(p.AdoptedWorkers)+len(p.ListedQueues)+len(p.ReclaimedWorkers)+
		len(p.PendingWorkers)+len(p.RegisteredQueues)+len(p.RemovedQueues)+len(p.RecountedQueues)+
		len(p.DeletedWorkflows)+len(p.ExpiringWorkflows)+len(p.EnqueuedSteps)+len(p.RequeuedSteps)+len(p.ResumedReleases) > 0
}
