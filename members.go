package worqr

import "sync"

// members is the set of workers that a client-wide loop serves: a beat
// (lease.go) or a reclaimer (reclaim.go), one of each per TTL and
// RenewInterval (groupKey). Its owner adds and removes members while it
// holds the client's lock for such loops, so that a loop found in the
// client's map is never one whose last member has left.
type members struct {
	mu  sync.Mutex // guards set
	set map[*Worker]struct{}
}

func (m *members) add(w *Worker) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.set == nil {
		m.set = make(map[*Worker]struct{})
	}
	m.set[w] = struct{}{}
}

// remove takes w out and reports whether it was the last.
func (m *members) remove(w *Worker) (last bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.set, w)
	return len(m.set) == 0
}

// list is a copy of the members.
func (m *members) list() []*Worker {
	m.mu.Lock()
	defer m.mu.Unlock()
	ws := make([]*Worker, 0, len(m.set))
	for w := range m.set {
		ws = append(ws, w)
	}
	return ws
}

// one is any one of the members (nil if none).
func (m *members) one() *Worker {
	m.mu.Lock()
	defer m.mu.Unlock()
	for w := range m.set {
		return w
	}
	return nil
}
