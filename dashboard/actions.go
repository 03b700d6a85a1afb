package dashboard

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/worqr/worqr"
)

// actionSpec describes an action: what the confirmation says, and whether
// it needs a task id or a number.
type actionSpec struct {
	verb   string // for the confirmation: "Pause queue"
	needID bool
	needN  bool
	done   string // the done code it redirects with
}

var actions = map[string]actionSpec{
	"pause":      {verb: "Pause queue", done: "paused"},
	"resume":     {verb: "Resume queue", done: "resumed"},
	"limit":      {verb: "Set the concurrency limit of queue", needN: true, done: "limited"},
	"grouplimit": {verb: "Set a group concurrency limit of queue", needN: true, done: "groupLimited"},
	"grouprate":  {verb: "Set a group rate limit of queue", needN: true, done: "groupRated"},
	"groupturns": {verb: "Set the turns in a row of a group of queue", needN: true, done: "groupTurned"},
	// The verb of "sequencehold" depends on its hold (on or off): see holdVerbs.
	"sequencehold": {done: "sequenceHold"},
	"purge":        {verb: "Delete every dead letter of queue", done: "purged"},
	"deletequeue":  {verb: "Delete queue (its waiting tasks are dropped)", done: "deleted"},
	"cancel":       {verb: "Cancel task", needID: true, done: "cancelled"},
	"requeue":      {verb: "Requeue dead letter", needID: true, done: "requeued"},
	"deletedead":   {verb: "Delete dead letter", needID: true, done: "deadDeleted"},
	"runnow":       {verb: "Run now: queue", needID: true, done: "ranNow"},
}

// doneMessages are the notices shown after an action, by done code (never
// text from the request).
var doneMessages = map[string]string{
	"paused":            "Queue paused.",
	"resumed":           "Queue resumed.",
	"limited":           "Concurrency limit set.",
	"groupLimited":      "Group concurrency limit set.",
	"groupRated":        "Group rate limit set.",
	"groupTurned":       "Group turns set.",
	"sequenceHold":      "Sequence hold set.",
	"purged":            "Dead letters purged.",
	"deleted":           "Queue deleted.",
	"cancelled":         "Task cancelled.",
	"requeued":          "Dead letter requeued.",
	"deadDeleted":       "Dead letter deleted.",
	"ranNow":            "Task moved to the back of the queue, to run now.",
	"nothing":           "Nothing to do: the task was not there any more.",
	"workflowCancelled": "Workflow cancelled: its steps that had not ended will not run.",
	"workflowEnded":     "Nothing to do: the workflow had ended.",
	// With the count the redirect carries (n).
	"bulkCancelled":     "%d waiting tasks cancelled.",
	"bulkCancelledMore": "%d waiting tasks cancelled; the search stopped at 10,000 tasks, and more may match further back.",
	"bulkRequeued":      "%d dead letters requeued.",
	"bulkDeleted":       "%d dead letters deleted.",
}

// holdVerbs are the confirmations of "sequencehold", by its hold value;
// any other value is refused.
var holdVerbs = map[string]string{
	"on":  "Hold each sequence (a group with limit 1) on its dead task, until the dead letter is requeued or deleted, in queue",
	"off": "Stop holding sequences on a dead task (each one held goes on at once) in queue",
}

// groupHoldVerbs are the confirmations of "sequencehold" for one group,
// by its hold value.
var groupHoldVerbs = map[string]string{
	"on":    "Hold this group's sequence on its dead task whatever the queue's setting, in queue",
	"off":   "Never hold this group's sequence on a dead task (if held, it goes on at once), in queue",
	"queue": "Let this group follow the queue's sequence hold, in queue",
}

// groupHolds are a group's own settings, by their hold value.
var groupHolds = map[string]worqr.GroupHold{"on": worqr.GroupHoldOn, "off": worqr.GroupHoldOff, "queue": worqr.GroupHoldAsQueue}

type confirmData struct {
	Op, Verb, Queue, ID, N, Back string
	// Group is the group of a group limit, rate or turns ("": every
	// group's default) or of a sequence hold ("": the queue's), and Per a
	// group rate's window, as typed (a Go duration).
	Group, Per string
	// Hold is a sequence hold's setting: "on" or "off", or for a group's
	// own, "queue" too.
	Hold string
	Bulk *bulkForm
	// Workflow is the workflow of a workflow's action (Queue is "").
	Workflow string
}

func (confirmData) title() string { return "confirm" }

func (h *handler) action(w http.ResponseWriter, r *http.Request) {
	if h.opts.ReadOnly {
		http.Error(w, "read-only dashboard: actions are disabled", http.StatusForbidden)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	if err := r.ParseForm(); err != nil {
		http.Error(w, "bad form", http.StatusBadRequest)
		return
	}
	if !h.checkCSRF(r) {
		h.log.Warn("worqr dashboard: action refused: bad or missing CSRF token", "remote", r.RemoteAddr)
		http.Error(w, "forbidden: bad or missing CSRF token (reload the page)", http.StatusForbidden)
		return
	}
	op := r.PostFormValue("op")
	switch op {
	case "bulk":
		h.bulkAction(w, r)
		return
	case "cancelworkflow":
		h.workflowAction(w, r)
		return
	}
	spec, ok := actions[op]
	queue, qok := queueParam(r, "q")
	id, nText, group, perText := r.PostFormValue("id"), r.PostFormValue("n"), r.PostFormValue("group"), r.PostFormValue("per")
	hold := r.PostFormValue("hold")
	n, nerr := strconv.Atoi(nText)
	per, perr := time.ParseDuration(perText)
	switch {
	case !ok:
		h.fail(w, r, http.StatusBadRequest, "unknown action")
		return
	case !qok:
		h.fail(w, r, http.StatusBadRequest, "no queue given")
		return
	case spec.needID && (id == "" || len(id) > 64):
		h.fail(w, r, http.StatusBadRequest, "no task id given")
		return
	case spec.needN && (nerr != nil || n < 0):
		h.fail(w, r, http.StatusBadRequest, "the limit must be a whole number, 0 for none")
		return
	case op == "grouprate" && n > 0 && (perr != nil || per < time.Millisecond || per%time.Millisecond != 0):
		// Redis keeps the window in whole milliseconds: 1.5ms would be
		// stored as 1ms, not what the confirmation said.
		h.fail(w, r, http.StatusBadRequest, "the window must be a duration of 1ms or more, in whole milliseconds (1m, 500ms)")
		return
	case op == "sequencehold" && group == "" && holdVerbs[hold] == "":
		h.fail(w, r, http.StatusBadRequest, "the sequence hold must be on or off")
		return
	case op == "sequencehold" && group != "" && groupHoldVerbs[hold] == "":
		h.fail(w, r, http.StatusBadRequest, "a group's sequence hold must be on, off or queue")
		return
	case len(group) > worqr.MaxGroupLen:
		h.fail(w, r, http.StatusBadRequest, "the group key is too long")
		return
	}
	back := r.PostFormValue("back")
	if r.PostFormValue("confirmed") != "yes" {
		// Without the script's confirm(), ask here.
		d := confirmData{Op: op, Verb: spec.verb, Queue: queue, ID: id, N: nText, Back: back, Group: group}
		switch op {
		case "grouprate":
			d.Per = perText
		case "sequencehold":
			d.Verb, d.Hold = holdVerbs[hold], hold
			if group != "" {
				d.Verb = groupHoldVerbs[hold]
			}
		}
		h.render(w, r, "confirm", http.StatusOK, d)
		return
	}
	ctx, cancel := h.ctx(r)
	defer cancel()
	done := spec.done
	var err error
	switch op {
	case "pause":
		err = h.c.Pause(ctx, queue)
	case "resume":
		err = h.c.Resume(ctx, queue)
	case "limit":
		err = h.c.SetConcurrency(ctx, queue, n)
	case "grouplimit":
		err = h.c.SetGroupConcurrency(ctx, queue, group, n)
	case "grouprate":
		err = h.c.SetGroupRate(ctx, queue, group, n, per)
	case "groupturns":
		err = h.c.SetGroupTurns(ctx, queue, group, n)
	case "sequencehold":
		if group != "" {
			err = h.c.SetGroupSequenceHold(ctx, queue, group, groupHolds[hold])
		} else {
			err = h.c.SetSequenceHold(ctx, queue, hold == "on")
		}
	case "purge":
		_, err = h.c.PurgeDeadLetters(ctx, queue)
	case "deletequeue":
		_, err = h.c.DeleteQueue(ctx, queue)
		back = "overview"
	case "cancel":
		var res worqr.CancelResult
		if !h.lookup(w, r, func(ctx context.Context) { res, err = h.c.CancelTask(ctx, queue, id) }) {
			return
		}
		if err == nil && res.Removed+res.Marked == 0 {
			done = "nothing"
		}
	case "runnow":
		// A scan of the delayed set: a lookup.
		var found bool
		if !h.lookup(w, r, func(ctx context.Context) { found, err = h.c.RunNow(ctx, queue, id) }) {
			return
		}
		if err == nil && !found {
			done = "nothing"
		}
	case "requeue", "deletedead":
		var found bool
		if op == "requeue" {
			found, err = h.c.RequeueDeadLetter(ctx, queue, id)
		} else {
			found, err = h.c.DeleteDeadLetter(ctx, queue, id)
		}
		if err == nil && !found {
			done = "nothing"
		}
	}
	h.log.Info("worqr dashboard: action", "op", op, "queue", queue, "id", id, "n", nText, "group", group, "hold", hold, "remote", r.RemoteAddr, "err", err)
	if err != nil {
		h.fail(w, r, errorStatus(err), fmt.Sprintf("%s failed: %v", op, err))
		return
	}
	http.Redirect(w, r, backURL(base(r), back, queue, id, done), http.StatusSeeOther)
}

// backURL is where an action returns to: built here, never taken from the
// request, so it cannot point elsewhere.
func backURL(base, back, queue, id, done string) string {
	v := url.Values{"done": {done}}.Encode()
	u := queuePath(base, queue)
	switch back {
	case "overview":
		return base + "/?" + v
	case "task":
		u = taskPath(base, queue, id)
	}
	if strings.Contains(u, "?") {
		return u + "&" + v
	}
	return u + "?" + v
}

// bulkAction is a bulk action's request (op "bulk"): checked, confirmed,
// then run.
func (h *handler) bulkAction(w http.ResponseWriter, r *http.Request) {
	queue, ok := queueParam(r, "q")
	if !ok {
		h.fail(w, r, http.StatusBadRequest, "no queue given")
		return
	}
	f, msg := readBulk(r)
	if msg != "" {
		h.fail(w, r, http.StatusBadRequest, msg)
		return
	}
	if r.PostFormValue("confirmed") != "yes" {
		h.render(w, r, "confirm", http.StatusOK, confirmData{Op: "bulk", Verb: f.Question(), Queue: queue, Back: "queue", Bulk: &f})
		return
	}
	done, n, answered, err := h.bulk(w, r, queue, f)
	if answered {
		return
	}
	h.log.Info("worqr dashboard: action", "op", "bulk", "by", f.By, "queue", queue, "ids", len(f.IDs), "kind", f.Kind, "n", n, "remote", r.RemoteAddr, "err", err)
	if err != nil {
		h.fail(w, r, errorStatus(err), fmt.Sprintf("%s failed after %d: %v", f.By, n, err))
		return
	}
	http.Redirect(w, r, backURL(base(r), "queue", queue, "", done)+"&n="+strconv.FormatInt(n, 10), http.StatusSeeOther)
}
