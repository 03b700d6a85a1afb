package workflow

import (
	"context"
	"slices"
	"strings"

	"github.com/worqr/worqr/internal/store"
)

// WholePage is the part from, limit of a workflow read whole, as
// store.WorkflowSteps would page it: for a workflow created before the
// order of its steps was kept. Its steps are sorted by name, then put in
// dependency order (Order), each with at most maxParents parents (the
// rest counted in MoreOfEach), with the workflow's counts of steps open
// and dead.
func WholePage(rec store.WorkflowRecord, from, limit, maxParents int) store.StepsPage {
	steps := slices.Clone(rec.Steps)
	slices.SortFunc(steps, func(a, b store.StepRecord) int { return strings.Compare(a.Name, b.Name) })
	page := store.StepsPage{State: rec.State, Created: rec.Created, Ended: rec.Ended, Total: len(steps)}
	for _, st := range steps {
		switch StepState(st.State) {
		case "waiting", "ready", "queued":
			page.Open++
		case "dead":
			page.Dead++
		}
	}
	order := Order(len(steps), func(i int) string { return steps[i].Name }, func(i int) []string { return steps[i].Parents })
	for _, i := range order[min(from, len(order)):min(from+limit, len(order))] {
		st, more := steps[i], 0
		if len(st.Parents) > maxParents {
			st.Parents, more = st.Parents[:maxParents], len(st.Parents)-maxParents
		}
		page.Steps = append(page.Steps, st)
		page.MoreOfEach = append(page.MoreOfEach, more)
	}
	return page
}

// ReadPage reads the part from, limit of a workflow's steps, each with at
// most maxParents parents: one page's read, or, for a workflow created
// before the order of its steps was kept, a read of the whole workflow
// paged here (WholePage). ok is false for a workflow unknown, or ended
// and past its keep.
func ReadPage(ctx context.Context, st *store.Store, id string, from, limit, maxParents int) (page store.StepsPage, ok bool, err error) {
	page, ok, err = st.WorkflowSteps(ctx, id, from, limit, maxParents)
	if err != nil || !ok || page.Total >= 0 {
		return page, ok, err
	}
	whole, ok, err := st.WorkflowState(ctx, id)
	if err != nil || !ok {
		return store.StepsPage{}, ok, err
	}
	return WholePage(whole, from, limit, maxParents), true, nil
}
