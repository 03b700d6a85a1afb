package worqr

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/worqr/worqr/internal/flows"
	"github.com/worqr/worqr/internal/store"
)

// FlowSweepAge is how old a workflow task's notice must be before a sweep
// carries it to its workflow (see workflow.go): the worker that ended the
// task carries it within milliseconds, unless it crashed or lost Redis.
const FlowSweepAge = 10 * time.Second

// FlowSweepEvery is how often a client with workers sweeps the queues
// they have served for notices left by a crash.
const FlowSweepEvery = 30 * time.Second

// flowSweepLimit bounds the notices one sweep of a queue carries.
const flowSweepLimit = 1000

// flowBatchMax is the most notices carried together (carryBatch).
const flowBatchMax = maxTasksPerScript

// flowsEnv is what the client's carries and sweeps of workflow notices
// (internal/flows) take of it.
func flowsEnv(c *Client) *flows.Env {
	return &flows.Env{
		Clock:    c.clock,
		Log:      c.log,
		Carry:    c.carryBatch,
		Sweep:    c.sweepFlows,
		BatchMax: flowBatchMax,
		Every:    FlowSweepEvery,
		Age:      FlowSweepAge,
		Swept:    &c.signals.swept,
	}
}

// flowEnded carries the notice of a workflow task that a worker of the
// client just ended, finished or dead (the script that ended it wrote
// the notice), without holding up the caller.
func (c *Client) flowEnded(queue, flow, taskID string, want Outcome) {
	status := "ok"
	if want == OutcomeDead {
		status = "dead"
	}
	if n, ok := store.ParseNotice(flow + "," + taskID + "," + status); ok {
		c.flows.Ended(queue, n)
	}
}

// sweepFlows carries a queue's notices at least age old to their
// workflows, and returns how many it carried.
func (c *Client) sweepFlows(ctx context.Context, queue string, age time.Duration) (int, error) {
	raw, err := c.store.FlowNotices(ctx, queue, age, flowSweepLimit)
	if err != nil {
		return 0, c.fail("workflow sweep", queue, err)
	}
	return c.carryRaw(ctx, queue, raw, func(store.Notice) bool { return true })
}

// carryRevived carries a queue's notices of workflow tasks requeued from
// the dead letters, after a requeue: their workflows run again by the
// time the requeue returns. One that fails is left to the sweep.
func (c *Client) carryRevived(ctx context.Context, queue string) {
	raw, err := c.store.FlowNotices(ctx, queue, 0, flowSweepLimit)
	if err == nil {
		_, err = c.carryRaw(ctx, queue, raw, func(n store.Notice) bool { return n.Status == "revived" })
	}
	if err != nil {
		c.log.Warn("worqr: could not tell a workflow of its step requeued; a sweep will", "queue", queue, "err", err)
	}
}

// carryCancelled carries the notices a cancel or a queue's delete wrote
// for the workflow tasks it cancelled: their workflows have recorded
// those steps' ends, and cancelled their descendants, by the time the
// call returns. Notices that fail to be carried stay in the queue's flows
// set, for a sweep of that queue.
func (c *Client) carryCancelled(ctx context.Context, queue string, notices []string) {
	if len(notices) == 0 {
		return
	}
	if _, err := c.carryRaw(ctx, queue, notices, func(store.Notice) bool { return true }); err != nil {
		c.log.Warn("worqr: could not tell a workflow of its step cancelled; a sweep will", "queue", queue, "err", err)
	}
}

// carryRaw carries the notices of raw that pass want, in batches, and
// forgets those that are not worqr's; it returns how many it carried
// and the first error.
func (c *Client) carryRaw(ctx context.Context, queue string, raw []string, want func(store.Notice) bool) (int, error) {
	var notices []store.Notice
	var junk []string
	for _, r := range raw {
		n, ok := store.ParseNotice(r)
		switch {
		case !ok: // not worqr's: nothing to carry
			junk = append(junk, r)
		case want(n):
			notices = append(notices, n)
		}
	}
	if err := c.store.ForgetNotices(ctx, queue, junk); err != nil {
		return 0, c.fail("workflow sweep", queue, err)
	}
	done := 0
	for batch := range slices.Chunk(notices, flowBatchMax) {
		errs, err := c.carryBatch(ctx, queue, batch)
		if err != nil {
			return done, err
		}
		for _, err := range errs {
			if err != nil {
				return done, err
			}
			done++
		}
	}
	return done, nil
}

// carryBatch takes notices of a queue to their workflows, together: it
// reads when each was written and its task's result (kept with its
// outcome, for a task that finished) in one call, records the steps'
// ends in one call per workflow (idempotent), enqueues the steps those
// ends made ready, of all the workflows, in one round trip (idempotent),
// and then removes the notices carried, in one call. Any step may be run
// again; a notice gone was carried already. It returns an error per
// notice (the notices of a workflow whose release failed stay, for the
// sweep), or one for all.
func (c *Client) carryBatch(ctx context.Context, queue string, notices []store.Notice) ([]error, error) {
	reads, err := c.store.FlowRead(ctx, queue, notices)
	if err != nil {
		return nil, c.fail("workflow release", queue, err)
	}
	var flows []wfReady
	var ends [][]store.StepEnd
	var of [][]int // the notices of each workflow, by index
	index := make(map[string]int)
	for i, n := range notices {
		rd := reads[i]
		if !rd.Found {
			continue
		}
		var result string
		if n.Status == "ok" && rd.Kept {
			result = rd.Result.Body
		}
		w, ok := index[n.Workflow]
		if !ok {
			w = len(flows)
			index[n.Workflow] = w
			flows, ends, of = append(flows, wfReady{id: n.Workflow}), append(ends, nil), append(of, nil)
		}
		ends[w] = append(ends[w], store.StepEnd{Step: n.Step, Task: n.Task, Status: n.Status, Result: result, At: rd.At})
		of[w] = append(of[w], i)
	}
	errs := make([]error, len(notices))
	for w := range flows {
		ready, err := c.store.ReleaseSteps(ctx, flows[w].id, ends[w])
		if err != nil {
			err = c.fail("workflow release", queue, err)
			for _, i := range of[w] {
				errs[i] = err
			}
			continue
		}
		flows[w].ready = ready
	}
	var forget []string
	for w, err := range c.enqueueReady(ctx, flows) {
		for _, i := range of[w] {
			switch {
			case errs[i] != nil:
			case err != nil:
				errs[i] = fmt.Errorf("worqr: workflow %s: %w", flows[w].id, err)
			default:
				forget = append(forget, notices[i].Raw)
			}
		}
	}
	if err := c.store.ForgetNotices(ctx, queue, forget); err != nil {
		return nil, c.fail("workflow release", queue, err)
	}
	return errs, nil
}
