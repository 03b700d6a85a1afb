package dashboard

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/worqr/worqr"
)

// sparkLen is how many rates a sparkline shows: the last polls.
const sparkLen = 60

// poller reads every queue's counts once per interval, for all the
// viewers subscribed, and only while there is one.
type poller struct {
	c     *worqr.Client
	every time.Duration
	log   *slog.Logger
	// window is how far back the rates look: rateWindow, set shorter by
	// tests. Read only under mu.
	window time.Duration

	mu     sync.Mutex
	subs   map[chan []byte]struct{}
	cancel context.CancelFunc // nil while stopped
	done   chan struct{}      // closed when the last run ended
	last   []byte             // the last event, for new viewers
	hist   map[string]*history
	// While polls fail, when the first of them did and how many have: a
	// poll that fails while Redis is down would otherwise log a line a
	// PollInterval. The first failure logs a WARN, the first success after
	// it one INFO (after the poller stopped for want of viewers and
	// started again, if it did meanwhile).
	failingSince time.Time
	failed       int
}

// history is what a queue's rate is computed from: the tasks finished in
// each recent minute as last read from its stats, and when (by the Redis
// clock).
type history struct {
	finished map[int64]int64 // minute start (Unix s) -> tasks finished
	at       time.Time
	gains    []gain        // the reads of the last window
	window   time.Duration // rateWindow, unless a test sets it
	rates    []float64
}

func newPoller(c *worqr.Client, every time.Duration, log *slog.Logger) *poller {
	return &poller{c: c, every: every, log: log, window: rateWindow, subs: make(map[chan []byte]struct{}), hist: make(map[string]*history)}
}

// subscribe adds a viewer, starting the poll if it is the first. The
// channel gets the latest event (older ones unread are dropped).
func (p *poller) subscribe() (<-chan []byte, func()) {
	ch := make(chan []byte, 1)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.subs[ch] = struct{}{}
	if p.last != nil {
		ch <- p.last
	}
	if p.cancel == nil {
		ctx, cancel := context.WithCancel(context.Background())
		prev, done := p.done, make(chan struct{})
		p.cancel, p.done = cancel, done
		go p.run(ctx, prev, done)
	}
	return ch, func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		delete(p.subs, ch)
		if len(p.subs) == 0 && p.cancel != nil {
			p.cancel()
			p.cancel = nil
		}
	}
}

func (p *poller) run(ctx context.Context, prev, done chan struct{}) {
	defer close(done)
	if prev != nil {
		<-prev // never two polls at once
	}
	t := time.NewTicker(p.every)
	defer t.Stop()
	for {
		p.pollOnce(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// event is what a viewer receives.
type event struct {
	At     int64      `json:"at"`
	Error  string     `json:"error,omitempty"`
	Queues []queueRow `json:"queues"`
}

// queueRow is one queue's counts. Rate is the tasks finished per second
// between the last two polls, from the queue's stats (0 when they are off).
type queueRow struct {
	Key      string    `json:"k"` // the name in hex: names are any bytes
	Name     string    `json:"name"`
	Waiting  int64     `json:"waiting"`
	Delayed  int64     `json:"delayed"`
	InFlight int64     `json:"inFlight"`
	Weight   int64     `json:"weight"` // the slots the tasks in flight hold (weighted ones several)
	Dead     int64     `json:"dead"`
	Paused   bool      `json:"paused"`
	Limit    int       `json:"limit"`
	Rate     float64   `json:"rate"`
	Spark    []float64 `json:"spark"`
}

func (p *poller) pollOnce(ctx context.Context) {
	if ctx.Err() != nil {
		return
	}
	rctx, cancel := context.WithTimeout(ctx, max(p.every, 5*time.Second))
	infos, err := readQueues(rctx, p.c)
	var stats []worqr.Stats
	if err == nil {
		// Every minute that had not ended at the last poll, and one more.
		stats, err = readStats(rctx, p.c, infos, time.Now().Add(-p.every-2*time.Minute))
	}
	cancel()
	if ctx.Err() != nil {
		return
	}
	now := time.Now()
	ev := event{At: now.UnixMilli(), Queues: []queueRow{}}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.account(now, err)
	if err != nil {
		ev.Error = err.Error()
	}
	seen := make(map[string]bool, len(infos))
	for i, qi := range infos {
		seen[qi.Name] = true
		h := p.hist[qi.Name]
		if h == nil {
			h = &history{window: p.window}
			p.hist[qi.Name] = h
		}
		var rate float64
		if i < len(stats) { // else a failed read, whose error is shown
			if r, ok := h.next(stats[i]); ok {
				rate = r
				h.rates = append(h.rates, rate)
				if len(h.rates) > sparkLen {
					h.rates = h.rates[len(h.rates)-sparkLen:]
				}
			}
		}
		ev.Queues = append(ev.Queues, queueRow{
			Key: hex.EncodeToString([]byte(qi.Name)), Name: display(qi.Name),
			Waiting: qi.Waiting, Delayed: qi.Delayed, InFlight: qi.InFlight, Weight: qi.InFlightWeight, Dead: qi.Dead,
			Paused: qi.Paused, Limit: qi.Concurrency, Rate: rate, Spark: append([]float64(nil), h.rates...),
		})
	}
	if err == nil {
		for name := range p.hist {
			if !seen[name] {
				delete(p.hist, name)
			}
		}
	}
	b, merr := json.Marshal(ev)
	if merr != nil {
		p.log.Error("worqr dashboard: encoding counts", "err", merr)
		return
	}
	p.last = b
	for ch := range p.subs {
		select {
		case ch <- b:
		default:
			select { // drop the stale event for the fresh one
			case <-ch:
			default:
			}
			ch <- b
		}
	}
}

// account logs a poll's failure or success, as a change of state only:
// one WARN when polls begin to fail, one INFO with how long and how many
// when one succeeds again. Called with p.mu held.
func (p *poller) account(now time.Time, err error) {
	switch {
	case err != nil && p.failed == 0:
		p.failingSince, p.failed = now, 1
		p.log.Warn("worqr dashboard: reading queues failed; retrying each poll", "err", err)
	case err != nil:
		p.failed++
	case p.failed > 0:
		down := now.Sub(p.failingSince).Round(100 * time.Millisecond)
		p.log.Info(fmt.Sprintf("worqr dashboard: Redis back after %v", down), "down", down, "failed", p.failed)
		p.failingSince, p.failed = time.Time{}, 0
	}
}

// rateWindow is how far back a queue's finished/s looks (poller.window):
// the stats flusher writes its counts in batches, so that the tasks
// finished between two polls come in jumps; over a minute of polls they
// add up to a steady rate.
const rateWindow = time.Minute

// next takes a new read of a queue's recent minutes and returns the
// tasks finished per second over the polls of the last rateWindow (ok
// false on the first read). A minute's count only grows while it lasts,
// so the tasks finished between two reads are what each minute that had
// not ended at the first gained since.
func (h *history) next(s worqr.Stats) (rate float64, ok bool) {
	finished := make(map[int64]int64, len(s.Buckets))
	var gained int64
	for _, b := range s.Buckets {
		start := b.Start.Unix()
		finished[start] = b.Counts.Finished
		if b.Start.Add(time.Minute).After(h.at) {
			gained += b.Counts.Finished - h.finished[start]
		}
	}
	ok = !h.at.IsZero()
	if ok && s.Now.After(h.at) {
		h.gains = append(h.gains, gain{from: h.at, to: s.Now, n: max(gained, 0)})
	}
	h.finished, h.at = finished, s.Now
	window := h.window
	if window <= 0 {
		window = rateWindow
	}
	for len(h.gains) > 0 && !h.gains[0].to.After(s.Now.Add(-window)) {
		h.gains = h.gains[1:]
	}
	if len(h.gains) > 0 {
		var n int64
		for _, g := range h.gains {
			n += g.n
		}
		if dt := s.Now.Sub(h.gains[0].from).Seconds(); dt > 0 {
			rate = float64(n) / dt
		}
	}
	return rate, ok
}

// gain is the tasks a queue finished between two reads.
type gain struct {
	from, to time.Time
	n        int64
}

// readQueues reads every queue's counts and controls, sorted by name:
// the registry, then one round trip per queue.
func readQueues(ctx context.Context, c *worqr.Client) ([]worqr.QueueInfo, error) {
	names, err := c.Queues(ctx)
	if err != nil {
		return nil, err
	}
	slices.Sort(names)
	out := make([]worqr.QueueInfo, 0, len(names))
	for _, n := range names {
		qi, err := c.QueueInfo(ctx, n)
		if err != nil {
			return out, err
		}
		out = append(out, qi)
	}
	return out, nil
}

// readStats reads the queues' stats of the minutes since since: one round
// trip per queue (an HMGET of those minutes' fields, when since is recent).
func readStats(ctx context.Context, c *worqr.Client, infos []worqr.QueueInfo, since time.Time) ([]worqr.Stats, error) {
	out := make([]worqr.Stats, 0, len(infos))
	for _, qi := range infos {
		st, err := c.Stats(ctx, qi.Name, worqr.StatsOptions{Since: since})
		if err != nil {
			return out, err
		}
		out = append(out, st)
	}
	return out, nil
}

// events streams the counts to one viewer as Server-Sent Events. A
// viewer signed in with a session is streamed to while the session lasts:
// its sign-out ends the stream at once, its expiry at the next event.
func (h *handler) events(w http.ResponseWriter, r *http.Request) {
	var ended <-chan struct{} // nil, which never fires, without a session
	sid := h.session(r)
	if sid != "" {
		var ok bool
		if ended, ok = h.sessions.valid(sid, h.now()); !ok {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
	}
	// The poll is shared, so a stream costs no Redis read; what it holds
	// (a connection, a goroutine, a write per poll) is bounded here.
	client := clientAddr(r)
	done, ok := h.streams.open(client)
	if !ok {
		all, from := h.streams.count(client)
		secs := int64(streamBusyWait / time.Second)
		w.Header().Set("Retry-After", strconv.FormatInt(secs, 10))
		h.warnRefused("worqr dashboard: live stream refused: too many open", "remote", r.RemoteAddr, "open", all, "fromClient", from)
		http.Error(w, fmt.Sprintf("too many live streams open (%d, %d from this address); try again in %d s", all, from, secs), http.StatusServiceUnavailable)
		return
	}
	defer done()
	rc := http.NewResponseController(w)
	hd := w.Header()
	hd.Set("Content-Type", "text/event-stream")
	hd.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	// A client that stops reading would keep a write waiting, and its
	// stream counted, for ever: each write may wait writeWait.
	h.limitWrite(rc)
	if _, err := fmt.Fprintf(w, "retry: %d\n\n", max(h.opts.PollInterval.Milliseconds(), 1000)); err != nil {
		return
	}
	if rc.Flush() != nil {
		return
	}
	ch, unsubscribe := h.poll.subscribe()
	defer unsubscribe()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-ended:
			return
		case b := <-ch:
			if sid != "" {
				if _, ok := h.sessions.valid(sid, h.now()); !ok {
					return
				}
			}
			h.limitWrite(rc)
			if _, err := fmt.Fprintf(w, "event: counts\ndata: %s\n\n", b); err != nil {
				return
			}
			if rc.Flush() != nil {
				return
			}
		}
	}
}
