package workflow

import (
	"slices"
	"strings"
	"time"

	"github.com/worqr/worqr/internal/store"
	"github.com/worqr/worqr/worqrtype"
)

// Info is workflow id's record as WorkflowInfo describes it, its steps
// sorted by name.
func Info(id string, rec store.WorkflowRecord) worqrtype.WorkflowInfo {
	info := worqrtype.WorkflowInfo{ID: id, State: worqrtype.WorkflowState(rec.State), Created: time.UnixMilli(rec.Created)}
	if rec.Ended > 0 {
		info.Ended = time.UnixMilli(rec.Ended)
	}
	for _, st := range rec.Steps {
		info.Steps = append(info.Steps, stepInfo(st, 0))
	}
	slices.SortFunc(info.Steps, func(a, b worqrtype.StepInfo) int { return strings.Compare(a.Name, b.Name) })
	return info
}

// PageInfo is a page of workflow id's steps, from place from, as
// WorkflowPage describes it.
func PageInfo(id string, from int, rec store.StepsPage) worqrtype.WorkflowPage {
	page := worqrtype.WorkflowPage{ID: id, State: worqrtype.WorkflowState(rec.State), Created: time.UnixMilli(rec.Created),
		Total: rec.Total, Open: rec.Open, Dead: rec.Dead, From: from}
	if rec.Ended > 0 {
		page.Ended = time.UnixMilli(rec.Ended)
	}
	for i, st := range rec.Steps {
		page.Steps = append(page.Steps, stepInfo(st, rec.MoreOfEach[i]))
	}
	return page
}

// stepInfo is a step as stored, with more parents than it lists.
func stepInfo(st store.StepRecord, more int) worqrtype.StepInfo {
	queue, _ := SpecQueue(st.Spec) // a spec unreadable shows what was read of it
	return worqrtype.StepInfo{Name: st.Name, Queue: queue, State: worqrtype.StepState(StepState(st.State)), TaskID: st.TaskID, Parents: st.Parents, MoreParents: more}
}
