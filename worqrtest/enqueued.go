package worqrtest

import (
	"bytes"
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/worqr/worqr"
)

// readTimeout bounds each read of a queue.
const readTimeout = 10 * time.Second

// Enqueued returns a queue's waiting tasks, in the order workers would
// take them, then its delayed tasks, in due order. Tasks a worker has
// taken are not listed: run no worker on a queue whose tasks a test
// checks this way. It fails the test if the queue cannot be read. Call it
// (and the Require functions) from the test's goroutine.
func Enqueued(t testing.TB, c *worqr.Client, queue string) []worqr.TaskInfo {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), readTimeout)
	defer cancel()
	waiting, err := c.Tasks(ctx, queue, 0, -1)
	if err != nil {
		t.Fatalf("worqrtest: read queue %q: %v", queue, err)
	}
	delayed, err := c.Delayed(ctx, queue, 0, -1)
	if err != nil {
		t.Fatalf("worqrtest: read queue %q: %v", queue, err)
	}
	return append(waiting, delayed...)
}

// EnqueuedJSON is the payloads of Enqueued's tasks decoded from JSON into
// T's. It fails the test if one does not decode.
func EnqueuedJSON[T any](t testing.TB, c *worqr.Client, queue string) []T {
	t.Helper()
	tasks := Enqueued(t, c, queue)
	out := make([]T, len(tasks))
	for i, task := range tasks {
		if err := (worqr.JSON[T]{}).Unmarshal(task.Payload, &out[i]); err != nil {
			t.Fatalf("worqrtest: queue %q: task %s does not decode into %s: %v (payload %q)", queue, task.ID, reflect.TypeFor[T](), err, task.Payload)
		}
	}
	return out
}

// RequireEnqueued fails the test unless a queue has a task, waiting or
// delayed, with this payload, and returns the first such task (with its
// id, attempts, due time).
func RequireEnqueued(t testing.TB, c *worqr.Client, queue string, payload []byte) worqr.TaskInfo {
	t.Helper()
	tasks := Enqueued(t, c, queue)
	for _, task := range tasks {
		if bytes.Equal(task.Payload, payload) {
			return task
		}
	}
	t.Fatalf("worqrtest: queue %q has no task %q; it has %s", queue, payload, describe(tasks))
	return worqr.TaskInfo{}
}

// RequireNotEnqueued fails the test if a queue has a task, waiting or
// delayed, with this payload.
func RequireNotEnqueued(t testing.TB, c *worqr.Client, queue string, payload []byte) {
	t.Helper()
	for _, task := range Enqueued(t, c, queue) {
		if bytes.Equal(task.Payload, payload) {
			t.Fatalf("worqrtest: queue %q has task %s %q, which the test expected not to be there", queue, task.ID, payload)
		}
	}
}

// RequireEnqueuedJSON fails the test unless a queue has a task, waiting
// or delayed, whose payload decodes from JSON into a T equal to want (by
// reflect.DeepEqual, so the JSON's field order and spacing do not
// matter), and returns the first such task. Tasks that do not decode into
// a T do not match.
func RequireEnqueuedJSON[T any](t testing.TB, c *worqr.Client, queue string, want T) worqr.TaskInfo {
	t.Helper()
	tasks := Enqueued(t, c, queue)
	for _, task := range tasks {
		var got T
		if (worqr.JSON[T]{}).Unmarshal(task.Payload, &got) == nil && reflect.DeepEqual(got, want) {
			return task
		}
	}
	t.Fatalf("worqrtest: queue %q has no task %+v (%s); it has %s", queue, want, reflect.TypeFor[T](), describe(tasks))
	return worqr.TaskInfo{}
}

// RequireNotEnqueuedJSON fails the test if a queue has a task, waiting
// or delayed, whose payload decodes from JSON into a T equal to v.
func RequireNotEnqueuedJSON[T any](t testing.TB, c *worqr.Client, queue string, v T) {
	t.Helper()
	for _, task := range Enqueued(t, c, queue) {
		var got T
		if (worqr.JSON[T]{}).Unmarshal(task.Payload, &got) == nil && reflect.DeepEqual(got, v) {
			t.Fatalf("worqrtest: queue %q has task %s %q, which the test expected not to be there", queue, task.ID, task.Payload)
		}
	}
}

// describe lists tasks for a failure message: at most ten payloads.
func describe(tasks []worqr.TaskInfo) string {
	if len(tasks) == 0 {
		return "none"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d:", len(tasks))
	for i, task := range tasks {
		if i == 10 {
			b.WriteString(" ...")
			break
		}
		fmt.Fprintf(&b, " %q", task.Payload)
	}
	return b.String()
}
