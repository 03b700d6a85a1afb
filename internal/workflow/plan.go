// Package workflow is a workflow's plan, before and after it is in Redis:
// its id's rules and a random one's home queue (plan.go), the checks of
// its steps and their dependency graph, laid out for the store (plan.go),
// their dependency order (order.go), and what a step's task is enqueued
// with, kept in the workflow's state until the step is released
// (spec.go). The root package's EnqueueWorkflow, Workflow and
// WorkflowSteps are thin methods over it and the store.
package workflow

import (
	"crypto/rand"
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/worqr/worqr/internal/enqueue"
	"github.com/worqr/worqr/internal/errs"
	"github.com/worqr/worqr/internal/store"
)

// MaxIDLen is the longest workflow id (the root's MaxWorkflowIDLen).
const MaxIDLen = 64

// Step is one step of a workflow as the caller gave it, its enqueue
// options collected.
type Step struct {
	Name       string
	Queue      string
	Task       []byte
	After      []string
	AfterEnded []string
	Options    enqueue.Options
}

// NewID is a random workflow id: 16 bytes, in hex.
func NewID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24)
	return hex.EncodeToString(b[:])
}

// HomeQueue is the queue of the most of n steps (the first of them, on
// a tie), queue(i) the i-th's: a workflow of a random id gets one whose
// keys share that queue's slot, so that the finish of a step's task in
// it records the step's end at once, with no notice to carry (see
// finish.lua). A workflow of the caller's id lives in the slot that id
// falls in; its steps' ends are carried, unless by chance it falls in
// their queue's.
func HomeQueue(n int, queue func(i int) string) string {
	count := make(map[string]int)
	home := ""
	for i := range n {
		q := queue(i)
		count[q]++
		if count[q] > count[home] {
			home = q
		}
	}
	return home
}

// CheckID refuses an id that is not 1 to MaxIDLen bytes of letters,
// digits, '-' and '_' (it goes in a hash tag and a header field).
func CheckID(id string) error {
	if id == "" || len(id) > MaxIDLen {
		return fmt.Errorf("%w: workflow id of %d bytes, limit %d", errs.ErrInvalidOptions, len(id), MaxIDLen)
	}
	for i := 0; i < len(id); i++ {
		if b := id[i]; b == '.' || b == '/' || !enqueue.KindByte(b) {
			return fmt.Errorf("%w: workflow id %q: byte %q is not a letter, a digit, '-' or '_'", errs.ErrInvalidOptions, id, b)
		}
	}
	return nil
}

// Plan checks steps and lays them out for the store: each with its spec,
// parents and children, in the order given, and its place in dependency
// order. A step's task holds at most maxTaskSize bytes, and its queue's
// name passes checkQueue; its outcome is kept at least keep.
func Plan(steps []Step, keep time.Duration, runAfterFailure bool, maxTaskSize int, checkQueue func(string) error) ([]store.WorkflowStep, error) {
	if len(steps) == 0 {
		return nil, fmt.Errorf("no steps: %w", errs.ErrInvalidOptions)
	}
	index := make(map[string]int, len(steps))
	for i, st := range steps {
		if st.Name == "" {
			return nil, fmt.Errorf("step %d has no name: %w", i, errs.ErrInvalidOptions)
		}
		if err := enqueue.CheckKind(st.Name); err != nil {
			return nil, fmt.Errorf("step name: %w", err)
		}
		if _, dup := index[st.Name]; dup {
			return nil, fmt.Errorf("step %q: %w", st.Name, errs.ErrDuplicateStep)
		}
		index[st.Name] = i
	}
	plan := make([]store.WorkflowStep, len(steps))
	for i, st := range steps {
		if err := checkQueue(st.Queue); err != nil {
			return nil, fmt.Errorf("step %q: %w", st.Name, err)
		}
		if len(st.Task) > maxTaskSize {
			return nil, fmt.Errorf("step %q: %w", st.Name, enqueue.TooLarge{Index: -1, Size: len(st.Task), Limit: maxTaskSize})
		}
		o := st.Options
		if err := o.Check(); err != nil {
			return nil, fmt.Errorf("step %q: %w", st.Name, err)
		}
		if o.UniqueSet {
			return nil, fmt.Errorf("step %q: a workflow's step holds a unique key of its own: %w", st.Name, errs.ErrInvalidOptions)
		}
		if o.AggregateSet {
			return nil, fmt.Errorf("step %q: a workflow's step is one task of its own, never aggregated: %w", st.Name, errs.ErrInvalidOptions)
		}
		o.Retain = max(o.Retain, keep)
		spec, err := json.Marshal(Spec{Queue: st.Queue, Args: o.Args(), Task: st.Task})
		if err != nil {
			return nil, fmt.Errorf("step %q: %w", st.Name, err)
		}
		plan[i].Name, plan[i].Spec = st.Name, string(spec)
		seen := make(map[string]bool)
		edge := func(parent string, runs bool) error {
			j, ok := index[parent]
			switch {
			case !ok:
				return fmt.Errorf("step %q waits for %q: %w", st.Name, parent, errs.ErrUnknownStep)
			case parent == st.Name:
				return fmt.Errorf("step %q waits for itself: %w", st.Name, errs.ErrWorkflowCycle)
			case seen[parent]:
				return nil
			}
			seen[parent] = true
			plan[i].Parents = append(plan[i].Parents, parent)
			kid := st.Name
			if runs || runAfterFailure {
				kid = "+" + kid
			}
			plan[j].Kids = append(plan[j].Kids, kid)
			return nil
		}
		for _, p := range st.After {
			if err := edge(p, false); err != nil {
				return nil, err
			}
		}
		for _, p := range st.AfterEnded {
			if err := edge(p, true); err != nil {
				return nil, err
			}
		}
	}
	if cycle := findCycle(plan, index); cycle != nil {
		return nil, fmt.Errorf("steps %s: %w", strings.Join(cycle, " -> "), errs.ErrWorkflowCycle)
	}
	place(plan)
	return plan, nil
}

// Digest is what a plan's workflow is created with to tell a retry of
// the same call (the same steps and keep) from another workflow of the
// same id.
func Digest(plan []store.WorkflowStep, keep time.Duration) string {
	sum := sha1.New()
	for _, st := range plan {
		fmt.Fprintf(sum, "%s\x00%s\x00%s\x00%s\x00", st.Name, st.Spec, strings.Join(st.Parents, ","), strings.Join(st.Kids, ","))
	}
	fmt.Fprintf(sum, "%d", keep.Milliseconds())
	return hex.EncodeToString(sum.Sum(nil))
}

// findCycle returns the steps of a cycle, the first repeated at the end,
// or nil when there is none (a depth-first walk along the parents).
func findCycle(plan []store.WorkflowStep, index map[string]int) []string {
	const (
		unseen = iota
		open
		done
	)
	mark := make([]int, len(plan))
	var path []string
	var walk func(i int) []string
	walk = func(i int) []string {
		mark[i] = open
		path = append(path, plan[i].Name)
		for _, p := range plan[i].Parents {
			j := index[p]
			switch mark[j] {
			case open:
				at := slices.Index(path, p)
				return append(slices.Clone(path[at:]), p)
			case unseen:
				if c := walk(j); c != nil {
					return c
				}
			}
		}
		path = path[:len(path)-1]
		mark[i] = done
		return nil
	}
	for i := range plan {
		if mark[i] == unseen {
			if c := walk(i); c != nil {
				return c
			}
		}
	}
	return nil
}
