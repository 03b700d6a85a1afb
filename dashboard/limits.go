package dashboard

import (
	"cmp"
	"errors"
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
	// DefaultMaxHeldBytes is Options.MaxHeldBytes when it is zero: some
	// hundreds of pages (most are tens of KiB, a task's at most some
	// hundreds).
	DefaultMaxHeldBytes = 32 << 20
	// DefaultMaxHeldBytesPerClient is Options.MaxHeldBytesPerClient when
	// zero: a quarter of DefaultMaxHeldBytes, so that one address does
	// not keep every other out.
	DefaultMaxHeldBytesPerClient = DefaultMaxHeldBytes / 4

	// pageWait is how long a page waits for a slot before its 503.
	pageWait = 2 * time.Second
	// pageBusyWait and streamBusyWait are the Retry-After of a page, and
	// of a live stream, refused for want of a slot.
	pageBusyWait   = time.Second
	streamBusyWait = 10 * time.Second
	// defaultWriteWait is Options.WriteWait when zero: how long a write
	// may wait for a client that reads nothing before its connection is
	// dropped; far longer than a slow network takes over 64 KiB or an
	// event.
	defaultWriteWait = 30 * time.Second
	// sendPart is the bytes of a page's answer written at once, each
	// within writeWait: a client must take at least that many per
	// writeWait.
	sendPart = 64 << 10
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

// held bounds the bytes of answers kept in memory until their clients
// read them, from all clients together and from each client address: a
// semaphore by bytes.
type held struct {
	mu        sync.Mutex
	max       int64 // negative: no bound
	perClient int64 // negative: no bound
	n         int64
	clients   map[string]int64
	room      chan struct{} // closed, and replaced, when bytes are given back
}

// wait waits up to d, or until r ends, for the bounds to have room for
// client; ok is false if none came.
func (h *held) wait(r *http.Request, client string, d time.Duration) bool {
	var t *time.Timer
	for {
		h.mu.Lock()
		if (h.max < 0 || h.n < h.max) && (h.perClient < 0 || h.clients[client] < h.perClient) {
			h.mu.Unlock()
			return true
		}
		if h.room == nil {
			h.room = make(chan struct{})
		}
		room := h.room
		h.mu.Unlock()
		if t == nil {
			t = time.NewTimer(d)
			defer t.Stop()
		}
		select {
		case <-room:
		case <-t.C:
			return false
		case <-r.Context().Done():
			return false
		}
	}
}

// fits says whether n more bytes for client are within the bounds.
// Called with h.mu held.
func (h *held) fits(client string, n int64) bool {
	return (h.max < 0 || h.n+n <= h.max) && (h.perClient < 0 || h.clients[client]+n <= h.perClient)
}

// take counts n more bytes for client if they fit, without waiting.
func (h *held) take(client string, n int64) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.fits(client, n) {
		return false
	}
	h.n += n
	if h.perClient >= 0 {
		if h.clients == nil {
			h.clients = make(map[string]int64)
		}
		h.clients[client] += n
	}
	return true
}

// give ends the count of n bytes for client.
func (h *held) give(client string, n int64) {
	if n == 0 {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.n -= n
	if h.perClient >= 0 {
		if h.clients[client] -= n; h.clients[client] <= 0 {
			delete(h.clients, client)
		}
	}
	if h.room != nil {
		close(h.room)
		h.room = nil
	}
}

// count is the bytes held.
func (h *held) count() int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.n
}

// buffered is a ResponseWriter that keeps the answer until send: its
// headers are the real writer's, not sent before. Its body counts in
// held; over is set, and the body dropped, if it does not fit.
type buffered struct {
	w      http.ResponseWriter
	held   *held
	client string // its address, as held counts it
	status int
	body   []byte
	over   bool
}

func (b *buffered) Header() http.Header { return b.w.Header() }

func (b *buffered) WriteHeader(status int) {
	if b.status == 0 {
		b.status = status
	}
}

func (b *buffered) Write(p []byte) (int, error) {
	b.WriteHeader(http.StatusOK)
	if b.over {
		return 0, errHeldFull
	}
	if !b.held.take(b.client, int64(len(p))) {
		b.drop()
		b.over = true
		return 0, errHeldFull
	}
	b.body = append(b.body, p...)
	return len(p), nil
}

// drop gives back the bytes kept.
func (b *buffered) drop() {
	b.held.give(b.client, int64(len(b.body)))
	b.body = nil
}

// send writes the answer kept, sendPart bytes at a time, each part
// given its own time by limit and pushed to the client by flush, and then
// gives its bytes back: all at once, as the memory is one array. A write
// that fails (its time out, the client gone) ends it.
func (b *buffered) send(limit func(), flush func() error) {
	defer b.drop()
	b.w.Header().Set("Content-Length", strconv.Itoa(len(b.body)))
	b.w.WriteHeader(cmp.Or(b.status, http.StatusOK))
	for rest := b.body; len(rest) > 0; {
		n := min(len(rest), sendPart)
		limit()
		if _, err := b.w.Write(rest[:n]); err != nil {
			return
		}
		if flush() != nil {
			return
		}
		rest = rest[n:]
	}
}

var errHeldFull = errors.New("worqr dashboard: too many bytes held for clients")

// heldFull answers 503 with Retry-After for a page whose answer found no
// room in held.
func (h *handler) heldFull(w http.ResponseWriter, r *http.Request) {
	if r.Context().Err() != nil {
		return // no one to answer
	}
	secs := int64((pageBusyWait + time.Second - 1) / time.Second)
	w.Header().Set("Retry-After", strconv.FormatInt(secs, 10))
	h.warnRefused("worqr dashboard: page refused: too many answers held for clients", "remote", r.RemoteAddr, "path", r.URL.Path)
	h.fail(w, r, http.StatusServiceUnavailable, "too many answers waiting for clients to read them; try again in "+strconv.FormatInt(secs, 10)+" s")
}

// newHeld is the held-bytes budget the options ask for: a per-address
// bound left at its default follows the whole bound when that is off, so
// that MaxHeldBytes -1 alone means no bound at all.
func newHeld(all, perClient int64) held {
	perDefault := int64(DefaultMaxHeldBytesPerClient)
	if all < 0 {
		perDefault = -1
	}
	return held{max: heldLimit(all, DefaultMaxHeldBytes), perClient: heldLimit(perClient, perDefault)}
}

// heldLimit is a bound of held bytes: def for zero, none (-1) for
// negative.
func heldLimit(v, def int64) int64 {
	switch {
	case v == 0:
		return def
	case v < 0:
		return -1
	}
	return v
}
