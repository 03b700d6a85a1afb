package worqrotel_test

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

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/worqr/worqr"
	worqrotel "github.com/worqr/worqr/otel"
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

// collect reads every metric of reader.
func collect(t *testing.T, reader sdkmetric.Reader) metricdata.ResourceMetrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, reader.Collect(context.Background(), &rm))
	return rm
}

// find returns the metric of that name, or fails.
func find(t *testing.T, rm metricdata.ResourceMetrics, name string) metricdata.Metrics {
	t.Helper()
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name == name {
				require.Equal(t, worqrotel.ScopeName, sm.Scope.Name)
				return m
			}
		}
	}
	t.Fatalf("no metric %s", name)
	return metricdata.Metrics{}
}

// has reports whether a data point's attributes include every one of kvs.
func has(set attribute.Set, kvs ...attribute.KeyValue) bool {
	for _, kv := range kvs {
		if v, ok := set.Value(kv.Key); !ok || v != kv.Value {
			return false
		}
	}
	return true
}

// sum is the total of an int64 sum's data points with the attributes kvs
// (and -1 if it has none).
func sum(t *testing.T, rm metricdata.ResourceMetrics, name string, kvs ...attribute.KeyValue) int64 {
	t.Helper()
	data, ok := find(t, rm, name).Data.(metricdata.Sum[int64])
	require.True(t, ok, "%s is an int64 sum", name)
	total, found := int64(0), false
	for _, dp := range data.DataPoints {
		if has(dp.Attributes, kvs...) {
			total, found = total+dp.Value, true
		}
	}
	if !found {
		return -1
	}
	return total
}

// histogram is the data point of a float64 histogram with the attributes
// kvs.
func histogram(t *testing.T, rm metricdata.ResourceMetrics, name string, kvs ...attribute.KeyValue) metricdata.HistogramDataPoint[float64] {
	t.Helper()
	m := find(t, rm, name)
	require.Equal(t, "s", m.Unit)
	data, ok := m.Data.(metricdata.Histogram[float64])
	require.True(t, ok, "%s is a float64 histogram", name)
	for _, dp := range data.DataPoints {
		if has(dp.Attributes, kvs...) {
			return dp
		}
	}
	t.Fatalf("no %s data point with %v", name, kvs)
	return metricdata.HistogramDataPoint[float64]{}
}
