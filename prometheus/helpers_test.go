package worqrprom_test

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

// backend starts an in-memory Redis (miniredis speaks RESP2 only and has
// no client tracking, hence the rueidis options).
func backend(t *testing.T) *miniredis.Miniredis {
	t.Helper()
	m := miniredis.NewMiniRedis()
	m.ClockTTL(true)
	require.NoError(t, m.Start())
	t.Cleanup(m.Close)
	return m
}

// redisOn is a rueidis client of m, closed at the end of the test.
func redisOn(t *testing.T, m *miniredis.Miniredis) rueidis.Client {
	t.Helper()
	rdb, err := rueidis.NewClient(rueidis.ClientOption{
		InitAddress: []string{m.Addr()}, DisableCache: true, AlwaysRESP2: true, ForceSingleClient: true,
	})
	require.NoError(t, err)
	t.Cleanup(rdb.Close)
	return rdb
}

// clientOn is a worqr client of m with an observer, closed at the end of
// the test.
func clientOn(t *testing.T, rdb rueidis.Client, observer any) *worqr.Client {
	t.Helper()
	c, err := worqr.New(worqr.Options{Redis: rdb, Observer: observer, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	return c
}

func newWorker(t *testing.T, c *worqr.Client, opts worqr.WorkerOptions) *worqr.Worker {
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

// eventually polls cond until it holds or the deadline passes.
func eventually(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", within, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestCoreHasNoMetricsDependencies keeps Prometheus and OpenTelemetry out
// of the core package: programs that import only worqr must not build
// them.
func TestCoreHasNoMetricsDependencies(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH")
	}
	out, err := exec.Command(goBin, "list", "-deps", "github.com/worqr/worqr").Output()
	require.NoError(t, err)
	deps := strings.Fields(string(out))
	require.Contains(t, deps, "github.com/worqr/worqr")
	for _, dep := range deps {
		for _, banned := range []string{"github.com/prometheus/", "go.opentelemetry.io/"} {
			if strings.HasPrefix(dep, banned) {
				t.Errorf("the core package depends on %s", dep)
			}
		}
	}
}
