package store

import (
	"testing"

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
