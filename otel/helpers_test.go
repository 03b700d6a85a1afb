package worqrotel_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/worqr/worqr/internal/testenv"
	worqrotel "github.com/worqr/worqr/otel"
)

// The core package stays free of Prometheus and OpenTelemetry.
func TestCoreHasNoMetricsDependencies(t *testing.T) { testenv.RequireCoreWithoutMetrics(t) }

// Short names for the shared test helpers.
var (
	backend    = testenv.Backend
	redisOn    = testenv.RedisOn
	clientOn   = testenv.ClientOn
	newWorker  = testenv.NewWorker
	eventually = testenv.Eventually
)

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

// sum is the total of the data points of an int64 sum or gauge with the
// attributes kvs (and -1 if it has none).
func sum(t *testing.T, rm metricdata.ResourceMetrics, name string, kvs ...attribute.KeyValue) int64 {
	t.Helper()
	var points []metricdata.DataPoint[int64]
	switch data := find(t, rm, name).Data.(type) {
	case metricdata.Sum[int64]:
		points = data.DataPoints
	case metricdata.Gauge[int64]:
		points = data.DataPoints
	default:
		t.Fatalf("%s is %T, not an int64 sum or gauge", name, data)
	}
	total, found := int64(0), false
	for _, dp := range points {
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
