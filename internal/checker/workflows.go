package checker

import (
	"cmp"
	"context"
	"maps"
	"slices"
	"strings"

	"github.com/worqr/worqr/internal/store"
)

// stepsPage bounds the steps of a workflow one script call reads, and the
// steps judged at once: the check's memory and each call's cost are the
// page's, whatever a workflow's size.
const stepsPage = 1000

// pagesAtOnce bounds the pages of steps read in one round trip.
const pagesAtOnce = 16

// stepsAsk is a workflow's steps to look at.
type stepsAsk struct {
	id    string
	steps []string
}

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
// Or a release under way (a step's end whose children are not all
// settled) that no notice carries on (judgeReleases).
// A running workflow's steps are read a page at a time (wf_steps.lua),
// and those ready or queued judged a page's worth at a time (judgeSteps).
func (ck *checker) judgeWorkflows(ctx context.Context) error {
	rep := ck.rep
	ck.stalled = make(map[string][]store.ReadyStep)
	size := ck.c.StepsPage
	if size <= 0 {
		size = stepsPage
	}
	ids := slices.Sorted(maps.Keys(ck.flows))
	rep.WorkflowsChecked = len(ids)
	var asks []stepsAsk
	held := 0                                      // steps in asks
	marked := make(map[string][]store.ReleaseMark) // workflow -> its releases under way
	flush := func() error {
		if len(asks) == 0 {
			return nil
		}
		err := ck.judgeSteps(ctx, asks)
		asks, held = nil, 0
		return err
	}
	for start := 0; start < len(ids); start += lookBatch {
		batch := ids[start:min(start+lookBatch, len(ids))]
		heads, broken, err := ck.lookWorkflows(ctx, batch, nil, false)
		if err != nil {
			return err
		}
		rep.BrokenWorkflows = append(rep.BrokenWorkflows, broken...)
		var pages []store.PageAsk
		for _, id := range batch {
			w, ok := heads[id]
			switch {
			case !ok:
				continue
			case w.State == "" && w.Keys > 0:
				rep.LeftoverWorkflows = append(rep.LeftoverWorkflows, id)
			case store.Ended(w.State) && w.Lasting > 0:
				rep.LastingWorkflows = append(rep.LastingWorkflows, id)
			case w.State == "running":
				pages = append(pages, store.PageAsk{ID: id, Limit: size})
				if len(w.Marks) > 0 {
					marked[id] = w.Marks
				}
			}
		}
		for len(pages) > 0 {
			now := pages[:min(pagesAtOnce, len(pages))]
			read, err := ck.c.Store.StepPages(ctx, now)
			if err != nil {
				return ck.fail(err)
			}
			pages = pages[len(now):]
			for i, p := range read {
				a := now[i]
				switch {
				case p.Broken:
					if a.From == 0 {
						rep.BrokenWorkflows = append(rep.BrokenWorkflows, a.ID)
					}
					continue
				case p.Err != nil:
					return ck.fail(p.Err)
				case !p.Found || p.State != "running":
					continue
				case p.Total < 0:
					// Created before its steps' order was kept: looked at whole.
					asks = append(asks, stepsAsk{id: a.ID, steps: store.AllSteps})
					held += size
				default:
					var names []string
					for _, st := range p.Steps {
						if st.State == "r" || st.State == "q" {
							names = append(names, st.Name)
						}
					}
					if len(names) > 0 {
						asks = append(asks, stepsAsk{id: a.ID, steps: names})
						held += len(names)
					}
					if a.From+a.Limit < p.Total {
						pages = append(pages, store.PageAsk{ID: a.ID, From: a.From + a.Limit, Limit: size})
					}
				}
				if held >= size {
					if err := flush(); err != nil {
						return err
					}
				}
			}
		}
	}
	if err := flush(); err != nil {
		return err
	}
	if err := ck.judgeReleases(ctx, marked); err != nil {
		return err
	}
	// Judged a page at a time: the findings are sorted as one judgement
	// would list them.
	slices.Sort(rep.BrokenWorkflows)
	for _, list := range [][]WorkflowStep{rep.StalledSteps, rep.LostSteps, rep.VanishedSteps, rep.StalledReleases} {
		slices.SortFunc(list, compareSteps)
	}
	slices.SortFunc(ck.vanished, func(a, b vanishedStep) int { return compareSteps(a.WorkflowStep, b.WorkflowStep) })
	return nil
}

// judgeReleases judges the releases under way of running workflows, as
// their first look answered them (marked, by workflow): a step's end
// whose children are not all settled is carried on while a notice of the
// step's end is pending in the step's queue (its carrier calls again,
// or a sweep replays it from where the release stands); one with none
// (deleted by hand, or lost in a failover) is stalled, and the children
// past where it stands wait for good.
// A stalled release is confirmed by looking at its workflow again after
// the notices were read: a carry removes a notice only once the release
// it carries is done, so a release that stands at the same place at
// both looks had no notice pending between them.
func (ck *checker) judgeReleases(ctx context.Context, marked map[string][]store.ReleaseMark) error {
	if len(marked) == 0 {
		return nil
	}
	type ask struct {
		flow  string
		mark  store.ReleaseMark
		queue string
	}
	asks := make(map[string][]ask) // queue -> releases asked about
	for _, id := range slices.Sorted(maps.Keys(marked)) {
		for _, m := range marked[id] {
			q, ok := ck.c.StepQueue(m.Spec)
			// A step not ended, or whose end the workflow did not note,
			// has no end a replay could carry: it is not judged.
			if !ok || m.Stamp < 0 || (m.State != "ok" && m.State != "dead" && m.State != "x") {
				continue
			}
			asks[q] = append(asks[q], ask{flow: id, mark: m, queue: q})
		}
	}
	candidates := make(map[string]map[string]ask) // workflow -> step -> its release
	for _, q := range slices.Sorted(maps.Keys(asks)) {
		prefixes := make([]string, len(asks[q]))
		for i, a := range asks[q] {
			prefixes[i] = a.flow + "." + a.mark.Step + ","
		}
		found, err := ck.c.Store.PendingNotices(ctx, q, prefixes)
		if err != nil {
			return ck.c.Fail("consistency check", q, err)
		}
		for i, a := range asks[q] {
			if found[i] {
				continue
			}
			if candidates[a.flow] == nil {
				candidates[a.flow] = make(map[string]ask)
			}
			candidates[a.flow][a.mark.Step] = a
		}
	}
	ids := slices.Sorted(maps.Keys(candidates))
	second, _, err := ck.lookWorkflows(ctx, ids, nil, false)
	if err != nil {
		return err
	}
	for _, id := range ids {
		w, ok := second[id]
		if !ok || w.State != "running" {
			continue
		}
		for _, m := range w.Marks {
			a, ok := candidates[id][m.Step]
			if !ok || a.mark != m {
				continue
			}
			ws := WorkflowStep{Workflow: id, Step: m.Step, Task: m.TaskID}
			ck.rep.StalledReleases = append(ck.rep.StalledReleases, ws)
			ck.releases = append(ck.releases, stalledRelease{WorkflowStep: ws, queue: a.queue, mark: m})
		}
	}
	return nil
}

// compareSteps orders workflow steps by workflow, then step.
func compareSteps(a, b WorkflowStep) int {
	return cmp.Or(strings.Compare(a.Workflow, b.Workflow), strings.Compare(a.Step, b.Step))
}

// judgeSteps judges the steps asked about, of workflows running, that are
// ready or queued (see judgeWorkflows).
// Such a step is confirmed by looking at its workflow again after the
// notices were read: the carrier marks a step queued (or ended) before
// it removes the notice, so a step in the same state at both looks had
// none pending between them.
func (ck *checker) judgeSteps(ctx context.Context, looks []stepsAsk) error {
	rep := ck.rep
	// A workflow's pages judged together are looked at in one call.
	var ids []string
	var steps [][]string
	at := make(map[string]int)
	for _, l := range looks {
		i, ok := at[l.id]
		if !ok {
			i = len(ids)
			at[l.id] = i
			ids, steps = append(ids, l.id), append(steps, nil)
		}
		steps[i] = append(steps[i], l.steps...)
	}
	first, broken, err := ck.lookWorkflows(ctx, ids, steps, false)
	if err != nil {
		return err
	}
	// A key the pages did not read (a workflow read whole reads more) may
	// be of a wrong type: the workflow is reported, once, though its pages
	// may be judged in more than one call.
	for _, id := range broken {
		if !slices.Contains(rep.BrokenWorkflows, id) {
			rep.BrokenWorkflows = append(rep.BrokenWorkflows, id)
		}
	}
	type pending struct {
		flow, step string
		prefix     string
	}
	type queued struct {
		flow, step, task, queue string
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
					tasks[q] = append(tasks[q], queued{flow: id, step: st.Name, task: st.TaskID})
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
			gone[t.flow][t.step] = queued{flow: t.flow, step: t.step, task: t.task, queue: q}
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
	// Looked at again: the steps not carried, their specs whole for
	// their repair.
	var again []string
	var named [][]string
	for _, id := range slices.Sorted(maps.Keys(candidates)) {
		var names []string
		for _, step := range slices.Sorted(maps.Keys(candidates[id])) {
			if !candidates[id][step] {
				names = append(names, step)
			}
		}
		if len(names) > 0 {
			again = append(again, id)
			named = append(named, names)
		}
	}
	second, _, err := ck.lookWorkflows(ctx, again, named, true)
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
				ck.vanished = append(ck.vanished, vanishedStep{WorkflowStep: ws, queue: g.queue, spec: st.Spec})
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

// lookWorkflows runs check_workflow.lua on workflows, pipelined, asking
// of each about its steps (none: its state and keys only), their specs
// whole with full; those that could not be read for a key of a type worqr
// never writes there are answered apart.
func (ck *checker) lookWorkflows(ctx context.Context, ids []string, steps [][]string, full bool) (map[string]store.WorkflowLook, []string, error) {
	out := make(map[string]store.WorkflowLook, len(ids))
	var broken []string
	for start := 0; start < len(ids); start += lookBatch {
		end := min(start+lookBatch, len(ids))
		batch := ids[start:end]
		var asked [][]string
		if steps != nil {
			asked = steps[start:end]
		}
		looks, err := ck.c.Store.LookWorkflows(ctx, batch, asked, full, ck.s)
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
