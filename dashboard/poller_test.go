package dashboard

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
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
	mu     sync.Mutex
	last   event
	done   chan struct{}
}

func (e *env) watch() *viewer {
	e.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	v := &viewer{cancel: cancel, done: make(chan struct{})}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.url("/events"), nil)
	require.NoError(e.t, err)
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
