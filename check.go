package worqr

import (
	"context"

	"github.com/worqr/worqr/internal/checker"
	"github.com/worqr/worqr/internal/store"
	"github.com/worqr/worqr/worqrtype"
)

// How the check works, its invariants and why its repairs are safe
// while workers run, is told in internal/checker's package doc.

// CheckOptions configure Client.Check.
type CheckOptions struct {
	// Repair fixes what the check finds, as Client.Check describes.
	// Without it the check only reads.
	Repair bool
}

// The report of Client.Check and its parts are worqrtype's.
type (
	// CheckReport says what Client.Check found and, with Repair, what it
	// changed (see worqrtype.CheckReport).
	CheckReport = worqrtype.CheckReport
	// CheckRepairs says what a repair changed (see
	// worqrtype.CheckRepairs).
	CheckRepairs = worqrtype.CheckRepairs
	// WorkerQueue names a worker and a queue (see worqrtype.WorkerQueue).
	WorkerQueue = worqrtype.WorkerQueue
	// GroupCount is a group's count of the slots its processes hold, for
	// CheckReport (see worqrtype.GroupCount).
	GroupCount = worqrtype.GroupCount
	// QueueControl is a queue's control as stored, for CheckReport (see
	// worqrtype.QueueControl).
	QueueControl = worqrtype.QueueControl
	// WorkflowStep names a workflow and one of its steps, for CheckReport
	// (see worqrtype.WorkflowStep).
	WorkflowStep = worqrtype.WorkflowStep
)

// StepSearchLimit bounds the entries one call of Client.Check reads from
// a queue to look for workflow steps' tasks (see
// CheckReport.VanishedSteps).
const StepSearchLimit = store.StepSearchLimit

// Check compares every key under the client's prefix with the registries
// and reports what does not add up (see CheckReport); with Repair it also
// fixes what it found, one script per queue, worker or workflow, each
// judging again when it runs, so a repair never moves work that a live
// worker holds. It walks the keyspace with SCAN (MATCH "<prefix>:*"),
// never KEYS, on every node the Redis client knows (Nodes(): each master
// and replica of a Cluster), so its cost grows with the whole keyspace:
// run it now and then, or after an incident. It is safe to run while
// workers run, from any number of clients; a finding can be stale by the
// time it is reported. On error the report holds what was found and
// repaired until then. docs/consistency-check.md tells what each finding
// means and what its repair does.
func (c *Client) Check(ctx context.Context, opts CheckOptions) (CheckReport, error) {
	if err := c.core.ValidateCtx(ctx, "consistency check"); err != nil {
		return CheckReport{}, err
	}
	rep, err := checker.Run(ctx, c.core.CheckEnv(), opts.Repair)
	return rep, err
}
