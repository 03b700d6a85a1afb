package checker

import (
	"github.com/worqr/worqr/internal/store"
	"github.com/worqr/worqr/worqrtype"
)

// The report a check builds is the one the root's Check returns, under
// the names this package gives its parts.
type (
	// Report is what a check found and repaired.
	Report = worqrtype.CheckReport
	// Repairs is what a repair changed.
	Repairs = worqrtype.CheckRepairs
	// WorkflowStep names a workflow and one of its steps, and its task if
	// known.
	WorkflowStep = worqrtype.WorkflowStep
	// WorkerQueue names a worker and a queue.
	WorkerQueue = worqrtype.WorkerQueue
	// GroupCount is a group's count of the slots its processes hold.
	GroupCount = worqrtype.GroupCount
	// QueueControl is a queue's control as stored.
	QueueControl = worqrtype.QueueControl
)

// Orphan is an in-flight process of queue whose owner holds no live lease
// on it.
type Orphan struct {
	Queue string
	Proc  store.Proc
}
