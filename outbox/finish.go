package worqroutbox

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/worqr/worqr"
)

// FinishTx records, in the handler's own transaction tx, that p's task
// has done its work: once tx commits, a later attempt at the task finds
// the record (Finished, SkipFinished) and need not do the work again.
//
// A handler that writes to Postgres and then returns nil can still run
// twice: its worker may die after the commit and before worqr records
// the finish, and a peer then starts the task again. Recording the finish
// in the same transaction as the work makes the work and the record
// commit together, so the second attempt sees it. Recording it twice is
// not an error.
func (o *Outbox) FinishTx(ctx context.Context, tx Execer, p *worqr.Process) error {
	if _, err := tx.Exec(ctx, o.finishSQL, p.Queue(), p.TaskID()); err != nil {
		return fmt.Errorf("worqroutbox: finish task %s of %q: %w", p.TaskID(), p.Queue(), err)
	}
	return nil
}

// Finished reports whether p's task was recorded as finished with
// FinishTx (by any attempt, committed) within the relays' KeepFinished.
func (o *Outbox) Finished(ctx context.Context, db Querier, p *worqr.Process) (bool, error) {
	var one int
	err := db.QueryRow(ctx, o.finishedSQL, p.Queue(), p.TaskID()).Scan(&one)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("worqroutbox: is task %s of %q finished: %w", p.TaskID(), p.Queue(), err)
	}
	return true, nil
}

// SkipFinished is a middleware that runs the handler only for a task not
// recorded as finished (FinishTx): for one that was, it returns nil
// without calling the handler, so worqr records the finish this time.
// If the check fails (the database is down), the attempt fails with that
// error and the task is retried as any failure is.
func (o *Outbox) SkipFinished(db Querier) worqr.Middleware {
	return func(next worqr.Handler) worqr.Handler {
		return func(ctx context.Context, p *worqr.Process) error {
			done, err := o.Finished(ctx, db, p)
			if err != nil {
				return err
			}
			if done {
				return nil
			}
			return next(ctx, p)
		}
	}
}

// PruneFinished deletes the records of tasks finished (FinishTx) more
// than keep ago and returns how many it deleted. Relays run it at every
// sweep with RelayOptions.KeepFinished.
func (o *Outbox) PruneFinished(ctx context.Context, db Execer, keep time.Duration) (int64, error) {
	tag, err := db.Exec(ctx, o.pruneSQL, keep.Microseconds())
	if err != nil {
		return 0, fmt.Errorf("worqroutbox: prune finished tasks of %s: %w", o.Name(), err)
	}
	return tag.RowsAffected(), nil
}
