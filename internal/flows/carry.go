package flows

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/worqr/worqr/internal/store"
)

// SweepLimit bounds the notices one sweep of a queue carries.
const SweepLimit = 1000

// Ready are a workflow's steps ready to be enqueued.
type Ready struct {
	ID    string
	Steps []store.ReadyStep
}

// Carrier is what a carry does: it reads the notices, releases the steps
// their ends made ready, enqueues those and forgets the notices carried.
type Carrier struct {
	Store *store.Store
	// Fail makes a store error the client's (op, queue).
	Fail func(op, queue string, err error) error
	// Enqueue enqueues workflows' ready steps and returns an error per
	// workflow.
	Enqueue func(ctx context.Context, ready []Ready) []error
	// BatchMax is the most notices carried together.
	BatchMax int
	// Log says which carries failed, left to the sweep.
	Log *slog.Logger
}

// Revived carries a queue's notices of workflow tasks requeued from the
// dead letters, after a requeue: their workflows run again by the time
// the requeue returns. One that fails is left to the sweep.
func (c *Carrier) Revived(ctx context.Context, queue string) {
	raw, err := c.Store.FlowNotices(ctx, queue, 0, SweepLimit)
	if err == nil {
		_, err = c.Raw(ctx, queue, raw, func(n store.Notice) bool { return n.Status == "revived" })
	}
	if err != nil {
		c.Log.Warn("worqr: could not tell a workflow of its step requeued; a sweep will", "queue", queue, "err", err)
	}
}

// Cancelled carries the notices a cancel or a queue's delete wrote for
// the workflow tasks it cancelled: their workflows have recorded those
// steps' ends, and cancelled their descendants, by the time the call
// returns. Notices that fail to be carried stay in the queue's flows
// set, for a sweep of that queue.
func (c *Carrier) Cancelled(ctx context.Context, queue string, notices []string) {
	if len(notices) == 0 {
		return
	}
	if _, err := c.Raw(ctx, queue, notices, func(store.Notice) bool { return true }); err != nil {
		c.Log.Warn("worqr: could not tell a workflow of its step cancelled; a sweep will", "queue", queue, "err", err)
	}
}

// Sweep carries a queue's notices at least age old to their workflows,
// and returns how many it carried.
func (c *Carrier) Sweep(ctx context.Context, queue string, age time.Duration) (int, error) {
	raw, err := c.Store.FlowNotices(ctx, queue, age, SweepLimit)
	if err != nil {
		return 0, c.Fail("workflow sweep", queue, err)
	}
	return c.Raw(ctx, queue, raw, func(store.Notice) bool { return true })
}

// Raw carries the notices of raw that pass want, in batches, and forgets
// those that are not worqr's; it returns how many it carried and the
// first error.
func (c *Carrier) Raw(ctx context.Context, queue string, raw []string, want func(store.Notice) bool) (int, error) {
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
	if err := c.Store.ForgetNotices(ctx, queue, junk); err != nil {
		return 0, c.Fail("workflow sweep", queue, err)
	}
	done := 0
	for batch := range slices.Chunk(notices, c.BatchMax) {
		errs, err := c.Batch(ctx, queue, batch)
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

// read answers what FlowRead does for each notice: a notice that holds
// it already (the worker that finished its task knows when the finish
// wrote it and the result) is not read, and a batch of those costs no
// call. One carried already, and gone, is then released again, which
// records nothing twice (see Batch).
func (c *Carrier) read(ctx context.Context, queue string, notices []store.Notice) ([]store.NoticeRead, error) {
	var unread []store.Notice
	for _, n := range notices {
		if n.Read == nil {
			unread = append(unread, n)
		}
	}
	var got []store.NoticeRead
	if len(unread) > 0 {
		var err error
		if got, err = c.Store.FlowRead(ctx, queue, unread); err != nil {
			return nil, err
		}
		if len(unread) == len(notices) {
			return got, nil
		}
	}
	reads := make([]store.NoticeRead, len(notices))
	for i, n := range notices {
		if n.Read != nil {
			reads[i] = *n.Read
		} else {
			reads[i], got = got[0], got[1:]
		}
	}
	return reads, nil
}

// Batch takes notices of a queue to their workflows, together: it reads
// when each was written and its task's result (kept with its outcome, for
// a task that finished) in one call, records the steps' ends in one call
// per workflow (idempotent), enqueues the steps those ends made ready, of
// all the workflows, in one round trip (idempotent), and then removes the
// notices carried, in one call. Any step may be run again; a notice gone
// was carried already. It returns an error per notice (the notices of a
// workflow whose release failed stay, for the sweep), or one for all.
func (c *Carrier) Batch(ctx context.Context, queue string, notices []store.Notice) ([]error, error) {
	reads, err := c.read(ctx, queue, notices)
	if err != nil {
		return nil, c.Fail("workflow release", queue, err)
	}
	var flows []Ready
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
			flows, ends, of = append(flows, Ready{ID: n.Workflow}), append(ends, nil), append(of, nil)
		}
		ends[w] = append(ends[w], store.StepEnd{Step: n.Step, Task: n.Task, Status: n.Status, Result: result, At: rd.At})
		of[w] = append(of[w], i)
	}
	errs := make([]error, len(notices))
	for w := range flows {
		ready, err := c.Store.ReleaseSteps(ctx, flows[w].ID, ends[w])
		if err != nil {
			err = c.Fail("workflow release", queue, err)
			for _, i := range of[w] {
				errs[i] = err
			}
			continue
		}
		flows[w].Steps = ready
	}
	var forget []string
	for w, err := range c.Enqueue(ctx, flows) {
		for _, i := range of[w] {
			switch {
			case errs[i] != nil:
			case err != nil:
				errs[i] = fmt.Errorf("worqr: workflow %s: %w", flows[w].ID, err)
			default:
				forget = append(forget, notices[i].Raw)
			}
		}
	}
	if err := c.Store.ForgetNotices(ctx, queue, forget); err != nil {
		return nil, c.Fail("workflow release", queue, err)
	}
	return errs, nil
}
