package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"net"
	"os/exec"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/worqr/worqr"
)

// workflow shows a diamond's steps in dependency order with their
// states, queues, tasks and parents, as a table and as JSON; an unknown
// id exits 1 and a bad one 2.
func TestWorkflowCommand(t *testing.T) {
	t.Parallel()
	b := newBackend(t)
	c, ctx := b.client(), ctxT(t)
	w := newWorker(t, c)
	require.NoError(t, w.Handle(ctx, "etl", func(context.Context, *worqr.Process) error { return nil }, worqr.HandleOptions{}))
	_, err := c.EnqueueWorkflow(ctx, []worqr.Step{
		{Name: "load", Queue: "etl", After: []string{"clean", "enrich"}},
		{Name: "extract", Queue: "etl"},
		{Name: "clean", Queue: "etl", After: []string{"extract"}},
		{Name: "enrich", Queue: "geo", After: []string{"extract"}},
	}, worqr.WorkflowOptions{ID: "nightly"})
	require.NoError(t, err)
	// No one serves geo: enrich stays queued, load waiting.
	eventually(t, "clean done", func() bool {
		info, err := c.Workflow(ctx, "nightly")
		return err == nil && info.Steps[0].Name == "clean" && info.Steps[0].State == worqr.StepSucceeded
	})
	info, err := c.Workflow(ctx, "nightly")
	require.NoError(t, err)
	task := map[string]string{}
	for _, st := range info.Steps {
		task[st.Name] = st.TaskID
	}

	r := b.ok("workflow", "nightly")
	assert.Contains(t, r.stderr, "workflow nightly: running, created ")
	assert.Contains(t, r.stderr, "4 steps")
	got := rows(r.stdout)
	require.Len(t, got, 5, "%s", r.stdout)
	assert.Equal(t, []string{"STEP", "STATE", "QUEUE", "TASK", "AFTER"}, got[0])
	assert.Equal(t, []string{"extract", "succeeded", "etl", task["extract"], "-"}, got[1])
	assert.Equal(t, []string{"clean", "succeeded", "etl", task["clean"], "extract"}, got[2])
	assert.Equal(t, []string{"enrich", "queued", "geo", task["enrich"], "extract"}, got[3])
	assert.Equal(t, []string{"load", "waiting", "etl", "-", "clean,enrich"}, got[4])
	assert.Equal(t, r.stdout, b.ok("workflow", "show", "nightly").stdout, "workflow show is workflow")

	j := jsonOf[workflowJSON](b, "workflow", "nightly")
	assert.Equal(t, "nightly", j.ID)
	assert.Equal(t, "running", j.State)
	assert.False(t, j.Created.IsZero())
	assert.Nil(t, j.Ended)
	assert.Equal(t, 4, j.Total)
	assert.Equal(t, []stepRow{
		{Name: "extract", State: "succeeded", Queue: "etl", TaskID: task["extract"], Parents: []string{}},
		{Name: "clean", State: "succeeded", Queue: "etl", TaskID: task["clean"], Parents: []string{"extract"}},
		{Name: "enrich", State: "queued", Queue: "geo", TaskID: task["enrich"], Parents: []string{"extract"}},
		{Name: "load", State: "waiting", Queue: "etl", Parents: []string{"clean", "enrich"}},
	}, j.Steps)

	r = b.ok("workflow", "nightly", "--offset", "1", "--limit", "2")
	assert.Contains(t, r.stderr, "steps 2 to 3 of 4")
	assert.Equal(t, [][]string{got[0], got[2], got[3]}, rows(r.stdout))
	j = jsonOf[workflowJSON](b, "workflow", "nightly", "--offset", "3")
	assert.Equal(t, 3, j.Offset)
	assert.Equal(t, []string{"load"}, []string{j.Steps[0].Name})
	b.fails(2, "--limit must be positive", "workflow", "nightly", "--limit", "0")

	b.fails(1, "no workflow unknown: never enqueued, or ended and past its keep", "workflow", "unknown")
	b.fails(2, "a workflow id has 1 to 64", "workflow", strings.Repeat("w", 65))
	b.fails(1, "workflow id", "workflow", "bad/id")
	b.fails(2, "missing arguments", "workflow")
}

// workflow cancel ends a running workflow cancelled, its waiting steps
// with it; a second cancel changes nothing; an unknown id exits 1.
func TestWorkflowCancelCommand(t *testing.T) {
	t.Parallel()
	b := newBackend(t)
	c, ctx := b.client(), ctxT(t)
	_, err := c.EnqueueWorkflow(ctx, []worqr.Step{
		{Name: "first", Queue: "q"},
		{Name: "second", Queue: "q", After: []string{"first"}},
	}, worqr.WorkflowOptions{ID: "doomed"})
	require.NoError(t, err)

	r := b.ok("workflow", "cancel", "doomed")
	assert.Equal(t, "cancelled workflow doomed\n", r.stdout)
	info, err := c.Workflow(ctx, "doomed")
	require.NoError(t, err)
	assert.Equal(t, worqr.WorkflowCancelled, info.State)
	for _, st := range info.Steps {
		assert.Equal(t, worqr.StepCancelled, st.State, st.Name)
	}
	n, err := c.QueueLen(ctx, "q")
	require.NoError(t, err)
	assert.Zero(t, n, "the queued step's task is cancelled")

	r = b.ok("workflow", "cancel", "doomed")
	assert.Empty(t, r.stdout)
	assert.Contains(t, r.stderr, "workflow doomed had ended: nothing to cancel")
	assert.Equal(t, map[string]any{"id": "doomed", "cancelled": false}, jsonOf[map[string]any](b, "workflow", "cancel", "doomed"))
	b.fails(1, "no workflow unknown", "workflow", "cancel", "unknown")
	b.fails(2, "too many arguments", "workflow", "cancel", "a", "b")
}

// A step with many parents lists the first 10 of them, and how many
// more, in the table and in --json.
func TestWorkflowCommandManyParents(t *testing.T) {
	t.Parallel()
	b := newBackend(t)
	c, ctx := b.client(), ctxT(t)
	steps := []worqr.Step{}
	var parents []string
	for i := range 12 {
		name := fmt.Sprintf("part-%02d", i)
		parents = append(parents, name)
		steps = append(steps, worqr.Step{Name: name, Queue: "q"})
	}
	steps = append(steps, worqr.Step{Name: "summary", Queue: "q", After: parents})
	_, err := c.EnqueueWorkflow(ctx, steps, worqr.WorkflowOptions{ID: "wide"})
	require.NoError(t, err)
	summary := row(t, b.ok("workflow", "wide").stdout, "summary")
	assert.Equal(t, strings.Join(parents[:10], ",")+" and 2 more", summary[len(summary)-1])
	j := jsonOf[workflowJSON](b, "workflow", "wide")
	assert.Equal(t, parents[:10], j.Steps[len(j.Steps)-1].Parents)
	assert.Equal(t, 2, j.Steps[len(j.Steps)-1].MoreParents)
}

// counter is a TCP proxy to addr that counts the bytes Redis answers.
type counter struct {
	ln     net.Listener
	mu     sync.Mutex
	ended  *sync.Cond // signalled as a connection starts or ends
	active int
	bytes  int64
	seen   map[string]bool // the clients' addresses accepted
}

func newCounter(t *testing.T, addr string) *counter {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	c := &counter{ln: ln, seen: map[string]bool{}}
	c.ended = sync.NewCond(&c.mu)
	var wg sync.WaitGroup
	t.Cleanup(func() { _ = ln.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", addr)
			if err != nil {
				_ = in.Close()
				continue
			}
			c.mu.Lock()
			c.active++
			c.seen[in.RemoteAddr().String()] = true
			c.ended.Broadcast()
			c.mu.Unlock()
			wg.Add(2)
			go func() { defer wg.Done(); _, _ = io.Copy(out, in); _ = out.Close() }()
			go func() {
				defer wg.Done()
				n, _ := io.Copy(in, out)
				_ = in.Close()
				c.mu.Lock()
				c.bytes += n
				c.active--
				c.ended.Broadcast()
				c.mu.Unlock()
			}()
		}
	}()
	return c
}

// total is the bytes answered once every connection made so far has
// ended: a connection of its own, made last, is accepted after them all.
func (c *counter) total(t *testing.T) int64 {
	t.Helper()
	last, err := net.Dial("tcp", c.ln.Addr().String())
	require.NoError(t, err)
	addr := last.LocalAddr().String()
	require.NoError(t, last.Close())
	c.mu.Lock()
	defer c.mu.Unlock()
	for !c.seen[addr] || c.active > 0 {
		c.ended.Wait()
	}
	return c.bytes
}

// "worqr workflow" reads the steps it shows, a page at a time: showing
// the first 5 steps of a workflow of 10,000 takes from Redis what it does
// for one of 10, however many steps are read in all.
func TestWorkflowCommandCostBounded(t *testing.T) {
	t.Parallel()
	b := newBackend(t)
	c, ctx := b.client(), ctxT(t)
	for id, n := range map[string]int{"small": 10, "large": 10_000} {
		steps := make([]worqr.Step, n)
		for i := range steps {
			steps[i] = worqr.Step{Name: fmt.Sprintf("step-%05d", i), Queue: "q"}
			if i > 0 {
				steps[i].After = []string{steps[i-1].Name}
			}
		}
		_, err := c.EnqueueWorkflow(ctx, steps, worqr.WorkflowOptions{ID: id})
		require.NoError(t, err)
	}
	p := newCounter(t, b.seeds[0])
	cost := func(args ...string) int64 {
		t.Helper()
		least := int64(math.MaxInt64)
		for range 3 { // the fewest: a command's own background calls vary
			before := p.total(t)
			// A plain address: on miniredis the binary then keeps to the
			// address given, which it would leave for the one miniredis
			// names in CLUSTER SLOTS.
			cmd := exec.Command(binary, append([]string{"--addr", p.ln.Addr().String(), "--prefix", b.prefix}, args...)...)
			cmd.Env = cleanEnv()
			r := execute(t, cmd, "")
			require.Zero(t, r.code, "%v: %s", args, r.stderr)
			least = min(least, p.total(t)-before)
		}
		return least
	}
	small, large := cost("workflow", "small", "--limit", "5"), cost("workflow", "large", "--limit", "5")
	t.Logf("5 steps of 10: %d bytes from Redis; of 10,000: %d", small, large)
	assert.InDelta(t, small, large, 512, "the first 5 steps")
	mid := cost("workflow", "large", "--offset", "5000", "--limit", "5")
	assert.InDelta(t, small, mid, 512, "5 steps from the middle")
	all := cost("workflow", "large", "--limit", "2500", "--json")
	assert.Greater(t, all, 50*small, "2,500 steps, read in pages")
	j := jsonOf[workflowJSON](b, "workflow", "large", "--offset", "999", "--limit", "1002")
	require.Len(t, j.Steps, 1002, "across pages")
	assert.Equal(t, "step-00999", j.Steps[0].Name)
	assert.Equal(t, "step-02000", j.Steps[1001].Name)
	assert.Equal(t, 10_000, j.Total)
}
