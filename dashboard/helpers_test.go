package dashboard

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"
	"github.com/worqr/worqr"
)

// counting is a rueidis client that counts the commands sent through it,
// and the bytes of the replies (see replyBytes).
type counting struct {
	rueidis.Client
	n     atomic.Int64
	bytes atomic.Int64
	// hold, if set, is called with each command before it is sent.
	hold atomic.Pointer[func(context.Context, rueidis.Completed)]
}

func (c *counting) held(ctx context.Context, cmds ...rueidis.Completed) {
	if hold := c.hold.Load(); hold != nil {
		for _, cmd := range cmds {
			(*hold)(ctx, cmd)
		}
	}
}

func (c *counting) Do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	c.n.Add(1)
	c.held(ctx, cmd)
	res := c.Client.Do(ctx, cmd)
	c.bytes.Add(replyBytes(res))
	return res
}

func (c *counting) DoMulti(ctx context.Context, cmds ...rueidis.Completed) []rueidis.RedisResult {
	c.n.Add(int64(len(cmds)))
	c.held(ctx, cmds...)
	results := c.Client.DoMulti(ctx, cmds...)
	for _, res := range results {
		c.bytes.Add(replyBytes(res))
	}
	return results
}

// replyBytes is the size of a reply: the bytes of its strings, and 8 for
// every other value.
func replyBytes(res rueidis.RedisResult) int64 {
	m, err := res.ToMessage()
	if err != nil {
		return 8
	}
	var size func(m rueidis.RedisMessage) int64
	size = func(m rueidis.RedisMessage) int64 {
		if vals, err := m.ToArray(); err == nil {
			var n int64
			for _, v := range vals {
				n += size(v)
			}
			return n
		}
		if s, err := m.ToString(); err == nil {
			return int64(len(s))
		}
		return 8
	}
	return size(m)
}

// env is a dashboard on a worqr client on miniredis, served by httptest.
type env struct {
	t      *testing.T
	c      *worqr.Client
	rdb    *counting
	m      *miniredis.Miniredis
	srv    *httptest.Server
	h      *handler
	http   *http.Client // with a cookie jar
	prefix string       // where the dashboard is mounted
}

func newEnv(t *testing.T, opts Options) *env {
	t.Helper()
	m := miniredis.NewMiniRedis()
	m.ClockTTL(true)
	require.NoError(t, m.Start())
	inner, err := rueidis.NewClient(rueidis.ClientOption{
		InitAddress: []string{m.Addr()}, DisableCache: true, AlwaysRESP2: true, ForceSingleClient: true,
	})
	require.NoError(t, err)
	rdb := &counting{Client: inner}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	c, err := worqr.New(worqr.Options{Redis: rdb, Logger: quiet})
	require.NoError(t, err)
	if opts.Logger == nil {
		opts.Logger = quiet
	}
	h, err := New(c, opts)
	require.NoError(t, err)
	mux := http.NewServeMux()
	mux.Handle("/ops/", http.StripPrefix("/ops", h))
	srv := httptest.NewServer(mux)
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	e := &env{t: t, c: c, rdb: rdb, m: m, srv: srv, h: h.(*handler), prefix: "/ops",
		http: &http.Client{Jar: jar, Timeout: 10 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
	t.Cleanup(func() {
		srv.Close()
		_ = c.Close(context.Background())
		inner.Close()
		m.Close()
	})
	return e
}

// ctx is a context for the test's calls, ended with it or after a minute:
// a browser test holds one across Chromium's start and every page it
// drives, which take more than ten seconds on a loaded machine.
func (e *env) ctx() context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	e.t.Cleanup(cancel)
	return ctx
}

// fewestReads runs do three times and returns the fewest commands sent to
// Redis during one run. The client sends commands of its own (a keep-alive,
// a clock reading) that may land in any one window; the fewest is what do
// itself costs.
func (e *env) fewestReads(do func()) int64 {
	fewest := int64(-1)
	for range 3 {
		before := e.rdb.n.Load()
		do()
		if n := e.rdb.n.Load() - before; fewest < 0 || n < fewest {
			fewest = n
		}
	}
	return fewest
}

// url is the address of a dashboard path.
func (e *env) url(path string) string { return e.srv.URL + e.prefix + path }

// get fetches a page and returns its status and body.
func (e *env) get(path string, header ...string) (int, string) {
	e.t.Helper()
	req, err := http.NewRequest(http.MethodGet, e.url(path), nil)
	require.NoError(e.t, err)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	res, err := e.http.Do(req)
	require.NoError(e.t, err)
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	require.NoError(e.t, err)
	return res.StatusCode, string(b)
}

// csrf loads the overview, for the session's CSRF cookie, and returns
// the token its forms carry.
func (e *env) csrf() string {
	e.t.Helper()
	_, body := e.get("/")
	m := csrfMeta.FindStringSubmatch(body)
	if m == nil {
		return ""
	}
	return m[1]
}

var csrfMeta = regexp.MustCompile(`<meta name="csrf-token" content="([0-9a-f]+)">`)

// post submits an action form and returns the status and Location.
func (e *env) post(path string, form url.Values, header ...string) (int, string) {
	e.t.Helper()
	req, err := http.NewRequest(http.MethodPost, e.url(path), strings.NewReader(form.Encode()))
	require.NoError(e.t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	res, err := e.http.Do(req)
	require.NoError(e.t, err)
	defer res.Body.Close()
	_, _ = io.Copy(io.Discard, res.Body)
	return res.StatusCode, res.Header.Get("Location")
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
