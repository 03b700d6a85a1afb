package checker

import "github.com/worqr/worqr/internal/store"

// Report is what a check found and repaired: the root's CheckReport, whose
// fields say what each holds, with the orphaned processes as the store
// read them.
type Report struct {
	OrphanedProcesses   []Orphan
	DeadWorkers         []string
	UnregisteredWorkers []string
	UnlistedQueues      []WorkerQueue
	UnregisteredQueues  []string
	StaleQueues         []string
	BrokenQueues        []string
	StaleProgress       int64
	UndueGatherings     int64
	StaleTurns          int64
	UnknownKeys         []string
	MiscountedQueues    []string
	MiscountedGroups    []GroupCount
	UnreadableControls  []QueueControl
	LeftoverWorkflows   []string
	LastingWorkflows    []string
	StalledSteps        []WorkflowStep
	LostSteps           []WorkflowStep
	VanishedSteps       []WorkflowStep
	StalledReleases     []WorkflowStep
	BrokenWorkflows     []string

	NodesScanned     int
	KeysScanned      int
	QueuesChecked    int
	WorkflowsChecked int

	Repaired Repairs
}

// Repairs is what a repair changed: the root's CheckRepairs.
type Repairs struct {
	Requeued              int64
	Dropped               int64
	LeasesRemoved         int64
	AdoptedWorkers        []string
	ListedQueues          []WorkerQueue
	ReclaimedWorkers      []string
	PendingWorkers        []string
	RegisteredQueues      []string
	RemovedQueues         []string
	RecountedQueues       []string
	RecountedGroups       int64
	RescheduledGatherings int64
	ClearedTurns          int64
	DeletedWorkflows      []string
	ExpiringWorkflows     []string
	EnqueuedSteps         []WorkflowStep
	RequeuedSteps         []WorkflowStep
	ResumedReleases       []WorkflowStep
}

// WorkflowStep names a workflow and one of its steps, and its task if
// known (the root's WorkflowStep).
type WorkflowStep struct {
	Workflow string
	Step     string
	Task     string
}

// Orphan is an in-flight process of queue whose owner holds no live lease
// on it.
type Orphan struct {
	Queue string
	Proc  store.Proc
}

// WorkerQueue names a worker and a queue (the root's WorkerQueue).
type WorkerQueue struct {
	Worker string
	Queue  string
}

// GroupCount is a group's count of the slots its processes hold (the
// root's GroupCount).
type GroupCount struct {
	Queue         string
	Group         string
	Counted, Held int64
}

// QueueControl is a queue's control as stored (the root's QueueControl).
type QueueControl struct {
	Queue   string
	Control string
	Value   string
}
