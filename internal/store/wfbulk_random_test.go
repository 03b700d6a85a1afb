package store

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Random workflows, their steps ended in random batches (mostly first
// successes, so mostly recorded in bulk; now and then a death, a cancel or
// a step twice, which go one notice after another), end with the same keys
// as the same notices recorded one after another (behind a replay of an
// end recorded already, as TestWorkflowReleaseBulkScript does), and answer
// the same steps ready.
func TestWorkflowReleaseBulkRandomScript(t *testing.T) {
	t.Parallel()
	for seed := range uint64(40) {
		rng := rand.New(rand.NewPCG(seed, 7))
		n := 3 + rng.IntN(8)
		steps := []WorkflowStep{{Name: "p", Spec: "S-p"}}
		parents := make([][]string, n)
		kids := make([][]string, n)
		for j := range n {
			for i := range j {
				if rng.IntN(3) == 0 {
					parents[j] = append(parents[j], fmt.Sprint("s", i))
					kid := fmt.Sprint("s", j)
					if rng.IntN(5) == 0 {
						kid = "+" + kid
					}
					kids[i] = append(kids[i], kid)
				}
			}
		}
		for j := range n {
			if len(parents[j]) == 0 {
				parents[j] = []string{"p"}
				steps[0].Kids = append(steps[0].Kids, fmt.Sprint("s", j))
			}
		}
		for j := range n {
			name := fmt.Sprint("s", j)
			steps = append(steps, WorkflowStep{Name: name, Spec: "S-" + name, Parents: parents[j], Kids: kids[j], Place: j + 1})
		}
		bulk, single := newScriptEnv(t, "wf_release.lua"), newScriptEnv(t, "wf_release.lua")
		ids := map[*scriptEnv]string{bulk: bulk.workflow(), single: single.workflow()}
		for e, id := range ids {
			_, _, err := e.s.CreateWorkflow(e.ctx, id, "sum", time.Minute, steps)
			require.NoError(t, err)
		}
		pEnd := StepEnd{Step: "p", Task: "t-p", Status: "ok", Result: "P", At: 1}
		for e, id := range ids {
			_, err := e.s.ReleaseSteps(e.ctx, id, []StepEnd{pEnd})
			require.NoError(t, err)
		}
		at := int64(10)
		for round := 0; round < 50; round++ {
			got := bulk.dump()
			if st := got["wf.flow"].(hash)["state"]; st != "running" {
				break
			}
			var open []string
			for name, st := range got["wf.steps"].(hash) {
				if st == "r" || st == "q" {
					open = append(open, name)
				}
			}
			if len(open) == 0 {
				break
			}
			slices.Sort(open)
			rng.Shuffle(len(open), func(i, j int) { open[i], open[j] = open[j], open[i] })
			// Some of the ready ones marked queued first, in both.
			var queued []QueuedStep
			for _, s := range open {
				if rng.IntN(2) == 0 {
					queued = append(queued, QueuedStep{Name: s, TaskID: "t-" + s})
				}
			}
			for e, id := range ids {
				_, err := e.s.StepsEnqueued(e.ctx, id, queued)
				require.NoError(t, err)
			}
			var ends []StepEnd
			for _, s := range open[:1+rng.IntN(len(open))] {
				status := "ok"
				switch r := rng.IntN(20); {
				case r == 0:
					status = "dead"
				case r == 1:
					status = "cancelled"
				}
				at++
				ends = append(ends, StepEnd{Step: s, Task: "t-" + s, Status: status, Result: "R-" + s, At: at})
			}
			if rng.IntN(10) == 0 {
				at++
				e := ends[0]
				e.At = at
				ends = append(ends, e)
			}
			why := fmt.Sprintf("seed %d round %d: %v", seed, round, ends)
			a, err := bulk.s.ReleaseSteps(bulk.ctx, ids[bulk], ends)
			require.NoError(t, err, why)
			b, err := single.s.ReleaseSteps(single.ctx, ids[single], append([]StepEnd{pEnd}, ends...))
			require.NoError(t, err, why)
			x, y := single.dump(), bulk.dump()
			for _, st := range []keyState{x, y} {
				delete(st["wf.flow"].(hash), "created")
				delete(st["wf.flow"].(hash), "ended")
				// The order of a step's freed list is not compared.
				if fr, ok := st["wf.freed"].(hash); ok {
					for k, v := range fr {
						l := strings.Split(v, ",")
						slices.Sort(l)
						fr[k] = strings.Join(l, ",")
					}
				}
			}
			bulk.same(x, y, why)
			// The replay's answer adds p's freed steps still ready.
			for _, r := range a {
				require.Contains(t, b, r, why)
			}
			if t.Failed() {
				return
			}
		}
	}
}
