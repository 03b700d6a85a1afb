package store

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeState answers the calls of wf_state.lua from pages (one read's,
// by cursor), logging each query; change, if set, is called before each
// call and may edit the pages.
type fakeState struct {
	pages   map[string]statePart
	whole   statePart
	queries []stateQuery
	change  func(call int)
}

func (f *fakeState) read(q stateQuery) (statePart, bool, error) {
	f.queries = append(f.queries, q)
	if f.change != nil {
		f.change(len(f.queries))
	}
	if q.Size == 0 {
		return f.whole, true, nil
	}
	return f.pages[q.Cursor], true, nil
}

// page is a statePart of a running workflow, revived times, with steps
// named, each waiting, and next its next cursor.
func page(revived, next string, names ...string) statePart {
	p := statePart{WorkflowRecord: WorkflowRecord{State: "running", Created: 7}, Revived: revived, Next: next}
	for _, n := range names {
		p.Steps = append(p.Steps, StepRecord{Name: n, State: "w"})
	}
	return p
}

func names(r WorkflowRecord) []string {
	var out []string
	for _, st := range r.Steps {
		out = append(out, st.Name)
	}
	return out
}

// Pages that answer a step twice (HSCAN during a rehash, for a workflow
// kept with no order) read it once, as the first page that had it.
func TestReadStateKeepsEachStepOnce(t *testing.T) {
	f := &fakeState{pages: map[string]statePart{
		"0":  page("0", "c1", "a", "b"),
		"c1": page("0", "c2", "b", "c"),
		"c2": page("0", "", "a", "d"),
	}}
	r, ok, err := readState(f.read)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, []string{"a", "b", "c", "d"}, names(r))
	assert.Len(t, f.queries, 3, "one read in pages")
}

// A read that a revival goes between (the revivals counted differ) is
// made again; a workflow revived between the pages of every read is read
// whole in one call at the last of stateReads reads, which it answers.
func TestReadStateAgainAfterARevival(t *testing.T) {
	f := &fakeState{pages: map[string]statePart{
		"0":  page("0", "c1", "a"),
		"c1": page("0", "", "b"),
	}}
	revivals := 0
	f.change = func(call int) {
		if f.queries[call-1].Cursor == "c1" { // before each second page
			revivals++
			r := string(rune('0' + revivals))
			f.pages["c1"] = page(r, "", "b")
			f.pages["0"] = page(r, "c1", "a")
		}
	}
	f.whole = page("9", "", "a", "b")
	f.whole.Steps[0].State = "q"
	r, ok, err := readState(f.read)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, []stateQuery{
		{Cursor: "0", Size: statePage}, {Cursor: "c1", Size: statePage},
		{Cursor: "0", Size: statePage}, {Cursor: "c1", Size: statePage},
		{Cursor: "0"},
	}, f.queries, "two reads in pages, each moved, then one whole")
	assert.Equal(t, f.whole.WorkflowRecord, r)

	// A revival before the first read only: the second read answers.
	revivals = 0
	f.queries = nil
	f.change = func(call int) {
		if call == 2 {
			f.pages["0"] = page("1", "c1", "a")
			f.pages["c1"] = page("1", "", "b")
		}
	}
	f.pages["0"], f.pages["c1"] = page("0", "c1", "a"), page("0", "", "b")
	r, _, err = readState(f.read)
	require.NoError(t, err)
	assert.Len(t, f.queries, 4, "read again once")
	assert.Equal(t, []string{"a", "b"}, names(r))
}

// wf_state.lua with a size of 0 reads every step in one call (over the
// thousand its hash reads take a call), with the workflow's count of
// revivals: from the order kept at create, and, for a workflow with no
// order, from its steps' hash.
func TestWorkflowStateWholeScript(t *testing.T) {
	t.Parallel()
	e := newScriptEnv(t, "wf_state.lua")
	id := e.workflow()
	steps := []WorkflowStep{{Name: "a", Spec: "S-a"}}
	for i := range 1200 {
		steps = append(steps, WorkflowStep{Name: fmt.Sprintf("k%04d", i), Spec: "S", Parents: []string{"a"}, Place: i + 1})
	}
	for i := range steps[1:] {
		steps[0].Kids = append(steps[0].Kids, steps[i+1].Name)
	}
	_, _, err := e.s.CreateWorkflow(e.ctx, id, "sum", time.Minute, steps)
	require.NoError(t, err)
	e.seed(keyState{"wf.flow": hash{"revived": "3"}})
	before := e.dump()
	for _, order := range []bool{true, false} {
		if !order {
			require.NoError(t, e.rdb.Do(e.ctx, e.rdb.B().Del().Key(e.s.Keys().Workflow(id).Order).Build()).Error())
			delete(before, "wf.order")
		}
		p, ok, err := e.s.readStatePage(e.ctx, id, stateQuery{Cursor: "0"})
		require.NoError(t, err)
		require.True(t, ok)
		assert.Equal(t, "3", p.Revived)
		assert.Empty(t, p.Next, "the last page (order kept: %v)", order)
		assert.Len(t, p.Steps, 1201, "order kept: %v", order)
		e.expect(before)
	}
}
