package worqr

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/worqr/worqr/internal/enqueue"
	"github.com/worqr/worqr/internal/errs"
	"github.com/worqr/worqr/internal/store"
	"github.com/worqr/worqr/internal/workflow"
	"github.com/worqr/worqr/worqrtype"
)

// A workflow is a set of tasks, its steps, on any queues, with
// dependencies between them, enqueued in one call (EnqueueWorkflow). How
// its steps are released exactly once across slots is told in
// internal/flows's package doc and docs/workflows.md.

// Errors of EnqueueWorkflow, matched with errors.Is.
var (
	// ErrWorkflowCycle: the dependencies of a workflow's steps make a
	// cycle (a step that waits, through others, for itself).
	ErrWorkflowCycle = errs.ErrWorkflowCycle
	// ErrUnknownStep: a step waits for a step the workflow does not
	// have.
	ErrUnknownStep = errs.ErrUnknownStep
	// ErrDuplicateStep: two steps of a workflow have the same name.
	ErrDuplicateStep = errs.ErrDuplicateStep
	// ErrWorkflowExists: a workflow of that id (WorkflowOptions.ID)
	// exists with other steps.
	ErrWorkflowExists = errors.New("workflow id taken")
	// ErrNoWorkflow: no workflow of that id is known (never enqueued, or
	// ended and its keep passed), or the process runs no workflow step.
	ErrNoWorkflow = errors.New("no such workflow")
)

// Step is one task of a workflow.
type Step struct {
	// Name names the step in its workflow: 1 to MaxKindLen bytes of
	// ASCII letters, digits and "-_./".
	Name string
	// Queue and Task are the queue the step's task goes to and its
	// payload.
	Queue string
	Task  []byte
	// After are the steps it waits for, which must all succeed: if one
	// dies (goes to the dead letters) or is cancelled, this step is
	// cancelled, with its own descendants, and never runs (unless
	// WorkflowOptions.RunAfterFailure).
	After []string
	// AfterEnded are steps it waits for whatever their end: it runs once
	// each has succeeded, died or been cancelled.
	AfterEnded []string
	// Options are the step's enqueue options, applied when it is
	// released into its queue (In and At count from then). Unique and
	// UniqueFor are refused: a workflow's step holds a unique key of its
	// own. Retain is set to the workflow's keep if it is shorter.
	Options []EnqueueOption
}

// WorkflowOptions change how EnqueueWorkflow creates a workflow.
type WorkflowOptions struct {
	// ID is the workflow's id: 1 to MaxWorkflowIDLen ASCII letters,
	// digits, '-' and '_'; "" gives it a random one (docs/workflows.md
	// tells where it puts the workflow's state). A call with the id of a
	// workflow that exists with the same steps adds nothing and returns
	// that id, so a call can be retried; with other steps,
	// ErrWorkflowExists.
	ID string
	// Keep is how long the workflow's state and its steps' results are
	// kept once it has ended; 0 means DefaultWorkflowKeep.
	Keep time.Duration
	// RunAfterFailure makes every dependency as Step.AfterEnded: a step
	// runs once its parents have ended, whatever their end.
	RunAfterFailure bool
}

// DefaultWorkflowKeep is WorkflowOptions.Keep's default.
const DefaultWorkflowKeep = 24 * time.Hour

// MaxWorkflowIDLen is the longest workflow id.
const MaxWorkflowIDLen = 64

// The limit is internal/workflow's, which checks ids: see the limits of
// enqueue.go for how this fails the build when the two part.
const _ = uint(MaxWorkflowIDLen-workflow.MaxIDLen) + uint(workflow.MaxIDLen-MaxWorkflowIDLen)

// EnqueueWorkflow creates a workflow of steps and enqueues those without
// parents; each other step is enqueued once its parents have ended (see
// Step.After), without polling. It returns the workflow's id. The steps
// are checked first: ErrDuplicateStep, ErrUnknownStep and
// ErrWorkflowCycle (all matched by errors.Is) refuse the workflow, and
// nothing is written; ErrWorkflowExists refuses an ID taken by other
// steps. On ErrUnavailable the workflow may have been created, in part:
// retry with the same WorkflowOptions.ID, which completes it.
// docs/workflows.md tells the rest: results passed on, cancels, keeps.
func (c *Client) EnqueueWorkflow(ctx context.Context, steps []Step, opts WorkflowOptions) (string, error) {
	if err := c.core.ValidateCtx(ctx, "enqueue workflow"); err != nil {
		return "", err
	}
	keep := opts.Keep
	if keep == 0 {
		keep = DefaultWorkflowKeep
	}
	if keep < 0 {
		return "", fmt.Errorf("worqr: enqueue workflow: negative Keep %v: %w", keep, ErrInvalidOptions)
	}
	id := opts.ID
	if id == "" {
		id = c.core.Store.Keys().HomeWorkflowID(workflow.NewID(), workflow.HomeQueue(len(steps), func(i int) string { return steps[i].Queue }))
	} else if err := workflow.CheckID(id); err != nil {
		return "", fmt.Errorf("worqr: enqueue workflow: %w", err)
	}
	plan, err := c.planWorkflow(steps, keep, opts.RunAfterFailure)
	if err != nil {
		return "", fmt.Errorf("worqr: enqueue workflow %s: %w", id, err)
	}
	did, ready, err := c.core.Store.CreateWorkflow(ctx, id, workflow.Digest(plan, keep), keep, plan)
	if err != nil {
		return "", c.core.Fail("enqueue workflow", "", err)
	}
	if did == store.WorkflowTaken {
		return "", fmt.Errorf("worqr: enqueue workflow %s: %w", id, ErrWorkflowExists)
	}
	if err := c.core.EnqueueSteps(ctx, id, ready); err != nil {
		return id, fmt.Errorf("worqr: enqueue workflow %s: %w", id, err)
	}
	return id, nil
}

// planWorkflow checks steps and lays them out for the store
// (workflow.Plan), under the client's limits.
func (c *Client) planWorkflow(steps []Step, keep time.Duration, runAfterFailure bool) ([]store.WorkflowStep, error) {
	planned := make([]workflow.Step, len(steps))
	for i, st := range steps {
		planned[i] = workflow.Step{Name: st.Name, Queue: st.Queue, Task: st.Task, After: st.After, AfterEnded: st.AfterEnded,
			Options: enqueue.Collect(st.Options)}
	}
	return workflow.Plan(planned, keep, runAfterFailure, c.core.MaxTaskSize, func(queue string) error {
		return enqueue.CheckQueue("enqueue workflow", queue)
	})
}

// CancelWorkflow cancels a running workflow: its steps that have not
// ended never run (those waiting for parents, or in their queues), the
// tasks of those in flight are cancelled (as CancelTask does), and the
// workflow ends cancelled. It reports false, with no error, for a
// workflow that has ended already; ErrNoWorkflow for one unknown.
func (c *Client) CancelWorkflow(ctx context.Context, id string) (bool, error) {
	if err := c.core.ValidateCtx(ctx, "cancel workflow"); err != nil {
		return false, err
	}
	if err := workflow.CheckID(id); err != nil {
		return false, fmt.Errorf("worqr: cancel workflow: %w", err)
	}
	was, queued, err := c.core.Store.CancelWorkflow(ctx, id)
	if err != nil {
		return false, c.core.Fail("cancel workflow", "", err)
	}
	switch was {
	case "":
		return false, fmt.Errorf("worqr: cancel workflow %s: %w", id, ErrNoWorkflow)
	case "running":
		return true, c.core.Release.CancelSteps(ctx, queued)
	}
	return false, nil
}

// A workflow's state and its steps' are worqrtype's.
type (
	// WorkflowState is where a workflow stands (see
	// worqrtype.WorkflowState).
	WorkflowState = worqrtype.WorkflowState
	// StepState is where a workflow's step stands (see
	// worqrtype.StepState).
	StepState = worqrtype.StepState
	// WorkflowInfo is a workflow's state and each of its steps' (see
	// worqrtype.WorkflowInfo).
	WorkflowInfo = worqrtype.WorkflowInfo
	// StepInfo is one step of a workflow (see worqrtype.StepInfo).
	StepInfo = worqrtype.StepInfo
	// WorkflowPage is part of a workflow's steps, in dependency order,
	// with the workflow's state (see worqrtype.WorkflowPage).
	WorkflowPage = worqrtype.WorkflowPage
)

// The states of a workflow (see worqrtype.WorkflowRunning).
const (
	WorkflowRunning   = worqrtype.WorkflowRunning   // some step has not ended
	WorkflowSucceeded = worqrtype.WorkflowSucceeded // every step succeeded (or, after a failure, ran)
	WorkflowFailed    = worqrtype.WorkflowFailed    // every step ended, and one died
	WorkflowCancelled = worqrtype.WorkflowCancelled // CancelWorkflow ended it
)

// The states of a step (see worqrtype.StepWaiting).
const (
	StepWaiting   = worqrtype.StepWaiting   // for its parents, outside its queue
	StepReady     = worqrtype.StepReady     // its parents ended; its task is being enqueued
	StepQueued    = worqrtype.StepQueued    // its task is in its queue: waiting, delayed or in flight
	StepSucceeded = worqrtype.StepSucceeded // its task finished
	StepDead      = worqrtype.StepDead      // its task went to the dead letters
	StepCancelled = worqrtype.StepCancelled // it will not run: a parent failed, or the workflow was cancelled
)

// MaxPageParents is how many of a step's parents WorkflowSteps lists, so
// that a page's size does not grow with a fan-in's.
const MaxPageParents = 10

// MaxPageSteps is the most steps WorkflowSteps reads in one call.
const MaxPageSteps = 1000

// WorkflowSteps reads limit steps of a workflow (1 to MaxPageSteps), from
// place from (0: the first) in dependency order, the order
// WorkflowInfo.InOrder lists them in, with the workflow's state and its
// counts of steps, at the cost of the page, whatever the workflow's size
// (docs/workflows.md tells it). A from past the last step reads no steps;
// a negative from or a limit out of bounds is ErrInvalidOptions. It
// returns ErrNoWorkflow for a workflow unknown, or ended and past its
// keep.
func (c *Client) WorkflowSteps(ctx context.Context, id string, from, limit int) (WorkflowPage, error) {
	if err := c.core.ValidateCtx(ctx, "workflow steps"); err != nil {
		return WorkflowPage{}, err
	}
	if err := workflow.CheckID(id); err != nil {
		return WorkflowPage{}, fmt.Errorf("worqr: workflow steps: %w", err)
	}
	if from < 0 || limit < 1 || limit > MaxPageSteps {
		return WorkflowPage{}, fmt.Errorf("worqr: workflow steps: from %d, limit %d (1 to %d): %w", from, limit, MaxPageSteps, ErrInvalidOptions)
	}
	rec, ok, err := workflow.ReadPage(ctx, c.core.Store, id, from, limit, MaxPageParents)
	if err != nil {
		return WorkflowPage{}, c.core.Fail("workflow steps", "", err)
	}
	if !ok {
		return WorkflowPage{}, fmt.Errorf("worqr: workflow %s: %w", id, ErrNoWorkflow)
	}
	return workflow.PageInfo(id, from, rec), nil
}

// Workflow reads a workflow's state and its steps', sorted by name; it
// returns ErrNoWorkflow for one unknown, or ended and past its keep.
// The steps are read a bounded page a call (docs/workflows.md tells
// what a read of a workflow that changes meanwhile sees, and when such a
// read is made again, in the end in one call).
func (c *Client) Workflow(ctx context.Context, id string) (WorkflowInfo, error) {
	if err := c.core.ValidateCtx(ctx, "workflow"); err != nil {
		return WorkflowInfo{}, err
	}
	if err := workflow.CheckID(id); err != nil {
		return WorkflowInfo{}, fmt.Errorf("worqr: workflow: %w", err)
	}
	rec, ok, err := c.core.Store.WorkflowState(ctx, id)
	if err != nil {
		return WorkflowInfo{}, c.core.Fail("workflow", "", err)
	}
	if !ok {
		return WorkflowInfo{}, fmt.Errorf("worqr: workflow %s: %w", id, ErrNoWorkflow)
	}
	return workflow.Info(id, rec), nil
}

// WaitWorkflow waits until a workflow has ended and returns its state,
// without polling: it listens on the workflow's channel, where its end is
// announced, and reads the state when it subscribes and when it hears
// the end. It returns ErrNoWorkflow for a workflow unknown, or ended and
// past its keep, and ctx's error if ctx ends first.
func (c *Client) WaitWorkflow(ctx context.Context, id string) (WorkflowInfo, error) {
	if err := c.core.ValidateCtx(ctx, "wait workflow"); err != nil {
		return WorkflowInfo{}, err
	}
	if err := workflow.CheckID(id); err != nil {
		return WorkflowInfo{}, fmt.Errorf("worqr: wait workflow: %w", err)
	}
	if err := c.core.Waiters.WaitWorkflow(ctx, id, ErrNoWorkflow, c.core.Fail); err != nil {
		return WorkflowInfo{}, err
	}
	return c.Workflow(ctx, id)
}

// ParentResults reads the results of the step's parents that succeeded,
// by step name (Process.SetResult set them; a parent that set none gives
// an empty slice), for a process running a workflow's step. A parent
// that died or was cancelled is absent (a step runs after one only with
// Step.AfterEnded or RunAfterFailure). It returns ErrNoWorkflow for a
// task that is no workflow's step, or whose workflow is gone.
func (p *Process) ParentResults(ctx context.Context) (map[string][]byte, error) {
	wf, step, ok := strings.Cut(p.rec.Flow, ".")
	if !ok {
		return nil, fmt.Errorf("worqr: parent results of task %s: %w", p.rec.TaskID, ErrNoWorkflow)
	}
	if p.w == nil {
		return nil, fmt.Errorf("worqr: parent results of task %s: %w", p.rec.TaskID, ErrDetached)
	}
	c := p.w.c
	if err := c.core.ValidateCtx(ctx, "parent results"); err != nil {
		return nil, err
	}
	out, found, err := c.core.Store.StepResults(ctx, wf, step)
	if err != nil {
		return nil, c.core.Fail("parent results", "", err)
	}
	if !found {
		return nil, fmt.Errorf("worqr: parent results of task %s: workflow %s: %w", p.rec.TaskID, wf, ErrNoWorkflow)
	}
	return out, nil
}

// Workflow is the id of the workflow whose step the process runs, and
// the step's name; "", "" for a task that is no workflow's step.
func (p *Process) Workflow() (id, step string) {
	id, step, _ = strings.Cut(p.rec.Flow, ".")
	return id, step
}

// ParentResult decodes the result of one of a step's parents with codec
// (JSON[T]{} for JSON), for a typed step: what ParentResults returns under
// parent's name. It reports false, with no error, when that parent left
// no result (it died or was cancelled, and the step runs after it with
// Step.AfterEnded).
func ParentResult[T any](ctx context.Context, p *Process, codec Codec[T], parent string) (v T, ok bool, err error) {
	results, err := p.ParentResults(ctx)
	if err != nil {
		return v, false, err
	}
	data, ok := results[parent]
	if !ok {
		return v, false, nil
	}
	if err := codec.Unmarshal(data, &v); err != nil {
		return v, false, fmt.Errorf("worqr: result of step %q: %w", parent, err)
	}
	return v, true, nil
}

// SetResultWith encodes v with codec (JSON[T]{} for JSON) and sets it as
// the process's result (Process.SetResult), for a typed step whose
// children read it with ParentResult.
func SetResultWith[T any](p *Process, codec Codec[T], v T) error {
	data, err := codec.Marshal(v)
	if err != nil {
		return fmt.Errorf("worqr: set result of task %s: %w", p.rec.TaskID, err)
	}
	p.SetResult(data)
	return nil
}
