package dashboard

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"
)

// MinTokenLength is the fewest characters New accepts in Options.Token.
const MinTokenLength = 16

const (
	// sessionLifetime is how long a sign-in lasts, however active.
	sessionLifetime = 12 * time.Hour
	// maxSessions bounds the sessions kept; past it, signing in ends the
	// one closest to expiry.
	maxSessions = 1000

	// A client may fail clientBurst credentials at once, then one per
	// clientEvery; all clients together globalBurst, then one per
	// globalEvery. Past the global cap only clients that failed in the
	// last suspectFor are refused: a guesser with many addresses is slowed
	// to one guess per address per suspectFor beyond the global rate, and
	// cannot lock out a client that has not failed, such as the owner.
	clientBurst = 5
	clientEvery = 12 * time.Second
	globalBurst = 60
	globalEvery = time.Second
	suspectFor  = time.Hour
	// maxClients is how many clients' failures are kept; when full, those
	// older than suspectFor are swept out, at most once per sweepEvery
	// (a sweep reads them all). While it stays full, a client without a
	// record counts as failed.
	maxClients = 1 << 16
	sweepEvery = time.Minute
)

// random returns n random bytes in hex.
func random(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand does not fail
	return hex.EncodeToString(b)
}

// hostAllowed says whether the dashboard answers to a request's Host.
// A page whose name an attacker rebinds to this machine's address (DNS
// rebinding) is same-origin with itself and sends its own name as Host:
// without a credential to stop it, only names that cannot be rebound
// (loopback addresses and localhost) and the ones configured are served.
func (h *handler) hostAllowed(hostport string) bool {
	if len(h.hosts) == 0 && (h.opts.Token != "" || h.opts.BasicAuthUser != "") {
		return true
	}
	host := normalHost(hostport)
	return loopbackName(host) || host != "" && slices.Contains(h.hosts, host)
}

// loopbackName says whether host (see normalHost) is localhost or a
// loopback address: a name no other site can rebind.
func loopbackName(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// normalHost is the host of a Host header (or an AllowedHosts entry):
// without port and brackets, in lower case.
func normalHost(hostport string) string {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	return strings.ToLower(host)
}

// cookie returns the name and path of one of the dashboard's cookies for
// r. Over TLS the name has the __Host- prefix, which browsers accept only
// from a secure origin, for path / and without a Domain, so that neither
// a sibling subdomain nor a plain-HTTP page can plant one; the path must
// then be /, so a dashboard mounted under a prefix adds a digest of it to
// keep its cookies apart from another's.
func cookie(r *http.Request, name string) (string, string) {
	b := base(r)
	if r.TLS == nil {
		return name, b + "/"
	}
	if b != "" {
		sum := sha256.Sum256([]byte(b))
		name += "_" + hex.EncodeToString(sum[:4])
	}
	return "__Host-" + name, "/"
}

func setCookie(w http.ResponseWriter, r *http.Request, name, value string, maxAge int) {
	name, path := cookie(r, name)
	http.SetCookie(w, &http.Cookie{Name: name, Value: value, Path: path, MaxAge: maxAge,
		HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode})
}

// cookies returns the values of every cookie of this name r carries: a
// page on another port of the same host can add one of its own, with a
// longer path so that it comes first.
func cookies(r *http.Request, name string) []string {
	name, _ = cookie(r, name)
	var vs []string
	for _, c := range r.CookiesNamed(name) {
		vs = append(vs, c.Value)
	}
	return vs
}

// sessions are the browsers signed in: random ids, each good for
// sessionLifetime or until signed out. They are kept by their SHA-256,
// so a lookup's timing says nothing of the ids. Each has a channel closed
// when it ends, so that what it holds open (its live stream) ends too.
type sessions struct {
	mu sync.Mutex
	m  map[[32]byte]*session
}

type session struct {
	expiry time.Time
	done   chan struct{}
}

// drop ends the session under key k. Called with s.mu held.
func (s *sessions) drop(k [32]byte) {
	if e, ok := s.m[k]; ok {
		close(e.done)
		delete(s.m, k)
	}
}

func (s *sessions) create(now time.Time) string {
	id := random(32)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = make(map[[32]byte]*session)
	}
	if len(s.m) >= maxSessions {
		var oldest [32]byte
		var first time.Time
		for k, e := range s.m {
			if !e.expiry.After(now) {
				s.drop(k)
			} else if first.IsZero() || e.expiry.Before(first) {
				oldest, first = k, e.expiry
			}
		}
		if len(s.m) >= maxSessions {
			s.drop(oldest)
		}
	}
	s.m[sha256.Sum256([]byte(id))] = &session{expiry: now.Add(sessionLifetime), done: make(chan struct{})}
	return id
}

// valid says whether id is a live session, and returns a channel closed
// when it ends.
func (s *sessions) valid(id string, now time.Time) (<-chan struct{}, bool) {
	k := sha256.Sum256([]byte(id))
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.m[k]
	if !ok {
		return nil, false
	}
	if !e.expiry.After(now) {
		s.drop(k)
		return nil, false
	}
	return e.done, true
}

func (s *sessions) remove(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.drop(sha256.Sum256([]byte(id)))
}

// session returns r's session id if it carries a live one, else "".
func (h *handler) session(r *http.Request) string {
	if h.opts.Token == "" {
		return ""
	}
	now := h.now()
	for _, v := range cookies(r, sessionCookie) {
		if _, ok := h.sessions.valid(v, now); v != "" && ok {
			return v
		}
	}
	return ""
}

// sign is the CSRF token for a binding: an HMAC under the handler's own
// secret, which a page elsewhere cannot compute even when it chose the
// cookie.
func (h *handler) sign(kind, value string) string {
	m := hmac.New(sha256.New, h.secret[:])
	m.Write([]byte("worqr-dashboard-csrf\x00" + kind + "\x00" + value))
	return hex.EncodeToString(m.Sum(nil))
}

// csrfToken returns the token r's forms carry: bound to its session if it
// has one, else to a random nonce in a cookie, set if r had none.
func (h *handler) csrfToken(w http.ResponseWriter, r *http.Request) string {
	if sid := h.session(r); sid != "" {
		return h.sign("session", sid)
	}
	for _, v := range cookies(r, csrfCookie) {
		if validNonce(v) {
			return h.sign("nonce", v)
		}
	}
	nonce := random(32)
	setCookie(w, r, csrfCookie, nonce, 0)
	return h.sign("nonce", nonce)
}

// checkCSRF says whether the form's token is one this handler signed for
// r's session, or, without one, for a nonce cookie r carries.
func (h *handler) checkCSRF(r *http.Request) bool {
	got := r.PostFormValue("csrf")
	if got == "" {
		return false
	}
	if sid := h.session(r); sid != "" {
		return hmac.Equal([]byte(got), []byte(h.sign("session", sid)))
	}
	for _, v := range cookies(r, csrfCookie) {
		if validNonce(v) && hmac.Equal([]byte(got), []byte(h.sign("nonce", v))) {
			return true
		}
	}
	return false
}

func validNonce(v string) bool {
	if len(v) != 64 {
		return false
	}
	_, err := hex.DecodeString(v)
	return err == nil
}

// limiter counts failed credentials, per client and in all, as leaky
// buckets. It refuses to check a client's credential while the client's
// own bucket is full, or while the global one is and the client failed
// in the last suspectFor: a client with no failure on record is always
// checked, so that guesses from other addresses never refuse it.
type limiter struct {
	mu      sync.Mutex
	clients map[string]*bucket
	global  bucket
	swept   time.Time // the last sweep of clients
}

// bucket holds the failures not yet forgiven: one drains every per.
type bucket struct {
	used   float64
	at     time.Time
	failed time.Time // the last failure
}

func (b *bucket) drain(now time.Time, per time.Duration) {
	if !b.at.IsZero() && now.After(b.at) {
		b.used = max(0, b.used-float64(now.Sub(b.at))/float64(per))
	}
	b.at = now
}

// wait is how long until b has room for one more failure.
func (b *bucket) wait(burst float64, per time.Duration) time.Duration {
	if over := b.used + 1 - burst; over > 0 {
		return time.Duration(over * float64(per))
	}
	return 0
}

// try runs check, a comparison of a credential, unless the limits above
// refuse client; the check and the counting of its failure are one step,
// so that parallel guesses cannot slip past the limit. It returns check's
// answer, or how long to wait if it did not run.
func (l *limiter) try(client string, now time.Time, check func() bool) (ok bool, wait time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.clients == nil {
		l.clients = make(map[string]*bucket)
	}
	c := l.clients[client]
	if c == nil && len(l.clients) >= maxClients {
		l.sweep(now)
	}
	suspect := c != nil && now.Sub(c.failed) < suspectFor ||
		c == nil && len(l.clients) >= maxClients
	if c != nil {
		c.drain(now, clientEvery)
		wait = c.wait(clientBurst, clientEvery)
	}
	l.global.drain(now, globalEvery)
	if suspect {
		wait = max(wait, l.global.wait(globalBurst, globalEvery))
	}
	if wait > 0 {
		return false, wait
	}
	if check() {
		return true, 0
	}
	if c == nil {
		c = &bucket{at: now}
		if len(l.clients) < maxClients {
			l.clients[client] = c
		}
	}
	c.used++
	c.failed = now
	l.global.used++
	return false, 0
}

// sweep forgets the clients that last failed suspectFor ago or more, if
// it did not sweep in the last sweepEvery. Called with l.mu held.
func (l *limiter) sweep(now time.Time) {
	if now.Sub(l.swept) < sweepEvery {
		return
	}
	l.swept = now
	for k, b := range l.clients {
		if now.Sub(b.failed) >= suspectFor {
			delete(l.clients, k)
		}
	}
}

// clientOf is whom a request's failures count against: its address, or
// for IPv6 its /64, which one host can usually pick addresses from; the
// requests from there sent to a name other than a loopback one apart
// from the others. A browser sends the requests of a page rebound to
// this machine (see hostAllowed) from its own address, which for a
// dashboard on loopback is the owner's: counted together, any site the
// owner visits could keep the owner from signing in. Every such name
// shares one count, so that a guesser gains nothing from more names.
func clientOf(r *http.Request) string {
	who := clientAddr(r)
	if !loopbackName(normalHost(r.Host)) {
		who += " named"
	}
	return who
}

// clientAddr is a request's address, or for IPv6 its /64.
func clientAddr(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	ip := net.ParseIP(host)
	if ip == nil {
		return host
	}
	if ip.To4() == nil {
		return ip.Mask(net.CIDRMask(64, 128)).String() + "/64"
	}
	return ip.String()
}
