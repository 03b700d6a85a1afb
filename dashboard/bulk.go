package dashboard

import (
	"context"
	"encoding/hex"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/worqr/worqr"
)

const (
	// maxBulkIDs bounds the tasks one bulk action names: a page's worth
	// of each list, twice over.
	maxBulkIDs = 2 * pageSize
	// deadScan is how many of the newest dead letters a bulk action by
	// kind or by error looks at: each match is requeued or deleted by id.
	deadScan = 1000
	// maxErrorLen is the longest error text a bulk action matches: what
	// a dead letter records at most.
	maxErrorLen = 4096
)

// bulkSpec is one bulk action, chosen by the button's "by" value: what it
// acts on (waiting tasks or dead letters), what it does, and which.
type bulkSpec struct {
	list  string // "waiting" or "dead"
	verb  string // "cancel", "requeue" or "delete"
	which string // "selected", "all", "kind" or "error"
}

var bulkSpecs = map[string]bulkSpec{
	"waiting-cancel-selected": {"waiting", "cancel", "selected"},
	"waiting-cancel-all":      {"waiting", "cancel", "all"},
	"waiting-cancel-kind":     {"waiting", "cancel", "kind"},
	"dead-requeue-selected":   {"dead", "requeue", "selected"},
	"dead-requeue-all":        {"dead", "requeue", "all"},
	"dead-requeue-kind":       {"dead", "requeue", "kind"},
	"dead-requeue-error":      {"dead", "requeue", "error"},
	"dead-delete-selected":    {"dead", "delete", "selected"},
	"dead-delete-kind":        {"dead", "delete", "kind"},
	"dead-delete-error":       {"dead", "delete", "error"},
}

// bulkForm is a bulk action's request, checked.
type bulkForm struct {
	By   string
	spec bulkSpec
	IDs  []string
	Kind string
	Err  string
}

// readBulk reads and checks a bulk action's fields; msg says what is
// wrong.
func readBulk(r *http.Request) (f bulkForm, msg string) {
	f.By = r.PostFormValue("by")
	spec, ok := bulkSpecs[f.By]
	if !ok {
		return f, "unknown bulk action"
	}
	f.spec = spec
	f.IDs, f.Kind, f.Err = r.PostForm["ids"], r.PostFormValue("kind"), r.PostFormValue("err")
	// The queue page's forms send the error's bytes in hex, as a name's:
	// a browser sends a value's line breaks as CRLF, and a page cannot
	// carry bytes that are not UTF-8, so that the text itself of an error
	// of several lines (a panic's stack) or of any bytes would match none.
	if x := r.PostFormValue("errx"); x != "" {
		b, err := hex.DecodeString(x)
		if err != nil {
			return f, "the error's text (errx) is not in hex"
		}
		f.Err = string(b)
	}
	switch spec.which {
	case "selected":
		if len(f.IDs) == 0 {
			return f, "no task selected"
		}
		if len(f.IDs) > maxBulkIDs {
			return f, fmt.Sprintf("%d tasks selected, at most %d at once", len(f.IDs), maxBulkIDs)
		}
		for _, id := range f.IDs {
			if id == "" || len(id) > maxIDLen {
				return f, "a task id is empty or too long"
			}
		}
	case "kind":
		if f.Kind == "" || len(f.Kind) > worqr.MaxKindLen {
			return f, "give a kind (at most 64 bytes)"
		}
	case "error":
		if f.Err == "" || len(f.Err) > maxErrorLen {
			return f, "give an error text (at most 4,096 bytes)"
		}
	}
	if spec.which != "selected" {
		f.IDs = nil
	}
	return f, ""
}

// Question is what the confirmation asks, without the queue's name.
func (f bulkForm) Question() string {
	things := map[string]string{"waiting": "waiting tasks", "dead": "dead letters"}[f.spec.list]
	verb := map[string]string{"cancel": "Cancel", "requeue": "Requeue", "delete": "Delete"}[f.spec.verb]
	switch f.spec.which {
	case "selected":
		return fmt.Sprintf("%s the %d selected %s of queue", verb, len(f.IDs), things)
	case "all":
		if f.spec.list == "waiting" {
			return verb + " every waiting task (10,000 at most) of queue"
		}
		return verb + " every dead letter of queue"
	case "kind":
		scope := "the " + things
		if f.spec.list == "waiting" {
			scope += " (among the first 10,000)"
		} else {
			scope += fmt.Sprintf(" (among the newest %d)", deadScan)
		}
		return fmt.Sprintf("%s %s of kind %q, of queue", verb, scope, f.Kind)
	}
	return fmt.Sprintf("%s the dead letters (among the newest %d) whose last error is the one below, of queue", verb, deadScan)
}

// bulk runs a confirmed bulk action: it returns the done code and count
// for the notice, or the error.
func (h *handler) bulk(w http.ResponseWriter, r *http.Request, queue string, f bulkForm) (done string, n int64, answered bool, err error) {
	ctx, cancel := h.ctx(r)
	defer cancel()
	spec := f.spec
	done = map[string]string{"cancel": "bulkCancelled", "requeue": "bulkRequeued", "delete": "bulkDeleted"}[spec.verb]
	switch {
	case spec.list == "dead" && spec.which == "all":
		n, err = h.c.RequeueDeadLetters(ctx, queue)
		return done, n, false, err
	case spec.list == "waiting":
		// One script, which looks at 10,000 entries at most: a lookup.
		var more bool
		sel := worqr.WaitingSelection{IDs: f.IDs}
		if spec.which == "kind" {
			sel.Kind = f.Kind
		}
		if !h.lookup(w, r, func(ctx context.Context) { n, more, err = h.c.CancelWaiting(ctx, queue, sel) }) {
			return "", 0, true, nil
		}
		if more && spec.which != "selected" {
			done = "bulkCancelledMore"
		}
		return done, n, false, err
	}
	// Dead letters by id: the selected, or those of the newest deadScan
	// that match. Each is a call that looks the letter up: a lookup.
	if !h.lookup(w, r, func(ctx context.Context) { n, err = h.eachDead(ctx, queue, f) }) {
		return "", 0, true, nil
	}
	return done, n, false, err
}

// eachDead requeues or deletes, one by one, the dead letters f chooses,
// and returns how many it found.
func (h *handler) eachDead(ctx context.Context, queue string, f bulkForm) (int64, error) {
	ids := f.IDs
	if f.spec.which != "selected" {
		dls, err := whole(func(from, n int) ([]worqr.DeadLetter, error) {
			return h.c.DeadLetters(ctx, queue, from, n, worqr.PayloadPrefix(0))
		}, deadSize)(0, deadScan)
		if err != nil {
			return 0, err
		}
		for _, d := range dls {
			if f.spec.which == "kind" && d.Kind == f.Kind || f.spec.which == "error" && d.Error == f.Err {
				ids = append(ids, d.ID)
			}
		}
	}
	var n int64
	for _, id := range ids {
		var found bool
		var err error
		if f.spec.verb == "requeue" {
			found, err = h.c.RequeueDeadLetter(ctx, queue, id)
		} else {
			found, err = h.c.DeleteDeadLetter(ctx, queue, id)
		}
		if err != nil {
			return n, err
		}
		if found {
			n++
		}
	}
	return n, nil
}

// kinds are the distinct kinds of tasks, in their order, for the bulk
// forms' suggestions.
func kinds(ts []worqr.TaskInfo) []string {
	var out []string
	seen := map[string]bool{}
	for _, t := range ts {
		if t.Kind != "" && !seen[t.Kind] {
			seen[t.Kind] = true
			out = append(out, t.Kind)
		}
	}
	return out
}

// deadChoices are the distinct kinds and errors of dead letters, for the
// bulk form's choices; each error with a one-line label.
func deadChoices(ds []worqr.DeadLetter) (ks []string, errs []errorChoice) {
	seenK, seenE := map[string]bool{}, map[string]bool{}
	for _, d := range ds {
		if d.Kind != "" && !seenK[d.Kind] {
			seenK[d.Kind] = true
			ks = append(ks, d.Kind)
		}
		if d.Error != "" && !seenE[d.Error] {
			seenE[d.Error] = true
			label := strings.Join(strings.Fields(d.Error), " ")
			if r := []rune(label); len(r) > 80 {
				label = string(r[:80]) + "…"
			}
			errs = append(errs, errorChoice{Text: d.Error, Label: label})
		}
	}
	return ks, errs
}

type errorChoice struct{ Text, Label string }

// countParam is the count a done notice shows.
func countParam(r *http.Request) int64 {
	n, err := strconv.ParseInt(r.URL.Query().Get("n"), 10, 64)
	if err != nil || n < 0 {
		return 0
	}
	return n
}
