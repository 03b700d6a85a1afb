package store

import "sync"

// idHints guesses, per queue, the ids enqueue.lua would give a call's
// tasks, so that the call can send them as whole entries (see
// enqueue.lua): the first id is the clock (µs), or one past the last id
// this client sent or was told of, if that is later. A wrong guess costs
// the script the work the guess was to save, never a wrong id.
type idHints struct {
	mu   sync.Mutex
	next map[string]uint64 // queue -> one past the last id known
}

// reserve returns the first of n ids for a call on queue, at now (Unix
// µs), and counts them as taken.
func (h *idHints) reserve(queue string, now uint64, n int) uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	next, ok := h.next[queue]
	first := max(now, next)
	if ok || len(h.next) < maxCachedQueues {
		if h.next == nil {
			h.next = make(map[string]uint64)
		}
		h.next[queue] = first + uint64(n)
	}
	return first
}

// seen records that the ids of queue up to next (exclusive) are taken.
func (h *idHints) seen(queue string, next uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if cur, ok := h.next[queue]; ok && next > cur {
		h.next[queue] = next
	}
}
