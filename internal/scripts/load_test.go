package scripts

import "testing"

// Load builds each set once per process: a later Load copies the Set,
// sharing its Scripts, so a process of many clients does not spend a
// set's megabyte-order memory on each. Each copy is its own: replacing
// one of its scripts leaves the other sets alone.
func TestLoadBuildsEachSetOnce(t *testing.T) {
	a := Load(false, true)
	if allocs := testing.AllocsPerRun(10, func() { Load(false, true) }); allocs > 1 {
		t.Errorf("a later Load made %v allocations, want the Set's copy only", allocs)
	}
	b := Load(false, true)
	if a == b || a.Keepalive != b.Keepalive {
		t.Fatalf("want two Sets sharing their Scripts: %p %p, %p %p", a, b, a.Keepalive, b.Keepalive)
	}
	b.Keepalive = nil
	if a.Keepalive == nil || Load(false, true).Keepalive == nil {
		t.Error("replacing a Set's script reached the other Sets")
	}
	if Load(true, true).Enqueue.SHA1() == a.Enqueue.SHA1() || Load(false, false).Enqueue.SHA1() == a.Enqueue.SHA1() {
		t.Error("the sets of other options share the script")
	}
}
