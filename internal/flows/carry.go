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
// all the workflows, in one round trip (idempotent), releases again the
// workflows whose ends have children left to settle (a thousand a call)
// and enqueues those, until none is left, then releases those once more
// as a replay (whose answer takes in the children another carry of the
// same notices settled and did not enqueue) and enqueues what it
// answers, and then removes the notices carried, in one call. Any step
// may be run again; a notice gone was carried already. It returns an
// error per notice (the notices of a workflow whose release failed stay,
// for the sweep), or one for all.
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
	// A release settles a thousand children a call: a workflow whose
	// ends have more is released again once the steps made ready are
	// enqueued, until none is left. Its notices are forgotten only then:
	// a crash between leaves them, and a sweep's replay goes on from
	// where the release stands.
	// A call with enqueued answers only the children it settled itself:
	// another carry of the same notices (a sweep's) may have settled
	// those between and failed to enqueue them, keeping the notices this
	// carry forgets. So once the last chunk is enqueued the notices are
	// released once more without it, which answers every child they
	// freed that is not yet marked queued.
	failed := make([]error, len(flows)) // by workflow
	more := make([]bool, len(flows))
	chunked := make([]bool, len(flows)) // released with enqueued since the last replay
	release := func(w int, enqueued bool) {
		ready, left, err := c.Store.ReleaseChunk(ctx, flows[w].ID, ends[w], enqueued)
		if err != nil {
			failed[w] = c.Fail("workflow release", queue, err)
			ready, left = nil, false
		}
		flows[w].Steps, more[w], chunked[w] = ready, left, enqueued
	}
	now := make([]int, len(flows)) // the workflows released this round
	for w := range flows {
		release(w, false)
		now[w] = w
	}
	for len(now) > 0 {
		round := make([]Ready, len(now))
		for i, w := range now {
			round[i] = flows[w]
		}
		var next, replay []int
		for i, err := range c.Enqueue(ctx, round) {
			w := now[i]
			switch {
			case failed[w] != nil:
			case err != nil:
				failed[w] = fmt.Errorf("worqr: workflow %s: %w", flows[w].ID, err)
			case more[w]:
				next = append(next, w)
			case chunked[w]:
				replay = append(replay, w)
			}
		}
		for _, w := range next {
			release(w, true)
		}
		for _, w := range replay {
			release(w, false)
		}
		now = append(next, replay...)
	}
	errs := make([]error, len(notices))
	var forget []string
	for w := range flows {
		for _, i := range of[w] {
			// A notice of no Raw has none stored behind it: an end
			// carried once more by the consistency check's repair.
			if errs[i] = failed[w]; errs[i] == nil && notices[i].Raw != "" {
				forget = append(forget, notices[i].Raw)
			}
		}
	}
	if err := c.Store.ForgetNotices(ctx, queue, forget); err != nil {
		return nil, c.Fail("workflow release", queue, err)
	}
	return errs, nil
}
