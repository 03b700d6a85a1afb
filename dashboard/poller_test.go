package dashboard

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// viewer is one SSE connection, counting the events it gets.
type viewer struct {
	cancel context.CancelFunc
	events atomic.Int64
	failed atomic.Int64 // the events that carried an error
	mu     sync.Mutex
	last   event
	done   chan struct{}
}

// watch opens /events with the headers given as name, value pairs.
func (e *env) watch(header ...string) *viewer {
	e.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	v := &viewer{cancel: cancel, done: make(chan struct{})}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.url("/events"), nil)
	require.NoError(e.t, err)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Add(header[i], header[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	require.NoError(e.t, err)
	require.Equal(e.t, http.StatusOK, res.StatusCode)
	require.Equal(e.t, "text/event-stream", res.Header.Get("Content-Type"))
	go func() {
		defer close(v.done)
		defer res.Body.Close()
		sc := bufio.NewScanner(res.Body)
		for sc.Scan() {
			if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				var ev event
				if json.Unmarshal([]byte(data), &ev) == nil {
					v.mu.Lock()
					v.last = ev
					v.mu.Unlock()
					if ev.Error != "" {
						v.failed.Add(1)
					}
					v.events.Add(1)
				}
			}
		}
	}()
	e.t.Cleanup(v.close)
	return v
}

func (v *viewer) close() { v.cancel(); <-v.done }

func (p *poller) running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cancel != nil
}

// However many viewers watch, Redis is read once per interval; and not at
// all while no one watches.
func TestPollerReadsOncePerInterval(t *testing.T) {
	t.Parallel()
	const every = 40 * time.Millisecond
	e := newEnv(t, Options{PollInterval: every})
	ctx := e.ctx()
	for _, q := range []string{"a", "b", "c"} {
		_, err := e.c.Enqueue(ctx, q, []byte("x"))
		require.NoError(t, err)
	}
	before := e.rdb.n.Load()
	infos, err := readQueues(ctx, e.c)
	require.NoError(t, err)
	_, err = readStats(ctx, e.c, infos, time.Now().Add(-time.Minute))
	require.NoError(t, err)
	perPoll := e.rdb.n.Load() - before
	require.Positive(t, perPoll)

	idle := e.rdb.n.Load()
	time.Sleep(5 * every)
	assert.Equal(t, idle, e.rdb.n.Load(), "no reads without viewers")
	assert.False(t, e.h.poll.running())

	start, began := e.rdb.n.Load(), time.Now()
	viewers := make([]*viewer, 8)
	for i := range viewers {
		viewers[i] = e.watch()
	}
	eventually(t, "every viewer gets 10 events", func() bool {
		for _, v := range viewers {
			if v.events.Load() < 10 {
				return false
			}
		}
		return true
	})
	elapsed := time.Since(began)
	reads := e.rdb.n.Load() - start
	polls := float64(reads) / float64(perPoll)
	maxPolls := float64(elapsed/every) + 2
	t.Logf("%d viewers, %v: %d commands, %.1f polls (at most %.0f allowed), %d per poll", len(viewers), elapsed, reads, polls, maxPolls, perPoll)
	assert.LessOrEqual(t, polls, maxPolls, "one poll per interval for all viewers")
	var most int64
	for _, v := range viewers {
		most = max(most, v.events.Load())
	}
	assert.LessOrEqual(t, polls, float64(most)+2, "each poll is an event for every viewer")

	viewers[0].mu.Lock()
	last := viewers[0].last
	viewers[0].mu.Unlock()
	require.Len(t, last.Queues, 3)
	assert.EqualValues(t, 1, last.Queues[0].Waiting)
	assert.Equal(t, qx(last.Queues[0].Name), last.Queues[0].Key)

	// A count change reaches the viewers.
	_, err = e.c.Enqueue(ctx, "a", []byte("y"))
	require.NoError(t, err)
	eventually(t, "the new count", func() bool {
		viewers[3].mu.Lock()
		defer viewers[3].mu.Unlock()
		for _, q := range viewers[3].last.Queues {
			if q.Name == "a" {
				return q.Waiting == 2
			}
		}
		return false
	})

	for _, v := range viewers {
		v.close()
	}
	eventually(t, "the poller stops", func() bool { return !e.h.poll.running() })
	e.h.poll.mu.Lock()
	done := e.h.poll.done
	e.h.poll.mu.Unlock()
	<-done
	stopped := e.rdb.n.Load()
	time.Sleep(5 * every)
	assert.Equal(t, stopped, e.rdb.n.Load(), "no reads once the last viewer left")

	// And it starts again for a new viewer.
	v := e.watch()
	eventually(t, "an event", func() bool { return v.events.Load() > 0 })
}

// records is a slog.Handler that keeps what is logged through it.
type records struct {
	mu   sync.Mutex
	recs []record
}

// record is one line logged, its attributes by key.
type record struct {
	level slog.Level
	msg   string
	attrs map[string]slog.Value
}

func (r record) String() string { return fmt.Sprintf("%v %q %v", r.level, r.msg, r.attrs) }

func (r *records) Enabled(context.Context, slog.Level) bool { return true }
func (r *records) WithAttrs([]slog.Attr) slog.Handler       { return r }
func (r *records) WithGroup(string) slog.Handler            { return r }

func (r *records) Handle(_ context.Context, rec slog.Record) error {
	l := record{level: rec.Level, msg: rec.Message, attrs: make(map[string]slog.Value)}
	rec.Attrs(func(a slog.Attr) bool {
		l.attrs[a.Key] = a.Value.Resolve()
		return true
	})
	r.mu.Lock()
	defer r.mu.Unlock()
	r.recs = append(r.recs, l)
	return nil
}

// at returns the lines logged at level.
func (r *records) at(level slog.Level) []record {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []record
	for _, l := range r.recs {
		if l.level == level {
			out = append(out, l)
		}
	}
	return out
}

// Polls that fail while Redis is down log one WARN when they start
// failing and one INFO, with how long and how many, when one succeeds
// again: not a line a poll.
func TestPollerLogsTheStartAndEndOfFailures(t *testing.T) {
	t.Parallel()
	logs := &records{}
	e := newEnv(t, Options{PollInterval: 10 * time.Millisecond, Logger: slog.New(logs)})
	_, err := e.c.Enqueue(e.ctx(), "a", []byte("x"))
	require.NoError(t, err)
	v := e.watch()
	eventually(t, "a poll that succeeds", func() bool { return v.events.Load() > 0 })
	require.Zero(t, v.failed.Load())

	e.m.SetError("MASTERDOWN Link with MASTER is down")
	eventually(t, "ten polls that fail", func() bool { return v.failed.Load() >= 10 })
	warns := logs.at(slog.LevelWarn)
	require.Len(t, warns, 1, "one WARN when polls start failing")
	assert.Contains(t, warns[0].attrs["err"].String(), "MASTERDOWN")
	assert.Empty(t, logs.at(slog.LevelError), "no line per failed poll")
	assert.Empty(t, logs.at(slog.LevelInfo), "no INFO while polls fail")

	e.m.SetError("")
	seen := v.events.Load()
	eventually(t, "polls that succeed again", func() bool {
		v.mu.Lock()
		defer v.mu.Unlock()
		return v.last.Error == "" && v.events.Load() >= seen+5
	})
	infos := logs.at(slog.LevelInfo)
	require.Len(t, infos, 1, "one INFO when a poll succeeds again")
	assert.Contains(t, infos[0].msg, "Redis back after")
	assert.GreaterOrEqual(t, infos[0].attrs["failed"].Int64(), v.failed.Load(), "the failed polls counted")
	assert.Positive(t, infos[0].attrs["down"].Duration())
	assert.Len(t, logs.at(slog.LevelWarn), 1)
	assert.Empty(t, logs.at(slog.LevelError))
}

// ended says whether v's stream ended on the server's side before the
// deadline.
func (v *viewer) ended(t *testing.T) bool {
	t.Helper()
	select {
	case <-v.done:
		return true
	case <-time.After(5 * time.Second):
		return false
	}
}

// A signed-in browser's live stream lasts as long as its session: its
// sign-out ends it at once, and its expiry at the next event; a stream
// opened with a bearer token is not a session's.
func TestEventsEndWithSession(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Options{Token: testToken, PollInterval: 20 * time.Millisecond})
	clk := e.clock()
	signIn := func() string {
		t.Helper()
		code, _ := e.post("/login", url.Values{"token": {testToken}})
		require.Equal(t, http.StatusSeeOther, code)
		return e.jarCookie(sessionCookie)
	}

	sid := signIn()
	v := e.watch("Cookie", sessionCookie+"="+sid)
	bearer := e.watch("Authorization", "Bearer "+testToken)
	eventually(t, "an event", func() bool { return v.events.Load() > 0 })
	code, _ := e.post("/logout", url.Values{"csrf": {e.csrf()}})
	require.Equal(t, http.StatusSeeOther, code)
	assert.True(t, v.ended(t), "the stream outlived its sign-out")
	seen := bearer.events.Load()
	eventually(t, "the bearer stream goes on", func() bool { return bearer.events.Load() > seen })

	sid = signIn()
	v = e.watch("Cookie", sessionCookie+"="+sid)
	eventually(t, "an event", func() bool { return v.events.Load() > 0 })
	clk.advance(sessionLifetime)
	assert.True(t, v.ended(t), "the stream outlived its session")
	assert.Equal(t, http.StatusUnauthorized, e.raw("/events", nil, "Cookie", sessionCookie+"="+sid).code)
}
