package checker

import (
	"context"
	"maps"
	"slices"

	"github.com/worqr/worqr/internal/store"
)

// judgeWorkflows looks at every workflow the scan found a key of: one
// whose flow hash is gone left keys behind; an ended one whose keys do
// not all expire keeps them for good; and a running one may have a step
// ready (released, to be enqueued) that nothing carries into its queue
// any more: no notice of a parent's end pending (a sweep replays those),
// and no parent at all for a step that was ready from the start (only
// the call that created the workflow enqueues those); or a step queued
// whose task ended, or is gone, with no notice of its end left to carry;
// or a step queued whose task has not ended but is in no place of its
// queue (removed by hand, or by a bug), so it never will.
// Such a step is confirmed by looking at its workflow again after the
// notices were read: the carrier marks a step queued (or ended) before
// it removes the notice, so a step in the same state at both looks had
// none pending between them.
func (ck *checker) judgeWorkflows(ctx context.Context) error {
	rep := ck.rep
	ck.stalled = make(map[string][]store.ReadyStep)
	first, broken, err := ck.lookWorkflows(ctx, slices.Sorted(maps.Keys(ck.flows)))
	if err != nil {
		return err
	}
	rep.WorkflowsChecked = len(ck.flows)
	rep.BrokenWorkflows = broken
	type pending struct {
		flow, step string
		prefix     string
	}
	type queued struct {
		flow, step, task, spec, queue string
	}
	asks := make(map[string][]pending)             // queue -> notices asked about
	tasks := make(map[string][]queued)             // queue -> queued steps' tasks
	candidates := make(map[string]map[string]bool) // workflow -> step -> carried
	candidate := func(id, step string) {
		if candidates[id] == nil {
			candidates[id] = make(map[string]bool)
		}
		candidates[id][step] = false
	}
	for _, id := range slices.Sorted(maps.Keys(first)) {
		w := first[id]
		switch {
		case w.State == "" && w.Keys > 0:
			rep.LeftoverWorkflows = append(rep.LeftoverWorkflows, id)
		case store.Ended(w.State) && w.Lasting > 0:
			rep.LastingWorkflows = append(rep.LastingWorkflows, id)
		}
		for _, st := range w.Steps {
			switch {
			case st.State == "r":
				candidate(id, st.Name)
				for _, p := range st.FreedBy {
					q, ok := ck.c.StepQueue(w.Specs[p])
					if !ok {
						// Its parent's queue cannot be told: the step is
						// not judged.
						candidates[id][st.Name] = true
						continue
					}
					asks[q] = append(asks[q], pending{flow: id, step: st.Name, prefix: id + "." + p + ","})
				}
			case st.State == "q" && st.TaskID != "":
				if q, ok := ck.c.StepQueue(st.Spec); ok {
					candidate(id, st.Name)
					tasks[q] = append(tasks[q], queued{flow: id, step: st.Name, task: st.TaskID, spec: st.Spec})
				}
			}
		}
	}
	// A queued step's task that has not ended carries the step (its end
	// will leave a notice), if it is in its queue; one that ended, or
	// whose outcome is gone, left its notice by then, in the same script,
	// so its notices are read after this.
	gone := make(map[string]map[string]queued) // workflow -> step -> its task, gone from its queue
	for _, q := range slices.Sorted(maps.Keys(tasks)) {
		ids := make([]string, len(tasks[q]))
		for i, t := range tasks[q] {
			ids[i] = t.task
		}
		states, err := ck.c.Store.TaskOutcomes(ctx, q, ids)
		if err != nil {
			return ck.c.Fail("consistency check", q, err)
		}
		var live []queued
		for i, t := range tasks[q] {
			if states[i] == store.RetainedPending {
				live = append(live, t)
				continue
			}
			asks[q] = append(asks[q], pending{flow: t.flow, step: t.step, prefix: t.flow + "." + t.step + "," + t.task + ","})
		}
		if len(live) == 0 {
			continue
		}
		ids = make([]string, len(live))
		for i, t := range live {
			ids[i] = t.task
		}
		// A task not ended is looked for in its queue: one found nowhere
		// was removed by hand or lost, and will never end.
		missing, err := ck.c.Store.GoneTasks(ctx, q, ids, ck.s)
		if err != nil {
			return ck.c.Fail("consistency check", q, err)
		}
		for i, t := range live {
			if !missing[i] {
				candidates[t.flow][t.step] = true
				continue
			}
			if gone[t.flow] == nil {
				gone[t.flow] = make(map[string]queued)
			}
			gone[t.flow][t.step] = queued{flow: t.flow, step: t.step, task: t.task, spec: t.spec, queue: q}
		}
	}
	for _, q := range slices.Sorted(maps.Keys(asks)) {
		prefixes := make([]string, len(asks[q]))
		for i, a := range asks[q] {
			prefixes[i] = a.prefix
		}
		found, err := ck.c.Store.PendingNotices(ctx, q, prefixes)
		if err != nil {
			return ck.c.Fail("consistency check", q, err)
		}
		for i, a := range asks[q] {
			if found[i] {
				candidates[a.flow][a.step] = true
			}
		}
	}
	var again []string
	for id, steps := range candidates {
		for _, carried := range steps {
			if !carried {
				again = append(again, id)
				break
			}
		}
	}
	slices.Sort(again)
	second, _, err := ck.lookWorkflows(ctx, again)
	if err != nil {
		return err
	}
	for _, id := range again {
		w, ok := second[id]
		if !ok || w.State != "running" {
			continue
		}
		was := make(map[string]store.LookedStep, len(first[id].Steps))
		for _, st := range first[id].Steps {
			was[st.Name] = st
		}
		for _, st := range w.Steps {
			if carried, ok := candidates[id][st.Name]; !ok || carried || st.State != was[st.Name].State || st.TaskID != was[st.Name].TaskID {
				continue
			}
			ws := WorkflowStep{Workflow: id, Step: st.Name}
			if g, ok := gone[id][st.Name]; ok {
				ws.Task = st.TaskID
				rep.VanishedSteps = append(rep.VanishedSteps, ws)
				ck.vanished = append(ck.vanished, vanishedStep{WorkflowStep: ws, queue: g.queue, spec: g.spec})
				continue
			}
			if st.State == "r" {
				rep.StalledSteps = append(rep.StalledSteps, ws)
				ck.stalled[id] = append(ck.stalled[id], store.ReadyStep{Name: st.Name, Spec: st.Spec})
			} else {
				ws.Task = st.TaskID
				rep.LostSteps = append(rep.LostSteps, ws)
			}
		}
	}
	return nil
}

// lookWorkflows runs check_workflow.lua on workflows, pipelined; those
// that could not be read for a key of a type worqr never writes there
// are answered apart.
func (ck *checker) lookWorkflows(ctx context.Context, ids []string) (map[string]store.WorkflowLook, []string, error) {
	out := make(map[string]store.WorkflowLook, len(ids))
	var broken []string
	for start := 0; start < len(ids); start += lookBatch {
		batch := ids[start:min(start+lookBatch, len(ids))]
		looks, err := ck.c.Store.LookWorkflows(ctx, batch, ck.s)
		if err != nil {
			return nil, nil, ck.fail(err)
		}
		for i, l := range looks {
			switch {
			case l.Broken:
				broken = append(broken, batch[i])
			case l.Err != nil:
				return nil, nil, ck.fail(l.Err)
			default:
				out[batch[i]] = l
			}
		}
	}
	return out, broken, nil
}
