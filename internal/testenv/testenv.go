// Package testenv holds the test helpers that worqr's sub-packages (the
// Prometheus and OpenTelemetry packages) share: an in-memory Redis, a
// worqr client and worker on it, waiting with a deadline, and the check
// that the core package stays free of metrics dependencies. Only tests
// import it.
package testenv

import (
	"context"
	"io"
	"log/slog"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"

	"github.com/worqr/worqr"
)

// Backend starts an in-memory Redis (miniredis speaks RESP2 only and has
// no client tracking, hence the rueidis options of RedisOn).
func Backend(t *testing.T) *miniredis.Miniredis {
	t.Helper()
	m := miniredis.NewMiniRedis()
	m.ClockTTL(true)
	require.NoError(t, m.Start())
	t.Cleanup(m.Close)
	return m
}

// RedisOn is a rueidis client of m, closed at the end of the test.
func RedisOn(t *testing.T, m *miniredis.Miniredis) rueidis.Client {
	t.Helper()
	rdb, err := rueidis.NewClient(rueidis.ClientOption{
		InitAddress: []string{m.Addr()}, DisableCache: true, AlwaysRESP2: true, ForceSingleClient: true,
	})
	require.NoError(t, err)
	t.Cleanup(rdb.Close)
	return rdb
}

// ClientOn is a worqr client on rdb with an observer, closed at the end
// of the test.
func ClientOn(t *testing.T, rdb rueidis.Client, observer any) *worqr.Client {
	t.Helper()
	c, err := worqr.New(worqr.Options{Redis: rdb, Observer: observer, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	return c
}

// NewWorker is a worker of c, closed at the end of the test.
func NewWorker(t *testing.T, c *worqr.Client, opts worqr.WorkerOptions) *worqr.Worker {
	t.Helper()
	w, err := c.NewWorker(context.Background(), opts)
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = w.Close(ctx)
	})
	return w
}

// Eventually polls cond until it holds or the deadline passes.
func Eventually(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", within, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// RequireCoreWithout fails the test if the core package depends on one
// of banned: a package path, or, ending in "/", every path under it.
// Programs that import only worqr must not build the metrics libraries or
// database drivers that modules of their own bring in.
func RequireCoreWithout(t *testing.T, banned ...string) {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH")
	}
	out, err := exec.Command(goBin, "list", "-deps", "github.com/worqr/worqr").Output()
	require.NoError(t, err)
	deps := strings.Fields(string(out))
	require.Contains(t, deps, "github.com/worqr/worqr")
	for _, dep := range deps {
		for _, b := range banned {
			if dep == b || strings.HasSuffix(b, "/") && strings.HasPrefix(dep, b) {
				t.Errorf("the core package depends on %s", dep)
			}
		}
	}
}

// RequireCoreWithoutMetrics fails the test if the core package depends
// on Prometheus or OpenTelemetry.
func RequireCoreWithoutMetrics(t *testing.T) {
	t.Helper()
	RequireCoreWithout(t, "github.com/prometheus/", "go.opentelemetry.io/")
}

// RunKinds enqueues one task of each kind on queue with c, in order, and
// has a worker of c take and finish them one at a time, so that an
// observer sees the kinds started in that order ("" is a task without a
// kind).
func RunKinds(t *testing.T, c *worqr.Client, queue string, kinds ...string) {
	t.Helper()
	ctx := context.Background()
	for _, kind := range kinds {
		_, err := c.Enqueue(ctx, queue, []byte(kind), worqr.Kind(kind))
		require.NoError(t, err)
	}
	w := NewWorker(t, c, worqr.WorkerOptions{})
	require.NoError(t, w.StartWork(ctx, queue, worqr.Events{}))
	for range kinds {
		p, err := w.Dequeue(ctx, queue)
		require.NoError(t, err)
		require.NoError(t, p.Finish(ctx))
	}
}
