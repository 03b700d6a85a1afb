package workflow

import (
	"slices"
	"strings"

	"github.com/worqr/worqr/internal/store"
	"github.com/worqr/worqr/worqrtype"
)

// Order returns the indexes of n steps in dependency order: each after
// all its parents (those of a name among the n; others are ignored), and
// among those whose parents are all listed, by index, so that steps
// sorted by name read a chain from its first step to its last: the order
// of worqrtype.WorkflowInfo.InOrder, which computes it.
func Order(n int, name func(i int) string, parents func(i int) []string) []int {
	w := worqrtype.WorkflowInfo{Steps: make([]worqrtype.StepInfo, n)}
	at := make(map[string]int, n)
	for i := range n {
		w.Steps[i] = worqrtype.StepInfo{Name: name(i), Parents: parents(i)}
		at[name(i)] = i
	}
	steps := w.InOrder()
	out := make([]int, len(steps))
	for k, st := range steps {
		out[k] = at[st.Name]
	}
	return out
}

// place sets each step's place in dependency order, the order the root's
// WorkflowInfo.InOrder lists them in (its steps sorted by name), which
// the workflow keeps so that WorkflowSteps reads a part of it at that
// part's cost.
func place(plan []store.WorkflowStep) {
	byName := make([]int, len(plan))
	for i := range plan {
		byName[i] = i
	}
	slices.SortFunc(byName, func(a, b int) int { return strings.Compare(plan[a].Name, plan[b].Name) })
	order := Order(len(plan), func(i int) string { return plan[byName[i]].Name }, func(i int) []string { return plan[byName[i]].Parents })
	for at, i := range order {
		plan[byName[i]].Place = at
	}
}
