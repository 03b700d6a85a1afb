package workflow

import (
	"container/heap"
	"slices"
	"strings"

	"github.com/worqr/worqr/internal/store"
)

// Order returns the indexes of n steps in dependency order: each after
// all its parents (those of a name among the n; others are ignored), and
// among those whose parents are all listed, by index, so that steps
// sorted by name read a chain from its first step to its last.
func Order(n int, name func(i int) string, parents func(i int) []string) []int {
	at := make(map[string]int, n)
	for i := range n {
		at[name(i)] = i
	}
	left := make([]int, n) // parents not yet listed
	kids := make([][]int, n)
	for i := range n {
		for _, p := range parents(i) {
			if j, ok := at[p]; ok {
				left[i]++
				kids[j] = append(kids[j], i)
			}
		}
	}
	ready := &indexHeap{}
	for i := range n {
		if left[i] == 0 {
			ready.ints = append(ready.ints, i)
		}
	}
	out := make([]int, 0, n)
	for ready.Len() > 0 {
		i := heap.Pop(ready).(int)
		out = append(out, i)
		for _, k := range kids[i] {
			if left[k]--; left[k] == 0 {
				heap.Push(ready, k)
			}
		}
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

// indexHeap is a min-heap of step indexes.
type indexHeap struct{ ints []int }

func (h *indexHeap) Len() int           { return len(h.ints) }
func (h *indexHeap) Less(i, j int) bool { return h.ints[i] < h.ints[j] }
func (h *indexHeap) Swap(i, j int)      { h.ints[i], h.ints[j] = h.ints[j], h.ints[i] }
func (h *indexHeap) Push(x any)         { h.ints = append(h.ints, x.(int)) }
func (h *indexHeap) Pop() any {
	n := len(h.ints) - 1
	x := h.ints[n]
	h.ints = h.ints[:n]
	return x
}
