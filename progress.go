package worqr

import (
	"context"
	"fmt"
	"time"

	"github.com/worqr/worqr/internal/proc"
	"github.com/worqr/worqr/internal/store"
)

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

// TaskProgress is the last progress report of a task in flight (see
// Process.ReportProgress).
type TaskProgress struct {
	TaskID string
	// ProcessID is the process that reported it.
	ProcessID string
	// Percent is 0 to 100.
	Percent int
	Note    string
	// At is when it was written, by the Redis clock.
	At time.Time
}

func taskProgress(id string, r store.ProgressRecord) TaskProgress {
	return TaskProgress{TaskID: id, ProcessID: r.PID, Percent: r.Percent, Note: r.Note, At: time.UnixMilli(r.At)}
}

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
		return fmt.Errorf("worqr: progress %q process %s: percent %d not in 0..100: %w", p.queue, p.id, percent, ErrInvalidOptions)
	}
	if len(note) > MaxProgressNote {
		note = note[:MaxProgressNote]
	}
	if p.w == nil {
		p.st.KeepProgress(percent, note)
		return nil
	}
	write, ended := p.st.ReportProgress(p.throttle(), (*progressFlusher)(p), percent, note)
	if ended != nil {
		if p.isSettled() {
			return fmt.Errorf("worqr: progress %q process %s: already ended: %w", p.queue, p.id, ErrProcessLost)
		}
		return fmt.Errorf("worqr: progress %q process %s: %w", p.queue, p.id, ended)
	}
	if !write {
		return nil
	}
	return p.writeProgress(ctx, percent, note)
}

// Progress is the last report ReportProgress was given (made in this
// process, whether written yet or not); ok is false if none was.
func (p *Process) Progress() (percent int, note string, ok bool) { return p.st.Progress() }

// throttle is what the throttle of p's progress writes takes of its
// worker.
func (p *Process) throttle() proc.Throttle {
	return proc.Throttle{Clock: p.w.c.clock, Interval: ProgressInterval}
}

// progressFlusher is a process as the writer of the reports its
// throttle held (a conversion, not an allocation).
type progressFlusher Process

func (f *progressFlusher) FlushProgress() { (*Process)(f).flushProgress() }

// flushProgress is the throttle's timer: it writes the last report held.
func (p *Process) flushProgress() {
	percent, note, ok := p.st.FlushingProgress(p.throttle())
	if !ok {
		return // ended; or the write in flight rearms the timer
	}
	ctx, cancel := context.WithTimeout(p.w.life, p.w.opts.TTL)
	defer cancel()
	if err := p.writeProgress(ctx, percent, note); err != nil {
		p.w.logger().Debug("worqr: progress report not written", "queue", p.queue, "process", p.id, "err", err)
	}
}

// writeProgress writes a report (the caller has marked the write in
// flight, in p.st), then arms the timer if another report came while it
// was.
func (p *Process) writeProgress(ctx context.Context, percent int, note string) error {
	err := p.sendProgress(ctx, percent, note)
	p.st.ProgressWritten(p.throttle(), (*progressFlusher)(p))
	return err
}

// sendProgress runs the progress script and maps what it found.
func (p *Process) sendProgress(ctx context.Context, percent int, note string) error {
	c := p.w.c
	if err := c.validateCtx(ctx, "progress"); err != nil {
		return err
	}
	got, err := c.store.ReportProgress(ctx, p.queue, store.ProcRef{Worker: p.owner, PID: p.id}, percent, note)
	if err != nil {
		return c.fail("progress", p.queue, err)
	}
	switch got {
	case store.WasActive:
		return nil
	case store.LeaseGone:
		if p.isSettled() {
			break // it ended meanwhile, by this worker's own hand
		}
		p.w.lease.leaseLost(p.owner, p.queue, nil, p, fmt.Errorf("progress found the lease on %q gone", p.queue))
		forget(p, ErrProcessLost)
	case store.NotOwned:
		if !p.isSettled() {
			forget(p, ErrProcessLost)
		}
	case store.WasCancelled:
		p.end(ErrTaskCancelled, false)
		return fmt.Errorf("worqr: progress %q process %s: %w", p.queue, p.id, ErrTaskCancelled)
	case store.WasDeleted:
		p.end(ErrQueueDeleted, false)
		return fmt.Errorf("worqr: progress %q process %s: %w", p.queue, p.id, ErrQueueDeleted)
	}
	return fmt.Errorf("worqr: progress %q process %s: %w", p.queue, p.id, ErrProcessLost)
}

// TaskProgress returns the last progress report of a task in flight, by
// id. It returns ErrNoTask when the task is not in flight or has reported
// nothing in its current attempt (reports end with their process).
func (c *Client) TaskProgress(ctx context.Context, queue, id string) (TaskProgress, error) {
	if err := c.validate(ctx, "task progress", queue); err != nil {
		return TaskProgress{}, err
	}
	if id == "" {
		return TaskProgress{}, fmt.Errorf("worqr: task progress %q: empty task id: %w", queue, ErrInvalidOptions)
	}
	r, ok, err := c.store.Progress(ctx, queue, id)
	if err != nil {
		return TaskProgress{}, c.fail("task progress", queue, err)
	}
	if !ok {
		return TaskProgress{}, fmt.Errorf("worqr: task progress %q %s: %w", queue, id, ErrNoTask)
	}
	return taskProgress(id, r), nil
}
