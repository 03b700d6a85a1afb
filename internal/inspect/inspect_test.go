package inspect

import (
	"slices"
	"testing"

	"github.com/worqr/worqr/internal/store"
)

func keys(gs []store.GroupState) []string {
	var out []string
	for _, g := range gs {
		out = append(out, g.Key)
	}
	return out
}

// TopGroups lists each kind of group by its count, largest first and
// ties by key, cut to n; a group held on a dead task is listed there and
// not among those held back at a limit or rate.
func TestTopGroups(t *testing.T) {
	gs := []store.GroupState{
		{Key: "b", Waiting: 5, Ready: true},
		{Key: "a", Waiting: 5, Running: 1, Ready: true},
		{Key: "c", Waiting: 9, Running: 3},               // held back at its limit
		{Key: "d", Waiting: 2, DeadTask: "1f"},           // held on a dead task
		{Key: "e", Running: 2, Ready: true},              // nothing waiting
		{Key: "f", Waiting: 1, Ready: false, Running: 0}, // held back at its rate
	}
	top := TopGroups(gs, 3)
	for _, c := range []struct {
		name      string
		got, want []string
	}{
		{"waiting", keys(top.Waiting), []string{"c", "a", "b"}},
		{"running", keys(top.Running), []string{"c", "e", "a"}},
		{"held back", keys(top.HeldBack), []string{"c", "f"}},
		{"held on a dead task", keys(top.HeldOnDead), []string{"d"}},
	} {
		if len(c.got) != len(c.want) {
			t.Errorf("%s: %v, want %v", c.name, c.got, c.want)
			continue
		}
		for i := range c.got {
			if c.got[i] != c.want[i] {
				t.Errorf("%s: %v, want %v", c.name, c.got, c.want)
				break
			}
		}
	}
}

// Processes sort by their ids read as numbers, which is dequeue order:
// an id one hex digit longer comes after, whatever its first digit.
func TestSortProcs(t *testing.T) {
	ps := []store.Proc{{PID: "100"}, {PID: "ff"}, {PID: "a"}, {PID: "1f"}}
	SortProcs(ps)
	var ids []string
	for _, p := range ps {
		ids = append(ids, p.PID)
	}
	if want := []string{"a", "1f", "ff", "100"}; !slices.Equal(ids, want) {
		t.Fatalf("sorted %v, want %v", ids, want)
	}
}
