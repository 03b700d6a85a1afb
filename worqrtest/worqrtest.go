// Package worqrtest helps test programs that use worqr: a client on an
// embedded Redis of the test's own, cleaned up when the test ends;
// running a handler on a payload without a worker or a Redis (Run), or
// on a real worker under its retry, timeout and dead-letter policy, with
// the delays compressed (RunPolicy); and assertions on what was
// enqueued.
//
//	func TestSignup(t *testing.T) {
//		t.Parallel()
//		client := worqrtest.NewClient(t, worqrtest.Options{})
//		if err := signup(t.Context(), client, "ada@example.com"); err != nil {
//			t.Fatal(err)
//		}
//		worqrtest.RequireEnqueuedJSON(t, client, "welcome", Welcome{Email: "ada@example.com"})
//
//		_, err := worqrtest.RunJSON(t.Context(), sendWelcome, Welcome{Email: "ada@example.com"}, worqrtest.RunOptions{})
//		if err != nil {
//			t.Fatal(err)
//		}
//	}
//
// Everything here is safe with t.Parallel and the race detector: each
// client has a Redis (or, on a shared one, a prefix) of its own, and the
// helpers keep no state between calls.
package worqrtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/worqr/worqr"
	"github.com/worqr/worqr/embedded"
)

// Options configure NewClient. The zero value gives a client on an
// embedded Redis of the test's own, logging to the test's log.
type Options struct {
	// Addr is a Redis to use instead of an embedded one, as
	// worqr.Options.Addr takes it (an address, a cluster's seeds, a URL).
	// The test's keys there are deleted when it ends.
	Addr string
	// Client configures the client. Its Prefix, if set, begins the
	// test's prefix (a random suffix follows). Its Addr and Redis must be
	// empty. Logger defaults to the test's log, at level Info.
	Client worqr.Options
}

// NewClient returns a client for the test alone: on an embedded Redis of
// its own (or, with Options.Addr, on that Redis), under a fresh prefix.
// When the test ends the client is closed (and so are its workers), then
// the embedded Redis, or the test's keys are deleted. It fails the test
// if the client cannot be made.
func NewClient(t testing.TB, opts Options) *worqr.Client {
	t.Helper()
	if opts.Client.Addr != "" || opts.Client.Redis != nil {
		t.Fatalf("worqrtest: Options.Client must not name a Redis (Addr or Redis); use Options.Addr")
	}
	prefix := "worqrtest"
	if opts.Client.Prefix != "" {
		prefix = opts.Client.Prefix
	}
	opts.Client.Prefix = prefix + "-" + randomHex(4)
	quiet := &atomic.Bool{}
	if opts.Client.Logger == nil {
		opts.Client.Logger = slog.New(slog.NewTextHandler(testWriter{t, quiet}, nil))
	}

	if opts.Addr == "" {
		redis, err := embedded.Start(embedded.Options{Client: opts.Client})
		if err != nil {
			t.Fatalf("worqrtest: %v", err)
		}
		t.Cleanup(func() {
			_ = redis.Close(context.Background())
			quiet.Store(true)
		})
		return redis.Client()
	}

	opts.Client.Addr = opts.Addr
	c, err := worqr.New(opts.Client)
	if err != nil {
		t.Fatalf("worqrtest: %v", err)
	}
	t.Cleanup(func() {
		_ = c.Close(context.Background())
		quiet.Store(true)
		deleteKeys(t, opts.Addr, opts.Client.Prefix)
	})
	return c
}

// globEscape escapes the characters SCAN's MATCH reads as a pattern.
func globEscape(s string) string {
	return strings.NewReplacer(`\`, `\\`, "*", `\*`, "?", `\?`, "[", `\[`, "]", `\]`).Replace(s)
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return hex.EncodeToString(b)
}

// testWriter sends log lines to the test's log until quiet is set: a log
// line after the test ended would panic.
type testWriter struct {
	t     testing.TB
	quiet *atomic.Bool
}

func (w testWriter) Write(p []byte) (int, error) {
	if !w.quiet.Load() {
		w.t.Log(strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}

// deleteKeys deletes the prefix's keys on every node of the Redis at
// addr, failing the test if it cannot.
func deleteKeys(t testing.TB, addr, prefix string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := deletePrefix(ctx, addr, prefix); err != nil {
		t.Errorf("worqrtest: delete the test's keys: %v", err)
	}
}

// deletePrefix deletes the prefix's keys on every node of the Redis at
// addr, with SCAN.
func deletePrefix(ctx context.Context, addr, prefix string) error {
	var opt rueidis.ClientOption
	if strings.Contains(addr, "://") {
		parsed, err := rueidis.ParseURL(addr)
		if err != nil {
			return err
		}
		opt = parsed
	} else {
		opt.InitAddress = strings.Split(addr, ",")
	}
	opt.DisableCache = true
	rdb, err := rueidis.NewClient(opt)
	if err != nil {
		return err
	}
	defer rdb.Close()
	for _, node := range rdb.Nodes() {
		var cursor uint64
		for {
			e, err := node.Do(ctx, node.B().Scan().Cursor(cursor).Match(globEscape(prefix)+":*").Count(1000).Build()).AsScanEntry()
			if err != nil {
				return err
			}
			for _, k := range e.Elements {
				if err := rdb.Do(ctx, rdb.B().Del().Key(k).Build()).Error(); err != nil {
					return err
				}
			}
			if cursor = e.Cursor; cursor == 0 {
				break
			}
		}
	}
	return nil
}
