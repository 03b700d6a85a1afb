package periodic

import (
	"context"
	"sync"
	"time"
)

// Key names a schedule on a worker: its queue and name.
type Key struct{ Queue, Name string }

// Set is a worker's running schedules, by queue and name. Once closed
// (the worker drains) it runs none: those running are stopped, and none
// starts.
type Set struct {
	mu     sync.Mutex // guards the fields below; taken under no other lock
	closed bool
	m      map[Key]*Periodic
}

// Has reports whether a schedule runs under key.
func (ps *Set) Has(key Key) bool {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	_, ok := ps.m[key]
	return ok
}

// Start starts p on life from its last tick, under key, unless another
// runs under it (ok false) or the set is closed (closed true).
func (ps *Set) Start(key Key, p *Periodic, life context.Context, last time.Time) (ok, closed bool) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if ps.closed {
		return false, true
	}
	if _, taken := ps.m[key]; taken {
		return false, false
	}
	if ps.m == nil {
		ps.m = make(map[Key]*Periodic)
	}
	p.Start(life, last)
	ps.m[key] = p
	return true, false
}

// Stop stops the schedule under key, waiting for it, and reports whether
// there was one.
func (ps *Set) Stop(key Key) bool {
	ps.mu.Lock()
	p, ok := ps.m[key]
	delete(ps.m, key)
	ps.mu.Unlock()
	if ok {
		p.Stop()
	}
	return ok
}

// Close stops every schedule and waits for them; none starts after.
func (ps *Set) Close() {
	ps.mu.Lock()
	ps.closed = true
	m := ps.m
	ps.m = nil
	ps.mu.Unlock()
	for _, p := range m {
		p.Stop()
	}
}
