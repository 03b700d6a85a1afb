package dashboard

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/worqr/worqr"
)

// stalled is a ResponseWriter whose client takes nothing: its first
// Write signals writing and waits until free is closed, as a write to a
// client that reads nothing does once the socket's buffers are full.
type stalled struct {
	*httptest.ResponseRecorder
	writing chan struct{}
	free    chan struct{}
}

func newStalled() *stalled {
	return &stalled{ResponseRecorder: httptest.NewRecorder(), writing: make(chan struct{}), free: make(chan struct{})}
}

func (s *stalled) Write(b []byte) (int, error) {
	select {
	case <-s.writing:
	default:
		close(s.writing)
		<-s.free
	}
	return s.ResponseRecorder.Write(b)
}

// A client that reads nothing of its page's answer holds no page slot
// while the answer waits for it: the slot bounds the reads of Redis, and
// the page has read Redis by then. With one slot, a page that cannot be
// written does not keep the next page out, nor an action.
func TestSlowReaderHoldsNoSlotHostile(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Options{MaxPageReads: 1})
	_, err := e.c.Enqueue(e.ctx(), "q", []byte("x"))
	require.NoError(t, err)
	tok := e.csrf()
	cookie := e.jarCookie(csrfCookie)

	for _, path := range []string{"/", "/queue/q", "/workers"} {
		w := newStalled()
		served := make(chan struct{})
		go func() {
			defer close(served)
			e.h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "http://127.0.0.1"+path, nil))
		}()
		<-w.writing
		assert.Zero(t, len(e.h.pages), "%s: a slot held while its answer waits for the client", path)
		assert.Equal(t, http.StatusOK, e.raw("/queue/q", nil).code, "%s: the next page", path)
		assert.Equal(t, http.StatusSeeOther, e.raw("/action", pauseForm(tok, "q"), "Cookie", csrfCookie+"="+cookie).code, "%s: an action", path)
		close(w.free)
		<-served
		assert.Equal(t, http.StatusOK, w.Code, path)
		assert.Contains(t, w.Body.String(), "</html>", "%s: the whole page, once the client reads", path)
	}
}

// blockedBody is a request body that sends its first bytes, then
// nothing until free is closed: a client that sends its form slowly.
type blockedBody struct {
	first   io.Reader
	reading chan struct{}
	free    chan struct{}
}

func (b *blockedBody) Read(p []byte) (int, error) {
	if n, err := b.first.Read(p); n > 0 || err != io.EOF {
		return n, err
	}
	select {
	case <-b.reading:
	default:
		close(b.reading)
	}
	<-b.free
	return 0, io.EOF
}

func (*blockedBody) Close() error { return nil }

// A client that sends an action's form slowly holds no page slot while
// it does: the form is read before the slot is taken.
func TestSlowFormHoldsNoSlotHostile(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Options{MaxPageReads: 1})
	_, err := e.c.Enqueue(e.ctx(), "q", []byte("x"))
	require.NoError(t, err)
	tok := e.csrf()
	cookie := e.jarCookie(csrfCookie)

	body := &blockedBody{first: strings.NewReader(pauseForm(tok, "q").Encode() + "&x="), reading: make(chan struct{}), free: make(chan struct{})}
	r := httptest.NewRequest(http.MethodPost, "http://127.0.0.1/action", body)
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	r.Header.Set("Cookie", csrfCookie+"="+cookie)
	w := httptest.NewRecorder()
	served := make(chan struct{})
	go func() {
		defer close(served)
		e.h.ServeHTTP(w, r)
	}()
	<-body.reading
	assert.Zero(t, len(e.h.pages), "a slot held while the form arrives")
	assert.Equal(t, http.StatusOK, e.raw("/queue/q", nil).code, "the next page")
	close(body.free)
	<-served
	assert.Equal(t, http.StatusSeeOther, w.Code, "the slow action, once sent")
	assert.True(t, e.paused("q"))
}

// Offsets past any list, negative or past int64, show a page (empty
// lists), never a Redis error, and the links of that page stay in range.
func TestAbsurdOffsetsHostile(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Options{})
	_, err := e.c.Enqueue(e.ctx(), "q", []byte("x"))
	require.NoError(t, err)
	for _, v := range []string{"9223372036854775807", "9223372036854775800", "4294967296", "-9223372036854775808", "1e30", "99999999999999999999"} {
		for _, k := range []string{"wo", "lo", "do", "fo"} {
			code, body := e.get("/queue/q?" + k + "=" + v)
			assert.Equal(t, http.StatusOK, code, "%s=%s: %s", k, v, body)
			assert.NotContains(t, body, "=-", "%s=%s: a negative offset linked", k, v)
		}
		code, _ := e.get("/queue/q?kind=k&only=retries&wo=" + v + "&lo=" + v + "&do=" + v)
		assert.Equal(t, http.StatusOK, code, "filtered, %s", v)
	}
}

// A queue page's read of its groups (a script over up to 2,000 groups)
// shares the lookups' budget of Redis time: while it is spent, the page
// shows everything else and says the groups were not read, with their
// forms still there; each read of them is charged to it.
func TestGroupsReadBudgetedHostile(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Options{})
	e.frozen()
	_, err := e.c.Enqueue(e.ctx(), "q", []byte("x"), worqr.Group("tenant-<7>"))
	require.NoError(t, err)
	e.h.lookups.mu.Lock()
	e.h.lookups.at, e.h.lookups.avail = e.h.now(), lookupMinCost // one read left
	e.h.lookups.mu.Unlock()

	code, body := e.get("/queue/q")
	require.Equal(t, http.StatusOK, code)
	assert.Contains(t, sectionOf(body, `id="groups"`), "tenant-&lt;7&gt;", "read within the budget")
	e.h.lookups.mu.Lock()
	left := e.h.lookups.avail
	e.h.lookups.mu.Unlock()
	assert.LessOrEqual(t, left, time.Duration(0), "the read charged")

	for range 3 {
		code, body = e.get("/queue/q")
		require.Equal(t, http.StatusOK, code)
		assert.False(t, strings.Contains(body, `id="groups"`), "read past the budget")
		assert.True(t, strings.Contains(body, `id="groups-unread"`), "says so")
		assert.True(t, strings.Contains(body, `id="group-limit"`), "the forms are still there")
		assert.True(t, strings.Contains(body, `id="waiting"`), "the rest of the page")
	}
}

// A task's page reached from a workflow's (wf) checks the task against
// one page of the workflow's steps, the one the link says (at), never the
// whole workflow: for 10,000 steps it costs Redis what it does for 10,
// with the task found or not.
func TestTaskPageOfStepCostBounded(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Options{})
	e.frozen()
	fanIn(t, e, "small", 10)
	fanIn(t, e, "large", 10_000)
	e.get("/task/none/x?wf=small") // the scripts' first calls load them
	cost := func(path string) (cmds, bytes int64) {
		t.Helper()
		cmds, bytes = math.MaxInt64, math.MaxInt64
		for range 3 { // the fewest: the client's own background calls share the counter
			n0, b0 := e.rdb.n.Load(), e.rdb.bytes.Load()
			code, _ := e.get(path)
			require.Equal(t, http.StatusNotFound, code, path)
			cmds, bytes = min(cmds, e.rdb.n.Load()-n0), min(bytes, e.rdb.bytes.Load()-b0)
		}
		return cmds, bytes
	}
	for _, at := range []string{"", "&at=5", "&at=9999", "&at=-1", "&at=99999999999999999999"} {
		smallN, smallB := cost("/task/none/x?wf=small" + at)
		largeN, largeB := cost("/task/none/x?wf=large" + at)
		t.Logf("at %q: %d commands, %d bytes; large: %d commands, %d bytes", at, smallN, smallB, largeN, largeB)
		assert.Equal(t, smallN, largeN, "commands, at %q", at)
		assert.Less(t, largeB, int64(64<<10), "bytes read, at %q", at)
	}
}

// stuckStream is a live stream's client that takes its first lines,
// then nothing: a write after them waits until the write deadline set
// through http.ResponseController, as a socket's write does.
type stuckStream struct {
	*httptest.ResponseRecorder
	mu       sync.Mutex
	deadline time.Time
	writes   int
	stuck    chan struct{}
}

func (s *stuckStream) SetWriteDeadline(t time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.deadline = t
	return nil
}

func (s *stuckStream) Write(b []byte) (int, error) {
	s.mu.Lock()
	s.writes++
	first, deadline := s.writes == 1, s.deadline
	s.mu.Unlock()
	if first {
		return s.ResponseRecorder.Write(b)
	}
	select {
	case <-s.stuck:
	default:
		close(s.stuck)
	}
	if deadline.IsZero() {
		select {} // no deadline: a socket's write waits for ever
	}
	time.Sleep(time.Until(deadline))
	return 0, os.ErrDeadlineExceeded
}

// A live stream whose client stops reading ends once a write has waited
// writeWait, and its place among MaxStreamsPerClient is freed: it does
// not hold the count, nor keep the poll running, for ever.
func TestStuckStreamEndsHostile(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Options{PollInterval: 10 * time.Millisecond, MaxStreamsPerClient: 1})
	e.h.writeWait = 50 * time.Millisecond
	_, err := e.c.Enqueue(e.ctx(), "q", []byte("x"))
	require.NoError(t, err)
	w := &stuckStream{ResponseRecorder: httptest.NewRecorder(), stuck: make(chan struct{})}
	served := make(chan struct{})
	go func() {
		defer close(served)
		e.h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "http://127.0.0.1/events", nil))
	}()
	<-w.stuck
	select {
	case <-served:
	case <-time.After(10 * time.Second):
		t.Fatal("a stream whose client reads nothing still open")
	}
	all, _ := e.h.streams.count("192.0.2.1")
	assert.Zero(t, all, "its place held")
}

// Answers kept for clients that read nothing are bounded in bytes, from
// all clients together: with room for two task pages (each showing a
// preview of a 1 MB result), two stalled clients hold what there is, a
// third page waits, then gets 503 with Retry-After, and holds nothing;
// once a client reads, the next page is served.
func TestHeldAnswersBoundedHostile(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Options{})
	e.h.pageWait = 20 * time.Millisecond
	ctx := e.ctx()
	w, err := e.c.NewWorker(ctx, worqr.WorkerOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = w.Close(e.ctx()) })
	require.NoError(t, w.StartWork(ctx, "q", worqr.Events{}))
	id, err := e.c.Enqueue(ctx, "q", []byte("x"), worqr.Retain(time.Hour))
	require.NoError(t, err)
	p, err := w.Dequeue(ctx, "q")
	require.NoError(t, err)
	p.SetResult([]byte(strings.Repeat("<", 1<<20)))
	require.NoError(t, p.Finish(ctx))

	path := "/task/q/" + id
	page := e.raw(path, nil)
	require.Equal(t, http.StatusOK, page.code)
	size := int64(len(page.body))
	assert.Less(t, size, int64(1<<20)/2, "the result is shown in part")
	// The page's handler gives its bytes back once its client has them.
	heldUntil(t, &e.h.held, 10*time.Second, "the page read", func(n int64) bool { return n == 0 })
	e.h.held.mu.Lock()
	e.h.held.max = 2*size + size/2
	e.h.held.mu.Unlock()

	var stalls []*stalled
	var served sync.WaitGroup
	for range 2 {
		s := newStalled()
		stalls = append(stalls, s)
		served.Add(1)
		go func() {
			defer served.Done()
			e.h.ServeHTTP(s, httptest.NewRequest(http.MethodGet, "http://127.0.0.1"+path, nil))
		}()
		<-s.writing
	}
	assert.Greater(t, e.h.held.count(), size+size/2, "two answers held")

	res := e.raw(path, nil)
	assert.Equal(t, http.StatusServiceUnavailable, res.code, "a third answer held")
	assert.Equal(t, "1", res.header.Get("Retry-After"))
	assert.True(t, strings.Contains(res.body, "too many answers waiting"), "the 503 says why")
	assert.LessOrEqual(t, e.h.held.count(), e.h.held.max)

	close(stalls[0].free)
	// Its handler gives its bytes back once it has written them, after
	// its client read: a page asked before that would still find no room.
	heldUntil(t, &e.h.held, 10*time.Second, "the first held answer given back", func(n int64) bool { return n < size+size/2 })
	assert.Equal(t, http.StatusOK, e.raw(path, nil).code, "a page once a client has read")
	close(stalls[1].free)
	served.Wait()
	for _, s := range stalls {
		assert.Equal(t, http.StatusOK, s.Code)
		assert.Contains(t, s.Body.String(), "</html>", "the whole page, once the client reads")
	}
	// The last page's client has its bytes when raw returns; its handler
	// gives them back after, as the first page's did.
	heldUntil(t, &e.h.held, 10*time.Second, "bytes given back", func(n int64) bool { return n == 0 })
}

// A JSON result of nested brackets, 20 KB that indented would make 200 MB,
// is shown as it is: the page stays some KiB, however deep the nesting.
// Shallow JSON is still indented.
func TestDeepJSONShownAsItIsHostile(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Options{})
	ctx := e.ctx()
	w, err := e.c.NewWorker(ctx, worqr.WorkerOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = w.Close(e.ctx()) })
	require.NoError(t, w.StartWork(ctx, "q", worqr.Events{}))
	deep := strings.Repeat("[", 9999) + strings.Repeat("]", 9999)
	ids := map[string]string{}
	for _, result := range []string{deep, `{"a":[1,{"b":2}]}`} {
		id, err := e.c.Enqueue(ctx, "q", []byte("x"), worqr.Retain(time.Hour))
		require.NoError(t, err)
		p, err := w.Dequeue(ctx, "q")
		require.NoError(t, err)
		p.SetResult([]byte(result))
		require.NoError(t, p.Finish(ctx))
		ids[result] = id
	}

	res := e.raw("/task/q/"+ids[deep], nil)
	require.Equal(t, http.StatusOK, res.code)
	assert.Less(t, len(res.body), 64<<10, "the page of a deep JSON result")
	assert.True(t, strings.Contains(res.body, deep), "shown as it is")
	res = e.raw("/task/q/"+ids[`{"a":[1,{"b":2}]}`], nil)
	require.Equal(t, http.StatusOK, res.code)
	assert.Contains(t, res.body, "\n      &#34;b&#34;: 2\n", "shallow JSON indented")
}

// indentedSize is never less than what json.Indent makes.
func TestIndentedSizeBounds(t *testing.T) {
	t.Parallel()
	for _, s := range []string{`[]`, `{}`, `[[[]]]`, `{"a":{"b":[1,2,{"c":"d,[{"}]}}`, `[ 1 , 2 , [ 3 ] ]`, `{"a\"[":"\\",  "b": [{}, []]}`, strings.Repeat("[", 50) + strings.Repeat("]", 50)} {
		var buf bytes.Buffer
		require.NoError(t, json.Indent(&buf, []byte(s), "", "  "), s)
		assert.GreaterOrEqual(t, indentedSize(s), buf.Len(), s)
	}
}

// finished enqueues a task with Retain on queue and finishes it with
// result, and returns its id.
func finished(t *testing.T, e *env, queue string, result []byte) string {
	t.Helper()
	ctx := e.ctx()
	w, err := e.c.NewWorker(ctx, worqr.WorkerOptions{})
	require.NoError(t, err)
	defer func() { _ = w.Close(e.ctx()) }()
	require.NoError(t, w.StartWork(ctx, queue, worqr.Events{}))
	id, err := e.c.Enqueue(ctx, queue, []byte("x"), worqr.Retain(time.Hour))
	require.NoError(t, err)
	p, err := w.Dequeue(ctx, queue)
	require.NoError(t, err)
	p.SetResult(result)
	require.NoError(t, p.Finish(ctx))
	return id
}

// tightListener gives each connection it accepts a small send buffer, so
// that an answer of some KiB fills it when its client reads nothing, and
// closes writing at the first write on any of them.
type tightListener struct {
	net.Listener
	once    sync.Once
	writing chan struct{}
}

func (l *tightListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetWriteBuffer(4 << 10)
	}
	return &signalConn{Conn: c, l: l}, nil
}

type signalConn struct {
	net.Conn
	l *tightListener
}

func (c *signalConn) Write(b []byte) (int, error) {
	c.l.once.Do(func() { close(c.l.writing) })
	return c.Conn.Write(b)
}

// serveTight serves h on a tightListener.
func serveTight(t *testing.T, h http.Handler) (*httptest.Server, *tightListener) {
	t.Helper()
	srv := httptest.NewUnstartedServer(h)
	l := &tightListener{Listener: srv.Listener, writing: make(chan struct{})}
	srv.Listener = l
	srv.Start()
	t.Cleanup(srv.Close)
	return srv, l
}

// dialTight connects to srv with a small receive buffer.
func dialTight(t *testing.T, srv *httptest.Server) *net.TCPConn {
	t.Helper()
	c, err := net.Dial("tcp", srv.Listener.Addr().String())
	require.NoError(t, err)
	tc := c.(*net.TCPConn)
	require.NoError(t, tc.SetReadBuffer(4<<10))
	t.Cleanup(func() { _ = tc.Close() })
	return tc
}

// heldUntil waits until the bytes held satisfy ok, woken by each give,
// and fails the test if they do not within d.
func heldUntil(t *testing.T, h *held, d time.Duration, what string, ok func(int64) bool) {
	t.Helper()
	timeout := time.After(d)
	for {
		h.mu.Lock()
		n := h.n
		if h.room == nil {
			h.room = make(chan struct{})
		}
		room := h.room
		h.mu.Unlock()
		if ok(n) {
			return
		}
		select {
		case <-room:
		case <-timeout:
			t.Fatalf("%s: %d bytes still held after %v", what, n, d)
		}
	}
}

// A client that reads nothing of a large answer holds its bytes for at
// most WriteWait: the write it does not take fails, its connection is
// dropped, and the bytes are given back; the client has the start of the
// answer, cut short of its Content-Length.
func TestUnreadAnswerGivenBackHostile(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Options{WriteWait: 100 * time.Millisecond})
	id := finished(t, e, "q", bytes.Repeat([]byte("<"), 1<<20))
	srv, l := serveTight(t, e.h)
	c := dialTight(t, srv)
	_, err := io.WriteString(c, "GET /task/q/"+id+" HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
	require.NoError(t, err)

	<-l.writing
	assert.Positive(t, e.h.held.count(), "the answer held while it is written")
	heldUntil(t, &e.h.held, 10*time.Second, "a client that reads nothing", func(n int64) bool { return n == 0 })

	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	require.NoError(t, err)
	assert.Equal(t, http.StatusOK, res.StatusCode)
	assert.Greater(t, res.ContentLength, int64(256<<10), "a large answer")
	got, err := io.Copy(io.Discard, res.Body)
	assert.Error(t, err, "the answer cut short")
	assert.Less(t, got, res.ContentLength)
}

// A task's page reads of its result only what it shows: for a 10 MB
// result, Redis sends the page its first taskPreview bytes and little
// more, and the page says how many more there are; a search by id that
// finds the task by its outcome reads none of it.
func TestTaskPageOfResultCostBounded(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Options{})
	e.frozen()
	const size = 10 << 20
	id := finished(t, e, "q", bytes.Repeat([]byte("r"), size))
	for _, path := range []string{"/task/q/" + id, "/search?id=" + id} {
		n0, b0 := e.rdb.n.Load(), e.rdb.bytes.Load()
		res := e.raw(path, nil)
		n, b := e.rdb.n.Load()-n0, e.rdb.bytes.Load()-b0
		t.Logf("%s: %d commands, %d bytes", path, n, b)
		if strings.HasPrefix(path, "/search") {
			assert.Equal(t, http.StatusSeeOther, res.code, path)
			assert.Less(t, b, int64(16<<10), "bytes read, %s", path)
			continue
		}
		require.Equal(t, http.StatusOK, res.code, path)
		assert.Less(t, b, int64(taskPreview+16<<10), "bytes read, %s", path)
		assert.Contains(t, sectionOf(res.body, `id="result"`), "…and "+strconv.Itoa(size-taskPreview)+" more bytes ("+strconv.Itoa(size)+" in all)")
	}
}

// One client address cannot take the whole of MaxHeldBytes: past
// MaxHeldBytesPerClient its next page gets 503 with Retry-After, while
// another address's page is served from the room left.
func TestHeldAnswersPerClientHostile(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Options{})
	e.frozen()
	e.h.pageWait = 20 * time.Millisecond
	id := finished(t, e, "q", bytes.Repeat([]byte("<"), 1<<20))
	path := "/task/q/" + id
	page := e.raw(path, nil)
	require.Equal(t, http.StatusOK, page.code)
	size := int64(len(page.body))
	heldUntil(t, &e.h.held, 10*time.Second, "the page read", func(n int64) bool { return n == 0 })
	e.h.held.mu.Lock()
	e.h.held.max, e.h.held.perClient = 10*size, 2*size+size/2
	e.h.held.mu.Unlock()

	var stalls []*stalled
	var served sync.WaitGroup
	for range 2 {
		s := newStalled()
		stalls = append(stalls, s)
		served.Add(1)
		go func() {
			defer served.Done()
			e.h.ServeHTTP(s, httptest.NewRequest(http.MethodGet, "http://127.0.0.1"+path, nil)) // from 192.0.2.1
		}()
		<-s.writing
	}
	from := func(addr string) *httptest.ResponseRecorder {
		w := httptest.NewRecorder()
		r := httptest.NewRequest(http.MethodGet, "http://127.0.0.1"+path, nil)
		r.RemoteAddr = addr
		e.h.ServeHTTP(w, r)
		return w
	}
	res := from("192.0.2.1:4444")
	assert.Equal(t, http.StatusServiceUnavailable, res.Code, "a third answer held for one address")
	assert.Equal(t, "1", res.Header().Get("Retry-After"))
	assert.Equal(t, http.StatusOK, from("198.51.100.7:4444").Code, "another address")
	for _, s := range stalls {
		close(s.free)
	}
	served.Wait()
	assert.Equal(t, http.StatusOK, from("192.0.2.1:4444").Code, "the address, once its client has read")
	assert.Zero(t, e.h.held.count(), "bytes given back")
}

// A client that hangs up in the middle of a large answer frees its bytes
// at once, not after WriteWait: the write fails, and the rest is given
// back.
func TestHungUpAnswerGivenBackHostile(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Options{WriteWait: time.Hour})
	id := finished(t, e, "q", bytes.Repeat([]byte("<"), 1<<20))
	srv, l := serveTight(t, e.h)
	c := dialTight(t, srv)
	_, err := io.WriteString(c, "GET /task/q/"+id+" HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
	require.NoError(t, err)
	<-l.writing
	_, err = io.ReadFull(c, make([]byte, 1024))
	require.NoError(t, err)
	assert.Positive(t, e.h.held.count(), "the answer held while it is written")
	require.NoError(t, c.SetLinger(0)) // a reset: the server's next write fails
	require.NoError(t, c.Close())
	heldUntil(t, &e.h.held, 10*time.Second, "a client that hung up", func(n int64) bool { return n == 0 })
}
