package dashboard

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/worqr/worqr"
)

// A workflow page lists its steps in dependency order, workflowPageSize
// at a time (?from= pages on), and for each step at most maxParentsShown
// of its parents: a workflow of any size is a page of bounded size, read
// at a bounded cost (Client.WorkflowSteps).
const (
	workflowPageSize = 200
	maxParentsShown  = worqr.MaxPageParents
)

// workflowPath is a workflow page's address: /workflow/<id>. Workflow
// ids are letters, digits, '-' and '_', a path segment as they are; the
// escape is for an id refused anyway.
func workflowPath(base, id string) string { return base + "/workflow/" + url.PathEscape(id) }

// workflowFrom reads the workflow a page is for: /workflow/<id>, or id
// (the lookup box's form). ok is false for an id missing or too long.
func workflowFrom(r *http.Request) (id string, ok bool) {
	if strings.HasPrefix(r.URL.Path, "/workflow/") {
		parts, pok := pathSegments(r, "/workflow/")
		if !pok || len(parts) != 1 {
			return "", false
		}
		id = parts[0]
	} else {
		id = strings.TrimSpace(r.URL.Query().Get("id"))
	}
	return id, id != "" && len(id) <= worqr.MaxWorkflowIDLen
}

// stepRow is one step of a workflow page.
type stepRow struct {
	worqr.StepInfo
	// TaskURL is its task's page, which the workflow's id and the step's
	// place are passed to (as wf and at) so that it links back even once
	// the task has ended.
	TaskURL string
}

// stateCount is how many of a workflow's steps are in one state, or
// group of states.
type stateCount struct {
	State string
	N     int
}

type workflowData struct {
	Base string
	Info worqr.WorkflowPage // its Steps are not kept: see Steps
	// Steps are the page's steps, in dependency order, from From (0:
	// the first) of Total.
	Steps       []stepRow
	From, Total int
	Counts      []stateCount
}

func (d workflowData) title() string { return "workflow " + d.Info.ID }

// Running says whether the workflow can be cancelled.
func (d workflowData) Running() bool { return d.Info.State == worqr.WorkflowRunning }

// Last is the position of the page's last step, counted from 1.
func (d workflowData) Last() int { return d.From + len(d.Steps) }

// Page is the address of the page pages pages on (-1: back), "" if there
// is none.
func (d workflowData) Page(pages int) string {
	from := d.From + pages*workflowPageSize
	if from < 0 || from >= d.Total || pages == 0 {
		return ""
	}
	u := workflowPath(d.Base, d.Info.ID)
	if from > 0 {
		u += "?from=" + strconv.Itoa(from)
	}
	return u
}

func (h *handler) workflow(w http.ResponseWriter, r *http.Request) {
	id, ok := workflowFrom(r)
	if !ok {
		h.fail(w, r, http.StatusBadRequest, fmt.Sprintf("give a workflow id (/workflow/<id>, at most %d letters, digits, '-' and '_')", worqr.MaxWorkflowIDLen))
		return
	}
	if !strings.HasPrefix(r.URL.Path, "/workflow/") {
		// The lookup box: to the page's own address.
		http.Redirect(w, r, workflowPath(base(r), id), http.StatusSeeOther)
		return
	}
	from := offsetParam(r, "from") / workflowPageSize * workflowPageSize
	var page worqr.WorkflowPage
	var err error
	// One page of the steps, at that page's cost: a workflow created by
	// an older worqr, which keeps no order of its steps, is read whole.
	if !h.lookup(w, r, func(ctx context.Context) {
		page, err = h.c.WorkflowSteps(ctx, id, from, workflowPageSize)
		if err == nil && from > 0 && from >= page.Total {
			// Past the last step: the last page.
			page, err = h.c.WorkflowSteps(ctx, id, max(page.Total-1, 0)/workflowPageSize*workflowPageSize, workflowPageSize)
		}
	}) {
		return
	}
	switch {
	case errors.Is(err, worqr.ErrNoWorkflow):
		h.fail(w, r, http.StatusNotFound, "No workflow "+strconv.Quote(id)+": never enqueued, or ended and past its keep.")
		return
	case err != nil:
		h.fail(w, r, errorStatus(err), err.Error())
		return
	}
	h.render(w, r, "workflow", http.StatusOK, workflowPage(base(r), page))
}

// workflowPage lays out one page of a workflow's steps. Its counts are
// those the workflow keeps as it runs: a count per state would read
// every step's.
func workflowPage(base string, page worqr.WorkflowPage) workflowData {
	d := workflowData{Base: base, Total: page.Total, From: page.From}
	ended := page.Total - page.Open - page.Dead
	for _, c := range []stateCount{{"not ended", page.Open}, {"dead", page.Dead}, {"succeeded or cancelled", ended}} {
		if c.N > 0 {
			d.Counts = append(d.Counts, c)
		}
	}
	for i, st := range page.Steps {
		row := stepRow{StepInfo: st}
		if st.TaskID != "" {
			row.TaskURL = withParam(withParam(taskPath(base, st.Queue, st.TaskID), "wf", page.ID), "at", strconv.Itoa(page.From+i))
		}
		d.Steps = append(d.Steps, row)
	}
	page.Steps = nil
	d.Info = page
	return d
}

// workflowAction cancels a workflow (op cancelworkflow, its id as wf),
// after the confirmation.
func (h *handler) workflowAction(w http.ResponseWriter, r *http.Request) {
	id := r.PostFormValue("wf")
	if id == "" || len(id) > worqr.MaxWorkflowIDLen {
		h.fail(w, r, http.StatusBadRequest, "no workflow id given")
		return
	}
	if r.PostFormValue("confirmed") != "yes" {
		h.render(w, r, "confirm", http.StatusOK, confirmData{Op: "cancelworkflow", Verb: "Cancel workflow", Workflow: id})
		return
	}
	ctx, cancel := h.ctx(r)
	defer cancel()
	did, err := h.c.CancelWorkflow(ctx, id)
	h.log.Info("worqr dashboard: action", "op", "cancelworkflow", "workflow", id, "remote", r.RemoteAddr, "err", err)
	switch {
	case errors.Is(err, worqr.ErrNoWorkflow):
		h.fail(w, r, http.StatusNotFound, "No workflow "+strconv.Quote(id)+": never enqueued, or ended and past its keep.")
		return
	case err != nil:
		h.fail(w, r, errorStatus(err), fmt.Sprintf("cancel workflow failed: %v", err))
		return
	}
	done := "workflowCancelled"
	if !did {
		done = "workflowEnded"
	}
	http.Redirect(w, r, workflowPath(base(r), id)+"?done="+done, http.StatusSeeOther)
}

// withParam adds key=value to the query of u.
func withParam(u, key, value string) string {
	sep := "?"
	if strings.Contains(u, "?") {
		sep = "&"
	}
	return u + sep + url.Values{key: {value}}.Encode()
}

// stepOf finds, when the task's own record does not say (a task found
// only by its outcome), whether it is a step of workflow wf, the one
// its page was reached from: by the workflow's state, not the request.
// It reads one page of the steps, the one holding position at (the
// step's place, which the workflow page's link gives), so that a page
// costs the same for a workflow of any size.
func (h *handler) stepOf(ctx context.Context, d *taskData, wf string, at int) {
	if d.Flow() != nil || wf == "" || len(wf) > worqr.MaxWorkflowIDLen {
		return
	}
	page, err := h.c.WorkflowSteps(ctx, wf, at/workflowPageSize*workflowPageSize, workflowPageSize)
	if err != nil {
		return // no link: the page shows the task all the same
	}
	for _, st := range page.Steps {
		if st.TaskID == d.ID && st.Queue == d.Queue {
			d.step = &flowRef{ID: wf, Step: st.Name}
			return
		}
	}
}

// flowRef names the workflow and step a task runs.
type flowRef struct{ ID, Step string }

// Flow is the workflow whose step the task runs, nil if none: from the
// task's record, else (a task found only by its outcome, which does not
// say) from stepOf.
func (d taskData) Flow() *flowRef {
	var id, step string
	switch {
	case d.step != nil:
		return d.step
	case d.Process != nil:
		id, step = d.Process.Workflow, d.Process.Step
	case d.Waiting != nil:
		id, step = d.Waiting.Workflow, d.Waiting.Step
	case d.Delayed != nil:
		id, step = d.Delayed.Workflow, d.Delayed.Step
	case d.Dead != nil:
		id, step = d.Dead.Workflow, d.Dead.Step
	}
	if id == "" {
		return nil
	}
	return &flowRef{ID: id, Step: step}
}
