package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/google/uuid"
	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/worqr/worqr"
)

// The tests build the binary once and run it, as an operator would,
// against an in-process miniredis, or against the real Redis that
// WORQR_TEST_REDIS names ("127.0.0.1:6379"), where each test uses a key
// prefix of its own and deletes its keys afterwards. State is set up
// through the library.
const envRedis = "WORQR_TEST_REDIS"

// binary is the worqr binary the tests run, built with buildFlags.
var (
	binary     string
	buildFlags = []string{"build"}
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "worqr-cli-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "worqr")
	if out, err := exec.Command("go", append(buildFlags, "-o", binary, ".")...).CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building the binary: %v\n%s", err, out)
		_ = os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	_ = os.RemoveAll(dir)
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
	}
	os.Exit(code)
}

// backend is one test's Redis and key prefix.
type backend struct {
	t      *testing.T
	addr   string // for the binary's --addr
	seeds  []string
	real   bool
	prefix string
}

func newBackend(t *testing.T) *backend {
	t.Helper()
	b := &backend{t: t, prefix: "worqrclitest-" + uuid.NewString()[:8]}
	if addr := os.Getenv(envRedis); addr != "" {
		b.addr, b.seeds, b.real = addr, []string{addr}, true
		t.Cleanup(b.deleteKeys)
		return b
	}
	m := miniredis.NewMiniRedis()
	require.NoError(t, m.Start())
	t.Cleanup(m.Close)
	// miniredis's RESP3 is incomplete (a connection that subscribed takes
	// no other command), so the binary speaks RESP2 to it, as an operator
	// would to such a server.
	b.addr, b.seeds = "redis://"+m.Addr()+"?protocol=2", []string{m.Addr()}
	return b
}

// redis opens a rueidis client to the backend.
func (b *backend) redis() rueidis.Client {
	b.t.Helper()
	opt := rueidis.ClientOption{InitAddress: b.seeds, DisableCache: true}
	if !b.real {
		opt.AlwaysRESP2, opt.ForceSingleClient = true, true
	}
	rdb, err := rueidis.NewClient(opt)
	require.NoError(b.t, err)
	b.t.Cleanup(rdb.Close)
	return rdb
}

// client opens a worqr Client with the test's prefix.
func (b *backend) client() *worqr.Client {
	b.t.Helper()
	c, err := worqr.New(worqr.Options{Redis: b.redis(), Prefix: b.prefix, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	require.NoError(b.t, err)
	b.t.Cleanup(func() { _ = c.Close(context.Background()) })
	return c
}

func (b *backend) deleteKeys() {
	rdb, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: b.seeds, DisableCache: true})
	if err != nil {
		return
	}
	defer rdb.Close()
	ctx := context.Background()
	var cursor uint64
	for {
		e, err := rdb.Do(ctx, rdb.B().Scan().Cursor(cursor).Match(b.prefix+":*").Count(1000).Build()).AsScanEntry()
		if err != nil {
			return
		}
		for _, k := range e.Elements {
			rdb.Do(ctx, rdb.B().Del().Key(k).Build())
		}
		if cursor = e.Cursor; cursor == 0 {
			return
		}
	}
}

// result is what one run of the binary printed, and its exit status.
type result struct {
	stdout, stderr string
	code           int
}

func (r result) String() string {
	return fmt.Sprintf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
}

// command is the binary with the test's --addr and --prefix before args,
// and none of the WORQR_ variables of the environment.
func (b *backend) command(args ...string) *exec.Cmd {
	cmd := exec.Command(binary, append([]string{"--addr", b.addr, "--prefix", b.prefix}, args...)...)
	cmd.Env = cleanEnv()
	return cmd
}

// cleanEnv is the environment without WORQR_ variables, plus extra. A
// binary built with the race detector exits without its default second
// of sleep.
// bare is the binary with args alone: no --addr, --prefix or WORQR_
// variables.
func (b *backend) bare(args ...string) *exec.Cmd {
	cmd := exec.Command(binary, args...)
	cmd.Env = cleanEnv()
	return cmd
}

func cleanEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "WORQR_") {
			env = append(env, kv)
		}
	}
	return append(env, strings.TrimSpace("GORACE="+os.Getenv("GORACE")+" atexit_sleep_ms=0"))
}

// run runs the binary with args and stdin.
func (b *backend) runIn(stdin string, args ...string) result {
	b.t.Helper()
	return execute(b.t, b.command(args...), stdin)
}

func (b *backend) run(args ...string) result { b.t.Helper(); return b.runIn("", args...) }

func execute(t *testing.T, cmd *exec.Cmd, stdin string) result {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = strings.NewReader(stdin), &stdout, &stderr
	err := cmd.Run()
	r := result{stdout: stdout.String(), stderr: stderr.String()}
	if err != nil {
		exit, ok := err.(*exec.ExitError)
		require.True(t, ok, "running %v: %v", cmd.Args, err)
		r.code = exit.ExitCode()
	}
	return r
}

// ok runs the binary and requires exit status 0.
func (b *backend) ok(args ...string) result {
	b.t.Helper()
	r := b.run(args...)
	require.Equal(b.t, 0, r.code, "worqr %s\n%s", strings.Join(args, " "), r)
	return r
}

// fails runs the binary and requires this exit status and stderr text.
func (b *backend) fails(code int, stderr string, args ...string) result {
	b.t.Helper()
	r := b.run(args...)
	require.Equal(b.t, code, r.code, "worqr %s\n%s", strings.Join(args, " "), r)
	require.Contains(b.t, r.stderr, stderr, "worqr %s", strings.Join(args, " "))
	return r
}

// jsonOf runs the binary with --json and decodes its output into T.
func jsonOf[T any](b *backend, args ...string) T {
	b.t.Helper()
	r := b.ok(append(args, "--json")...)
	var v T
	require.NoError(b.t, jsonDecode(r.stdout, &v), "worqr %s --json\n%s", strings.Join(args, " "), r)
	return v
}

// jsonDecode decodes one JSON document, refusing fields v does not have.
func jsonDecode(s string, v any) error {
	dec := json.NewDecoder(strings.NewReader(s))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return fmt.Errorf("more than one JSON document")
	}
	return nil
}

var cellSep = regexp.MustCompile(`\s{2,}`)

// rows splits a table into its rows of cells, the header first.
func rows(out string) [][]string {
	var rs [][]string
	for _, line := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
		if line != "" {
			rs = append(rs, cellSep.Split(strings.TrimSpace(line), -1))
		}
	}
	return rs
}

// row finds the table row whose first cell is first.
func row(t *testing.T, out, first string) []string {
	t.Helper()
	for _, r := range rows(out) {
		if r[0] == first {
			return r
		}
	}
	t.Fatalf("no row %q in\n%s", first, out)
	return nil
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// newWorker starts a worker the test closes at its end.
func newWorker(t *testing.T, c *worqr.Client) *worqr.Worker {
	t.Helper()
	w, err := c.NewWorker(ctxT(t), worqr.WorkerOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = w.Close(context.Background()) })
	return w
}
