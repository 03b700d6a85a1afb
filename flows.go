package worqr

import (
	"context"
	"time"

	"github.com/worqr/worqr/internal/flows"
	"github.com/worqr/worqr/internal/store"
)

// FlowSweepAge is how old a workflow task's notice must be before a sweep
// carries it to its workflow (docs/workflows.md): the worker that ended the
// task carries it within milliseconds, unless it crashed or lost Redis.
const FlowSweepAge = 10 * time.Second

// FlowSweepEvery is how often a client with workers sweeps the queues
// they have served for notices left by a crash.
const FlowSweepEvery = 30 * time.Second

// flowBatchMax is the most notices carried together.
const flowBatchMax = maxTasksPerScript

// flowsRelease is what the release of workflows' ready steps takes of
// the client.
func flowsRelease(c *Client) *flows.Release {
	return &flows.Release{
		Store: c.store,
		Fail:  c.fail,
		Enqueued: func(ctx context.Context, queue string, ids []string) {
			c.obs.enqueued(ctx, EnqueueEvent{Queue: queue, TaskIDs: ids})
		},
		Cancel: func(ctx context.Context, queue, id string) error {
			_, err := c.CancelTask(ctx, queue, id)
			return err
		},
	}
}

// flowsCarrier is what a carry of workflow notices takes of the client.
func flowsCarrier(c *Client) *flows.Carrier {
	return &flows.Carrier{Store: c.store, Fail: c.fail, Enqueue: c.release.Enqueue, BatchMax: flowBatchMax, Log: c.log}
}

// flowsEnv is what the client's carries and sweeps of workflow notices
// (internal/flows) take of it.
func flowsEnv(c *Client) *flows.Env {
	return &flows.Env{
		Clock:    c.clock,
		Log:      c.log,
		Carry:    c.carrier.Batch,
		Sweep:    c.carrier.Sweep,
		BatchMax: flowBatchMax,
		Every:    FlowSweepEvery,
		Age:      FlowSweepAge,
		Swept:    &c.signals.swept,
	}
}

// flowEnded carries the notice of a workflow task that a worker of the
// client just ended, finished or dead (the script that ended it wrote
// the notice), without holding up the caller; read is what reading the
// notice would answer, if the script told it (nil: the carry reads it).
func (c *Client) flowEnded(queue, flow, taskID string, want Outcome, read *store.NoticeRead) {
	status := "ok"
	if want == OutcomeDead {
		status = "dead"
	}
	if n, ok := store.ParseNotice(flow + "," + taskID + "," + status); ok {
		n.Read = read
		c.flows.Ended(queue, n)
	}
}
