package dashboard

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/worqr/worqr"
)

const testToken = "correct-horse-battery-staple"

// clock is a time the test moves.
type clock struct{ offset atomic.Int64 }

func (c *clock) now() time.Time          { return time.Now().Add(time.Duration(c.offset.Load())) }
func (c *clock) advance(d time.Duration) { c.offset.Add(int64(d)) }

func (e *env) clock() *clock {
	c := &clock{}
	e.h.now = c.now
	return c
}

// response is what raw got back.
type response struct {
	code   int
	body   string
	header http.Header
}

// raw sends a request without the env's cookie jar: with the form (a
// POST if not nil) and headers given as name, value pairs ("Host" sets
// the Host header).
func (e *env) raw(path string, form url.Values, header ...string) response {
	e.t.Helper()
	method, body := http.MethodGet, io.Reader(nil)
	if form != nil {
		method, body = http.MethodPost, strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, e.url(path), body)
	require.NoError(e.t, err)
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for i := 0; i+1 < len(header); i += 2 {
		if header[i] == "Host" {
			req.Host = header[i+1]
			continue
		}
		req.Header.Add(header[i], header[i+1])
	}
	bare := &http.Client{Timeout: 10 * time.Second, CheckRedirect: e.http.CheckRedirect}
	res, err := bare.Do(req)
	require.NoError(e.t, err)
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	require.NoError(e.t, err)
	return response{res.StatusCode, string(b), res.Header}
}

// jarCookie is the value of the env's cookie of that name.
func (e *env) jarCookie(name string) string {
	u, err := url.Parse(e.url("/"))
	require.NoError(e.t, err)
	for _, c := range e.http.Jar.Cookies(u) {
		if c.Name == name {
			return c.Value
		}
	}
	return ""
}

func (e *env) paused(queue string) bool {
	e.t.Helper()
	qi, err := e.c.QueueInfo(e.ctx(), queue)
	require.NoError(e.t, err)
	return qi.Paused
}

func pauseForm(csrf, queue string) url.Values {
	return url.Values{"csrf": {csrf}, "op": {"pause"}, "q": {qx(queue)}, "confirmed": {"yes"}}
}

// A page on another port of the host can set the CSRF cookie to a value
// of its own (browsers share cookies across ports, and one with a longer
// path comes first) and post that value: the server must not take a
// token it did not sign.
func TestForgedCSRFCookieRefused(t *testing.T) {
	t.Parallel()
	forged := strings.Repeat("a", 64)
	for _, token := range []string{"", testToken} {
		t.Run(fmt.Sprintf("token=%v", token != ""), func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, Options{Token: token})
			_, err := e.c.Enqueue(e.ctx(), "q", []byte("x"))
			require.NoError(t, err)
			var auth []string
			if token != "" {
				code, _ := e.post("/login", url.Values{"token": {token}})
				require.Equal(t, http.StatusSeeOther, code)
				auth = []string{"Cookie", sessionCookie + "=" + e.jarCookie(sessionCookie)}
			}
			real := e.csrf()
			require.NotEmpty(t, real)

			// The forged cookie alone, and before the real one.
			res := e.raw("/action", pauseForm(forged, "q"), append(auth, "Cookie", csrfCookie+"="+forged)...)
			assert.Equal(t, http.StatusForbidden, res.code, res.body)
			if cookie := e.jarCookie(csrfCookie); cookie != "" {
				res = e.raw("/action", pauseForm(forged, "q"), append(auth, "Cookie", csrfCookie+"="+forged+"; "+csrfCookie+"="+cookie)...)
				assert.Equal(t, http.StatusForbidden, res.code, res.body)
			}
			assert.False(t, e.paused("q"), "a forged token paused the queue")

			// The dashboard's own form still works with the planted
			// cookie first.
			header := auth
			if cookie := e.jarCookie(csrfCookie); cookie != "" {
				header = append(header, "Cookie", csrfCookie+"="+forged+"; "+csrfCookie+"="+cookie)
			}
			res = e.raw("/action", pauseForm(real, "q"), header...)
			assert.Equal(t, http.StatusSeeOther, res.code, res.body)
			assert.True(t, e.paused("q"))
		})
	}
}

// A CSRF token is bound to its session: another signed-in browser's
// does not work in this one.
func TestCSRFTokenBoundToSession(t *testing.T) {
	t.Parallel()
	a := newEnv(t, Options{Token: testToken})
	_, err := a.c.Enqueue(a.ctx(), "q", []byte("x"))
	require.NoError(t, err)
	code, _ := a.post("/login", url.Values{"token": {testToken}})
	require.Equal(t, http.StatusSeeOther, code)
	tokA := a.csrf()
	sessA := a.jarCookie(sessionCookie)
	code, _ = a.post("/logout", url.Values{"csrf": {tokA}})
	require.Equal(t, http.StatusSeeOther, code)
	code, _ = a.post("/login", url.Values{"token": {testToken}})
	require.Equal(t, http.StatusSeeOther, code)
	sessB := a.jarCookie(sessionCookie)
	require.NotEqual(t, sessA, sessB)
	res := a.raw("/action", pauseForm(tokA, "q"), "Cookie", sessionCookie+"="+sessB)
	assert.Equal(t, http.StatusForbidden, res.code)
	assert.False(t, a.paused("q"))
	res = a.raw("/action", pauseForm(a.csrf(), "q"), "Cookie", sessionCookie+"="+sessB)
	assert.Equal(t, http.StatusSeeOther, res.code)
	assert.True(t, a.paused("q"))
}

// Requests that change state from another origin are refused even with
// a valid token: by Sec-Fetch-Site where the browser sends it, else by
// Origin against Host.
func TestCrossOriginRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Options{})
	_, err := e.c.Enqueue(e.ctx(), "q", []byte("x"))
	require.NoError(t, err)
	tok := e.csrf()
	jar := csrfCookie + "=" + e.jarCookie(csrfCookie)
	other := "http://127.0.0.1:1" // another port of the host
	for _, header := range [][]string{
		{"Sec-Fetch-Site", "same-site", "Origin", other},
		{"Sec-Fetch-Site", "cross-site", "Origin", "https://evil.example"},
		{"Origin", other},
		{"Origin", "null"},
	} {
		res := e.raw("/action", pauseForm(tok, "q"), append([]string{"Cookie", jar}, header...)...)
		assert.Equal(t, http.StatusForbidden, res.code, "%v", header)
		assert.Contains(t, res.body, "cross-origin", "%v", header)
	}
	assert.False(t, e.paused("q"))

	le := newEnv(t, Options{Token: testToken})
	res := le.raw("/login", url.Values{"token": {testToken}}, "Sec-Fetch-Site", "same-site")
	assert.Equal(t, http.StatusForbidden, res.code, "a login from another origin")

	res = e.raw("/action", pauseForm(tok, "q"), "Cookie", jar, "Sec-Fetch-Site", "same-origin", "Origin", e.srv.URL)
	assert.Equal(t, http.StatusSeeOther, res.code, "the dashboard's own form")
	assert.True(t, e.paused("q"))
}

// Without a credential, a request whose Host is a name an attacker could
// rebind to 127.0.0.1 gets nothing: no page, no token, no action.
func TestForeignHostRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Options{})
	_, err := e.c.Enqueue(e.ctx(), "q", []byte("x"))
	require.NoError(t, err)
	port := e.srv.Listener.Addr().String()
	port = port[strings.LastIndex(port, ":"):]
	evil := "rebind.attacker.example" + port
	for _, path := range []string{"/", "/queue?q=" + qx("q"), "/queue/q", "/task/q/x", "/search?id=x", "/workers", "/periodic", "/events", "/static/app.js", "/login"} {
		res := e.raw(path, nil, "Host", evil)
		assert.Equal(t, http.StatusForbidden, res.code, path)
		assert.NotContains(t, res.body, "csrf", path)
		assert.Empty(t, res.header.Values("Set-Cookie"), path)
	}
	tok := e.csrf()
	res := e.raw("/action", pauseForm(tok, "q"), "Host", evil, "Origin", "http://"+evil, "Sec-Fetch-Site", "same-origin",
		"Cookie", csrfCookie+"="+e.jarCookie(csrfCookie))
	assert.Equal(t, http.StatusForbidden, res.code)
	assert.False(t, e.paused("q"))

	for _, host := range []string{"127.0.0.1" + port, "localhost" + port, "LOCALHOST" + port, "[::1]" + port, "127.0.0.2" + port, "localhost"} {
		res := e.raw("/", nil, "Host", host)
		assert.Equal(t, http.StatusOK, res.code, host)
	}
	for _, host := range []string{"localhost.attacker.example" + port, "0.0.0.0" + port, "192.0.2.1" + port, "127.0.0.1.nip.io" + port} {
		res := e.raw("/", nil, "Host", host)
		assert.Equal(t, http.StatusForbidden, res.code, host)
	}

	// With a token, any name reaches the login form (the session cookie
	// is not sent to another name); with AllowedHosts, only those.
	te := newEnv(t, Options{Token: testToken})
	res = te.raw("/", nil, "Host", evil)
	assert.Equal(t, http.StatusUnauthorized, res.code)
	ae := newEnv(t, Options{Token: testToken, AllowedHosts: []string{"Ops.Example", "[2001:db8::1]"}})
	assert.Equal(t, http.StatusForbidden, ae.raw("/", nil, "Host", evil, "Authorization", "Bearer "+testToken).code)
	assert.Equal(t, http.StatusOK, ae.raw("/", nil, "Host", "ops.example"+port, "Authorization", "Bearer "+testToken).code)
	assert.Equal(t, http.StatusOK, ae.raw("/", nil, "Host", "[2001:db8::1]"+port, "Authorization", "Bearer "+testToken).code)
	assert.Equal(t, http.StatusOK, ae.raw("/", nil, "Host", "localhost"+port, "Authorization", "Bearer "+testToken).code)

	for _, bad := range []string{"", "ops.example:8080", "a b", "x/y"} {
		_, err := New(e.c, Options{AllowedHosts: []string{bad}})
		assert.ErrorIs(t, err, worqr.ErrInvalidOptions, "%q", bad)
	}
}

func TestMinTokenLength(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Options{})
	_, err := New(e.c, Options{Token: strings.Repeat("x", MinTokenLength-1)})
	require.ErrorIs(t, err, worqr.ErrInvalidOptions)
	assert.Equal(t, 1, strings.Count(err.Error(), "worqr:"), err.Error())
	_, err = New(e.c, Options{Token: strings.Repeat("x", MinTokenLength)})
	require.NoError(t, err)
}

// A session is a random id, not derived from the token; it ends after
// its lifetime or at sign-out, on the server.
func TestSessions(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Options{Token: testToken})
	clk := e.clock()

	// An id planted before the sign-in is not the session.
	planted := strings.Repeat("b", 64)
	res := e.raw("/login", url.Values{"token": {testToken}}, "Cookie", sessionCookie+"="+planted)
	require.Equal(t, http.StatusSeeOther, res.code)
	var set *http.Cookie
	for _, c := range (&http.Response{Header: res.header}).Cookies() {
		if c.Name == sessionCookie {
			set = c
		}
	}
	require.NotNil(t, set)
	assert.NotEqual(t, planted, set.Value)
	assert.Equal(t, int(sessionLifetime/time.Second), set.MaxAge, "the browser drops it too")
	assert.True(t, set.HttpOnly)
	assert.Equal(t, http.SameSiteStrictMode, set.SameSite)
	res2 := e.raw("/login", url.Values{"token": {testToken}})
	assert.NotEqual(t, set.Value, (&http.Response{Header: res2.header}).Cookies()[0].Value, "a new id per sign-in")
	assert.Equal(t, http.StatusUnauthorized, e.raw("/", nil, "Cookie", sessionCookie+"="+planted).code)

	in := func(id string) int { return e.raw("/workers", nil, "Cookie", sessionCookie+"="+id).code }
	assert.Equal(t, http.StatusOK, in(set.Value))
	clk.advance(sessionLifetime - time.Minute)
	assert.Equal(t, http.StatusOK, in(set.Value))
	clk.advance(2 * time.Minute)
	assert.Equal(t, http.StatusUnauthorized, in(set.Value), "expired")

	// Sign-out: the page offers it, and the id is dead afterwards even
	// to a client that kept the cookie.
	code, _ := e.post("/login", url.Values{"token": {testToken}})
	require.Equal(t, http.StatusSeeOther, code)
	id := e.jarCookie(sessionCookie)
	_, body := e.get("/")
	assert.Contains(t, body, `action="/ops/logout"`)
	code, _ = e.post("/logout", url.Values{"csrf": {"wrong"}})
	assert.Equal(t, http.StatusForbidden, code, "sign-out needs the CSRF token")
	assert.Equal(t, http.StatusOK, in(id))
	code, loc := e.post("/logout", url.Values{"csrf": {e.csrf()}})
	assert.Equal(t, http.StatusSeeOther, code)
	assert.Equal(t, "/ops/login", loc)
	assert.Empty(t, e.jarCookie(sessionCookie), "the cookie is cleared")
	assert.Equal(t, http.StatusUnauthorized, in(id), "the session is over on the server")
	assert.Equal(t, http.StatusMethodNotAllowed, e.raw("/logout", nil).code)
}

// Wrong tokens are limited per client, through the form and as bearer
// tokens; while limited, even the right token is not checked.
func TestLoginRateLimit(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Options{Token: testToken})
	clk := e.clock()
	for i := range clientBurst {
		var code int
		if i%2 == 0 {
			code = e.raw("/login", url.Values{"token": {"wrong-" + strconv.Itoa(i)}}).code
		} else {
			code = e.raw("/", nil, "Authorization", "Bearer wrong").code
		}
		require.Equal(t, http.StatusUnauthorized, code, "attempt %d", i)
	}
	res := e.raw("/login", url.Values{"token": {testToken}})
	assert.Equal(t, http.StatusTooManyRequests, res.code, "the right token is not checked while limited")
	assert.Contains(t, res.body, "Too many failed attempts")
	wait, err := strconv.Atoi(res.header.Get("Retry-After"))
	require.NoError(t, err)
	assert.InDelta(t, clientEvery.Seconds(), wait, 1)
	assert.Equal(t, http.StatusTooManyRequests, e.raw("/", nil, "Authorization", "Bearer "+testToken).code)

	clk.advance(clientEvery)
	assert.Equal(t, http.StatusSeeOther, e.raw("/login", url.Values{"token": {testToken}}).code, "one more try after its wait")
	assert.Equal(t, http.StatusOK, e.raw("/", nil, "Authorization", "Bearer "+testToken).code, "a right token costs nothing")

	// Guesses sent at once get no more tries.
	p := newEnv(t, Options{Token: testToken})
	var unauthorized, limited atomic.Int64
	var wg sync.WaitGroup
	for range 30 {
		wg.Go(func() {
			switch p.raw("/login", url.Values{"token": {"guess"}}).code {
			case http.StatusUnauthorized:
				unauthorized.Add(1)
			case http.StatusTooManyRequests:
				limited.Add(1)
			}
		})
	}
	wg.Wait()
	assert.EqualValues(t, clientBurst, unauthorized.Load())
	assert.EqualValues(t, 30-clientBurst, limited.Load())
}

// The global cap holds against guesses from many addresses: past it, a
// client that failed waits for it, and one that had not gets one check.
func TestLimiterGlobalCap(t *testing.T) {
	t.Parallel()
	var l limiter
	now := time.Now()
	wrong := func() bool { return false }
	for i := range globalBurst {
		ok, wait := l.try(fmt.Sprintf("192.0.2.%d", i), now, wrong)
		require.False(t, ok)
		require.Zero(t, wait, "client %d", i)
	}
	_, wait := l.try("192.0.2.1", now, wrong)
	assert.Equal(t, globalEvery, wait, "a client that failed waits for the global cap")
	ok, wait := l.try("198.51.100.1", now, func() bool { return true })
	assert.True(t, ok, "a client that had not failed is checked")
	assert.Zero(t, wait)
	ok, wait = l.try("198.51.100.2", now, wrong)
	assert.False(t, ok)
	assert.Zero(t, wait, "checked once")
	_, wait = l.try("198.51.100.2", now, wrong)
	assert.Equal(t, 2*globalEvery, wait, "then it waits for the global cap too")
	ok, _ = l.try("192.0.2.1", now.Add(2*globalEvery), func() bool { return true })
	assert.True(t, ok)
	assert.Len(t, l.clients, globalBurst+1)

	// Past suspectFor a failure no longer makes its client wait for the
	// global cap, and a full table is swept of such clients.
	later := now.Add(suspectFor)
	l.global = bucket{used: globalBurst, at: later}
	ok, _ = l.try("192.0.2.2", later, func() bool { return true })
	assert.True(t, ok, "a failure suspectFor ago")
	for i := len(l.clients); i < maxClients; i++ {
		l.clients[fmt.Sprintf("fill-%d", i)] = &bucket{at: later, failed: later}
	}
	_, wait = l.try("203.0.113.1", later, wrong)
	assert.Zero(t, wait, "the sweep made room")
	assert.Len(t, l.clients, maxClients-globalBurst)
	for i := len(l.clients); i < maxClients; i++ {
		l.clients[fmt.Sprintf("more-%d", i)] = &bucket{at: later, failed: later}
	}
	l.global.used = globalBurst
	_, wait = l.try("203.0.113.2", later, func() bool { return true })
	assert.Positive(t, wait, "past the global cap with a full table of recent failures, a new client counts as failed")

	r := httptest.NewRequest(http.MethodGet, "http://localhost/", nil)
	r.RemoteAddr = "[2001:db8:1:2:3:4:5:6]:5555"
	assert.Equal(t, "2001:db8:1:2::/64", clientOf(r))
	r.RemoteAddr = "192.0.2.7:5555"
	assert.Equal(t, "192.0.2.7", clientOf(r))
	r.Host = "ops.example:8080"
	assert.Equal(t, "192.0.2.7 named", clientOf(r))
}

// Failures from many addresses do not lock out a client that has not
// failed: the owner signs in, with the form or a bearer token, while the
// guessers wait.
func TestLoginNotLockedOutByOthers(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Options{Token: testToken})
	clk := e.clock()
	from := func(addr, path string, form url.Values, header ...string) int {
		method, body := http.MethodGet, ""
		if form != nil {
			method, body = http.MethodPost, form.Encode()
		}
		r := httptest.NewRequest(method, "http://127.0.0.1"+path, strings.NewReader(body))
		r.RemoteAddr = addr + ":40000"
		if form != nil {
			r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		for i := 0; i+1 < len(header); i += 2 {
			r.Header.Set(header[i], header[i+1])
		}
		w := httptest.NewRecorder()
		e.h.ServeHTTP(w, r)
		return w.Code
	}
	guess := url.Values{"token": {"wrong-guess-wrong-guess"}}
	attackers := 2 * globalBurst
	for i := range attackers {
		assert.Equal(t, http.StatusUnauthorized, from(fmt.Sprintf("192.0.2.%d", i), "/login", guess), "attacker %d's first guess is checked", i)
	}
	for i := range attackers {
		assert.Equal(t, http.StatusTooManyRequests, from(fmt.Sprintf("192.0.2.%d", i), "/login", guess), "attacker %d's second guess waits", i)
	}
	assert.Equal(t, http.StatusSeeOther, from("203.0.113.7", "/login", url.Values{"token": {testToken}}), "the owner signs in")
	assert.Equal(t, http.StatusOK, from("203.0.113.8", "/workers", nil, "Authorization", "Bearer "+testToken), "a script with the token")
	assert.Equal(t, http.StatusUnauthorized, from("203.0.113.9", "/login", guess), "a new address gets one check")
	assert.Equal(t, http.StatusTooManyRequests, from("203.0.113.9", "/login", url.Values{"token": {testToken}}), "then waits, even with the right token")

	clk.advance(time.Duration(attackers+1) * globalEvery)
	assert.Equal(t, http.StatusSeeOther, from("192.0.2.0", "/login", url.Values{"token": {testToken}}), "the global cap drained")
}

// A check and the counting of its failure are one step: guesses in
// parallel, each slow to compare, get no more checks than one at a time.
func TestLimiterCountsParallelGuesses(t *testing.T) {
	t.Parallel()
	var l limiter
	var checks atomic.Int64
	var wg sync.WaitGroup
	for range 30 {
		wg.Go(func() {
			l.try("192.0.2.1", time.Now(), func() bool {
				checks.Add(1)
				time.Sleep(time.Millisecond) // widens any gap between check and count
				return false
			})
		})
	}
	wg.Wait()
	assert.EqualValues(t, clientBurst, checks.Load())
}

// /static/ serves its files, not a listing of them.
func TestStaticListsNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Options{Token: testToken})
	res := e.raw("/static/", nil)
	assert.Equal(t, http.StatusNotFound, res.code)
	assert.NotContains(t, res.body, ">app.js<", "a listing")
	assert.NotContains(t, e.raw("/static", nil).body, ">app.js<")
	assert.Equal(t, http.StatusOK, e.raw("/static/app.css", nil).code, "the login page's style, without a credential")
}

// Over TLS the cookies have the __Host- prefix: secure, for path /, no
// Domain, so a plain-HTTP page on another port cannot plant one.
func TestTLSCookiesHostPrefixed(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Options{Token: testToken})
	mux := http.NewServeMux()
	mux.Handle("/", e.h)
	mux.Handle("/ops/", http.StripPrefix("/ops", e.h))
	do := func(method, target string, body string, cookies ...*http.Cookie) *http.Response {
		r := httptest.NewRequest(method, target, strings.NewReader(body))
		require.NotNil(t, r.TLS)
		if body != "" {
			r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		for _, c := range cookies {
			r.AddCookie(c)
		}
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, r)
		return w.Result()
	}
	res := do(http.MethodPost, "https://127.0.0.1/login", "token="+testToken)
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	cs := res.Cookies()
	require.Len(t, cs, 1)
	sess := cs[0]
	assert.Equal(t, "__Host-"+sessionCookie, sess.Name)
	assert.Equal(t, "/", sess.Path)
	assert.True(t, sess.Secure)
	assert.Empty(t, sess.Domain)
	res = do(http.MethodGet, "https://127.0.0.1/", "", sess)
	assert.Equal(t, http.StatusOK, res.StatusCode, "the prefixed cookie is the session")
	res = do(http.MethodGet, "https://127.0.0.1/", "", &http.Cookie{Name: sessionCookie, Value: sess.Value})
	assert.Equal(t, http.StatusUnauthorized, res.StatusCode, "over TLS only the prefixed name counts")

	res = do(http.MethodPost, "https://127.0.0.1/ops/login", "token="+testToken)
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	mounted := res.Cookies()[0]
	assert.True(t, strings.HasPrefix(mounted.Name, "__Host-"+sessionCookie+"_"), mounted.Name)
	assert.Equal(t, "/", mounted.Path)
	assert.Equal(t, http.StatusOK, do(http.MethodGet, "https://127.0.0.1/ops/", "", mounted).StatusCode)

	// Without a session, the CSRF nonce cookie too.
	o := newEnv(t, Options{})
	r := httptest.NewRequest(http.MethodGet, "https://127.0.0.1/", nil)
	w := httptest.NewRecorder()
	o.h.ServeHTTP(w, r)
	cs = w.Result().Cookies()
	require.Len(t, cs, 1)
	assert.Equal(t, "__Host-"+csrfCookie, cs[0].Name)
	assert.True(t, cs[0].Secure)
}

// A page of another site whose name is rebound to this machine (DNS
// rebinding) is served when a token is set and AllowedHosts is not, and
// its guesses come from the browser's own address, loopback, as the
// owner's do: they must not lock the owner out. Requests sent to a
// loopback name (which no site can rebind) are counted apart from those
// sent to any other name.
func TestRebindingCannotLockOutTheOwner(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Options{Token: testToken})
	port := e.srv.Listener.Addr().String()
	port = port[strings.LastIndex(port, ":"):]
	evil := "rebind.attacker.example" + port
	rebound := []string{"Host", evil, "Origin", "http://" + evil, "Sec-Fetch-Site", "same-origin"}
	for i := range clientBurst + 3 {
		res := e.raw("/login", url.Values{"token": {"guess-" + strconv.Itoa(i)}}, rebound...)
		if i < clientBurst {
			require.Equal(t, http.StatusUnauthorized, res.code, "guess %d is checked", i)
		} else {
			require.Equal(t, http.StatusTooManyRequests, res.code, "guess %d waits", i)
		}
	}
	assert.Equal(t, http.StatusTooManyRequests, e.raw("/", nil, append(rebound, "Authorization", "Bearer guess")...).code, "bearer guesses from the page wait too")
	assert.Equal(t, http.StatusTooManyRequests, e.raw("/login", url.Values{"token": {testToken}}, "Host", "other.attacker.example"+port).code,
		"every rebound name shares one count: a new name is no new client")

	for _, host := range []string{"127.0.0.1" + port, "localhost" + port, "[::1]" + port} {
		res := e.raw("/login", url.Values{"token": {testToken}}, "Host", host, "Origin", "http://"+host)
		assert.Equal(t, http.StatusSeeOther, res.code, "the owner signs in at %s", host)
		assert.Equal(t, http.StatusOK, e.raw("/workers", nil, "Host", host, "Authorization", "Bearer "+testToken).code, "a script with the token at %s", host)
	}
}
