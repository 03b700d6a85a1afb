// Package dashboard is worqr's web dashboard: an http.Handler that shows
// queues, their tasks, dead letters, workers and single tasks, with live
// counts pushed over Server-Sent Events, and actions (cancel, requeue,
// delete, purge, pause, resume, limit) behind a confirmation and CSRF
// protection.
//
// Mount it under any path with http.StripPrefix:
//
//	mux.Handle("/worqr/", http.StripPrefix("/worqr", dashboard.New(client, dashboard.Options{Token: token})))
//
// Its pages are rendered on the server; its script and style sheet are
// embedded, and load nothing from elsewhere. However many viewers watch,
// one goroutine reads Redis once per PollInterval, and only while at least
// one is connected.
package dashboard

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/worqr/worqr"
)

// Options configure the dashboard.
type Options struct {
	// ReadOnly hides the actions and refuses them (403).
	ReadOnly bool
	// Token, if set, must be given as a bearer token
	// ("Authorization: Bearer <token>") or through the login form, which
	// sets a cookie.
	Token string
	// BasicAuthUser and BasicAuthPassword, if the user is set, are
	// accepted as HTTP basic authentication. With both a Token and basic
	// authentication, either lets a request in.
	BasicAuthUser, BasicAuthPassword string
	// PollInterval is how often the live counts are read from Redis while
	// anyone watches. Default 1s.
	PollInterval time.Duration
	// Logger receives a line per action and per error; polls of the live
	// counts that fail in a row are two lines, a WARN at the first and an
	// INFO when one succeeds again. Default slog.Default().
	Logger *slog.Logger
}

const (
	csrfCookie    = "worqr_csrf"
	sessionCookie = "worqr_session"
)

type handler struct {
	c      *worqr.Client
	opts   Options
	log    *slog.Logger
	poll   *poller
	static http.Handler
}

// New returns the dashboard for client. The handler keeps no goroutine
// running while no one watches its live counts.
func New(client *worqr.Client, opts Options) http.Handler {
	if opts.PollInterval <= 0 {
		opts.PollInterval = time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	h := &handler{c: client, opts: opts, log: opts.Logger}
	h.poll = newPoller(client, opts.PollInterval, opts.Logger)
	h.static = http.FileServerFS(staticFS)
	return h
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hd := w.Header()
	hd.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("X-Frame-Options", "DENY")
	hd.Set("Referrer-Policy", "no-referrer")
	hd.Set("Cache-Control", "no-store")

	path := r.URL.Path
	if path == "" {
		path = "/"
	}
	if strings.HasPrefix(path, "/static/") {
		hd.Set("Cache-Control", "max-age=300")
		h.static.ServeHTTP(w, r)
		return
	}
	if path == "/login" {
		h.login(w, r)
		return
	}
	if !h.authorized(r) {
		h.refuse(w, r)
		return
	}
	if r.Method == http.MethodPost {
		if path != "/action" {
			http.Error(w, "not found", http.StatusNotFound)
			return
		}
		h.action(w, r)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		hd.Set("Allow", "GET, HEAD, POST")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	switch path {
	case "/":
		h.overview(w, r)
	case "/queue":
		h.queue(w, r)
	case "/task":
		h.task(w, r)
	case "/workers":
		h.workers(w, r)
	case "/events":
		h.events(w, r)
	default:
		http.Error(w, "not found", http.StatusNotFound)
	}
}

// base is the path the handler is mounted under (what http.StripPrefix
// took off), so that links work under any prefix.
func base(r *http.Request) string {
	u, err := url.ParseRequestURI(r.RequestURI)
	if err != nil {
		return ""
	}
	full, rest := u.EscapedPath(), r.URL.EscapedPath()
	if strings.HasSuffix(full, rest) {
		return strings.TrimSuffix(full, rest)
	}
	return ""
}

func cookiePath(r *http.Request) string { return base(r) + "/" }

// sessionValue is what the session cookie holds: a digest of the token,
// never the token itself.
func (h *handler) sessionValue() string {
	sum := sha256.Sum256([]byte("worqr-dashboard-session\x00" + h.opts.Token))
	return hex.EncodeToString(sum[:])
}

func equal(a, b string) bool { return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1 }

// authorized says whether r carries a credential, when one is needed.
func (h *handler) authorized(r *http.Request) bool {
	if h.opts.Token == "" && h.opts.BasicAuthUser == "" {
		return true
	}
	if h.opts.Token != "" {
		if auth, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok && equal(auth, h.opts.Token) {
			return true
		}
		if c, err := r.Cookie(sessionCookie); err == nil && equal(c.Value, h.sessionValue()) {
			return true
		}
	}
	if h.opts.BasicAuthUser != "" {
		if u, p, ok := r.BasicAuth(); ok && equal(u, h.opts.BasicAuthUser) && equal(p, h.opts.BasicAuthPassword) {
			return true
		}
	}
	return false
}

// refuse answers a request without a credential: the login form for a
// page when a token is configured, else 401.
func (h *handler) refuse(w http.ResponseWriter, r *http.Request) {
	if h.opts.BasicAuthUser != "" {
		w.Header().Set("WWW-Authenticate", `Basic realm="worqr", charset="UTF-8"`)
	}
	if h.opts.Token != "" && r.Method == http.MethodGet && r.URL.Path != "/events" {
		h.render(w, r, "login", http.StatusUnauthorized, map[string]any{"Failed": false})
		return
	}
	http.Error(w, "unauthorized", http.StatusUnauthorized)
}

// login shows the token form, and on POST checks the token and sets the
// session cookie.
func (h *handler) login(w http.ResponseWriter, r *http.Request) {
	if h.opts.Token == "" {
		http.Redirect(w, r, base(r)+"/", http.StatusSeeOther)
		return
	}
	if r.Method != http.MethodPost {
		h.render(w, r, "login", http.StatusOK, map[string]any{"Failed": false})
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	if !equal(r.PostFormValue("token"), h.opts.Token) {
		h.log.Warn("worqr dashboard: failed login", "remote", r.RemoteAddr)
		h.render(w, r, "login", http.StatusUnauthorized, map[string]any{"Failed": true})
		return
	}
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: h.sessionValue(), Path: cookiePath(r),
		HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode})
	http.Redirect(w, r, base(r)+"/", http.StatusSeeOther)
}

// csrfToken returns the session's CSRF token, setting its cookie if the
// request had none.
func csrfToken(w http.ResponseWriter, r *http.Request) string {
	if c, err := r.Cookie(csrfCookie); err == nil && len(c.Value) == 64 {
		if _, err := hex.DecodeString(c.Value); err == nil {
			return c.Value
		}
	}
	var b [32]byte
	if _, err := io.ReadFull(rand.Reader, b[:]); err != nil {
		panic(err) // crypto/rand does not fail
	}
	tok := hex.EncodeToString(b[:])
	http.SetCookie(w, &http.Cookie{Name: csrfCookie, Value: tok, Path: cookiePath(r),
		HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode})
	return tok
}

// checkCSRF compares the form's token with the cookie's.
func checkCSRF(r *http.Request) bool {
	c, err := r.Cookie(csrfCookie)
	if err != nil || c.Value == "" {
		return false
	}
	return equal(r.PostFormValue("csrf"), c.Value)
}
