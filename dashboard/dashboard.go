// Package dashboard is worqr's web dashboard: an http.Handler that shows
// queues, their tasks, dead letters, workers, single tasks and workflows,
// with live counts pushed over Server-Sent Events, and actions (cancel,
// requeue, delete, purge, pause, resume, limit, cancel a workflow) behind
// a confirmation and CSRF protection (signed tokens and an origin check).
// Without a credential it answers only to loopback host names and
// Options.AllowedHosts, against DNS rebinding; with a token, browsers sign
// in for a session of 12 hours, whose sign-out or expiry also ends its
// live stream.
//
// Wrong credentials are rate-limited per client address (5 at once, then
// one every 12 s; those sent to a name that is not a loopback one apart,
// so that a page rebound to 127.0.0.1 cannot lock out its owner) and in
// all (60 at once, then one a second); past the global limit only
// clients that failed in the last hour are refused, so that guesses from
// many addresses slow the guessers but never lock out a client that has
// not failed, such as the owner. In all, guessers get at most 60 guesses
// at once, then one a second, and two more per address an hour.
//
// Its pages read Redis only for requests from its own pages or from none
// (an address typed in, a script), by Sec-Fetch-Site or Origin: an image
// on another site's page gets 403, a link followed from one a page that
// links to the same address. Looking a task up by id scans its queue in
// one script (see worqr.Client.FindTask), as does cancelling by id, a
// workflow's page reads a page of its steps, a queue's page its groups
// (up to 2,000), and a page filtered by kind and a search of payloads
// read thousands of tasks: these lookups share one budget across all
// clients, a tenth of the time measured as their calls' durations, one
// at a time, and past it get 429 with Retry-After (a queue's page is
// shown without its groups). Lists
// of tasks are read in calls of about a megabyte of payloads each, which
// Redis reads whole. However many viewers there are, at most
// Options.MaxPageReads pages and actions (8) read Redis at once; one more
// waits up to 2 s for a slot, then gets 503 with Retry-After. A slot is
// held only while Redis is read, not while a client sends its form or
// reads its answer; the answers kept for clients still reading them are
// bounded in bytes, from all clients together (Options.MaxHeldBytes,
// 32 MiB) and from one address (MaxHeldBytesPerClient, 8 MiB), past
// which a page gets 503 too, and in time: a client that does not read
// each 64 KiB within Options.WriteWait (30 s) loses its connection, and
// its answer's bytes are given back.
//
// Mount it under any path with http.StripPrefix:
//
//	h, err := dashboard.New(client, dashboard.Options{Token: token})
//	if err != nil {
//		return err
//	}
//	mux.Handle("/worqr/", http.StripPrefix("/worqr", h))
//
// Its pages are rendered on the server; its script and style sheet are
// embedded, and load nothing from elsewhere. However many viewers watch,
// one goroutine reads Redis once per PollInterval, and only while at least
// one is connected; the live streams are bounded in all and per client
// address (Options.MaxStreams, 256, and MaxStreamsPerClient, 32), past
// which a new one gets 503 with Retry-After.
package dashboard

import (
	"crypto/rand"
	"crypto/subtle"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
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
	// starts a session of 12 hours in a cookie. It must be at least
	// MinTokenLength characters.
	Token string
	// BasicAuthUser and BasicAuthPassword, if the user is set, are
	// accepted as HTTP basic authentication. With both a Token and basic
	// authentication, either lets a request in.
	BasicAuthUser, BasicAuthPassword string
	// AllowedHosts are the host names or IP addresses, without a port,
	// that the dashboard answers to besides loopback addresses and
	// localhost: the Host header of every other request is refused, so
	// that a web page whose name is rebound to this machine (DNS
	// rebinding) reads and does nothing. Without a Token or basic
	// authentication that check is always on; with one, only if
	// AllowedHosts is set.
	AllowedHosts []string
	// PollInterval is how often the live counts are read from Redis while
	// anyone watches. Default 1s.
	PollInterval time.Duration
	// MaxPageReads bounds the pages (and actions) that read Redis at
	// once, from all clients together: each costs tens to hundreds of
	// commands, more with more queues. A request past them waits up to 2 s
	// for one to end, then gets 503 with Retry-After. Default
	// DefaultMaxPageReads; negative: no bound.
	MaxPageReads int
	// MaxStreams bounds the live streams (one per open page) in all, and
	// MaxStreamsPerClient those from one client address (an IPv6 /64;
	// behind a proxy every client has the proxy's); a stream past either
	// gets 503 with Retry-After, and its page no live counts. However many
	// there are, one poll reads Redis for all. Defaults DefaultMaxStreams
	// and DefaultMaxStreamsPerClient; negative: no bound.
	MaxStreams, MaxStreamsPerClient int
	// MaxHeldBytes bounds the bytes of answers kept in memory until their
	// clients read them, from all clients together: a page's answer is
	// made while it holds one of the MaxPageReads, and sent after, so that
	// a client that reads slowly holds none. A page waits up to 2 s for
	// room, then gets 503 with Retry-After, as does one whose answer does
	// not fit. Default DefaultMaxHeldBytes; negative: no bound.
	MaxHeldBytes int64
	// MaxHeldBytesPerClient bounds those bytes from one client address
	// (an IPv6 /64), so that one address cannot keep every other out; past
	// it, a page from that address gets 503 as past MaxHeldBytes. Behind a
	// proxy every client has the proxy's address: raise it to
	// MaxHeldBytes, or make it negative (no bound). Default
	// DefaultMaxHeldBytesPerClient, or no bound when MaxHeldBytes is
	// negative: turning the whole bound off turns this one off too.
	MaxHeldBytesPerClient int64
	// WriteWait bounds how long a client may take to read each part of an
	// answer: each 64 KiB of a page (so at least 64 KiB per WriteWait),
	// each event of a live stream, any other answer whole. Past it the
	// connection is dropped (over HTTP/2, the stream reset) and the bytes
	// kept for it given back: a client that reads nothing holds its answer
	// in MaxHeldBytes for at most WriteWait. Over HTTP/2 it also bounds the
	// time from a request to its answer, which a page may take up to some
	// 15 s (its waits for a slot and for room, and its reads of Redis):
	// keep it above that. It is set through http.ResponseController: a
	// ResponseWriter wrapped without an Unwrap method gets none. Default
	// 30s.
	WriteWait time.Duration
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

	hosts    []string // AllowedHosts, normalized
	secret   [32]byte // signs CSRF tokens; this handler's own
	origin   *http.CrossOriginProtection
	sessions sessions
	limit    limiter
	lookups  lookups
	refusals refusals
	pages    slots // MaxPageReads
	pageWait time.Duration
	held     held    // MaxHeldBytes, MaxHeldBytesPerClient
	streams  streams // MaxStreams, MaxStreamsPerClient
	// writeWait is how long a write of an answer may wait for its client
	// (Options.WriteWait), which then loses its connection.
	writeWait time.Duration
	now       func() time.Time
}

// New returns the dashboard for client. The handler keeps no goroutine
// running while no one watches its live counts. A Token shorter than
// MinTokenLength, or an AllowedHosts entry that is empty or has a port,
// is an error matching worqr.ErrInvalidOptions.
func New(client *worqr.Client, opts Options) (http.Handler, error) {
	if opts.Token != "" && len(opts.Token) < MinTokenLength {
		return nil, fmt.Errorf("worqr: dashboard: %w: the token has %d characters, fewer than %d", worqr.ErrInvalidOptions, len(opts.Token), MinTokenLength)
	}
	if opts.PollInterval <= 0 {
		opts.PollInterval = time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.WriteWait <= 0 {
		opts.WriteWait = defaultWriteWait
	}
	h := &handler{c: client, opts: opts, log: opts.Logger, origin: http.NewCrossOriginProtection(), now: time.Now,
		pages: newSlots(limitOf(opts.MaxPageReads, DefaultMaxPageReads)), pageWait: pageWait, held: newHeld(opts.MaxHeldBytes, opts.MaxHeldBytesPerClient), writeWait: opts.WriteWait,
		streams: streams{max: limitOf(opts.MaxStreams, DefaultMaxStreams), perClient: limitOf(opts.MaxStreamsPerClient, DefaultMaxStreamsPerClient)}}
	for _, a := range opts.AllowedHosts {
		host := normalHost(a)
		if host == "" || strings.ContainsAny(host, " /") || host != strings.ToLower(strings.TrimSuffix(strings.TrimPrefix(a, "["), "]")) {
			return nil, fmt.Errorf("worqr: dashboard: %w: allowed host %q: give a host name or IP address without a port", worqr.ErrInvalidOptions, a)
		}
		h.hosts = append(h.hosts, host)
	}
	_, _ = rand.Read(h.secret[:]) // crypto/rand does not fail
	h.poll = newPoller(client, opts.PollInterval, opts.Logger)
	h.static = http.FileServerFS(staticFS)
	return h, nil
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// Every answer is written within writeWait (see limitWrite); net/http
	// takes the deadline off the connection once the answer is sent.
	h.limitWrite(http.NewResponseController(w))
	hd := w.Header()
	hd.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("X-Frame-Options", "DENY")
	hd.Set("Referrer-Policy", "no-referrer")
	hd.Set("Cache-Control", "no-store")

	if !h.hostAllowed(r.Host) {
		h.warnRefused("worqr dashboard: request refused: host not allowed", "host", r.Host, "remote", r.RemoteAddr)
		http.Error(w, "forbidden: this dashboard does not answer to that host name", http.StatusForbidden)
		return
	}
	// Every request that may change something must come from the
	// dashboard's own pages (Sec-Fetch-Site, else Origin against Host);
	// SameSite cookies alone let in pages on another port of the host.
	if err := h.origin.Check(r); err != nil {
		h.warnRefused("worqr dashboard: request refused: cross-origin", "origin", r.Header.Get("Origin"), "fetch-site", r.Header.Get("Sec-Fetch-Site"), "remote", r.RemoteAddr)
		http.Error(w, "forbidden: cross-origin request", http.StatusForbidden)
		return
	}

	path := r.URL.Path
	if path == "" {
		path = "/"
	}
	if strings.HasPrefix(path, "/static/") {
		h.serveStatic(w, r, path)
		return
	}
	route := path
	for _, prefix := range []string{"/queue/", "/task/", "/workflow/"} {
		if strings.HasPrefix(path, prefix) {
			route = strings.TrimSuffix(prefix, "/")
		}
	}
	switch route {
	case "/", "/queue", "/task", "/workflow", "/workers", "/periodic", "/search", "/events":
		// Pages that read Redis, some a lot (a task's page scans its
		// queue): only for the dashboard's own pages, not an image on
		// another site's, which a browser sends with the credentials it has.
		if !sameOrigin(r) {
			h.crossSite(w, r)
			return
		}
	case "/login":
		h.login(w, r)
		return
	case "/logout":
		h.logout(w, r)
		return
	}
	if ok, wait := h.authorized(r); !ok {
		h.refuse(w, r, wait)
		return
	}
	if r.Method == http.MethodPost {
		if path != "/action" {
			http.Error(w, "not found", http.StatusNotFound)
			return
		}
		// The form is read before the slot is taken: a client that sends
		// it slowly holds no slot meanwhile.
		r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
		if err := r.ParseForm(); err != nil {
			http.Error(w, "bad form", http.StatusBadRequest)
			return
		}
		h.withSlot(w, r, h.action)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		hd.Set("Allow", "GET, HEAD, POST")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	switch route {
	case "/", "/search", "/queue", "/task", "/workflow", "/workers", "/periodic":
		// A live stream reads nothing itself (one poll serves them all):
		// it is bounded in events.
		h.withSlot(w, r, func(w http.ResponseWriter, r *http.Request) { h.page(w, r, route) })
	default:
		h.page(w, r, route)
	}
}

// withSlot serves r with serve while holding a page slot, and then sends
// its answer: a client that reads the answer slowly, or not at all, holds
// no slot while it does. The answers so kept are bounded in bytes, from
// all clients together (Options.MaxHeldBytes) and from its address
// (MaxHeldBytesPerClient): a page waits for room as it waits for a slot,
// and one whose answer does not fit gets 503. The answer is sent within
// WriteWait a part.
func (h *handler) withSlot(w http.ResponseWriter, r *http.Request, serve http.HandlerFunc) {
	client := clientAddr(r)
	if !h.held.wait(r, client, h.pageWait) {
		h.heldFull(w, r)
		return
	}
	release, ok := h.pageSlot(w, r)
	if !ok {
		return
	}
	b := &buffered{w: w, held: &h.held, client: client}
	// A page that panics gives its bytes back too (net/http recovers the
	// panic and serves on); drop gives them once, however often called.
	defer b.drop()
	func() {
		defer release()
		serve(b, r)
	}()
	rc := http.NewResponseController(w)
	h.limitWrite(rc) // the page may have taken longer than writeWait
	if b.over {
		h.heldFull(w, r)
		return
	}
	b.send(func() { h.limitWrite(rc) }, func() error {
		// A writer wrapped without Flush or Unwrap sends its parts when
		// it will: the answer goes on, as it goes without a deadline.
		if err := rc.Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
			return err
		}
		return nil
	})
}

// limitWrite gives the answer's next write writeWait to be taken by its
// client, past which it fails and the connection is dropped: a client
// that reads nothing would otherwise keep the write, its goroutine and
// its connection (and a page's bytes held) until TCP gives up, if ever.
func (h *handler) limitWrite(rc *http.ResponseController) {
	_ = rc.SetWriteDeadline(time.Now().Add(h.writeWait)) // unsupported: none
}

// page serves the GET of a route.
func (h *handler) page(w http.ResponseWriter, r *http.Request, route string) {
	switch route {
	case "/":
		h.overview(w, r)
	case "/search":
		h.search(w, r)
	case "/queue":
		h.queue(w, r)
	case "/task":
		h.task(w, r)
	case "/workflow":
		h.workflow(w, r)
	case "/workers":
		h.workers(w, r)
	case "/periodic":
		h.periodic(w, r)
	case "/events":
		h.events(w, r)
	default:
		http.Error(w, "not found", http.StatusNotFound)
	}
}

// serveStatic serves the embedded files, and no directory listing.
func (h *handler) serveStatic(w http.ResponseWriter, r *http.Request, path string) {
	if fi, err := fs.Stat(staticFS, strings.TrimPrefix(path, "/")); err != nil || fi.IsDir() {
		http.Error(w, "not found", http.StatusNotFound)
		return
	}
	w.Header().Set("Cache-Control", "max-age=300")
	h.static.ServeHTTP(w, r)
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

func equal(a, b string) bool { return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1 }

// authorized says whether r carries a credential, when one is needed. A
// bearer token or basic authentication is checked only while its client
// is under the failure limit; else wait says how long until it is.
func (h *handler) authorized(r *http.Request) (ok bool, wait time.Duration) {
	if h.opts.Token == "" && h.opts.BasicAuthUser == "" {
		return true, 0
	}
	if h.session(r) != "" {
		return true, 0
	}
	bearer, hasBearer := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	hasBearer = hasBearer && h.opts.Token != ""
	user, pass, hasBasic := r.BasicAuth()
	hasBasic = hasBasic && h.opts.BasicAuthUser != ""
	if !hasBearer && !hasBasic {
		return false, 0
	}
	ok, wait = h.limit.try(clientOf(r), h.now(), func() bool {
		return (hasBearer && equal(bearer, h.opts.Token)) ||
			(hasBasic && equal(user, h.opts.BasicAuthUser) && equal(pass, h.opts.BasicAuthPassword))
	})
	if !ok && wait == 0 {
		h.log.Warn("worqr dashboard: wrong credential", "remote", r.RemoteAddr)
	}
	return ok, wait
}

// refuse answers a request without a credential: the login form for a
// page when a token is configured, else 401; 429 while its client may
// not try again.
func (h *handler) refuse(w http.ResponseWriter, r *http.Request, wait time.Duration) {
	if wait > 0 {
		h.tooMany(w, r, wait)
		return
	}
	if h.opts.BasicAuthUser != "" {
		w.Header().Set("WWW-Authenticate", `Basic realm="worqr", charset="UTF-8"`)
	}
	if h.opts.Token != "" && r.Method == http.MethodGet && r.URL.Path != "/events" {
		h.render(w, r, "login", http.StatusUnauthorized, loginData{})
		return
	}
	http.Error(w, "unauthorized", http.StatusUnauthorized)
}

// tooMany answers 429, with the login form for a browser's page.
func (h *handler) tooMany(w http.ResponseWriter, r *http.Request, wait time.Duration) {
	secs := int64((wait + time.Second - 1) / time.Second)
	w.Header().Set("Retry-After", strconv.FormatInt(secs, 10))
	if h.opts.Token != "" && r.URL.Path != "/events" && (r.Method == http.MethodGet || r.URL.Path == "/login") {
		h.render(w, r, "login", http.StatusTooManyRequests, loginData{Wait: secs})
		return
	}
	http.Error(w, fmt.Sprintf("too many failed attempts: try again in %d s", secs), http.StatusTooManyRequests)
}

type loginData struct {
	Failed bool
	Wait   int64 // seconds until another try, while limited
}

// login shows the token form, and on POST checks the token and starts a
// session.
func (h *handler) login(w http.ResponseWriter, r *http.Request) {
	if h.opts.Token == "" {
		http.Redirect(w, r, base(r)+"/", http.StatusSeeOther)
		return
	}
	if r.Method != http.MethodPost {
		h.render(w, r, "login", http.StatusOK, loginData{})
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	token := r.PostFormValue("token")
	ok, wait := h.limit.try(clientOf(r), h.now(), func() bool { return equal(token, h.opts.Token) })
	if wait > 0 {
		h.warnRefused("worqr dashboard: login refused: too many failures", "remote", r.RemoteAddr)
		h.tooMany(w, r, wait)
		return
	}
	if !ok {
		h.log.Warn("worqr dashboard: failed login", "remote", r.RemoteAddr)
		h.render(w, r, "login", http.StatusUnauthorized, loginData{Failed: true})
		return
	}
	// A new id at every sign-in: one planted in the browser before it is
	// never the session.
	setCookie(w, r, sessionCookie, h.sessions.create(h.now()), int(sessionLifetime/time.Second))
	http.Redirect(w, r, base(r)+"/", http.StatusSeeOther)
}

// logout ends the request's session and clears its cookie.
func (h *handler) logout(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	if err := r.ParseForm(); err != nil {
		http.Error(w, "bad form", http.StatusBadRequest)
		return
	}
	if sid := h.session(r); sid != "" {
		if !h.checkCSRF(r) {
			http.Error(w, "forbidden: bad or missing CSRF token (reload the page)", http.StatusForbidden)
			return
		}
		h.sessions.remove(sid)
	}
	setCookie(w, r, sessionCookie, "", -1)
	to := base(r) + "/"
	if h.opts.Token != "" {
		to = base(r) + "/login"
	}
	http.Redirect(w, r, to, http.StatusSeeOther)
}
