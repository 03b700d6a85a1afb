package dashboard

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
)

// A lookup (a task's page, a cancel by id) scans a queue in one script,
// during which Redis serves no one else; its time grows with the bytes it
// reads. Lookups from all clients together may take lookupShare of the
// time, measured as their calls' durations, and lookupBurst of it at
// once; each costs at least lookupMinCost, so cheap ones are bounded too
// (20 a second). One runs at a time, so that other clients' commands
// are served between two lookups.
const (
	lookupShare   = 0.1
	lookupBurst   = time.Second
	lookupMinCost = 5 * time.Millisecond
	// lookupBusyWait is the Retry-After of a lookup refused because
	// another was running.
	lookupBusyWait = time.Second
)

// lookups is the dashboard's budget of lookups: a bucket of Redis time
// that refills at lookupShare of the clock's, shared by every client.
type lookups struct {
	mu    sync.Mutex
	busy  bool
	avail time.Duration // below zero while lookups owe time
	at    time.Time
}

func (l *lookups) refill(now time.Time) {
	if l.at.IsZero() {
		l.avail, l.at = lookupBurst, now
		return
	}
	if now.After(l.at) {
		l.avail = min(lookupBurst, l.avail+time.Duration(float64(now.Sub(l.at))*lookupShare))
		l.at = now
	}
}

// begin starts a lookup at now if the budget has room for one and none
// runs: end, to be called once with the time the lookup ended, charges
// its duration. Else it returns how long to wait.
func (l *lookups) begin(now time.Time) (end func(time.Time), wait time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.refill(now)
	if l.busy {
		return nil, lookupBusyWait
	}
	if l.avail < lookupMinCost {
		return nil, time.Duration(float64(lookupMinCost-l.avail) / lookupShare)
	}
	l.busy = true
	return func(done time.Time) {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.refill(done)
		l.avail -= max(done.Sub(now), lookupMinCost)
		l.busy = false
	}, 0
}

// lookupTimeout bounds a lookup's call.
const lookupTimeout = 10 * time.Second

// lookup runs f, a lookup, within the dashboard's budget; if the budget
// refuses it, it answers 429 with Retry-After and returns false. f's
// context does not end with the request: a script sent to Redis runs to
// its end, so a client that hangs up must not free the slot, nor cut the
// duration charged, before it does.
func (h *handler) lookup(w http.ResponseWriter, r *http.Request, f func(context.Context)) bool {
	end, wait := h.lookups.begin(h.now())
	if end == nil {
		secs := int64((wait + time.Second - 1) / time.Second)
		w.Header().Set("Retry-After", strconv.FormatInt(secs, 10))
		h.warnRefused("worqr dashboard: lookup refused: budget spent", "remote", r.RemoteAddr, "wait", wait)
		h.fail(w, r, http.StatusTooManyRequests, "too many task lookups: each scans a queue in Redis, and together they may take a tenth of its time; try again in "+strconv.FormatInt(secs, 10)+" s")
		return false
	}
	defer func() { end(h.now()) }()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), lookupTimeout)
	defer cancel()
	f(ctx)
	return true
}

// tryLookup runs f, a read that a page can show without, within the
// dashboard's budget of lookups, as lookup does; if the budget refuses
// it, it returns how long until it has room, and f is not run.
func (h *handler) tryLookup(ctx context.Context, f func(context.Context)) (wait time.Duration) {
	end, wait := h.lookups.begin(h.now())
	if end == nil {
		return max(wait, time.Second)
	}
	defer func() { end(h.now()) }()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), lookupTimeout)
	defer cancel()
	f(ctx)
	return 0
}

// sameOrigin says whether a request for a page comes from the dashboard's
// own pages, or from no page (an address typed or bookmarked, a script):
// by Sec-Fetch-Site where the browser sends it, else by Origin against
// Host. Browsers do not check what a GET may do, so a page elsewhere can
// make one with an image; those that send neither header are left to the
// lookup budget.
func sameOrigin(r *http.Request) bool {
	switch r.Header.Get("Sec-Fetch-Site") {
	case "same-origin", "none":
		return true
	case "":
	default:
		return false
	}
	origin := r.Header.Get("Origin")
	if origin == "" {
		return true
	}
	u, err := url.Parse(origin)
	return err == nil && u.Host != "" && strings.EqualFold(u.Host, r.Host)
}

type visitData struct{ URL, Path string }

func (visitData) title() string { return "open page" }

// crossSite answers a page requested from another site: a navigation (a
// link followed) gets a page with a link to the same address, which reads
// nothing; anything else (an image, a script, a fetch) is refused.
func (h *handler) crossSite(w http.ResponseWriter, r *http.Request) {
	h.warnRefused("worqr dashboard: page refused: cross-site", "path", r.URL.Path, "fetch-site", r.Header.Get("Sec-Fetch-Site"), "origin", r.Header.Get("Origin"), "remote", r.RemoteAddr)
	if r.Method != http.MethodGet || r.Header.Get("Sec-Fetch-Mode") != "navigate" || r.URL.Path == "/events" {
		http.Error(w, "forbidden: cross-origin request (open the dashboard's pages from the dashboard)", http.StatusForbidden)
		return
	}
	target := base(r) + r.URL.EscapedPath()
	if !strings.HasPrefix(target, "/") || strings.HasPrefix(target, "//") || strings.HasPrefix(target, "/\\") {
		target = "/"
	}
	if r.URL.RawQuery != "" {
		target += "?" + r.URL.RawQuery
	}
	h.render(w, r, "visit", http.StatusOK, visitData{URL: target, Path: r.URL.Path})
}
