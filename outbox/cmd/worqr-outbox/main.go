// Command worqr-outbox shows the state of a worqr outbox table: its
// backlog, the age of its oldest row and the rows worqr refused.
//
// Usage:
//
//	worqr-outbox [-postgres DSN] [-schema S] [-table T] stats
//	worqr-outbox [-postgres DSN] [-schema S] [-table T] failed [-n N]
//
// stats prints the backlog (rows committed and not yet moved into worqr),
// how long the oldest of them has waited, and the failed rows; failed
// lists the failed rows, oldest first, with the error worqr gave. The DSN
// defaults to $DATABASE_URL.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	worqroutbox "github.com/worqr/worqr/outbox"
)

// errUsage is a command line that names no known command.
var errUsage = errors.New("usage: worqr-outbox [-postgres DSN] [-schema S] [-table T] stats | failed [-n N]")

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "worqr-outbox:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("worqr-outbox", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	dsn := fs.String("postgres", os.Getenv("DATABASE_URL"), "Postgres DSN")
	schema := fs.String("schema", worqroutbox.DefaultSchema, "the outbox table's schema")
	table := fs.String("table", worqroutbox.DefaultTable, "the outbox table")
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("%w: %w", errUsage, err)
	}
	if fs.NArg() == 0 {
		return errUsage
	}
	ob, err := worqroutbox.New(worqroutbox.Config{Schema: *schema, Table: *table})
	if err != nil {
		return err
	}
	pool, err := pgxpool.New(ctx, *dsn)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer pool.Close()
	switch cmd, rest := fs.Arg(0), fs.Args()[1:]; cmd {
	case "stats":
		if len(rest) > 0 {
			return errUsage
		}
		s, err := ob.Stats(ctx, pool)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "outbox %s\nbacklog  %d\noldest   %s\nfailed   %d\n", ob.Name(), s.Backlog, s.Age.Round(time.Millisecond), s.Failed)
		return nil
	case "failed":
		ffs := flag.NewFlagSet("failed", flag.ContinueOnError)
		ffs.SetOutput(io.Discard)
		n := ffs.Int("n", 20, "rows to list")
		if err := ffs.Parse(rest); err != nil || ffs.NArg() > 0 || *n <= 0 {
			return errUsage
		}
		return listFailed(ctx, pool, ob, *n, out)
	default:
		return fmt.Errorf("%w: unknown command %q", errUsage, cmd)
	}
}

// listFailed prints up to n of the rows worqr refused, oldest first.
func listFailed(ctx context.Context, pool *pgxpool.Pool, ob *worqroutbox.Outbox, n int, out io.Writer) error {
	rows, err := pool.Query(ctx, `SELECT id::text, queue, failed_at, error FROM `+ob.Table()+
		` WHERE error IS NOT NULL ORDER BY id LIMIT $1`, n)
	if err != nil {
		return fmt.Errorf("failed rows of %s: %w", ob.Name(), err)
	}
	type failed struct {
		id, queue, msg string
		at             time.Time
	}
	fs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (failed, error) {
		var f failed
		err := r.Scan(&f.id, &f.queue, &f.at, &f.msg)
		return f, err
	})
	if err != nil {
		return fmt.Errorf("failed rows of %s: %w", ob.Name(), err)
	}
	if len(fs) == 0 {
		fmt.Fprintln(out, "no failed rows")
		return nil
	}
	for _, f := range fs {
		fmt.Fprintf(out, "%s  %s  %s  %q\n", f.id, f.at.UTC().Format(time.RFC3339), f.queue, f.msg)
	}
	return nil
}
