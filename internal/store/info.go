package store

import (
	"cmp"
	"strings"
	"time"

	"github.com/worqr/worqr/worqrtype"
)

// The records a Client's read side returns, as worqrtype gives them to
// users: each conversion sits here, beside its record, so that the root
// package passes the values on.

// Info is the task as TaskInfo describes it, in queue.
func (t Task) Info(queue string) worqrtype.TaskInfo {
	info := worqrtype.TaskInfo{ID: t.ID, Queue: queue, Kind: t.Kind, Group: t.Group, Attempts: t.Attempts, MaxAttempts: t.MaxAttempts, Weight: max(t.Weight, 1), Payload: []byte(t.Payload), Size: t.Size}
	info.Workflow, info.Step, _ = strings.Cut(t.Flow, ".")
	if t.ID != "" {
		info.EnqueuedAt = t.EnqueuedAt()
	}
	return info
}

// Info is the delayed task, with when it is due.
func (d DelayedTask) Info(queue string) worqrtype.TaskInfo {
	info := d.Task.Info(queue)
	info.DueAt = time.UnixMicro(d.Due)
	return info
}

// Public is the state as ProcessState names it.
func (s State) Public() worqrtype.ProcessState {
	switch s {
	case Cancelled:
		return worqrtype.StateCancelled
	case Deleted:
		return worqrtype.StateDeleted
	default:
		return worqrtype.StateActive
	}
}

// Info is the process as ProcessInfo describes it, in queue.
func (p Proc) Info(queue string) worqrtype.ProcessInfo {
	info := worqrtype.ProcessInfo{ID: p.PID, Queue: queue, Owner: p.Owner, State: p.State.Public(), TaskID: p.Task.ID, Attempt: p.Task.Attempts, TaskKind: p.Task.Kind, Task: []byte(p.Task.Payload), TaskSize: p.Task.Size, Weight: max(p.Task.Weight, 1)}
	info.Workflow, info.Step, _ = strings.Cut(p.Task.Flow, ".")
	if p.Progress != nil {
		tp := p.Progress.Report(p.Task.ID)
		info.Progress = &tp
	}
	return info
}

// Report is the progress record of task id as TaskProgress says it.
func (r ProgressRecord) Report(id string) worqrtype.TaskProgress {
	return worqrtype.TaskProgress{TaskID: id, ProcessID: r.PID, Percent: r.Percent, Note: r.Note, At: time.UnixMilli(r.At)}
}

// Info is the dead letter as worqrtype.DeadLetter describes it, in queue.
func (d DeadLetter) Info(queue string) worqrtype.DeadLetter {
	dl := worqrtype.DeadLetter{TaskInfo: d.Task.Info(queue), Worker: d.Task.Worker, Reason: d.Task.Reason, Error: d.Error}
	if d.Task.Died > 0 {
		dl.DiedAt = time.UnixMilli(d.Task.Died)
	}
	return dl
}

// Outcome is the outcome record as TaskOutcome says it, in queue.
func (r Result) Outcome(queue string) worqrtype.TaskOutcome {
	o := worqrtype.TaskOutcome{
		ID: r.ID, Queue: queue, Attempts: r.Attempts,
		EnqueuedAt: Task{ID: r.ID}.EnqueuedAt(),
		StartedAt:  time.UnixMilli(r.Started), EndedAt: time.UnixMilli(r.Ended), ExpiresAt: time.UnixMilli(r.Expires),
	}
	if r.Status == "dead" {
		o.Status, o.Error, o.Reason = worqrtype.OutcomeDead, r.Body, r.Reason
	} else {
		o.Status, o.Result = worqrtype.OutcomeSucceeded, []byte(r.Body)
	}
	return o
}

// Kept is the outcome as a listing gives it, in queue.
func (o KeptOutcome) Kept(queue string) worqrtype.KeptOutcome {
	return worqrtype.KeptOutcome{TaskOutcome: o.Result.Outcome(queue), Size: o.Size}
}

var attemptEnds = map[byte]worqrtype.AttemptEnd{
	AttemptRetried:   worqrtype.AttemptRetried,
	AttemptDead:      worqrtype.AttemptDead,
	AttemptReclaimed: worqrtype.AttemptReclaimed,
}

// History is an attempt history as TaskLocation.History gives it: nil
// for none.
func History(as []Attempt) []worqrtype.Attempt {
	if len(as) == 0 {
		return nil
	}
	out := make([]worqrtype.Attempt, len(as))
	for i, a := range as {
		out[i] = worqrtype.Attempt{EndedAt: time.UnixMilli(a.Ended), End: attemptEnds[a.How], Worker: a.Worker, Error: a.Error}
	}
	return out
}

// Location is what FindTask found, in queue, as TaskLocation says it.
func (f Found) Location(queue string) worqrtype.TaskLocation {
	l := worqrtype.TaskLocation{Position: f.Position, Partial: f.Partial, History: History(f.Attempts)}
	if f.Waiting != nil {
		t := f.Waiting.Info(queue)
		l.Waiting = &t
	}
	if f.Delayed != nil {
		t := f.Delayed.Info(queue)
		l.Delayed = &t
	}
	if f.Proc != nil {
		p := f.Proc.Info(queue)
		l.Process = &p
	}
	if f.Dead != nil {
		d := f.Dead.Info(queue)
		l.Dead = &d
	}
	return l
}

// Info is the worker as WorkerInfo describes it.
func (l WorkerLease) Info() worqrtype.WorkerInfo {
	info := worqrtype.WorkerInfo{ID: l.ID, LeaseLeftMillis: l.LeftMsec, Host: l.Host, PID: l.PID}
	if l.StartedMs > 0 {
		info.StartedAt = time.UnixMilli(l.StartedMs)
	}
	for _, s := range l.Slots {
		info.Slots = append(info.Slots, worqrtype.QueueSlots{Queue: s.Queue, Slots: s.Slots})
	}
	return info
}

// Info is the schedule as ScheduleInfo describes it, in queue.
func (s ScheduleState) Info(queue string) worqrtype.ScheduleInfo {
	info := worqrtype.ScheduleInfo{Name: s.Name, Queue: queue, LastTick: time.UnixMilli(s.Last), TaskID: s.TaskID}
	if s.Next > 0 {
		info.NextTick = time.UnixMilli(s.Next)
	}
	return info
}

// Info is the gathering as GatheringInfo describes it.
func (g Gathering) Info() worqrtype.GatheringInfo {
	return worqrtype.GatheringInfo{Key: g.Key, Tasks: g.Tasks, Bytes: g.Bytes, Deadline: time.UnixMicro(g.Deadline)}
}

// Info is the queue's state as QueueInfo describes it, with the
// aggregation settings not set taken from defaults.
func (st QueueState) Info(queue string, defaults worqrtype.AggregateSettings) worqrtype.QueueInfo {
	info := worqrtype.QueueInfo{Name: queue, Waiting: st.Waiting, Delayed: st.Delayed, InFlight: st.InFlight, InFlightWeight: st.InFlightWeight, Dead: st.Dead, Paused: st.Paused, Concurrency: st.Limit, Rate: st.Rate, Per: st.Per,
		Groups: st.Groups, GroupsReady: st.GroupsReady, GroupConcurrency: st.GroupLimit,
		SequenceHold: st.SequenceHold, GroupsHeldOnDead: st.GroupsDeadHeld,
		Gatherings: st.Gatherings, Gathering: st.Gathering, Aggregation: worqrtype.AggregateSettings{MaxSize: cmp.Or(st.AggregateMax, defaults.MaxSize), MaxDelay: cmp.Or(st.AggregateDelay, defaults.MaxDelay)},
		GroupTurns: cmp.Or(st.GroupTurns, 1), GroupTurnSize: cmp.Or(st.GroupTurnSize, 1)}
	if st.Oldest > 0 {
		info.WaitingSince = time.UnixMicro(st.Oldest)
	}
	return info
}

// Bucket is the slot as StatsBucket describes it.
func (sl StatsSlot) Bucket() worqrtype.StatsBucket {
	b := worqrtype.StatsBucket{Start: sl.Start}
	b.Counts = worqrtype.StatsCounts{
		Enqueued:  sl.Counts[StatEnqueued],
		Started:   sl.Counts[StatStarted],
		Finished:  sl.Counts[StatFinished],
		Retried:   sl.Counts[StatRetried],
		Requeued:  sl.Counts[StatRequeued],
		Dead:      sl.Counts[StatDead],
		Reclaimed: sl.Counts[StatReclaimed],
		Cancelled: sl.Counts[StatCancelled],
	}
	b.Wait = worqrtype.Histogram{Buckets: sl.Wait, Sum: time.Duration(sl.WaitSum) * time.Microsecond}
	b.Run = worqrtype.Histogram{Buckets: sl.Run, Sum: time.Duration(sl.RunSum) * time.Microsecond}
	for kind, c := range sl.Kinds {
		if b.Kinds == nil {
			b.Kinds = make(map[string]worqrtype.KindCounts, len(sl.Kinds))
		}
		b.Kinds[kind] = worqrtype.KindCounts{Finished: c[KindFinished], Retried: c[KindRetried], Dead: c[KindDead]}
	}
	return b
}
