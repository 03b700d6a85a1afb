package dashboard

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// frozen sets the handler's clock to one that moves only when the test
// advances it, so that a lookup's measured duration is zero and its cost
// lookupMinCost.
func (e *env) frozen() func(time.Duration) {
	var off atomic.Int64
	t0 := time.Now()
	e.h.now = func() time.Time { return t0.Add(time.Duration(off.Load())) }
	return func(d time.Duration) { off.Add(int64(d)) }
}

// Lookups of unknown ids, which scan the queue, share one budget of
// Redis time across all clients: past it they get 429 with Retry-After,
// and Redis is not asked; it refills with time.
func TestLookupBudget(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Options{})
	advance := e.frozen()
	_, err := e.c.Enqueue(e.ctx(), "q", []byte("x"))
	require.NoError(t, err)
	unknown := "/task?q=" + qx("q") + "&id=unknown"

	allowed := int(lookupBurst / lookupMinCost)
	for i := range allowed {
		require.Equal(t, http.StatusNotFound, e.raw(unknown, nil).code, "lookup %d", i)
	}
	var res response
	reads := e.fewestReads(func() {
		res = e.raw(unknown, nil)
		assert.Equal(t, http.StatusTooManyRequests, res.code)
		assert.Contains(t, res.body, "too many task lookups")
		assert.Equal(t, "1", res.header.Get("Retry-After"))
	})
	assert.Zero(t, reads, "a refused lookup reads nothing")

	// Cancelling by id scans the queue too, and is in the same budget.
	tok := e.csrf()
	res = e.raw("/action", url.Values{"csrf": {tok}, "op": {"cancel"}, "q": {qx("q")}, "id": {"unknown"}, "confirmed": {"yes"}},
		"Cookie", csrfCookie+"="+e.jarCookie(csrfCookie))
	assert.Equal(t, http.StatusTooManyRequests, res.code)

	wait, err := strconv.Atoi(res.header.Get("Retry-After"))
	require.NoError(t, err)
	advance(time.Duration(float64(lookupMinCost) / lookupShare))
	assert.Equal(t, http.StatusNotFound, e.raw(unknown, nil).code, "one more after its share of time")
	assert.Equal(t, http.StatusTooManyRequests, e.raw(unknown, nil).code)
	advance(time.Duration(wait) * time.Second)
	assert.Equal(t, http.StatusNotFound, e.raw(unknown, nil).code)

	// One at a time: a lookup refused while another runs.
	var l lookups
	now := time.Now()
	end, wait2 := l.begin(now)
	require.NotNil(t, end)
	require.Zero(t, wait2)
	again, busy := l.begin(now)
	assert.Nil(t, again)
	assert.Equal(t, lookupBusyWait, busy)
	done := now.Add(2 * lookupBurst) // a long one owes its duration
	end(done)
	_, owed := l.begin(done)
	assert.Equal(t, time.Duration(float64(lookupBurst+lookupMinCost)/lookupShare), owed.Round(time.Millisecond))
}

// A page requested from another site reads nothing from Redis: an image
// or a fetch is refused, a link followed gets a page with a link to the
// same address; the dashboard's own pages, addresses typed in and
// clients that send no such header are served.
func TestCrossSitePagesReadNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Options{})
	_, err := e.c.Enqueue(e.ctx(), "q", []byte("x"))
	require.NoError(t, err)
	task := "/task?q=" + qx("q") + "&id=unknown"
	for _, path := range []string{task, "/", "/queue?q=" + qx("q"), "/queue/q", "/task/q/unknown", "/search?id=unknown", "/search?queue=q&id=unknown", "/workers", "/periodic", "/events"} {
		for _, header := range [][]string{
			{"Sec-Fetch-Site", "cross-site", "Sec-Fetch-Mode", "no-cors", "Sec-Fetch-Dest", "image"},
			{"Sec-Fetch-Site", "same-site", "Sec-Fetch-Mode", "cors", "Origin", "http://127.0.0.1:1"},
			{"Origin", "https://evil.example"},
			{"Origin", "null"},
		} {
			reads := e.fewestReads(func() {
				assert.Equal(t, http.StatusForbidden, e.raw(path, nil, header...).code, "%s %v", path, header)
			})
			assert.Zero(t, reads, "%s %v read Redis", path, header)
		}
	}
	reads := e.fewestReads(func() {
		res := e.raw(task, nil, "Sec-Fetch-Site", "cross-site", "Sec-Fetch-Mode", "navigate", "Sec-Fetch-Dest", "document")
		assert.Equal(t, http.StatusOK, res.code)
		assert.Contains(t, res.body, `href="/ops/task?q=`+qx("q")+`&amp;id=unknown"`)
	})
	assert.Zero(t, reads, "a link from elsewhere read Redis")

	for _, header := range [][]string{
		{"Sec-Fetch-Site", "same-origin", "Sec-Fetch-Mode", "navigate"},
		{"Sec-Fetch-Site", "none", "Sec-Fetch-Mode", "navigate"},
		{"Origin", e.srv.URL},
		nil,
	} {
		assert.Equal(t, http.StatusNotFound, e.raw(task, nil, header...).code, "%v", header)
	}
}

// A flood of refused requests is a log line per refusalEvery, which
// counts the ones not logged, not a line each.
func TestRefusalsLogQuietly(t *testing.T) {
	t.Parallel()
	recs := &records{}
	e := newEnv(t, Options{Logger: slog.New(recs)})
	advance := e.frozen()
	img := []string{"Sec-Fetch-Site", "cross-site", "Sec-Fetch-Mode", "no-cors", "Sec-Fetch-Dest", "image"}
	for range 50 {
		require.Equal(t, http.StatusForbidden, e.raw("/task?q="+qx("q")+"&id=x", nil, img...).code)
	}
	require.Len(t, recs.at(slog.LevelWarn), 1)
	advance(refusalEvery)
	require.Equal(t, http.StatusForbidden, e.raw("/", nil, img...).code)
	warns := recs.at(slog.LevelWarn)
	require.Len(t, warns, 2)
	assert.EqualValues(t, 49, warns[1].attrs["unlogged"].Int64())
}

// A lookup's call does not end with its request: the script it sent runs
// on in Redis, so a client that hangs up must not free the budget's slot
// before the call returns.
func TestLookupOutlivesItsRequest(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Options{})
	_, err := e.c.Enqueue(e.ctx(), "q", []byte("x"))
	require.NoError(t, err)
	entered := make(chan context.Context, 1)
	release := make(chan struct{})
	hold := func(ctx context.Context, cmd rueidis.Completed) {
		if slices.Contains(cmd.Commands(), "held-id") {
			select { // the first command; the ones after it go through
			case entered <- ctx:
			default:
			}
			select {
			case <-release:
			case <-ctx.Done():
			}
		}
	}
	e.rdb.hold.Store(&hold)
	busy := func() bool {
		e.h.lookups.mu.Lock()
		defer e.h.lookups.mu.Unlock()
		return e.h.lookups.busy
	}

	ctx, cancel := context.WithCancel(context.Background())
	r := httptest.NewRequest(http.MethodGet, "http://127.0.0.1/task?q="+qx("q")+"&id=held-id", nil).WithContext(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		e.h.ServeHTTP(httptest.NewRecorder(), r)
	}()
	call := <-entered
	cancel() // the client hangs up
	assert.NoError(t, call.Err(), "the lookup's call ended with its request")
	assert.True(t, busy())
	close(release)
	<-done
	assert.False(t, busy())
}
