package engine

import (
	"context"
	"fmt"

	"github.com/worqr/worqr/internal/errs"
	"github.com/worqr/worqr/internal/proc"
	"github.com/worqr/worqr/internal/store"
)

// ReportProgress writes a progress report (percent checked, note cut by
// the caller) of a process that has a worker, or holds it for the
// throttle's timer when the last write was too recent.
func (p *Proc) ReportProgress(ctx context.Context, percent int, note string) error {
	write, ended := p.St.ReportProgress(p.throttle(), (*progressFlusher)(p), percent, note)
	if ended != nil {
		if p.St.IsSettled() {
			return fmt.Errorf("worqr: progress %q process %s: already ended: %w", p.Queue, p.ID, errs.ErrProcessLost)
		}
		return fmt.Errorf("worqr: progress %q process %s: %w", p.Queue, p.ID, ended)
	}
	if !write {
		return nil
	}
	return p.writeProgress(ctx, percent, note)
}

// throttle is what the throttle of p's progress writes takes of its
// worker.
func (p *Proc) throttle() proc.Throttle {
	env := p.Host.Env()
	return proc.Throttle{Clock: env.Clock, Interval: env.ProgressInterval}
}

// progressFlusher is a process as the writer of the reports its
// throttle held (a conversion, not an allocation).
type progressFlusher Proc

func (f *progressFlusher) FlushProgress() { (*Proc)(f).flushProgress() }

// flushProgress is the throttle's timer: it writes the last report held.
func (p *Proc) flushProgress() {
	percent, note, ok := p.St.FlushingProgress(p.throttle())
	if !ok {
		return // ended; or the write in flight rearms the timer
	}
	env := p.Host.Env()
	ctx, cancel := context.WithTimeout(env.Writer.Life(), env.TTL)
	defer cancel()
	if err := p.writeProgress(ctx, percent, note); err != nil {
		env.Log.Debug("worqr: progress report not written", "worker", env.WorkerID(), "queue", p.Queue, "process", p.ID, "err", err)
	}
}

// writeProgress writes a report (the caller has marked the write in
// flight, in p.St), then arms the timer if another report came while it
// was.
func (p *Proc) writeProgress(ctx context.Context, percent int, note string) error {
	err := p.sendProgress(ctx, percent, note)
	p.St.ProgressWritten(p.throttle(), (*progressFlusher)(p))
	return err
}

// sendProgress runs the progress script and maps what it found.
func (p *Proc) sendProgress(ctx context.Context, percent int, note string) error {
	env := p.Host.Env()
	if err := env.Validate(ctx, "progress"); err != nil {
		return err
	}
	got, err := env.Store.ReportProgress(ctx, p.Queue, store.ProcRef{Worker: p.Owner, PID: p.ID}, percent, note)
	if err != nil {
		return env.Fail("progress", p.Queue, err)
	}
	switch got {
	case store.WasActive:
		return nil
	case store.LeaseGone:
		if p.St.IsSettled() {
			break // it ended meanwhile, by this worker's own hand
		}
		p.Host.LeaseLost(fmt.Errorf("progress found the lease on %q gone", p.Queue))
		p.Forget(errs.ErrProcessLost)
	case store.NotOwned:
		if !p.St.IsSettled() {
			p.Forget(errs.ErrProcessLost)
		}
	case store.WasCancelled:
		p.End(errs.ErrTaskCancelled, false)
		return fmt.Errorf("worqr: progress %q process %s: %w", p.Queue, p.ID, errs.ErrTaskCancelled)
	case store.WasDeleted:
		p.End(errs.ErrQueueDeleted, false)
		return fmt.Errorf("worqr: progress %q process %s: %w", p.Queue, p.ID, errs.ErrQueueDeleted)
	}
	return fmt.Errorf("worqr: progress %q process %s: %w", p.Queue, p.ID, errs.ErrProcessLost)
}
