package workflow

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/worqr/worqr/internal/store"
)

// Spec is what a step's task is enqueued with, kept in the workflow's
// state until the step is released.
type Spec struct {
	Queue string            `json:"q"`
	Args  store.EnqueueArgs `json:"a"`
	Task  []byte            `json:"p"`
}

// UniqueHold is how long past the workflow's keep a step's unique key is
// held: a replay of the step's release within it finds the task enqueued
// and adds nothing (see package flows).
const UniqueHold = 24 * time.Hour

// StepTask is the task that runs workflow id's step r, with a unique key
// of its own, which makes its enqueue idempotent.
func StepTask(id string, r store.ReadyStep) (store.EnqueueOne, error) {
	var spec Spec
	if err := json.Unmarshal([]byte(r.Spec), &spec); err != nil {
		return store.EnqueueOne{}, fmt.Errorf("step %q: spec unreadable: %w", r.Name, err)
	}
	args := spec.Args
	args.Flow = id + "." + r.Name
	args.Unique = "worqr/workflow/" + id + "/" + r.Name
	args.UniqueTTL = args.Retain + UniqueHold
	return store.EnqueueOne{Queue: spec.Queue, Payload: spec.Task, Args: args}, nil
}

// SpecQueue is the queue of a step's spec, and whether the spec was
// read whole: the queue of one unreadable is what was read of it.
func SpecQueue(spec string) (string, bool) {
	var s Spec
	err := json.Unmarshal([]byte(spec), &s)
	return s.Queue, err == nil
}

// StepState is the name of a step's state (worqrtype.StepState) that
// the store's code for it stands for; "" for a code unknown.
func StepState(code string) string {
	switch code {
	case "w":
		return "waiting"
	case "r":
		return "ready"
	case "q":
		return "queued"
	case "ok":
		return "succeeded"
	case "dead":
		return "dead"
	case "x":
		return "cancelled"
	}
	return ""
}
