package worqroutbox

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Querier runs a query returning one row: a *pgxpool.Pool, a *pgx.Conn
// and a pgx.Tx are each one.
type Querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Stats is what an outbox table holds, read at one moment.
type Stats struct {
	// Backlog counts the rows committed and not yet moved into worqr. On
	// a healthy fleet it stays near zero: every commit wakes the relays.
	Backlog int64
	// Oldest is the creation time of the oldest row of the backlog, by
	// Postgres's clock (zero when the backlog is empty).
	Oldest time.Time
	// Age is how long the oldest row of the backlog has waited, by
	// Postgres's clock (0 when the backlog is empty): the relays are down,
	// or cannot reach Redis, when it grows.
	Age time.Duration
	// Failed counts the rows worqr refused for good, which the relays
	// keep and skip (see docs/outbox.md: they need someone to look).
	Failed int64
}

// Stats reads the outbox's backlog, the age of its oldest row and its
// failed rows, in one query. The oldest row is found through the primary
// key (ids are time-ordered); the counts scan the table once, which on
// a healthy fleet holds few rows.
func (o *Outbox) Stats(ctx context.Context, db Querier) (Stats, error) {
	var s Stats
	var oldest *time.Time
	var ageUs *int64
	err := db.QueryRow(ctx, o.statsSQL).Scan(&s.Backlog, &s.Failed, &oldest, &ageUs)
	if err != nil {
		return Stats{}, fmt.Errorf("worqroutbox: stats of %s: %w", o.Name(), err)
	}
	if oldest != nil && ageUs != nil {
		s.Oldest = *oldest
		s.Age = max(time.Duration(*ageUs)*time.Microsecond, 0)
	}
	return s, nil
}

// statsQuery is the query of Stats on the table qTable.
func statsQuery(qTable string) string {
	return `WITH oldest AS (
    SELECT created_at FROM ` + qTable + ` WHERE error IS NULL ORDER BY id LIMIT 1
), counts AS (
    SELECT count(*) FILTER (WHERE error IS NULL) AS backlog, count(*) FILTER (WHERE error IS NOT NULL) AS failed
    FROM ` + qTable + `
)
SELECT
    counts.backlog,
    counts.failed,
    (SELECT created_at FROM oldest),
    (SELECT (extract(epoch FROM clock_timestamp() - created_at) * 1000000)::bigint FROM oldest)
FROM counts`
}
