package worqrtype

import (
	"container/heap"
	"time"
)

// WorkflowState is where a workflow stands.
type WorkflowState string

// The states of a workflow.
const (
	WorkflowRunning   WorkflowState = "running"   // some step has not ended
	WorkflowSucceeded WorkflowState = "succeeded" // every step succeeded (or, after a failure, ran)
	WorkflowFailed    WorkflowState = "failed"    // every step ended, and one died
	WorkflowCancelled WorkflowState = "cancelled" // CancelWorkflow ended it
)

// StepState is where a workflow's step stands.
type StepState string

// The states of a step.
const (
	StepWaiting   StepState = "waiting"   // for its parents, outside its queue
	StepReady     StepState = "ready"     // its parents ended; its task is being enqueued
	StepQueued    StepState = "queued"    // its task is in its queue: waiting, delayed or in flight
	StepSucceeded StepState = "succeeded" // its task finished
	StepDead      StepState = "dead"      // its task went to the dead letters
	StepCancelled StepState = "cancelled" // it will not run: a parent failed, or the workflow was cancelled
)

// WorkflowInfo is a workflow's state and each of its steps'.
type WorkflowInfo struct {
	ID      string
	State   WorkflowState
	Created time.Time // by the Redis clock
	Ended   time.Time // zero while running
	Steps   []StepInfo
}

// StepInfo is one step of a workflow.
type StepInfo struct {
	Name    string
	Queue   string
	State   StepState
	TaskID  string   // its task's id in Queue, once queued; "" before
	Parents []string // the steps it waits for
	// MoreParents counts the parents not in Parents: WorkflowSteps lists
	// MaxPageParents at most. Workflow lists them all.
	MoreParents int
}

// WorkflowPage is part of a workflow's steps, in dependency order, with
// the workflow's state (WorkflowSteps).
type WorkflowPage struct {
	ID      string
	State   WorkflowState
	Created time.Time // by the Redis clock
	Ended   time.Time // zero while running
	// Total counts the workflow's steps, Open those that have not ended
	// (waiting, ready or queued) and Dead those that died.
	Total, Open, Dead int
	// From is the place of Steps[0] in dependency order, from 0.
	From int
	// Steps are the page's steps: those from From on in the order
	// WorkflowInfo.InOrder lists them, each with its first
	// MaxPageParents parents (MoreParents counts the rest).
	Steps []StepInfo
}

// InOrder returns the workflow's steps in dependency order: each after
// all its parents, and among those whose parents are all listed, in the
// order of Steps (by name, as Workflow returns them), so a chain reads
// from its first step to its last.
func (w WorkflowInfo) InOrder() []StepInfo {
	at := make(map[string]int, len(w.Steps))
	for i, st := range w.Steps {
		at[st.Name] = i
	}
	left := make([]int, len(w.Steps)) // parents not yet listed
	kids := make([][]int, len(w.Steps))
	for i, st := range w.Steps {
		for _, p := range st.Parents {
			if j, ok := at[p]; ok {
				left[i]++
				kids[j] = append(kids[j], i)
			}
		}
	}
	ready := &indexHeap{}
	for i := range w.Steps {
		if left[i] == 0 {
			ready.ints = append(ready.ints, i)
		}
	}
	out := make([]StepInfo, 0, len(w.Steps))
	for ready.Len() > 0 {
		i := heap.Pop(ready).(int)
		out = append(out, w.Steps[i])
		for _, k := range kids[i] {
			if left[k]--; left[k] == 0 {
				heap.Push(ready, k)
			}
		}
	}
	return out
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
