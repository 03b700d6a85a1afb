package worqr_test

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/worqr/worqr"
)

// A fan-out and a fan-in: two words are counted in parallel once the
// text is fetched, and the total waits for both, reading their results.
func ExampleClient_EnqueueWorkflow() {
	client, stop := embedded()
	defer stop()
	ctx := context.Background()
	worker, _ := client.NewWorker(ctx, worqr.WorkerOptions{})

	err := worker.Handle(ctx, "words", func(ctx context.Context, p *worqr.Process) error {
		parents, err := p.ParentResults(ctx)
		if err != nil {
			return err
		}
		_, step := p.Workflow()
		switch step {
		case "fetch":
			p.SetResult([]byte("to be or not to be"))
		case "total":
			var counts []string
			for name, n := range parents {
				counts = append(counts, name+"="+string(n))
			}
			sort.Strings(counts)
			p.SetResult([]byte(strings.Join(counts, " ")))
		default: // count-<word>
			word := strings.TrimPrefix(step, "count-")
			p.SetResult(fmt.Appendf(nil, "%d", strings.Count(string(parents["fetch"]), word)))
		}
		return nil
	}, worqr.HandleOptions{Concurrency: 4})
	if err != nil {
		panic(err)
	}
	id, err := client.EnqueueWorkflow(ctx, []worqr.Step{
		{Name: "fetch", Queue: "words"},
		{Name: "count-be", Queue: "words", After: []string{"fetch"}},
		{Name: "count-to", Queue: "words", After: []string{"fetch"}},
		{Name: "total", Queue: "words", After: []string{"count-be", "count-to"}},
	}, worqr.WorkflowOptions{})
	if err != nil {
		panic(err)
	}
	info, err := client.WaitWorkflow(ctx, id)
	if err != nil {
		panic(err)
	}
	fmt.Println(info.State)
	for _, st := range info.Steps {
		if st.Name == "total" {
			o, _ := client.TaskResult(ctx, st.Queue, st.TaskID)
			fmt.Println(string(o.Result))
		}
	}
	if err := worker.Shutdown(ctx); err != nil {
		panic(err)
	}
	// Output:
	// succeeded
	// count-be=2 count-to=2
}

// A page of a workflow's steps at a time, in dependency order: what a
// page of a large workflow costs does not grow with the workflow.
func ExampleClient_WorkflowSteps() {
	client, stop := embedded()
	defer stop()
	ctx := context.Background()
	steps := []worqr.Step{{Name: "extract", Queue: "etl"}}
	for _, name := range []string{"clean-a", "clean-b", "clean-c"} {
		steps = append(steps, worqr.Step{Name: name, Queue: "etl", After: []string{"extract"}})
	}
	steps = append(steps, worqr.Step{Name: "load", Queue: "etl", After: []string{"clean-a", "clean-b", "clean-c"}})
	id, err := client.EnqueueWorkflow(ctx, steps, worqr.WorkflowOptions{ID: "nightly"})
	if err != nil {
		fmt.Println(err)
		return
	}
	for from := 0; ; from += 2 {
		page, err := client.WorkflowSteps(ctx, id, from, 2)
		if err != nil {
			fmt.Println(err)
			return
		}
		if from == 0 {
			fmt.Printf("%s: %d steps, %d not ended\n", page.State, page.Total, page.Open)
		}
		for _, st := range page.Steps {
			fmt.Printf("%d %s %s after %v\n", from, st.Name, st.State, st.Parents)
		}
		if from+len(page.Steps) >= page.Total {
			break
		}
	}
	// Output:
	// running: 5 steps, 5 not ended
	// 0 extract queued after []
	// 0 clean-a waiting after [extract]
	// 2 clean-b waiting after [extract]
	// 2 clean-c waiting after [extract]
	// 4 load waiting after [clean-a clean-b clean-c]
}
