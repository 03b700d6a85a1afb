package worqroutbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/worqr/worqr"
	"github.com/worqr/worqr/internal/startstop"
	"github.com/worqr/worqr/internal/testsignal"
)

// Defaults of RelayOptions.
const (
	DefaultBatchSize    = 500
	DefaultSweep        = 30 * time.Second
	DefaultMoveTimeout  = 30 * time.Second
	DefaultDedupeWindow = 15 * time.Minute
	DefaultKeepFinished = 7 * 24 * time.Hour
)

// RelayOptions configure a Relay. Zero values mean the defaults.
type RelayOptions struct {
	// BatchSize is the most rows one move takes (DefaultBatchSize).
	BatchSize int
	// Sweep is how often the relay looks for rows with no notification:
	// one missed while its listening connection was down
	// (DefaultSweep).
	Sweep time.Duration
	// MoveTimeout bounds one move, from taking the rows to the commit that
	// deletes them; Postgres ends the move's session if it idles in its
	// transaction for that long, which frees the rows of a relay that hung
	// or lost its connection (DefaultMoveTimeout).
	MoveTimeout time.Duration
	// DedupeWindow is how long the row's id stays a task's unique key in
	// Redis after the move: a row moved again within it (its first relay
	// died before the delete) adds no second task. It must exceed
	// MoveTimeout plus Sweep by a margin (NewRelay refuses less than twice
	// their sum); each task holds a key for that long
	// (DefaultDedupeWindow, or twice the sum if that is longer). See
	// docs/outbox.md for the cost.
	DedupeWindow time.Duration
	// KeepFinished is how long a task's record of its finish (FinishTx)
	// is kept: it must outlast the longest time from a handler's commit to
	// a later attempt at its task (a retry's backoff, a reclaim). Relays
	// delete older records at every sweep (DefaultKeepFinished).
	KeepFinished time.Duration
	// Logger gets the relay's errors; none when nil.
	Logger *slog.Logger
	// OnMove, when set, is called after each move with its timing (from
	// the relay's goroutine: it must return quickly), to see where the
	// time from a commit to its task in Redis goes.
	OnMove func(MoveTrace)
}

// MoveTrace is the timing of one move, for RelayOptions.OnMove.
type MoveTrace struct {
	// Notified is when the relay last heard a notification before the
	// move began (zero if it has heard none).
	Notified time.Time
	// Begun is when the move began.
	Begun time.Time
	// Taken is when the move had its rows locked and read.
	Taken time.Time
	// Enqueued is when the rows' tasks were in Redis.
	Enqueued time.Time
	// Committed is when the rows' delete had committed.
	Committed time.Time
	// Rows is how many rows the move took (0: none were waiting).
	Rows int
	// Err is the move's error.
	Err error
}

// Relay moves committed outbox rows into worqr: run one in every worker
// process. Start and Stop it (Start runs it until Stop or until its
// context ends).
type Relay struct {
	base   startstop.Base
	o      *Outbox
	pool   *pgxpool.Pool
	client *worqr.Client
	opts   RelayOptions
	log    *slog.Logger

	selectSQL, deleteSQL, failSQL string
	settingsSQL                   string // the move's settings (see take)
	moveTimeout                   string // MoveTimeout in milliseconds, for idle_in_transaction_session_timeout

	wake     chan struct{}
	notified atomic.Int64 // unix nanoseconds of the last notification heard

	// Tests: afterEnqueue runs between the enqueues and the delete (an
	// error aborts the move, as a relay dying there would); idle signals
	// each time the relay has drained the table and waits.
	afterEnqueue func(ctx context.Context, conn *pgx.Conn) error
	idle         testsignal.Signal[struct{}]
}

// NewRelay makes a relay of o's rows into client's queues, on pool's
// Postgres: the relay makes two connections of its own with pool's
// settings, one that listens and one for its moves (see Start), and
// prunes finished records through pool.
func (o *Outbox) NewRelay(pool *pgxpool.Pool, client *worqr.Client, opts RelayOptions) (*Relay, error) {
	if pool == nil || client == nil {
		return nil, fmt.Errorf("worqroutbox: relay: %w: a pool and a client are required", ErrInvalidConfig)
	}
	if opts.BatchSize <= 0 {
		opts.BatchSize = DefaultBatchSize
	}
	if opts.Sweep <= 0 {
		opts.Sweep = DefaultSweep
	}
	if opts.MoveTimeout <= 0 {
		opts.MoveTimeout = DefaultMoveTimeout
	}
	if opts.KeepFinished <= 0 {
		opts.KeepFinished = DefaultKeepFinished
	}
	if opts.DedupeWindow <= 0 {
		opts.DedupeWindow = max(DefaultDedupeWindow, 2*(opts.Sweep+opts.MoveTimeout))
	}
	if opts.DedupeWindow < 2*(opts.Sweep+opts.MoveTimeout) {
		return nil, fmt.Errorf("worqroutbox: relay: %w: DedupeWindow %v is under twice the sum of Sweep and MoveTimeout (%v)",
			ErrInvalidConfig, opts.DedupeWindow, 2*(opts.Sweep+opts.MoveTimeout))
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return &Relay{
		o: o, pool: pool, client: client, opts: opts, log: log.With("outbox", o.qTable),
		// The order is the column's, o.id, not the text the row is read
		// as: that order could not use the primary key.
		selectSQL: `SELECT o.id::text, o.queue, o.payload, o.run_at, o.front, o.max_attempts, o.timeout_ms, o.retain_ms, o.priority, o.weight, o.kind, o.unique_key, o.unique_ttl_ms, o.group_key
FROM ` + o.qTable + ` AS o WHERE o.error IS NULL ORDER BY o.id LIMIT $1 FOR UPDATE SKIP LOCKED`,
		deleteSQL: `DELETE FROM ` + o.qTable + ` WHERE id = ANY($1::uuid[])`,
		failSQL:   `UPDATE ` + o.qTable + ` SET error = $2, failed_at = now() WHERE id = $1::uuid`,
		settingsSQL: `SELECT set_config('idle_in_transaction_session_timeout', $1, true),
	set_config('enable_seqscan', 'off', true), set_config('jit', 'off', true)`,
		moveTimeout: strconv.FormatInt(max(opts.MoveTimeout.Milliseconds(), 1), 10),
		wake:        make(chan struct{}, 1),
	}, nil
}

// Start starts the relay on ctx: it listens for the insert trigger's
// notifications and moves rows until Stop or until ctx ends. It returns
// at once; Started is closed once the relay listens. Starting a running
// relay does nothing.
func (r *Relay) Start(ctx context.Context) error {
	ctx, ok, started, stopped := r.base.Begin(ctx)
	if !ok {
		return nil
	}
	// The moves run one at a time on a connection of the relay's own,
	// from a pool of one made with the given pool's settings that never
	// pings it: pgxpool pings a connection idle over a second before
	// handing it out, a round trip more for every move of a quiet fleet.
	// A connection that died while idle fails its move's first round
	// trip, before anything is enqueued, and the move starts again on a
	// new one.
	cfg := r.pool.Config()
	cfg.MaxConns, cfg.MinConns, cfg.MinIdleConns = 1, 0, 0
	cfg.ShouldPing = func(context.Context, pgxpool.ShouldPingParams) bool { return false }
	moves, err := pgxpool.NewWithConfig(context.WithoutCancel(ctx), cfg)
	if err != nil {
		stopped()
		return fmt.Errorf("worqroutbox: relay: the moves' pool: %w", err)
	}
	var wg sync.WaitGroup
	wg.Go(func() { r.listen(ctx, started) })
	wg.Go(func() { r.run(ctx, moves) })
	go func() {
		wg.Wait()
		moves.Close()
		stopped()
	}()
	return nil
}

// Stop stops the relay and waits until it has: a move under way is cut
// short, and its rows are left for the next move (see docs/outbox.md). It
// is safe on a relay never started and to call twice.
func (r *Relay) Stop() { r.base.Stop() }

// Started is closed once the relay listens for notifications.
func (r *Relay) Started() <-chan struct{} { return r.base.Started() }

// Stopped is closed once the relay has stopped.
func (r *Relay) Stopped() <-chan struct{} { return r.base.Stopped() }

// poke wakes the mover; a wake already pending covers this one.
func (r *Relay) poke() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// listen holds a connection of its own that LISTENs on the outbox's
// channel and pokes the mover on each notification, and once more each
// time it has (re)started listening: notifications sent while it was not
// are lost, and the rows behind them wait for that move.
func (r *Relay) listen(ctx context.Context, started func()) {
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		err := r.listenOnce(ctx, func() {
			started()
			backoff = 100 * time.Millisecond
			r.poke()
		})
		if ctx.Err() != nil {
			return
		}
		r.log.Warn("worqroutbox: listening failed; retrying", "err", err, "in", backoff)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, r.opts.Sweep)
	}
}

func (r *Relay) listenOnce(ctx context.Context, listening func()) error {
	conn, err := pgx.ConnectConfig(ctx, r.pool.Config().ConnConfig.Copy())
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer func() {
		closeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		_ = conn.Close(closeCtx)
	}()
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{r.o.channel}.Sanitize()); err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	listening()
	for {
		if _, err := conn.WaitForNotification(ctx); err != nil {
			return fmt.Errorf("wait for notification: %w", err)
		}
		r.notified.Store(time.Now().UnixNano())
		r.poke()
	}
}

// run moves rows each time it is poked or the sweep comes round, until
// the table has none left to move, then waits.
func (r *Relay) run(ctx context.Context, moves *pgxpool.Pool) {
	sweep := time.NewTicker(r.opts.Sweep)
	defer sweep.Stop()
	backoff := time.Duration(0)
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.wake:
		case <-sweep.C:
			r.prune(ctx)
		}
		if err := r.drain(ctx, moves); err != nil {
			if ctx.Err() != nil {
				return
			}
			backoff = min(max(2*backoff, 100*time.Millisecond), r.opts.Sweep)
			r.log.Warn("worqroutbox: move failed; retrying", "err", err, "in", backoff)
			select {
			case <-ctx.Done():
				return
			case <-time.After(backoff):
			}
			r.poke()
			continue
		}
		backoff = 0
		r.idle.Signal(struct{}{})
	}
}

// prune deletes the records of finishes older than KeepFinished; a
// failure is logged, and the next sweep tries again.
func (r *Relay) prune(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, r.opts.MoveTimeout)
	defer cancel()
	if _, err := r.o.PruneFinished(ctx, r.pool, r.opts.KeepFinished); err != nil && ctx.Err() == nil {
		r.log.Warn("worqroutbox: pruning finished tasks failed; the next sweep tries again", "err", err)
	}
}

// drain moves batches until one comes back short.
func (r *Relay) drain(ctx context.Context, moves *pgxpool.Pool) error {
	for {
		n, err := r.move(ctx, moves)
		if err != nil {
			return err
		}
		if n < r.opts.BatchSize {
			return nil
		}
	}
}

// move moves one batch: it takes up to BatchSize rows no other relay
// holds, enqueues their tasks, deletes the rows of those enqueued (or
// found already enqueued: a duplicate of the row's key), marks those
// worqr refuses for good, and commits. It returns how many rows it took.
// A row whose enqueue failed otherwise (Redis unavailable) stays for a
// later move, and the move returns that error after committing the rest.
func (r *Relay) move(ctx context.Context, moves *pgxpool.Pool) (int, error) {
	if r.opts.OnMove == nil {
		return r.moveTraced(ctx, moves, nil)
	}
	var tr MoveTrace
	if ns := r.notified.Load(); ns != 0 {
		tr.Notified = time.Unix(0, ns)
	}
	tr.Begun = time.Now()
	n, err := r.moveTraced(ctx, moves, &tr)
	tr.Rows, tr.Err = n, err
	r.opts.OnMove(tr)
	return n, err
}

// moveTraced is move, noting its times in tr unless tr is nil.
//
// A move is two round trips to Postgres around the enqueue: one sends
// the begin, the move's settings and the take together, the other the
// delete and the commit, so that a row waits on as few round trips as
// can hold its lock across the enqueue.
func (r *Relay) moveTraced(ctx context.Context, moves *pgxpool.Pool, tr *MoveTrace) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, r.opts.MoveTimeout)
	defer cancel()
	var conn *pgx.Conn
	var rows []row
	var err error
	// The pool does not ping its connection (see Start): one that died
	// while idle fails the take, which has enqueued nothing, and the
	// move takes again on a new connection, once.
	for try := 0; ; try++ {
		pc, aerr := moves.Acquire(ctx)
		if aerr != nil {
			return 0, fmt.Errorf("worqroutbox: move: acquire a connection: %w", aerr)
		}
		defer pc.Release() // a connection left in a transaction is closed, not reused
		conn = pc.Conn()
		rows, err = r.take(ctx, conn)
		if err == nil || !conn.IsClosed() || try > 0 || ctx.Err() != nil {
			break
		}
		r.log.Debug("worqroutbox: the move's connection had closed; taking again on a new one", "err", err)
		pc.Release()
	}
	open := true
	defer func() {
		if open && !conn.IsClosed() {
			rbCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
			defer cancel()
			_, _ = conn.Exec(rbCtx, "ROLLBACK")
		}
	}()
	if err != nil || len(rows) == 0 {
		return 0, err
	}
	if tr != nil {
		tr.Taken = time.Now()
	}

	done := make([]string, 0, len(rows))
	type failure struct{ id, err string }
	var failed []failure
	var retryErr error
	errs := r.enqueue(ctx, rows)
	if tr != nil {
		tr.Enqueued = time.Now()
	}
	for i, err := range errs {
		switch {
		case err == nil, errors.Is(err, worqr.ErrDuplicate):
			done = append(done, rows[i].id)
		case refused(err):
			r.log.Error("worqroutbox: worqr refuses the task; the row is kept, marked failed", "id", rows[i].id, "queue", rows[i].queue, "err", err)
			failed = append(failed, failure{rows[i].id, err.Error()})
		default:
			retryErr = err
		}
	}
	if r.afterEnqueue != nil {
		if err := r.afterEnqueue(ctx, conn); err != nil {
			return 0, err
		}
	}
	var b pgx.Batch
	if len(done) > 0 {
		b.Queue(r.deleteSQL, done)
	}
	for _, f := range failed {
		b.Queue(r.failSQL, f.id, f.err)
	}
	b.Queue("COMMIT")
	if err := conn.SendBatch(ctx, &b).Close(); err != nil {
		return 0, fmt.Errorf("worqroutbox: move: delete and commit: %w", err)
	}
	open = false
	if tr != nil {
		tr.Committed = time.Now()
	}
	if retryErr != nil {
		return len(rows), fmt.Errorf("worqroutbox: move: %d of %d rows wait for the next move: %w", len(rows)-len(done)-len(failed), len(rows), retryErr)
	}
	return len(rows), nil
}

// enqueue enqueues the rows' tasks and returns each one's error. The
// rows of a queue go one call after another, in the order taken (ids in
// order: the producers' order), so a queue's tasks keep it: a run of
// rows with the same options in one EnqueueBatchItems, each keyed as its
// row says. Queues go concurrently, and their calls share the client's
// connection in one pipeline.
func (r *Relay) enqueue(ctx context.Context, rows []row) []error {
	errs := make([]error, len(rows))
	byQueue := make(map[string][]int)
	for i, w := range rows {
		byQueue[w.queue] = append(byQueue[w.queue], i)
	}
	var wg sync.WaitGroup
	for _, idx := range byQueue {
		wg.Go(func() {
			for len(idx) > 0 {
				n := 1
				for n < len(idx) && sameOptions(rows[idx[0]], rows[idx[n]]) {
					n++
				}
				r.enqueueRun(ctx, rows, idx[:n], errs)
				idx = idx[n:]
			}
		})
	}
	wg.Wait()
	return errs
}

// enqueueRun enqueues the rows at idx, of one queue and with the same
// options, in one call, and sets their errors in errs. A row left out as a
// duplicate of its key counts as enqueued. When worqr refuses the batch
// (a bad row), or a row has an empty unique key, which a batch item
// cannot carry, the rows go one Enqueue each, so that only the bad ones
// fail.
func (r *Relay) enqueueRun(ctx context.Context, rows []row, idx []int, errs []error) {
	single := len(idx) == 1
	for _, i := range idx {
		single = single || (rows[i].unique != nil && *rows[i].unique == "")
	}
	if !single {
		items := make([]worqr.BatchItem, len(idx))
		for j, i := range idx {
			items[j] = rows[i].item(r.opts.DedupeWindow)
		}
		first := rows[idx[0]]
		_, err := r.client.EnqueueBatchItems(ctx, first.queue, items, first.batchOptions()...)
		if !refused(err) {
			for _, i := range idx {
				errs[i] = err
			}
			return
		}
	}
	for _, i := range idx {
		w := rows[i]
		_, errs[i] = r.client.Enqueue(ctx, w.queue, w.payload, w.enqueueOptions(r.opts.DedupeWindow)...)
	}
}

// take begins the move's transaction and locks and reads the next batch
// of rows, in one round trip. The transaction is open when take returns,
// even with an error.
//
// The take must read the table's primary key, oldest first, and stop at
// the batch's end; an outbox is empty when autovacuum looks at it, so the
// planner, guessing a few rows from those statistics, would rather scan
// the whole table and sort it, which takes a backlog's size in time per
// move just when a backlog has built up. Sequential scans are turned off
// for the move's transaction, and JIT compiling, which the cost of a plan
// so penalized could otherwise start (seconds, for a few rows).
//
// The commit keeps the session's synchronous_commit: a delete that a
// Postgres crash lost would bring back rows whose tasks are in Redis, to
// be moved again after the crash's outage, which may outlast DedupeWindow,
// or once a task with its own key (Unique) has ended.
func (r *Relay) take(ctx context.Context, conn *pgx.Conn) ([]row, error) {
	var b pgx.Batch
	b.Queue("BEGIN")
	b.Queue(r.settingsSQL, r.moveTimeout)
	b.Queue(r.selectSQL, r.opts.BatchSize)
	br := conn.SendBatch(ctx, &b)
	defer br.Close()
	for range 2 {
		if _, err := br.Exec(); err != nil {
			return nil, fmt.Errorf("worqroutbox: move: begin: %w", err)
		}
	}
	q, err := br.Query()
	if err != nil {
		return nil, fmt.Errorf("worqroutbox: move: take rows: %w", err)
	}
	rows, err := pgx.CollectRows(q, func(q pgx.CollectableRow) (row, error) {
		var w row
		err := q.Scan(&w.id, &w.queue, &w.payload, &w.at, &w.front, &w.maxAttempts, &w.timeoutMs, &w.retainMs,
			&w.priority, &w.weight, &w.kind, &w.unique, &w.uniqueTTLMs, &w.group)
		return w, err
	})
	if err != nil {
		return nil, fmt.Errorf("worqroutbox: move: take rows: %w", err)
	}
	if err := br.Close(); err != nil {
		return nil, fmt.Errorf("worqroutbox: move: take rows: %w", err)
	}
	return rows, nil
}

// refused reports whether worqr refused a task for good: trying again
// would fail again.
func refused(err error) bool {
	return errors.Is(err, worqr.ErrInvalidOptions) || errors.Is(err, worqr.ErrInvalidQueueName) || errors.Is(err, worqr.ErrTaskTooLarge)
}
