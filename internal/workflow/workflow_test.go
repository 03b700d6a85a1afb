package workflow

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/worqr/worqr/internal/enqueue"
	"github.com/worqr/worqr/internal/errs"
	"github.com/worqr/worqr/internal/store"
)

func anyQueue(string) error { return nil }

func plan(t *testing.T, steps []Step, runAfterFailure bool) []store.WorkflowStep {
	t.Helper()
	p, err := Plan(steps, time.Hour, runAfterFailure, 100, anyQueue)
	if err != nil {
		t.Fatalf("Plan: %v", err)
	}
	return p
}

func TestPlanRefusesWhatCannotRun(t *testing.T) {
	errQueue := errors.New("bad queue")
	cases := []struct {
		name  string
		steps []Step
		want  error
		text  string
	}{
		{"no steps", nil, errs.ErrInvalidOptions, "no steps"},
		{"no name", []Step{{Queue: "q"}}, errs.ErrInvalidOptions, "step 0 has no name"},
		{"bad name", []Step{{Name: "a,b", Queue: "q"}}, errs.ErrInvalidOptions, "step name"},
		{"duplicate", []Step{{Name: "a", Queue: "q"}, {Name: "a", Queue: "q"}}, errs.ErrDuplicateStep, `step "a"`},
		{"unknown parent", []Step{{Name: "a", Queue: "q", After: []string{"z"}}}, errs.ErrUnknownStep, `step "a" waits for "z"`},
		{"itself", []Step{{Name: "a", Queue: "q", AfterEnded: []string{"a"}}}, errs.ErrWorkflowCycle, `step "a" waits for itself`},
		{"cycle", []Step{{Name: "a", Queue: "q", After: []string{"c"}}, {Name: "b", Queue: "q", After: []string{"a"}}, {Name: "c", Queue: "q", After: []string{"b"}}},
			errs.ErrWorkflowCycle, "steps a -> c -> b -> a"},
		{"queue", []Step{{Name: "a", Queue: ""}}, errQueue, `step "a"`},
		{"too large", []Step{{Name: "a", Queue: "q", Task: make([]byte, 101)}}, errs.ErrTaskTooLarge, `step "a"`},
		{"options", []Step{{Name: "a", Queue: "q", Options: enqueue.Options{In: -1}}}, errs.ErrInvalidOptions, `step "a"`},
		{"unique", []Step{{Name: "a", Queue: "q", Options: enqueue.Options{Unique: "k", UniqueSet: true}}}, errs.ErrInvalidOptions, "unique key of its own"},
		{"aggregate", []Step{{Name: "a", Queue: "q", Options: enqueue.Options{Aggregate: "k", AggregateSet: true}}}, errs.ErrInvalidOptions, "never aggregated"},
	}
	for _, c := range cases {
		_, err := Plan(c.steps, time.Hour, false, 100, func(q string) error {
			if q == "" {
				return errQueue
			}
			return nil
		})
		if !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.text) {
			t.Errorf("%s: Plan = %v, want %v saying %q", c.name, err, c.want, c.text)
		}
	}
}

func TestPlanLaysOutTheGraph(t *testing.T) {
	steps := []Step{
		{Name: "report", Queue: "q", After: []string{"fetch", "fetch"}, AfterEnded: []string{"clean"}},
		{Name: "fetch", Queue: "q", Task: []byte("x"), Options: enqueue.Options{Retain: time.Minute, Kind: "k"}},
		{Name: "clean", Queue: "r", After: []string{"fetch"}},
	}
	p := plan(t, steps, false)
	if got := strings.Join(p[0].Parents, ","); got != "fetch,clean" {
		t.Errorf("report's parents = %s, want fetch,clean (each once)", got)
	}
	if got := strings.Join(p[1].Kids, ","); got != "report,clean" {
		t.Errorf("fetch's kids = %s, want report,clean", got)
	}
	if got := strings.Join(p[2].Kids, ","); got != "+report" {
		t.Errorf("clean's kids = %s, want +report: report runs whatever its end", got)
	}
	if places := [3]int{p[0].Place, p[1].Place, p[2].Place}; places != [3]int{2, 0, 1} {
		t.Errorf("places = %v, want report last, fetch first", places)
	}
	var spec Spec
	if err := json.Unmarshal([]byte(p[1].Spec), &spec); err != nil {
		t.Fatal(err)
	}
	if spec.Queue != "q" || string(spec.Task) != "x" || spec.Args.Kind != "k" || spec.Args.Retain != time.Hour {
		t.Errorf("fetch's spec = %+v, want its queue, task, kind and the keep as its Retain", spec)
	}
	for _, kid := range plan(t, steps, true)[1].Kids {
		if !strings.HasPrefix(kid, "+") {
			t.Errorf("RunAfterFailure: kid %q runs only after a success", kid)
		}
	}
}

func TestDigestTellsPlansApart(t *testing.T) {
	a := plan(t, []Step{{Name: "a", Queue: "q"}, {Name: "b", Queue: "q", After: []string{"a"}}}, false)
	b := plan(t, []Step{{Name: "a", Queue: "q"}, {Name: "b", Queue: "q", AfterEnded: []string{"a"}}}, false)
	again := plan(t, []Step{{Name: "a", Queue: "q"}, {Name: "b", Queue: "q", After: []string{"a"}}}, false)
	if Digest(a, time.Hour) != Digest(again, time.Hour) {
		t.Error("the same plan twice digests apart: a retry would find its workflow taken")
	}
	if Digest(a, time.Hour) == Digest(b, time.Hour) || Digest(a, time.Hour) == Digest(a, 2*time.Hour) {
		t.Error("another dependency or keep digests alike")
	}
}

func TestOrderListsParentsFirstThenByIndex(t *testing.T) {
	names := []string{"a", "b", "c", "d", "e"}
	parents := map[string][]string{"a": {"d"}, "b": {"a", "gone"}, "c": nil, "d": nil, "e": {"b", "c"}}
	order := Order(len(names), func(i int) string { return names[i] }, func(i int) []string { return parents[names[i]] })
	var got []string
	for _, i := range order {
		got = append(got, names[i])
	}
	if strings.Join(got, "") != "cdabe" {
		t.Errorf("order = %v, want c d a b e", got)
	}
	// a, made ready by c, comes before d, made ready earlier by b.
	names = []string{"a", "b", "c", "d"}
	parents = map[string][]string{"a": {"c"}, "d": {"b"}}
	got = got[:0]
	for _, i := range Order(len(names), func(i int) string { return names[i] }, func(i int) []string { return parents[names[i]] }) {
		got = append(got, names[i])
	}
	if strings.Join(got, "") != "bcad" {
		t.Errorf("order = %v, want b c a d", got)
	}
}

func TestCheckID(t *testing.T) {
	for _, id := range []string{"", strings.Repeat("x", MaxIDLen+1), "a.b", "a/b", "a,b", "a b"} {
		if err := CheckID(id); !errors.Is(err, errs.ErrInvalidOptions) {
			t.Errorf("CheckID(%q) = %v, want ErrInvalidOptions", id, err)
		}
	}
	for _, id := range []string{"a", "Run-7_x", strings.Repeat("x", MaxIDLen)} {
		if err := CheckID(id); err != nil {
			t.Errorf("CheckID(%q) = %v", id, err)
		}
	}
	if a, b := NewID(), NewID(); a == b || CheckID(a) != nil || len(a) != 32 {
		t.Errorf("NewID: %q, %q", a, b)
	}
}

func TestHomeQueueIsTheMostStepsFirstOnATie(t *testing.T) {
	for queues, want := range map[string]string{"abb": "b", "abab": "a", "baab": "a", "c": "c"} {
		if got := HomeQueue(len(queues), func(i int) string { return queues[i : i+1] }); got != want {
			t.Errorf("HomeQueue(%s) = %q, want %q", queues, got, want)
		}
	}
}

func TestStepTaskHoldsAKeyOfItsOwn(t *testing.T) {
	spec, _ := json.Marshal(Spec{Queue: "q", Task: []byte("x"), Args: store.EnqueueArgs{Retain: time.Hour, Kind: "k"}})
	task, err := StepTask("wf", store.ReadyStep{Name: "s", Spec: string(spec)})
	if err != nil {
		t.Fatal(err)
	}
	a := task.Args
	if task.Queue != "q" || string(task.Payload) != "x" || a.Kind != "k" || a.Flow != "wf.s" ||
		a.Unique != "worqr/workflow/wf/s" || a.UniqueTTL != time.Hour+UniqueHold {
		t.Errorf("StepTask = %+v", task)
	}
	if _, err := StepTask("wf", store.ReadyStep{Name: "s", Spec: "{"}); err == nil {
		t.Error("an unreadable spec gives a task")
	}
	if q, ok := SpecQueue(string(spec)); q != "q" || !ok {
		t.Errorf("SpecQueue = %q, %v", q, ok)
	}
	if q, ok := SpecQueue(`{"q":"q","a":7}`); q != "q" || ok {
		t.Errorf("SpecQueue of a spec read in part = %q, %v; want its queue, false", q, ok)
	}
}

func TestStepState(t *testing.T) {
	for code, want := range map[string]string{"w": "waiting", "r": "ready", "q": "queued", "ok": "succeeded", "dead": "dead", "x": "cancelled", "?": ""} {
		if got := StepState(code); got != want {
			t.Errorf("StepState(%q) = %q, want %q", code, got, want)
		}
	}
}
