// Package worqroutbox enqueues worqr tasks inside an application's own
// Postgres transaction (the transactional outbox), outside the core
// package so that programs that do not use Postgres do not import a
// database driver.
//
// Outbox.Enqueue inserts the task into an outbox table in the caller's
// transaction: the task exists if and only if the transaction commits. A
// Relay, run in every worker process (no leader), moves committed rows
// into worqr: it locks a batch with FOR UPDATE SKIP LOCKED, enqueues each
// row's task, and deletes the rows in the same transaction. An insert
// trigger sends a notification that Postgres delivers at commit, which
// wakes the relays; a slow sweep catches a notification missed while a
// relay was disconnected.
//
// A relay that dies between the Redis enqueue and the delete leaves its
// rows for another relay; the second enqueue finds the row's id held as
// the task's unique key (worqr.UniqueFor, for RelayOptions.DedupeWindow)
// and adds nothing, so each committed row becomes one task.
//
// FinishTx records a task's finish in its handler's own transaction, and
// the SkipFinished middleware skips a later attempt at a task so
// recorded, so that work written to Postgres is done once even when the
// worker dies between the commit and worqr's record of the finish.
//
// Outbox.Stats reads the backlog, the age of its oldest row and the rows
// worqr refused; the packages worqroutboxprom (outbox/prometheus) and
// worqroutboxotel (outbox/otel) export them as metrics, and the
// worqr-outbox command prints them.
//
// Both pgx (a pgx.Tx, *pgx.Conn or pool) and database/sql (through SQL)
// can enqueue; the relay needs a pgxpool.Pool, as LISTEN needs a
// connection of its own. See docs/outbox.md for when to use it, how it
// fails and what it costs.
package worqroutbox
