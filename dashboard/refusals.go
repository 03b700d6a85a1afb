package dashboard

import (
	"sync"
	"time"
)

// refusalEvery is how often a kind of refused request is logged at most.
const refusalEvery = 10 * time.Second

// refusals throttles the log lines of refused requests: anyone who can
// reach the dashboard can send a flood of them, which would otherwise be
// a line each.
type refusals struct {
	mu    sync.Mutex
	kinds map[string]*refusalKind // by message, a constant
}

type refusalKind struct {
	logged  time.Time
	skipped int
}

// warnRefused logs msg as a WARN unless it was logged in the last
// refusalEvery; a line says how many were not logged since the last one.
func (h *handler) warnRefused(msg string, args ...any) {
	now := h.now()
	r := &h.refusals
	r.mu.Lock()
	if r.kinds == nil {
		r.kinds = make(map[string]*refusalKind)
	}
	k := r.kinds[msg]
	if k == nil {
		k = &refusalKind{}
		r.kinds[msg] = k
	}
	if !k.logged.IsZero() && now.Sub(k.logged) < refusalEvery {
		k.skipped++
		r.mu.Unlock()
		return
	}
	skipped := k.skipped
	k.logged, k.skipped = now, 0
	r.mu.Unlock()
	if skipped > 0 {
		args = append(args, "unlogged", skipped)
	}
	h.log.Warn(msg, args...)
}
