// Package members is the set of workers a client-wide loop serves.
package members

import "sync"

// Set is the set of workers that a client-wide loop serves: a beat
// (internal/beat) or a reclaimer (internal/reclaim), one of each per TTL and
// RenewInterval. Its owner adds and removes members while it
// holds the client's lock for such loops, so that a loop found in the
// client's map is never one whose last member has left.
type Set[W comparable] struct {
	mu  sync.Mutex // guards set
	set map[W]struct{}
}

// Add puts w in.
func (m *Set[W]) Add(w W) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.set == nil {
		m.set = make(map[W]struct{})
	}
	m.set[w] = struct{}{}
}

// Remove takes w out and reports whether it was the last.
func (m *Set[W]) Remove(w W) (last bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.set, w)
	return len(m.set) == 0
}

// List is a copy of the members.
func (m *Set[W]) List() []W {
	m.mu.Lock()
	defer m.mu.Unlock()
	ws := make([]W, 0, len(m.set))
	for w := range m.set {
		ws = append(ws, w)
	}
	return ws
}

// One is any one of the members (the zero W if none).
func (m *Set[W]) One() W {
	m.mu.Lock()
	defer m.mu.Unlock()
	for w := range m.set {
		return w
	}
	var none W
	return none
}

// Len is how many members there are.
func (m *Set[W]) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.set)
}
