package worqr

import (
	"context"
	"fmt"
	"time"

	"github.com/worqr/worqr/worqrtype"
)

// TaskProgress is the last progress report of a task in flight (see
// worqrtype.TaskProgress).
type TaskProgress = worqrtype.TaskProgress

// Progress reports.
const (
	// ProgressInterval is the least time between two progress writes of
	// one process: a report that comes sooner after the last write is
	// held, and the last one held is written when the interval has
	// passed (reports in between are coalesced into it). A process thus
	// costs Redis at most 1/ProgressInterval script calls a second
	// (10), however often its handler reports.
	ProgressInterval = 100 * time.Millisecond
	// MaxProgressNote bounds a progress report's note, in bytes; a longer
	// note is cut.
	MaxProgressNote = 256
)

// ReportProgress reports how far the handler has got with the task:
// percent (0 to 100) and a short note (at most MaxProgressNote bytes; cut
// beyond). The last report of each task in flight is kept in Redis, in a
// small hash of its queue beside (not in) the process record, and
// published on the queue's channel: Client.TaskProgress and
// Client.Processes read it, WaitWithProgress hears it. It is removed when
// the process ends, however it ends.
//
// Reports are throttled: at most one write per ProgressInterval per
// process. One that comes sooner returns nil at once and is written
// when the interval has passed, unless a later report replaces it first;
// its errors, if any, end the process as a failed Finish would.
//
// A report written now is owner-checked as Finish is: it returns
// ErrProcessLost if the process no longer belongs to this worker
// (reclaimed by peers after a fence, given back, or ended), and
// ErrTaskCancelled or ErrQueueDeleted if its task was cancelled or its
// queue deleted; nothing is written then. A detached process (see
// NewDetachedProcess) keeps the report for Progress and returns nil.
func (p *Process) ReportProgress(ctx context.Context, percent int, note string) error {
	if percent < 0 || percent > 100 {
		return fmt.Errorf("worqr: progress %q process %s: percent %d not in 0..100: %w", p.rec.Queue, p.rec.ID, percent, ErrInvalidOptions)
	}
	if len(note) > MaxProgressNote {
		note = note[:MaxProgressNote]
	}
	if p.w == nil {
		p.rec.St.KeepProgress(percent, note)
		return nil
	}
	return p.rec.ReportProgress(ctx, percent, note)
}

// Progress is the last report ReportProgress was given (made in this
// process, whether written yet or not); ok is false if none was.
func (p *Process) Progress() (percent int, note string, ok bool) { return p.rec.St.Progress() }

// TaskProgress returns the last progress report of a task in flight, by
// id. It returns ErrNoTask when the task is not in flight or has reported
// nothing in its current attempt (reports end with their process).
func (c *Client) TaskProgress(ctx context.Context, queue, id string) (TaskProgress, error) {
	if err := c.core.Validate(ctx, "task progress", queue); err != nil {
		return TaskProgress{}, err
	}
	if id == "" {
		return TaskProgress{}, fmt.Errorf("worqr: task progress %q: empty task id: %w", queue, ErrInvalidOptions)
	}
	r, ok, err := c.core.Store.Progress(ctx, queue, id)
	if err != nil {
		return TaskProgress{}, c.core.Fail("task progress", queue, err)
	}
	if !ok {
		return TaskProgress{}, fmt.Errorf("worqr: task progress %q %s: %w", queue, id, ErrNoTask)
	}
	return r.Report(id), nil
}
