package worqroutbox

import (
	"bytes"
	"context"
	"crypto/md5"
	"crypto/sha1"
	"database/sql"
	"embed"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"text/template"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/worqr/worqr"
)

// Defaults of Config.
const (
	DefaultSchema = "public"
	DefaultTable  = "worqr_outbox"
)

// maxIdentifier is the longest identifier Postgres keeps whole, in bytes.
const maxIdentifier = 63

// ErrInvalidConfig is returned by New for a Config it cannot use.
var ErrInvalidConfig = errors.New("invalid outbox config")

// Config names the outbox table.
type Config struct {
	// Schema holds the table; DefaultSchema when empty.
	Schema string
	// Table is the table's name; DefaultTable when empty. Migrate makes a
	// trigger function named after it (Table + "_notify") in Schema, and
	// the table of tasks finished in a transaction (Table + "_finished").
	Table string
}

// Outbox is one outbox table: where Enqueue inserts and a Relay moves
// from. It is safe for concurrent use.
type Outbox struct {
	schema, table                    string
	qTable                           string // schema.table, quoted
	qFinished                        string // schema.table_finished, quoted: see FinishTx
	channel                          string // the notification channel
	insertSQL                        string
	statsSQL                         string
	finishSQL, finishedSQL, pruneSQL string
}

// New checks cfg and returns its outbox. Names are quoted wherever they
// appear in SQL, so any name Postgres accepts works (a schema up to 63
// bytes, a table up to 51, since Migrate names others after it; no
// NUL byte).
func New(cfg Config) (*Outbox, error) {
	if cfg.Schema == "" {
		cfg.Schema = DefaultSchema
	}
	if cfg.Table == "" {
		cfg.Table = DefaultTable
	}
	// Postgres cuts identifiers at 63 bytes: the names made of the
	// table's (the longest, Table + "_finished_at") must fit whole, or
	// they could come out the same as the table's own.
	for _, n := range []struct {
		name string
		max  int
	}{{cfg.Schema, maxIdentifier}, {cfg.Table, maxIdentifier - len("_finished_at")}} {
		if len(n.name) > n.max || strings.IndexByte(n.name, 0) >= 0 {
			return nil, fmt.Errorf("worqroutbox: %w: name %q is over %d bytes or holds a NUL byte", ErrInvalidConfig, n.name, n.max)
		}
	}
	o := &Outbox{schema: cfg.Schema, table: cfg.Table}
	o.qTable = pgx.Identifier{cfg.Schema, cfg.Table}.Sanitize()
	o.qFinished = pgx.Identifier{cfg.Schema, cfg.Table + "_finished"}.Sanitize()
	// A channel name is an identifier (63 bytes at most): a long
	// schema.table gives way to a digest of it.
	o.channel = cfg.Schema + "." + cfg.Table
	if len(o.channel) > 63 {
		sum := md5.Sum([]byte(o.channel)) // Postgres's md5, in the trigger
		o.channel = "worqr_outbox_" + hex.EncodeToString(sum[:])
	}
	o.insertSQL = `INSERT INTO ` + o.qTable + ` (id, queue, payload, run_at, front, max_attempts, timeout_ms, retain_ms, priority, weight, kind, unique_key, unique_ttl_ms, group_key)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)`
	o.statsSQL = statsQuery(o.qTable)
	o.finishSQL = `INSERT INTO ` + o.qFinished + ` (queue, task_id) VALUES ($1, $2) ON CONFLICT DO NOTHING`
	o.finishedSQL = `SELECT 1 FROM ` + o.qFinished + ` WHERE queue = $1 AND task_id = $2`
	o.pruneSQL = `DELETE FROM ` + o.qFinished + ` WHERE finished_at < now() - make_interval(secs => $1::bigint / 1000000.0)`
	return o, nil
}

// Table is the outbox table's name, schema-qualified and quoted, for the
// application's own queries (a backlog count, say).
func (o *Outbox) Table() string { return o.qTable }

// Name is the outbox table's name, schema-qualified and unquoted
// ("public.worqr_outbox"), for logs and metric labels.
func (o *Outbox) Name() string { return o.schema + "." + o.table }

// Channel is the channel the insert trigger notifies and the relays
// listen on.
func (o *Outbox) Channel() string { return o.channel }

// Execer runs a statement. A pgx.Tx is one, as are *pgx.Conn and
// *pgxpool.Pool; SQL makes one of a database/sql transaction.
type Execer interface {
	Exec(ctx context.Context, sql string, arguments ...any) (pgconn.CommandTag, error)
}

// SQLExecer is what SQL wraps: a *sql.Tx, *sql.Conn or *sql.DB.
type SQLExecer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// SQL makes an Execer of a database/sql transaction (or connection or
// database), so that Enqueue and Migrate can use it. The driver must
// handle bytea, uuid and timestamptz arguments; pgx's stdlib driver does.
func SQL(tx SQLExecer) Execer { return sqlExecer{tx} }

type sqlExecer struct{ tx SQLExecer }

func (s sqlExecer) Exec(ctx context.Context, query string, args ...any) (pgconn.CommandTag, error) {
	res, err := s.tx.ExecContext(ctx, query, args...)
	if err != nil {
		return pgconn.CommandTag{}, err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return pgconn.CommandTag{}, nil // the count is not needed
	}
	return pgconn.NewCommandTag(fmt.Sprintf("EXEC %d", n)), nil
}

// Enqueue inserts a task into the outbox in the caller's transaction tx
// and returns the row's id: the task exists, once a relay has moved it,
// if and only if tx commits. The id is the task's unique key in worqr
// ("outbox:" and the id), not its worqr task id, which the relay learns
// only at the move.
//
// The queue name and the options are checked here as far as the outbox
// can (worqr.ErrInvalidQueueName, worqr.ErrInvalidOptions), so the caller
// can still roll back; the payload's size is checked at the move, against
// the relay's client (see RelayOptions and docs/outbox.md).
func (o *Outbox) Enqueue(ctx context.Context, tx Execer, queue string, payload []byte, opts ...Option) (string, error) {
	if err := checkQueue(queue); err != nil {
		return "", fmt.Errorf("worqroutbox: enqueue %q: %w", queue, err)
	}
	op := collect(time.Now(), opts)
	if err := op.check(); err != nil {
		return "", fmt.Errorf("worqroutbox: enqueue %q: %w", queue, err)
	}
	id, err := uuid.NewV7()
	if err != nil {
		return "", fmt.Errorf("worqroutbox: enqueue %q: make id: %w", queue, err)
	}
	if payload == nil {
		payload = []byte{} // the column is NOT NULL; an empty task is a task
	}
	var at *time.Time
	if !op.at.IsZero() {
		at = &op.at
	}
	var weight *int32
	if op.weight > 1 {
		w := int32(op.weight)
		weight = &w
	}
	var unique *string
	if op.uniqueSet {
		unique = &op.unique
	}
	_, err = tx.Exec(ctx, o.insertSQL, id.String(), queue, payload, at, op.front, op.maxAttempts,
		millis(op.timeout), millis(op.retain), nullString(op.priority), weight,
		nullString(op.kind), unique, millis(op.uniqueTTL), nullString(op.group))
	if err != nil {
		return "", fmt.Errorf("worqroutbox: enqueue %q: %w", queue, err)
	}
	return id.String(), nil
}

// EnqueueJSON inserts v encoded as JSON, as Enqueue does with a payload.
// If T is worqr.Kinded, the task gets T's kind (a Kind option among opts
// overrides it), as with worqr.EnqueueJSON.
func EnqueueJSON[T any](ctx context.Context, o *Outbox, tx Execer, queue string, v T, opts ...Option) (string, error) {
	return EnqueueWith(ctx, o, tx, worqr.JSON[T]{}, queue, v, opts...)
}

// EnqueueWith inserts v encoded with codec (worqr.JSON when nil), as
// Enqueue does with a payload, for workers that decode it with the same
// codec (worqr.Typed). If T is worqr.Kinded, the task gets T's kind (a
// Kind option among opts overrides it), as with worqr.EnqueueWith. An
// encoding error is returned wrapped; nothing is inserted then.
func EnqueueWith[T any](ctx context.Context, o *Outbox, tx Execer, codec worqr.Codec[T], queue string, v T, opts ...Option) (string, error) {
	if codec == nil {
		codec = worqr.JSON[T]{}
	}
	data, err := codec.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("worqroutbox: enqueue %q: encode %s: %w", queue, reflect.TypeFor[T](), err)
	}
	var zero T
	if rt := reflect.TypeFor[T](); rt.Kind() == reflect.Pointer {
		zero = reflect.New(rt.Elem()).Interface().(T)
	}
	if k, ok := any(zero).(worqr.Kinded); ok {
		opts = append([]Option{Kind(k.Kind())}, opts...)
	}
	return o.Enqueue(ctx, tx, queue, data, opts...)
}

// checkQueue refuses a queue name worqr refuses: empty, or holding '{',
// '}' or a NUL byte (which also cannot go in a text column).
func checkQueue(queue string) error {
	if queue == "" || strings.ContainsAny(queue, "{}\x00") {
		return fmt.Errorf("%w: %q", worqr.ErrInvalidQueueName, queue)
	}
	return nil
}

// migrationFiles are the outbox's migrations, one file per version of its
// schema, named by the version's number: Migrate runs them in that order.
//
//go:embed migrations/*.sql
var migrationFiles embed.FS

// migrations are the parsed migrationFiles, in order.
var migrations = parseMigrations()

func parseMigrations() []*template.Template {
	names, err := fs.Glob(migrationFiles, "migrations/*.sql")
	if err != nil {
		panic(err)
	}
	sort.Strings(names) // zero-padded versions: the names' order is theirs
	ts := make([]*template.Template, len(names))
	for i, name := range names {
		// A file's number is its version: none missing, none twice.
		if v, err := strconv.Atoi(strings.SplitN(path.Base(name), "_", 2)[0]); err != nil || v != i+1 {
			panic(fmt.Sprintf("worqroutbox: migration %s is not version %d", name, i+1))
		}
		ts[i] = template.Must(template.ParseFS(migrationFiles, name))
	}
	return ts
}

// Migration is one version of the outbox's schema, for a migration tool
// of the application's own that applies each version once (see
// Outbox.Migrations).
type Migration struct {
	// Version numbers the migrations from 1, in the order they apply.
	Version int
	// Name is the migration's file name ("0002_group.sql").
	Name string
	// SQL is the migration's script, with the outbox's names filled in.
	// It is idempotent, and takes the table's migration lock first.
	SQL string
}

// Migrate brings the outbox's schema, table and notify trigger up to the
// current version (making them if they are missing) in one transaction: a
// lock keeps concurrent calls apart. Every migration is idempotent, so it
// is safe to run at every start, on an empty database or a table of any
// earlier version with rows in it. db runs the script as one
// multi-statement string without arguments: pgx runs such a string in the
// simple protocol, as one implicit transaction.
//
// Run it before the relays or producers of a new version start: they read
// and write the current version's columns.
func (o *Outbox) Migrate(ctx context.Context, db Execer) error {
	script, err := o.MigrationSQL()
	if err != nil {
		return err
	}
	if _, err := db.Exec(ctx, script); err != nil {
		return fmt.Errorf("worqroutbox: migrate %s: %w", o.qTable, err)
	}
	return nil
}

// MigrationSQL is the script Migrate runs (every migration, in order,
// after the table's lock), for a migration tool of the application's own.
func (o *Outbox) MigrationSQL() (string, error) {
	ms, err := o.Migrations()
	if err != nil {
		return "", err
	}
	var b strings.Builder
	b.WriteString(o.lockSQL())
	for _, m := range ms {
		b.WriteString("\n-- " + m.Name + "\n")
		b.WriteString(strings.TrimPrefix(m.SQL, o.lockSQL()))
	}
	return b.String(), nil
}

// Migrations are the outbox's migrations one by one, in order, for a
// migration tool that records which versions it has applied.
func (o *Outbox) Migrations() ([]Migration, error) {
	data := map[string]any{
		"Schema":   pgx.Identifier{o.schema}.Sanitize(),
		"Table":    o.qTable,
		"Function": pgx.Identifier{o.schema, o.table + "_notify"}.Sanitize(),
		"Trigger":  pgx.Identifier{o.table + "_notify"}.Sanitize(),
		"Finished": o.qFinished,
		// An index's name is the schema's, as the table's.
		"FinishedIndex": pgx.Identifier{o.table + "_finished_at"}.Sanitize(),
	}
	ms := make([]Migration, len(migrations))
	for i, t := range migrations {
		var buf bytes.Buffer
		buf.WriteString(o.lockSQL())
		if err := t.Execute(&buf, data); err != nil {
			return nil, fmt.Errorf("worqroutbox: migration %s: %w", t.Name(), err)
		}
		ms[i] = Migration{Version: i + 1, Name: t.Name(), SQL: buf.String()}
	}
	return ms, nil
}

// lockSQL takes the transaction-level lock that keeps migrations of o's
// table apart. Its key is the table's, so migrations of two outboxes do
// not wait for each other.
func (o *Outbox) lockSQL() string {
	sum := sha1.Sum([]byte("worqroutbox:" + o.schema + "." + o.table))
	return fmt.Sprintf("SELECT pg_advisory_xact_lock(%d);\n", int64(binary.BigEndian.Uint64(sum[:8])))
}
