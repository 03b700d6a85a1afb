package main

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/worqr/worqr"
)

func workflowCommands() []*command {
	return []*command{
		{name: "workflow", synopsis: "<id> [--offset n] [--limit n]", group: "Inspect", summary: "a workflow's state and its steps, in dependency order", run: cmdWorkflow, help: `
Shows a workflow (see worqr.Client.EnqueueWorkflow): its state (running,
succeeded, failed or cancelled), when it was created and ended, and its
steps in dependency order (each after the steps it waits for), one row
each: the step's name, its state (waiting, ready, queued, succeeded, dead
or cancelled), its queue, its task's id ("-" before it is enqueued) and
the steps it waits for (the first 10, then how many more; in --json,
moreParents). It shows --limit steps (1,000 by default) from --offset, and
says on stderr when there are more; it reads those steps only, a page at
a time, whatever the workflow's size. Exits 1 when there is no such workflow (never
enqueued, or ended and past its keep). "worqr workflow show <id>" is the
same, for a workflow named like a subcommand.`},
		{name: "workflow cancel", synopsis: "<id>", group: "Change", summary: "cancel a running workflow: its steps that have not ended never run", run: cmdWorkflowCancel, help: `
Cancels a running workflow (see worqr.Client.CancelWorkflow): its steps
waiting for their parents or in their queues never run, the tasks of
those in flight are cancelled, and the workflow ends cancelled. Prints
whether it was cancelled; a workflow that had ended already is left as it
is (exit 0, "cancelled": false). Exits 1 when there is no such workflow.`},
	}
}

// stepRow is one step of a workflow.
type stepRow struct {
	Name    string   `json:"name"`
	State   string   `json:"state"`
	Queue   string   `json:"queue"`
	TaskID  string   `json:"taskId,omitempty"`
	Parents []string `json:"parents"`
	// MoreParents counts the parents not in Parents (see
	// worqr.StepInfo.MoreParents).
	MoreParents int `json:"moreParents,omitempty"`
}

// workflowJSON is the workflow command's --json output.
type workflowJSON struct {
	ID      string     `json:"id"`
	State   string     `json:"state"`
	Created time.Time  `json:"created"`
	Ended   *time.Time `json:"ended"`
	// Total counts the workflow's steps; Steps are those from Offset.
	Total  int       `json:"total"`
	Offset int       `json:"offset"`
	Steps  []stepRow `json:"steps"`
}

// maxParentsShown bounds the parents a table row lists.
const maxParentsShown = 10

// workflowArg checks a workflow id given on the command line.
func workflowArg(id string) (string, error) {
	if id == "" || len(id) > worqr.MaxWorkflowIDLen {
		return "", usagef("a workflow id has 1 to %d letters, digits, '-' and '_'", worqr.MaxWorkflowIDLen)
	}
	return id, nil
}

// noWorkflow turns ErrNoWorkflow into a not-found (exit 1) that says so.
func noWorkflow(err error, id string) error {
	if errors.Is(err, worqr.ErrNoWorkflow) {
		return notFoundf("no workflow %s: never enqueued, or ended and past its keep", escape(id))
	}
	return err
}

func cmdWorkflow(e *env, args []string) error {
	fs := e.flags()
	offset := fs.Int("offset", 0, "skip this many steps, in dependency order")
	limit := fs.Int("limit", 1000, "show at most this many steps")
	pos, err := e.parse(fs, args, 1, 1)
	if err != nil {
		return err
	}
	if *offset < 0 || *limit <= 0 {
		return usagef("--offset must not be negative and --limit must be positive")
	}
	id, err := workflowArg(pos[0])
	if err != nil {
		return err
	}
	c, err := e.client()
	if err != nil {
		return err
	}
	// Page by page (worqr.Client.WorkflowSteps): the steps shown cost
	// Redis what they are, however many the workflow has.
	var info worqr.WorkflowPage
	var steps []worqr.StepInfo
	for {
		ask := min(*limit-len(steps), worqr.MaxPageSteps)
		page, err := c.WorkflowSteps(e.ctx, id, *offset+len(steps), ask)
		if err != nil {
			return noWorkflow(err, id)
		}
		info, steps = page, append(steps, page.Steps...)
		if len(page.Steps) < ask || len(steps) >= *limit {
			break
		}
	}
	from := min(*offset, info.Total)
	if e.g.json {
		out := workflowJSON{ID: info.ID, State: string(info.State), Created: info.Created, Ended: jsonTime(info.Ended),
			Total: info.Total, Offset: from, Steps: make([]stepRow, len(steps))}
		for i, st := range steps {
			out.Steps[i] = stepRow{Name: st.Name, State: string(st.State), Queue: st.Queue, TaskID: st.TaskID, Parents: st.Parents, MoreParents: st.MoreParents}
			if out.Steps[i].Parents == nil {
				out.Steps[i].Parents = []string{}
			}
		}
		return e.printJSON(out)
	}
	ended := ""
	if !info.Ended.IsZero() {
		ended = ", ended " + stamp(info.Ended)
	}
	e.note("workflow %s: %s, created %s%s, %d steps", info.ID, info.State, stamp(info.Created), ended, info.Total)
	if len(steps) < info.Total {
		e.note("steps %d to %d of %d, in dependency order (--offset and --limit for others)", from+1, from+len(steps), info.Total)
	}
	t := e.table("STEP", "STATE", "QUEUE", "TASK", "AFTER")
	for _, st := range steps {
		parents := st.Parents[:min(len(st.Parents), maxParentsShown)]
		task, after := st.TaskID, strings.Join(parents, ",")
		if task == "" {
			task = "-"
		}
		if after == "" {
			after = "-"
		}
		if more := len(st.Parents) - len(parents) + st.MoreParents; more > 0 {
			after += fmt.Sprintf(" and %d more", more)
		}
		t.row(st.Name, string(st.State), escape(st.Queue), task, after)
	}
	return t.flush()
}

func cmdWorkflowCancel(e *env, args []string) error {
	pos, err := e.parse(e.flags(), args, 1, 1)
	if err != nil {
		return err
	}
	id, err := workflowArg(pos[0])
	if err != nil {
		return err
	}
	c, err := e.client()
	if err != nil {
		return err
	}
	did, err := c.CancelWorkflow(e.ctx, id)
	if err != nil {
		return noWorkflow(err, id)
	}
	if e.g.json {
		return e.printJSON(map[string]any{"id": id, "cancelled": did})
	}
	if !did {
		e.note("workflow %s had ended: nothing to cancel", id)
		return nil
	}
	_, err = e.stdout.Write([]byte("cancelled workflow " + id + "\n"))
	return err
}
