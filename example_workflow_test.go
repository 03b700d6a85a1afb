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
