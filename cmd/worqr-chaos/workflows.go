package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/worqr/worqr"
	"github.com/worqr/worqr/internal/store"
)

// Workflows run through the faults too: chains (a, b, c), chords (a fans
// out to p0 to p3, which z gathers) and diamonds (a before b and c, both
// before d), enqueued with EnqueueWorkflow to wfQueue while the faults
// strike. A step's payload names it and says how its handler behaves:
//
//	wf-12-b         ordinary work, then nil
//	wf-12-b.f1      fails its first attempt (a retry is not an end), then succeeds
//	wf-12-b.p       fails permanently: dead, and with the default policy
//	                its descendants are cancelled and never run
//	wf-12-a.eb      (-sabotage workflows) enqueues wf-12-b itself before
//	                its own work: b starts before its parent ended
//
// The verifier (judgeWorkflows) checks, from the ledger's runs, by the
// Redis clock, that no step started before its parents succeeded (or,
// under RunAfterFailure, ended), that no step of a cancelled branch ran,
// that every workflow ended, and that every step ended as its parents'
// ends and its plan say: none lost.

// wfQueue is the queue of every workflow step.
const wfQueue = "wf"

// sabotageWorkflows makes the first step of some workflows enqueue a
// child's task itself before doing its work: the child starts early.
const sabotageWorkflows = "workflows"

// wfShape is a workflow's graph: its steps' names with their parents.
type wfShape struct {
	name  string
	steps []wfStepSpec
}

type wfStepSpec struct {
	name    string
	parents []string
}

var wfShapes = []wfShape{
	{"chain", []wfStepSpec{{"a", nil}, {"b", []string{"a"}}, {"c", []string{"b"}}}},
	{"chord", []wfStepSpec{{"a", nil}, {"p0", []string{"a"}}, {"p1", []string{"a"}}, {"p2", []string{"a"}}, {"p3", []string{"a"}},
		{"z", []string{"p0", "p1", "p2", "p3"}}}},
	{"diamond", []wfStepSpec{{"a", nil}, {"b", []string{"a"}}, {"c", []string{"a"}}, {"d", []string{"b", "c"}}}},
}

// wfStepPlan is how a step's handler behaves, from its payload.
type wfStepPlan struct {
	fails     int    // attempts that fail before it succeeds
	permanent bool   // it fails permanently
	early     string // the child it enqueues before its work (-sabotage workflows)
}

// stepPayload is a step's payload: workflow n, step name, plan.
func stepPayload(n int, name string, pl wfStepPlan) string {
	s := "wf-" + strconv.Itoa(n) + "-" + name
	if pl.fails > 0 {
		s += ".f" + strconv.Itoa(pl.fails)
	}
	if pl.permanent {
		s += ".p"
	}
	if pl.early != "" {
		s += ".e" + pl.early
	}
	return s
}

// parseStep reads a step's plan from its payload, and the payload of the
// child it enqueues early (if any).
func parseStep(payload string) (pl wfStepPlan, early string, err error) {
	parts := strings.Split(payload, ".")
	head := parts[0]
	if !strings.HasPrefix(head, "wf-") || strings.Count(head, "-") != 2 {
		return pl, "", fmt.Errorf("not a workflow step: %q", payload)
	}
	for _, f := range parts[1:] {
		switch {
		case f == "p":
			pl.permanent = true
		case strings.HasPrefix(f, "f"):
			n, err := strconv.Atoi(f[1:])
			if err != nil || n < 1 {
				return pl, "", fmt.Errorf("bad failure count in %q", payload)
			}
			pl.fails = n
		case strings.HasPrefix(f, "e") && len(f) > 1:
			pl.early = f[1:]
		default:
			return pl, "", fmt.Errorf("unknown step plan field %q in %q", f, payload)
		}
	}
	if pl.early != "" {
		early = head[:strings.LastIndexByte(head, '-')+1] + pl.early
	}
	return pl, early, nil
}

// wfInfo is what the harness knows of a workflow it enqueued.
type wfInfo struct {
	id      string
	shape   string
	letRun  bool              // WorkflowOptions.RunAfterFailure
	steps   []wfStepSpec      // in the order enqueued
	payload map[string]string // by step name
	plans   map[string]wfStepPlan
}

// wfProducer enqueues workflows at a steady rate of steps, through the
// faults: an enqueue that fails is retried with the same id, which
// completes a workflow half created and adds nothing to a whole one.
type wfProducer struct {
	client   *worqr.Client
	rate     int // steps per second
	rng      *rand.Rand
	sabotage bool

	mu      sync.Mutex
	flows   []*wfInfo
	retries int // attempts that failed and were made again
}

// draw makes workflow n: a random shape; in 3 of 10, one step with
// children that fails permanently; each other step in 1 of 8 failing once first; in 2 of 5,
// RunAfterFailure. With sabotage, every third (the first among them) has
// its first step enqueue its first child (which then plans no failure)
// early.
func (p *wfProducer) draw(n int) *wfInfo {
	sh := wfShapes[p.rng.IntN(len(wfShapes))]
	w := &wfInfo{id: "cw-" + strconv.Itoa(n), shape: sh.name, letRun: p.rng.IntN(5) < 2, steps: sh.steps,
		payload: make(map[string]string), plans: make(map[string]wfStepPlan)}
	if n%2 == 0 {
		// Half share their queue's slot, as a random id would: their
		// steps' finishes record the ends that free no step; the others'
		// ends are all carried from notices.
		w.id = store.NewKeys("").HomeWorkflowID(w.id, wfQueue)
	}
	perm := -1
	if p.rng.IntN(10) < 3 {
		perm = p.rng.IntN(len(sh.steps) - 1) // not the last, which has no children to cancel
	}
	early := p.sabotage && n%3 == 0
	for i, st := range sh.steps {
		var pl wfStepPlan
		switch {
		case early && i == 1:
		case i == perm:
			pl.permanent = true
		case p.rng.IntN(8) == 0:
			pl.fails = 1
		}
		if early && i == 0 {
			pl.early = sh.steps[1].name
			pl.permanent = false
		}
		w.plans[st.name] = pl
		w.payload[st.name] = stepPayload(n, st.name, pl)
	}
	return w
}

// run enqueues until stop is closed.
func (p *wfProducer) run(stop <-chan struct{}) error {
	const tick = 100 * time.Millisecond
	t := time.NewTicker(tick)
	defer t.Stop()
	var carry float64
	n := 0
	next := p.draw(n)
	for {
		select {
		case <-stop:
			return nil
		case <-t.C:
		}
		carry += float64(p.rate) * tick.Seconds()
		for carry >= float64(len(next.steps)) {
			carry -= float64(len(next.steps))
			if err := p.enqueue(next); err != nil {
				return err
			}
			n++
			next = p.draw(n)
		}
	}
}

// enqueue creates a workflow, trying again with its id until it is.
func (p *wfProducer) enqueue(w *wfInfo) error {
	steps := make([]worqr.Step, 0, len(w.steps))
	for _, st := range w.steps {
		steps = append(steps, worqr.Step{Name: st.name, Queue: wfQueue, Task: []byte(w.payload[st.name]), After: st.parents})
	}
	p.mu.Lock()
	p.flows = append(p.flows, w)
	p.mu.Unlock()
	deadline := time.Now().Add(time.Minute)
	b := backoff{min: 20 * time.Millisecond, max: 500 * time.Millisecond}
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		_, err := p.client.EnqueueWorkflow(ctx, steps, worqr.WorkflowOptions{ID: w.id, RunAfterFailure: w.letRun})
		cancel()
		switch {
		case err == nil:
			return nil
		case errors.Is(err, worqr.ErrWorkflowExists):
			return fmt.Errorf("workflow producer: %s retried with the same steps: %w", w.id, err)
		case time.Now().After(deadline):
			return fmt.Errorf("workflow producer: could not enqueue %s for a minute: %w", w.id, err)
		}
		if !errors.Is(err, syscall.ECONNREFUSED) {
			p.mu.Lock()
			p.retries++
			p.mu.Unlock()
		}
		b.wait(context.Background())
	}
}

// workflows returns what was enqueued (or tried).
func (p *wfProducer) workflows() ([]*wfInfo, int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.flows), p.retries
}

// stepTasks adds every workflow's steps to tasks, as kind step: the
// ledger's checks of runs (overlaps, duplicates without a release,
// handlers that never ended, outcomes never written) cover them. Each is
// one copy, queued by its release at a time the harness does not know:
// before any of its runs.
func stepTasks(flows []*wfInfo, tasks map[string]*taskInfo) {
	for _, w := range flows {
		for _, st := range w.steps {
			tasks[w.payload[st.name]] = &taskInfo{queue: wfQueue, kind: "step", copies: []int64{0}}
		}
	}
}

// waitWorkflows waits, all at once, until every workflow has ended
// (WaitWorkflow, which hears the end), up to within; it returns each
// one's state as last read (absent: never read) and the longest wait.
func waitWorkflows(c *worqr.Client, flows []*wfInfo, within time.Duration) (map[string]worqr.WorkflowInfo, time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	var mu sync.Mutex
	out := make(map[string]worqr.WorkflowInfo)
	var longest time.Duration
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	start := time.Now()
	for _, w := range flows {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			for ctx.Err() == nil {
				info, err := c.WaitWorkflow(ctx, w.id)
				if err != nil {
					// A fault's leftovers, or the deadline: read the
					// state as it is.
					rctx, rcancel := context.WithTimeout(context.Background(), 5*time.Second)
					info, err = c.Workflow(rctx, w.id)
					rcancel()
					if err != nil || info.State == worqr.WorkflowRunning {
						if err == nil {
							mu.Lock()
							out[w.id] = info
							mu.Unlock()
						}
						time.Sleep(200 * time.Millisecond)
						continue
					}
				}
				mu.Lock()
				out[w.id] = info
				longest = max(longest, time.Since(start))
				mu.Unlock()
				return
			}
		}()
	}
	wg.Wait()
	return out, longest
}

// wfVerdict is what the workflow checks found.
type wfVerdict struct {
	flows, steps, runs int
	byShape            map[string]int
	letRun             int
	// Final states: of the workflows, and of their steps.
	wfStates   map[worqr.WorkflowState]int
	stepStates map[worqr.StepState]int
	// notEnded are workflows still running (or never read); lost are
	// steps that did not end as their parents' ends and their plan say:
	// not ended, cancelled though every parent succeeded, succeeded
	// without a completed run, dead without a dead letter.
	notEnded, lost []string
	// early are runs of a step that began, by the Redis clock, before a
	// parent's handler ended as the step waits for (succeeded; or also
	// failed permanently under RunAfterFailure).
	early []string
	// cancelledRan are runs of steps whose branch was cancelled (a parent
	// died or was cancelled, under the default policy).
	cancelledRan []string
	// wrongEnds are steps or workflows in a state their plans and their
	// parents' states do not call for.
	wrongEnds []string
	// poisoned counts steps dead by the poison guard (their holders died
	// too often), which plans do not foresee; earlyChecked counts the
	// (run, parent) pairs judged for order.
	poisoned, earlyChecked int
}

// judgeWorkflows checks the workflows' runs (from the ledger) and their
// final states (states, read from Redis) against their graphs and plans.
// dead are the dead letters by payload.
//
// A step's process id is the Redis clock at its dequeue; a parent's run
// that completed reported its end, by the wall clock (the workers run on
// Redis's host, whose clock TIME reads), before the script that finished
// it, which released the children: so every run of a step must have a
// process id later than the end report of a completed run of each
// parent.
func (l *ledger) judgeWorkflows(flows []*wfInfo, states map[string]worqr.WorkflowInfo, dead map[string][]deadLetter, t0 int64) wfVerdict {
	l.mu.Lock()
	defer l.mu.Unlock()
	v := wfVerdict{byShape: make(map[string]int), wfStates: make(map[worqr.WorkflowState]int), stepStates: make(map[worqr.StepState]int)}
	for _, w := range flows {
		v.flows++
		v.byShape[w.shape]++
		if w.letRun {
			v.letRun++
		}
		info, read := states[w.id]
		if !read {
			v.notEnded = append(v.notEnded, w.id+": state never read")
			continue
		}
		v.wfStates[info.State]++
		if info.State == worqr.WorkflowRunning {
			var open []string
			for _, st := range info.Steps {
				if st.State != worqr.StepSucceeded && st.State != worqr.StepDead && st.State != worqr.StepCancelled {
					open = append(open, st.Name+" "+string(st.State))
				}
			}
			v.notEnded = append(v.notEnded, fmt.Sprintf("%s (%s) still running: %s", w.id, w.shape, strings.Join(open, ", ")))
		}
		state := make(map[string]worqr.StepState)
		for _, st := range info.Steps {
			state[st.Name] = st.State
		}
		failed := false
		for _, st := range w.steps {
			v.steps++
			s := state[st.name]
			v.stepStates[s]++
			task := w.payload[st.name]
			runs := l.byTask[task]
			v.runs += len(runs)
			pl := w.plans[st.name]
			completed := slices.ContainsFunc(runs, func(ru *run) bool { return ru.ok })
			var poison bool
			for _, dl := range dead[task] {
				poison = poison || dl.reason == worqr.ReasonPoison
			}
			if s == worqr.StepDead || s == worqr.StepCancelled {
				failed = true
			}
			// What the parents' ends call for.
			parentsOK := true
			for _, p := range st.parents {
				if state[p] != worqr.StepSucceeded {
					parentsOK = false
				}
			}
			runnable := parentsOK || w.letRun
			where := fmt.Sprintf("%s (%s%s) step %s", w.id, w.shape, map[bool]string{true: ", let-run"}[w.letRun], st.name)
			switch {
			case s == "":
				v.lost = append(v.lost, where+": not in the workflow's state")
			case s == worqr.StepWaiting || s == worqr.StepReady || s == worqr.StepQueued:
				v.lost = append(v.lost, fmt.Sprintf("%s: %s at the end: %s", where, s, l.historyLocked(task, t0)))
			case s == worqr.StepCancelled && runnable:
				v.lost = append(v.lost, fmt.Sprintf("%s: cancelled though its parents %s: %s", where,
					map[bool]string{true: "succeeded", false: "ended"}[parentsOK], l.historyLocked(task, t0)))
			case s != worqr.StepCancelled && !runnable:
				v.wrongEnds = append(v.wrongEnds, fmt.Sprintf("%s: %s though a parent did not succeed", where, s))
			case s == worqr.StepSucceeded && !completed:
				v.lost = append(v.lost, fmt.Sprintf("%s: succeeded with no run that completed: %s", where, l.historyLocked(task, t0)))
			case s == worqr.StepSucceeded && pl.permanent:
				v.wrongEnds = append(v.wrongEnds, fmt.Sprintf("%s: succeeded though it fails permanently: %s", where, l.historyLocked(task, t0)))
			case s == worqr.StepDead && len(dead[task]) == 0:
				v.lost = append(v.lost, fmt.Sprintf("%s: dead with no dead letter: %s", where, l.historyLocked(task, t0)))
			case s == worqr.StepDead && poison:
				v.poisoned++
			case s == worqr.StepDead && !pl.permanent:
				v.wrongEnds = append(v.wrongEnds, fmt.Sprintf("%s: dead (%s) though it plans no permanent failure: %s", where, dead[task][0].reason, l.historyLocked(task, t0)))
			}
			if s == worqr.StepCancelled {
				for _, ru := range runs {
					v.cancelledRan = append(v.cancelledRan, fmt.Sprintf("%s: cancelled, yet ran on %s (pid %s): %s", where, ru.inst, ru.pid, l.historyLocked(task, t0)))
				}
			}
			// No run before its parents' ends.
			for _, ru := range runs {
				pid, err := strconv.ParseInt(ru.pid, 16, 64)
				if err != nil {
					l.problems = append(l.problems, fmt.Sprintf("a run of %s has a process id %q that is no Redis clock reading", task, ru.pid))
					continue
				}
				for _, p := range st.parents {
					ptask := w.payload[p]
					ended := false
					for _, pr := range l.byTask[ptask] {
						if (pr.ok || (w.letRun && pr.fail == failPermanent)) && pr.wEnd > 0 && pr.wEnd < pid {
							ended = true
						}
					}
					if !ended && state[p] == worqr.StepDead && slices.ContainsFunc(dead[ptask], func(dl deadLetter) bool { return dl.reason == worqr.ReasonPoison }) {
						continue // buried by a reclaim: no end report dates it
					}
					v.earlyChecked++
					if !ended {
						v.early = append(v.early, fmt.Sprintf("%s: run on %s (pid %s) began before parent %s ended: %s; parent: %s",
							where, ru.inst, ru.pid, p, l.historyLocked(task, t0), l.historyLocked(ptask, t0)))
					}
				}
			}
		}
		if info.State != worqr.WorkflowRunning && (info.State == worqr.WorkflowFailed) != failed {
			v.wrongEnds = append(v.wrongEnds, fmt.Sprintf("%s (%s): ended %s, with a step dead or cancelled: %v", w.id, w.shape, info.State, failed))
		}
	}
	sort.Strings(v.notEnded)
	return v
}

// summary is the verdict's line in the run's report.
func (v wfVerdict) summary(retries int, waited time.Duration) string {
	var shapes []string
	for _, sh := range wfShapes {
		shapes = append(shapes, fmt.Sprintf("%s=%d", sh.name, v.byShape[sh.name]))
	}
	return fmt.Sprintf("workflows=%d (%s; let-run=%d) steps=%d runs=%d ended=%d (succeeded=%d failed=%d) steps-succeeded=%d dead=%d (poison=%d) cancelled=%d "+
		"early=%d (of %d judged) cancelled-ran=%d lost=%d not-ended=%d wrong-end=%d enqueue-retries=%d last-end-heard-after=%v",
		v.flows, strings.Join(shapes, " "), v.letRun, v.steps, v.runs,
		v.wfStates[worqr.WorkflowSucceeded]+v.wfStates[worqr.WorkflowFailed]+v.wfStates[worqr.WorkflowCancelled],
		v.wfStates[worqr.WorkflowSucceeded], v.wfStates[worqr.WorkflowFailed],
		v.stepStates[worqr.StepSucceeded], v.stepStates[worqr.StepDead], v.poisoned, v.stepStates[worqr.StepCancelled],
		len(v.early), v.earlyChecked, len(v.cancelledRan), len(v.lost), len(v.notEnded), len(v.wrongEnds), retries, waited.Round(100*time.Millisecond))
}
