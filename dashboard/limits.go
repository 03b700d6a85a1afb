package dashboard

import (
	"cmp"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// Each page costs tens to hundreds of Redis commands, more with more
// queues, one round trip after another: however many viewers there are,
// at most Options.MaxPageReads pages (and actions) read Redis at once,
// so that workers' commands are served between theirs. A request past
// them waits up to pageWait for a slot, and then gets 503.
const (
	// DefaultMaxPageReads is Options.MaxPageReads when it is zero: more
	// than one browser sends at once (six connections to a host over
	// HTTP/1.1, one of them each tab's live stream).
	DefaultMaxPageReads = 8
	// DefaultMaxStreams and DefaultMaxStreamsPerClient are
	// Options.MaxStreams and Options.MaxStreamsPerClient when zero: a
	// stream is one tab's live counts.
	DefaultMaxStreams          = 256
	DefaultMaxStreamsPerClient = 32

	// pageWait is how long a page waits for a slot before its 503.
	pageWait = 2 * time.Second
	// pageBusyWait and streamBusyWait are the Retry-After of a page, and
	// of a live stream, refused for want of a slot.
	pageBusyWait   = time.Second
	streamBusyWait = 10 * time.Second
	// streamWriteWait is how long a live stream's write may wait for a
	// client that reads nothing before the stream ends: far longer than
	// a slow network takes over an event.
	streamWriteWait = 30 * time.Second
)

// slots is a bound on the requests that read Redis at once: a semaphore,
// nil for none.
type slots chan struct{}

func newSlots(limit int) slots {
	if limit < 0 {
		return nil
	}
	return make(slots, limit)
}

// acquire takes a slot, waiting up to wait for one, or until the request
// ends; release gives it back, once. ok is false if none came.
func (s slots) acquire(r *http.Request, wait time.Duration) (release func(), ok bool) {
	if s == nil {
		return func() {}, true
	}
	select {
	case s <- struct{}{}:
		return func() { <-s }, true
	default:
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case s <- struct{}{}:
		return func() { <-s }, true
	case <-t.C:
	case <-r.Context().Done():
	}
	return nil, false
}

// pageSlot takes one of the page slots for r, or answers 503 with
// Retry-After and returns false.
func (h *handler) pageSlot(w http.ResponseWriter, r *http.Request) (release func(), ok bool) {
	release, ok = h.pages.acquire(r, h.pageWait)
	if ok {
		return release, true
	}
	if r.Context().Err() != nil {
		return nil, false // no one to answer
	}
	secs := int64((pageBusyWait + time.Second - 1) / time.Second)
	w.Header().Set("Retry-After", strconv.FormatInt(secs, 10))
	h.warnRefused("worqr dashboard: page refused: too many at once", "remote", r.RemoteAddr, "path", r.URL.Path)
	h.fail(w, r, http.StatusServiceUnavailable, "too many pages being read from Redis at once; try again in "+strconv.FormatInt(secs, 10)+" s")
	return nil, false
}

// streams counts the live streams open, in all and per client address.
type streams struct {
	mu        sync.Mutex
	max       int // negative: no bound
	perClient int // negative: no bound
	n         int
	clients   map[string]int
}

// open counts a new stream from client if the bounds allow it; done,
// to be called once, ends its count.
func (s *streams) open(client string) (done func(), ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.max >= 0 && s.n >= s.max || s.perClient >= 0 && s.clients[client] >= s.perClient {
		return nil, false
	}
	if s.clients == nil {
		s.clients = make(map[string]int)
	}
	s.n++
	s.clients[client]++
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.n--
		if s.clients[client]--; s.clients[client] <= 0 {
			delete(s.clients, client)
		}
	}, true
}

// count is how many streams are open, in all and from client.
func (s *streams) count(client string) (all, from int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n, s.clients[client]
}

// limitOf is an option's bound: def for zero, none (-1) for negative.
func limitOf(v, def int) int {
	switch {
	case v == 0:
		return def
	case v < 0:
		return -1
	}
	return v
}

// buffered is a ResponseWriter that keeps the answer until send: its
// headers are the real writer's, not sent before.
type buffered struct {
	w      http.ResponseWriter
	status int
	body   []byte
}

func (b *buffered) Header() http.Header { return b.w.Header() }

func (b *buffered) WriteHeader(status int) {
	if b.status == 0 {
		b.status = status
	}
}

func (b *buffered) Write(p []byte) (int, error) {
	b.WriteHeader(http.StatusOK)
	b.body = append(b.body, p...)
	return len(p), nil
}

// send writes the answer kept.
func (b *buffered) send() {
	b.w.WriteHeader(cmp.Or(b.status, http.StatusOK))
	_, _ = b.w.Write(b.body)
}
