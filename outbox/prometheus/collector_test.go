package worqroutboxprom

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"

	worqroutbox "github.com/worqr/worqr/outbox"
	"github.com/worqr/worqr/outbox/internal/outboxtest"
)

func newOutbox(t *testing.T) (*worqroutbox.Outbox, *pgxpool.Pool) {
	t.Helper()
	return outboxtest.New(t, "worqr_outbox_prom_")
}

// gather returns the registry's gauges and counters by metric name.
func gather(t *testing.T, reg *prometheus.Registry) map[string]*dto.Metric {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	out := map[string]*dto.Metric{}
	for _, mf := range mfs {
		require.Len(t, mf.Metric, 1, mf.GetName())
		out[mf.GetName()] = mf.Metric[0]
	}
	return out
}

func TestCollectorReportsTheBacklogItsAgeAndFailedRows(t *testing.T) {
	ob, pool := newOutbox(t)
	ctx := context.Background()
	for range 2 {
		_, err := ob.Enqueue(ctx, pool, "q", []byte("x"))
		require.NoError(t, err)
	}
	_, err := pool.Exec(ctx, "UPDATE "+ob.Table()+" SET created_at = now() - interval '1 hour'")
	require.NoError(t, err)
	_, err = pool.Exec(ctx, "INSERT INTO "+ob.Table()+" (id, queue, payload, error, failed_at) VALUES ($1, 'q', 'y', 'refused', now())", uuid.Must(uuid.NewV7()).String())
	require.NoError(t, err)

	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(NewCollector(ob, pool, Options{ConstLabels: prometheus.Labels{"env": "test"}}))
	m := gather(t, reg)
	require.EqualValues(t, 2, m["worqr_outbox_backlog"].GetGauge().GetValue())
	require.EqualValues(t, 1, m["worqr_outbox_failed"].GetGauge().GetValue())
	age := m["worqr_outbox_oldest_waiting_seconds"].GetGauge().GetValue()
	require.GreaterOrEqual(t, age, time.Hour.Seconds())
	require.Less(t, age, (time.Hour + time.Minute).Seconds())
	require.Zero(t, m["worqr_outbox_scrape_errors_total"].GetCounter().GetValue())
	for _, l := range m["worqr_outbox_backlog"].GetLabel() {
		switch l.GetName() {
		case "table":
			require.Equal(t, ob.Name(), l.GetValue())
		case "env":
			require.Equal(t, "test", l.GetValue())
		}
	}
}

// A scrape whose query fails reports no numbers, counts the error and
// hands it to OnError.
func TestCollectorCountsAFailedScrape(t *testing.T) {
	ob, pool := newOutbox(t)
	_, err := pool.Exec(context.Background(), "DROP TABLE "+ob.Table())
	require.NoError(t, err)
	var got []error
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(NewCollector(ob, pool, Options{OnError: func(err error) { got = append(got, err) }}))
	m := gather(t, reg)
	require.NotContains(t, m, "worqr_outbox_backlog")
	require.EqualValues(t, 1, m["worqr_outbox_scrape_errors_total"].GetCounter().GetValue())
	require.Len(t, got, 1)
	require.ErrorContains(t, got[0], ob.Name())
}
