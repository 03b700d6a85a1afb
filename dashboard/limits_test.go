package dashboard

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// status fetches a page without the env's cookie jar, from any
// goroutine: its status, Retry-After, and body.
func (e *env) status(ctx context.Context, path string) (int, string, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.url(path), nil)
	if err != nil {
		return 0, "", "", err
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", "", err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return res.StatusCode, res.Header.Get("Retry-After"), string(b), err
}

// holdFirst makes the first n Redis commands sent wait until release is
// closed, each signalling entered as it starts to wait; the commands
// after them go through.
func (e *env) holdFirst(n int64) (entered <-chan struct{}, release func()) {
	in := make(chan struct{}, n)
	free := make(chan struct{})
	var seen atomic.Int64
	hold := func(ctx context.Context, _ rueidis.Completed) {
		if seen.Add(1) > n {
			return
		}
		in <- struct{}{}
		select {
		case <-free:
		case <-ctx.Done():
		}
	}
	e.rdb.hold.Store(&hold)
	var once sync.Once
	release = func() { once.Do(func() { close(free) }) }
	e.t.Cleanup(release) // before the server's Close, which waits for the held
	return in, release
}

// MaxPageReads pages read Redis at once: with that many held in Redis,
// one more page, or an action, waits, then gets 503 with Retry-After and
// sends Redis nothing; static files are still served. When the held pages
// end, every slot is free again.
func TestPageReadsBoundedHostile(t *testing.T) {
	t.Parallel()
	const slots = 3
	e := newEnv(t, Options{MaxPageReads: slots})
	e.h.pageWait = 20 * time.Millisecond
	_, err := e.c.Enqueue(e.ctx(), "q", []byte("x"))
	require.NoError(t, err)
	tok := e.csrf()
	cookie := e.jarCookie(csrfCookie)

	entered, release := e.holdFirst(slots)
	codes := make(chan int, slots)
	for range slots {
		go func() {
			code, _, _, err := e.status(context.Background(), "/")
			if err != nil {
				code = -1
			}
			codes <- code
		}()
	}
	for range slots {
		<-entered // every slot held, each page inside Redis
	}

	before := e.rdb.n.Load()
	for _, path := range []string{"/", "/queue/q", "/workers", "/periodic", "/search?id=x", "/task/q/x", "/workflow/x"} {
		res := e.raw(path, nil)
		assert.Equal(t, http.StatusServiceUnavailable, res.code, path)
		assert.Equal(t, "1", res.header.Get("Retry-After"), path)
		assert.Contains(t, res.body, "too many pages being read", path)
	}
	res := e.raw("/action", pauseForm(tok, "q"), "Cookie", csrfCookie+"="+cookie)
	assert.Equal(t, http.StatusServiceUnavailable, res.code, "an action")
	assert.Equal(t, before, e.rdb.n.Load(), "a refused page read Redis")
	assert.Equal(t, http.StatusOK, e.raw("/static/app.js", nil).code, "static files take no slot")

	release()
	for range slots {
		assert.Equal(t, http.StatusOK, <-codes, "a held page")
	}
	assert.Zero(t, len(e.h.pages), "slots left taken")
	assert.Equal(t, http.StatusOK, e.raw("/", nil).code)
	assert.Equal(t, http.StatusSeeOther, e.raw("/action", pauseForm(tok, "q"), "Cookie", csrfCookie+"="+cookie).code)
	assert.True(t, e.paused("q"))

	// The defaults: zero is DefaultMaxPageReads, negative no bound.
	assert.Equal(t, DefaultMaxPageReads, cap(newEnv(t, Options{}).h.pages))
	assert.Nil(t, newEnv(t, Options{MaxPageReads: -1}).h.pages)
}

// A request waiting for a slot gets the first one freed; one whose client
// hangs up while it waits takes none.
func TestPageSlotWait(t *testing.T) {
	t.Parallel()
	s := newSlots(1)
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	release, ok := s.acquire(r, time.Hour)
	require.True(t, ok)
	got := make(chan func())
	go func() {
		next, ok := s.acquire(r, time.Hour)
		if !ok {
			next = nil
		}
		got <- next
	}()
	release()
	next := <-got
	require.NotNil(t, next, "the waiter got the freed slot")

	ctx, cancel := context.WithCancel(context.Background())
	gone := make(chan bool)
	go func() {
		_, ok := s.acquire(r.WithContext(ctx), time.Hour)
		gone <- ok
	}()
	cancel()
	assert.False(t, <-gone, "a request whose client left took a slot")
	next()
	assert.Zero(t, len(s))
}

// Live streams are bounded per client address and in all: past either, a
// new stream gets 503 with Retry-After; streams that end free their
// place. However many there are, one poll reads Redis for all (see
// TestPollerReadsOncePerInterval).
func TestStreamsBoundedHostile(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Options{MaxStreams: 3, MaxStreamsPerClient: 2, PollInterval: 20 * time.Millisecond})
	a, b := e.watch(), e.watch()
	res := e.raw("/events", nil)
	assert.Equal(t, http.StatusServiceUnavailable, res.code, "a third stream from one address")
	assert.Equal(t, "10", res.header.Get("Retry-After"))
	assert.Contains(t, res.body, "too many live streams")

	// From other addresses, up to the total.
	other := func(ctx context.Context, addr string) *httptest.ResponseRecorder {
		r := httptest.NewRequestWithContext(ctx, http.MethodGet, "http://127.0.0.1/events", nil)
		r.RemoteAddr = addr + ":40000"
		w := httptest.NewRecorder()
		e.h.ServeHTTP(w, r)
		return w
	}
	ctx, cancel := context.WithCancel(context.Background())
	third := make(chan struct{})
	go func() {
		defer close(third)
		other(ctx, "192.0.2.1")
	}()
	eventually(t, "the third stream", func() bool { all, _ := e.h.streams.count("192.0.2.1"); return all == 3 })
	w := other(context.Background(), "192.0.2.2")
	assert.Equal(t, http.StatusServiceUnavailable, w.Code, "a stream past the total")
	assert.Equal(t, "10", w.Header().Get("Retry-After"))

	cancel()
	<-third
	a.close()
	b.close()
	eventually(t, "the streams' places freed", func() bool {
		all, from := e.h.streams.count("127.0.0.1")
		return all == 0 && from == 0
	})
	e.h.streams.mu.Lock()
	assert.Empty(t, e.h.streams.clients, "addresses left counted")
	e.h.streams.mu.Unlock()
	c := e.watch()
	eventually(t, "an event", func() bool { return c.events.Load() > 0 })

	d := newEnv(t, Options{MaxStreams: -1, MaxStreamsPerClient: -1})
	assert.Equal(t, [2]int{-1, -1}, [2]int{d.h.streams.max, d.h.streams.perClient})
	d = newEnv(t, Options{})
	assert.Equal(t, [2]int{DefaultMaxStreams, DefaultMaxStreamsPerClient}, [2]int{d.h.streams.max, d.h.streams.perClient})
}

// MaxHeldBytes -1 alone turns off the per-address bound too; either may
// be set on its own.
func TestHeldBoundsFromOptions(t *testing.T) {
	for _, c := range []struct {
		all, per int64
		want     [2]int64
	}{
		{0, 0, [2]int64{DefaultMaxHeldBytes, DefaultMaxHeldBytesPerClient}},
		{-1, 0, [2]int64{-1, -1}},
		{-1, 1000, [2]int64{-1, 1000}},
		{5000, -1, [2]int64{5000, -1}},
	} {
		h := newHeld(c.all, c.per)
		assert.Equal(t, c.want, [2]int64{h.max, h.perClient}, "MaxHeldBytes %d, MaxHeldBytesPerClient %d", c.all, c.per)
	}
}

// Failures sent to a loopback name and to any other are counted apart,
// so one address has two counts: it may fail twice clientBurst at once,
// then two every clientEvery, and, past the global cap, two a
// suspectFor. Guessing as fast as it is let, from both, for an hour,
// it gets no more than that.
func TestOneAddressTwoNamesBounded(t *testing.T) {
	t.Parallel()
	var l limiter
	now := time.Now()
	wrong := func() bool { return false }
	keys := []string{
		clientOf(&http.Request{RemoteAddr: "192.0.2.1:1", Host: "localhost"}),
		clientOf(&http.Request{RemoteAddr: "192.0.2.1:1", Host: "rebind.example"}),
	}
	require.NotEqual(t, keys[0], keys[1])
	checked := 0
	const hour = time.Hour
	for at := time.Duration(0); at < hour; at += time.Second {
		for _, k := range keys {
			if _, wait := l.try(k, now.Add(at), wrong); wait == 0 {
				checked++
			}
		}
	}
	assert.LessOrEqual(t, checked, 2*(clientBurst+int(hour/clientEvery)))
	assert.Greater(t, checked, int(hour/clientEvery), "both counts are used (else this test shows nothing)")

	// Past the global cap, each of an address's two counts gets one check.
	l = limiter{}
	l.global = bucket{used: globalBurst, at: now}
	for i := range 10 {
		for _, name := range []string{"127.0.0.1", "rebind.example"} {
			r := &http.Request{RemoteAddr: fmt.Sprintf("198.51.100.%d:1", i), Host: name}
			for range 3 {
				l.try(clientOf(r), now, wrong)
			}
		}
	}
	assert.InDelta(t, globalBurst+20, l.global.used, 0.001, "two checks per address past the global cap")
}

// A page waits for room in held while it is full, and is let in once
// bytes are given back; a wait that finds no room in time fails.
func TestHeldWaitsForRoom(t *testing.T) {
	t.Parallel()
	h := &held{max: 10, perClient: -1}
	r := httptest.NewRequest(http.MethodGet, "http://127.0.0.1/", nil)
	require.True(t, h.take("a", 10))
	assert.False(t, h.take("a", 1), "past the bound")
	assert.False(t, h.wait(r, "a", time.Millisecond), "no room in time")
	got := make(chan bool)
	go func() { got <- h.wait(r, "a", time.Hour) }()
	for waiting := false; !waiting; runtime.Gosched() { // until it waits
		h.mu.Lock()
		waiting = h.room != nil
		h.mu.Unlock()
	}
	h.give("a", 4)
	assert.True(t, <-got, "room once bytes are given back")
	assert.True(t, h.take("a", 4))
	assert.False(t, h.take("a", 1))
	assert.Equal(t, int64(10), h.count())
	none := &held{max: -1, perClient: -1}
	assert.True(t, none.take("a", 1<<40), "no bound")
	assert.True(t, none.wait(r, "a", 0))

	// Per client: one address's bytes do not keep another's out.
	per := &held{max: 10, perClient: 4}
	require.True(t, per.take("a", 4))
	assert.False(t, per.take("a", 1), "past the address's bound")
	assert.False(t, per.wait(r, "a", time.Millisecond), "no room for the address")
	assert.True(t, per.wait(r, "b", 0), "room for another")
	assert.True(t, per.take("b", 4))
	per.give("a", 4)
	assert.True(t, per.take("a", 2), "the address's room back")
	assert.False(t, per.take("c", 5), "past the address's bound, with room in all")
	assert.Equal(t, map[string]int64{"a": 2, "b": 4}, per.clients)
}

// A page that panics after writing part of its answer gives those bytes
// back, and its slot, as net/http recovers the panic and serves on: else
// each such panic would shrink MaxHeldBytes for good.
func TestHeldGivenBackWhenPagePanics(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Options{})
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	func() {
		defer func() { assert.Equal(t, "boom", recover(), "the panic went on to net/http") }()
		e.h.withSlot(httptest.NewRecorder(), r, func(w http.ResponseWriter, _ *http.Request) {
			_, err := w.Write(make([]byte, 1000))
			require.NoError(t, err)
			panic("boom")
		})
	}()
	assert.Zero(t, e.h.held.count(), "bytes left held")
	e.h.held.mu.Lock()
	assert.Empty(t, e.h.held.clients, "addresses left counted")
	e.h.held.mu.Unlock()
	assert.Zero(t, len(e.h.pages), "slot left taken")
}

// bareWriter is a ResponseWriter as a middleware may wrap one: without
// Flush, and without Unwrap to reach the one it wraps.
type bareWriter struct{ w http.ResponseWriter }

func (b bareWriter) Header() http.Header         { return b.w.Header() }
func (b bareWriter) Write(p []byte) (int, error) { return b.w.Write(p) }
func (b bareWriter) WriteHeader(status int)      { b.w.WriteHeader(status) }

// Behind a ResponseWriter that can neither flush nor set a deadline, an
// answer of many parts is sent whole (without the deadline), not cut
// after its first part under a Content-Length that promises all of it.
func TestAnswerSentWholeThroughAWriterThatCannotFlush(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Options{})
	body := make([]byte, 3*sendPart+10)
	for i := range body {
		body[i] = byte('a' + i%26)
	}
	rec := httptest.NewRecorder()
	e.h.withSlot(bareWriter{rec}, httptest.NewRequest(http.MethodGet, "/", nil), func(w http.ResponseWriter, _ *http.Request) {
		_, err := w.Write(body)
		require.NoError(t, err)
	})
	assert.Equal(t, http.StatusOK, rec.Code)
	assert.Equal(t, fmt.Sprint(len(body)), rec.Header().Get("Content-Length"))
	assert.Equal(t, len(body), rec.Body.Len(), "bytes sent")
	assert.Zero(t, e.h.held.count(), "bytes left held")
}
