package dashboard

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/worqr/worqr"
)

// listCalls records, for each call of a script that lists a queue's
// tasks (waiting, delayed, dead letters), how many entries it asked
// for: the scripts read each entry whole.
type listCalls struct {
	mu sync.Mutex
	n  []int
}

func (l *listCalls) hook(_ context.Context, cmd rueidis.Completed) {
	args := cmd.Commands()
	if len(args) < 4 || args[0] != "EVALSHA" && args[0] != "EVAL" {
		return
	}
	keys, err := strconv.Atoi(args[2])
	if err != nil || len(args) != 3+keys+3 {
		return
	}
	last := args[2+keys]
	a, errA := strconv.Atoi(args[3+keys])
	b, errB := strconv.Atoi(args[4+keys])
	if errA != nil || errB != nil {
		return
	}
	var n int
	switch {
	case strings.HasSuffix(last, ":gwait"), strings.HasSuffix(last, ":delayed"): // start, stop
		n = b - a + 1
	case strings.HasSuffix(last, ":errors"): // offset, limit
		n = b
	default:
		return
	}
	l.mu.Lock()
	l.n = append(l.n, n)
	l.mu.Unlock()
}

func (l *listCalls) take() []int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := l.n
	l.n = nil
	return n
}

// An attacker, or an operator, opens the page of a queue whose tasks are
// large: the scripts that list tasks read each whole, and a thousand of
// a megabyte read in one call held a real Redis for 9 s, past every
// worker's lease (3 s by default), which fenced the fleet. Every list
// the queue page, a kind's page, a payload search or a bulk action by
// kind reads is read in calls of about callBytes; the kinds' counts stop
// at kindBytes of each list, and say so; a filtered page, which may read
// a thousand tasks of each list, is a lookup in the shared budget.
func TestBigTasksReadInSmallCalls(t *testing.T) {
	// Not parallel: it moves many megabytes through miniredis, and would
	// slow the others past their deadlines under -race.
	e := newEnv(t, Options{})
	// A lookup is charged its duration by this clock: frozen, each costs
	// lookupMinCost, however slow miniredis is under -race.
	advance := e.frozen()
	ctx := e.ctx()
	const size = 300 << 10 // callBytes holds 3
	const perCall = callBytes / (size + entryOverhead)
	big := []byte(strings.Repeat("b", size))
	n := kindBytes/size + 10 // more than the kinds' counts read
	for range n {
		_, err := e.c.Enqueue(ctx, "q", big, worqr.Kind("big"))
		require.NoError(t, err)
	}
	for range 4 {
		_, err := e.c.Enqueue(ctx, "q", big, worqr.Kind("big"), worqr.In(time.Hour))
		require.NoError(t, err)
	}
	w, err := e.c.NewWorker(ctx, worqr.WorkerOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = w.Close(e.ctx()) })
	require.NoError(t, w.StartWork(ctx, "d", worqr.Events{}))
	for range 4 {
		_, err := e.c.Enqueue(ctx, "d", big, worqr.Kind("big"))
		require.NoError(t, err)
		p, err := w.Dequeue(ctx, "d")
		require.NoError(t, err)
		require.NoError(t, p.DeadLetter(ctx, errors.New("boom")))
	}
	var calls listCalls
	hook := calls.hook
	e.rdb.hold.Store(&hook)
	atMost := func(what string) {
		t.Helper()
		got := calls.take()
		require.NotEmpty(t, got, what)
		for _, k := range got {
			assert.LessOrEqual(t, k, perCall, "%s: a call asked for %d tasks of %d bytes (all: %v)", what, k, size, got)
		}
	}

	code, body := e.get("/queue/q")
	require.Equal(t, http.StatusOK, code)
	atMost("the queue page")
	assert.Contains(t, body, "(a list holds more)", "the kinds' counts stopped at kindBytes")
	assert.Contains(t, body, `<td class="n">`+strconv.Itoa(kindBytes/(size+entryOverhead)+1)+`</td>`, "and counted what they read")
	code, _ = e.get("/queue/q?kind=big&only=scheduled")
	require.Equal(t, http.StatusOK, code)
	atMost("a filtered page")
	code, _ = e.get("/queue/d?kind=big")
	require.Equal(t, http.StatusOK, code)
	atMost("a filtered page of dead letters")
	code, _ = e.get("/search?queue=q&payload=nowhere")
	require.Equal(t, http.StatusOK, code)
	atMost("a payload search")
	tok := e.csrf()
	calls.take()
	code, loc := e.post("/action", url.Values{"csrf": {tok}, "op": {"bulk"}, "q": {qx("d")}, "by": {"dead-delete-kind"}, "kind": {"big"}, "confirmed": {"yes"}})
	require.Equal(t, http.StatusSeeOther, code)
	assert.Contains(t, loc, "n=4")
	atMost("a bulk action by kind")

	// A filtered page is a lookup: refused, reading nothing, once the
	// budget is spent; the plain page is not.
	e.h.lookups.mu.Lock()
	e.h.lookups.avail, e.h.lookups.at = -lookupBurst, e.h.now()
	e.h.lookups.mu.Unlock()
	res := e.raw("/queue/q?kind=big", nil)
	assert.Equal(t, http.StatusTooManyRequests, res.code)
	assert.NotEmpty(t, res.header.Get("Retry-After"))
	assert.Empty(t, calls.take(), "a refused page reads no list")
	assert.Equal(t, http.StatusOK, e.raw("/queue/q", nil).code)
	advance(time.Duration(float64(lookupBurst+lookupMinCost) / lookupShare))
	assert.Equal(t, http.StatusOK, e.raw("/queue/q?kind=big", nil).code)
}

// sized reads small tasks in few calls, and stops at its limit.
func TestSized(t *testing.T) {
	t.Parallel()
	sizes := make([]int, 1000)
	for i := range sizes {
		sizes[i] = 100
	}
	var asked []int
	read := func(from, n int) ([]int, error) {
		asked = append(asked, n)
		return sizes[min(from, len(sizes)):min(from+n, len(sizes))], nil
	}
	id := func(s int) int { return s }
	ts, cut, err := sized(read, id, 0)(0, 999)
	require.NoError(t, err)
	assert.Len(t, ts, 999)
	assert.False(t, cut)
	assert.Equal(t, []int{1, 998}, asked, "one to learn the size, then the rest")

	asked = nil
	ts, cut, err = sized(read, id, 50*(100+entryOverhead))(0, 999)
	require.NoError(t, err)
	assert.True(t, cut)
	assert.Len(t, ts, 50, "no call reads past the limit")
	assert.Equal(t, []int{1, 49}, asked)

	for i := range sizes {
		sizes[i] = callBytes
	}
	asked = nil
	ts, cut, err = sized(read, id, 3*callBytes)(0, 999)
	require.NoError(t, err)
	assert.True(t, cut)
	assert.Len(t, ts, 3)
	assert.Equal(t, []int{1, 1, 1}, asked)

	asked = nil
	ts, cut, err = sized(read, id, 0)(995, 50)
	require.NoError(t, err)
	assert.False(t, cut, "the end of the list")
	assert.Len(t, ts, 5)
}

// A filtered page stops at filterBytes of payloads read, and its next
// page starts where it stopped; under it, at the end of the list.
func TestFilteredStopsAtFilterBytes(t *testing.T) {
	t.Parallel()
	sizes := make([]int, 500)
	for i := range sizes {
		sizes[i] = callBytes
	}
	var asked []int
	read := func(from, n int) ([]int, error) {
		asked = append(asked, n)
		return sizes[min(from, len(sizes)):min(from+n, len(sizes))], nil
	}
	none := func(int) bool { return false }
	id := func(s int) int { return s }
	out, next, err := filtered(10, read, none, id)
	require.NoError(t, err)
	assert.Empty(t, out)
	read1 := filterBytes/(callBytes+entryOverhead) + 1
	assert.Equal(t, 10+read1, next, "the next page starts where this one stopped")
	assert.Len(t, asked, read1, "a task a call")

	sizes = sizes[:20]
	out, next, err = filtered(0, read, none, id)
	require.NoError(t, err)
	assert.Empty(t, out)
	assert.Zero(t, next, "the end of the list")
}

// A payload search stops at its byte limit however the reads fall: when
// a chunk's last read, or a list's, ends past the limit, the next list or
// chunk reads nothing more (a limit used up is no limit to sized).
func TestScanListsStopsAtItsLimit(t *testing.T) {
	t.Parallel()
	const size = 1000
	var asked int
	list := func(n int) func(from, k int) ([]worqr.TaskInfo, error) {
		return func(from, k int) ([]worqr.TaskInfo, error) {
			var out []worqr.TaskInfo
			for i := from; i < min(from+k, n); i++ {
				out = append(out, worqr.TaskInfo{Size: size})
			}
			asked += len(out)
			return out, nil
		}
	}
	// The first list ends just past the limit; the next two are long.
	limit := 10*(size+entryOverhead) - 1
	d := foundData{Text: "x"}
	require.NoError(t, scanLists(&d, limit, []payloadList{{"waiting", list(10)}, {"delayed", list(searchScan)}, {"dead", list(searchScan)}}))
	assert.True(t, d.Cut, "stopped at the limit")
	assert.LessOrEqual(t, asked, 11, "read past the limit: %d tasks of %d bytes, the limit %d", asked, size, limit)

	// A chunk whose last read ends past the limit.
	asked = 0
	limit = searchChunk*(size+entryOverhead) - 1
	d = foundData{Text: "x"}
	require.NoError(t, scanLists(&d, limit, []payloadList{{"waiting", list(searchScan)}}))
	assert.True(t, d.Cut, "stopped at the limit")
	assert.LessOrEqual(t, asked, searchChunk+1, "read past the limit: %d tasks of %d bytes, the limit %d", asked, size, limit)
}

// A filtered page stops at filterBytes when a chunk's last read ends
// past it: the next chunk reads nothing (a limit used up is no limit to
// sized).
func TestFilteredStopsWhenAChunkEndsPastFilterBytes(t *testing.T) {
	t.Parallel()
	size := filterBytes / filterChunk // a chunk ends just past filterBytes
	asked := 0
	read := func(from, n int) ([]int, error) {
		k := max(min(n, filterScan-from), 0)
		asked += k
		out := make([]int, k)
		for i := range out {
			out[i] = size
		}
		return out, nil
	}
	none := func(int) bool { return false }
	id := func(s int) int { return s }
	_, next, err := filtered(0, read, none, id)
	require.NoError(t, err)
	assert.LessOrEqual(t, asked, filterChunk+1, "read %d tasks of %d bytes, past filterBytes", asked, size)
	assert.Equal(t, asked, next, "the next page starts where this one stopped")
}
