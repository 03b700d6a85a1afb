package worqroutboxotel

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	worqroutbox "github.com/worqr/worqr/outbox"
	"github.com/worqr/worqr/outbox/internal/outboxtest"
)

func newOutbox(t *testing.T) (*worqroutbox.Outbox, *pgxpool.Pool) {
	t.Helper()
	return outboxtest.New(t, "worqr_outbox_otel_")
}

// collect registers the instruments on a manual reader and reads them
// once, by name.
func collect(t *testing.T, ob *worqroutbox.Outbox, db worqroutbox.Querier, opts Options) map[string]metricdata.Metrics {
	t.Helper()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	opts.MeterProvider = mp
	reg, err := Register(ob, db, opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = reg.Unregister() })
	var rm metricdata.ResourceMetrics
	require.NoError(t, reader.Collect(context.Background(), &rm))
	out := map[string]metricdata.Metrics{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			out[m.Name] = m
		}
	}
	return out
}

// one is the single data point of m, checked to carry the table.
func one[N int64 | float64](t *testing.T, ob *worqroutbox.Outbox, m metricdata.Metrics) N {
	t.Helper()
	var points []metricdata.DataPoint[N]
	switch d := m.Data.(type) {
	case metricdata.Sum[N]:
		points = d.DataPoints
	case metricdata.Gauge[N]:
		points = d.DataPoints
	default:
		t.Fatalf("%s: unexpected data %T", m.Name, m.Data)
	}
	require.Len(t, points, 1, m.Name)
	v, ok := points[0].Attributes.Value(TableKey)
	require.True(t, ok, m.Name)
	require.Equal(t, ob.Name(), v.AsString())
	return points[0].Value
}

func TestRegisterReportsTheBacklogItsAgeAndFailedRows(t *testing.T) {
	ob, pool := newOutbox(t)
	ctx := context.Background()
	for range 3 {
		_, err := ob.Enqueue(ctx, pool, "q", []byte("x"))
		require.NoError(t, err)
	}
	_, err := pool.Exec(ctx, "UPDATE "+ob.Table()+" SET created_at = now() - interval '1 hour'")
	require.NoError(t, err)
	_, err = pool.Exec(ctx, "INSERT INTO "+ob.Table()+" (id, queue, payload, error, failed_at) VALUES ($1, 'q', 'y', 'refused', now())", uuid.Must(uuid.NewV7()).String())
	require.NoError(t, err)

	m := collect(t, ob, pool, Options{})
	require.EqualValues(t, 3, one[int64](t, ob, m["worqr.outbox.backlog"]))
	require.EqualValues(t, 1, one[int64](t, ob, m["worqr.outbox.failed"]))
	age := one[float64](t, ob, m["worqr.outbox.oldest_waiting"])
	require.GreaterOrEqual(t, age, time.Hour.Seconds())
	require.Less(t, age, (time.Hour + time.Minute).Seconds())
	require.Equal(t, "s", m["worqr.outbox.oldest_waiting"].Unit)
	require.Zero(t, one[int64](t, ob, m["worqr.outbox.scrape.errors"]))
}

// A collection whose query fails reports no numbers, counts the error
// and hands it to OnError.
func TestRegisterCountsAFailedCollection(t *testing.T) {
	ob, pool := newOutbox(t)
	_, err := pool.Exec(context.Background(), "DROP TABLE "+ob.Table())
	require.NoError(t, err)
	var got []error
	m := collect(t, ob, pool, Options{OnError: func(err error) { got = append(got, err) }})
	require.NotContains(t, m, "worqr.outbox.backlog")
	require.EqualValues(t, 1, one[int64](t, ob, m["worqr.outbox.scrape.errors"]))
	require.Len(t, got, 1)
	require.ErrorContains(t, got[0], ob.Name())
}
