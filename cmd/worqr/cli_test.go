package main

import (
	"flag"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestUsage(t *testing.T) {
	t.Parallel()
	b := newBackend(t)

	r := execute(t, b.bare(), "")
	assert.Equal(t, exitUsage, r.code)
	assert.Contains(t, r.stderr, "usage: worqr [global flags] <command>")

	for _, args := range [][]string{{"help"}, {"-h"}, {"--help"}} {
		r := execute(t, b.bare(args...), "")
		assert.Equal(t, exitOK, r.code, "%v", args)
		assert.Contains(t, r.stdout, "  dead requeue <queue> <id>|--all", "%v", args)
		assert.Contains(t, r.stdout, "  cancel --payload <queue> <payload>|-", "%v", args)
		assert.NotRegexp(t, ` \n`, r.stdout, "no trailing spaces")
	}
	for _, args := range [][]string{{"help", "dead", "requeue"}, {"dead", "requeue", "-h"}, {"dead", "requeue", "q", "--help"}} {
		r := execute(t, b.bare(args...), "")
		assert.Equal(t, exitOK, r.code, "%v", args)
		assert.True(t, strings.HasPrefix(r.stdout, "usage: worqr dead requeue <queue> <id>|--all\n"), "%v: %s", args, r.stdout)
		assert.Contains(t, r.stdout, "  --all ")
		assert.Contains(t, r.stdout, "global flags:\n  --addr address")
	}
	r = execute(t, b.bare("help", "wait"), "")
	assert.Contains(t, r.stdout, "--timeout duration")

	for _, c := range []struct {
		stderr string
		args   []string
	}{
		{`worqr: unknown command "frobnicate"`, []string{"frobnicate"}},
		{`unknown command "nope"`, []string{"help", "nope"}},
		{"worqr queues: flag provided but not defined: -bogus\nrun 'worqr queues -h' for usage", []string{"queues", "--bogus"}},
		{"worqr processes: missing arguments", []string{"processes"}},
		{"worqr queues: too many arguments", []string{"queues", "extra"}},
		{"invalid value \"soon\" for flag -timeout: not a duration", []string{"queues", "--timeout", "soon"}},
		{`--prefix "a{b": must not be empty or contain '{' or '}'`, []string{"queues", "--prefix", "a{b"}},
		{"flag needs an argument: -limit", []string{"dead", "q", "--limit"}},
	} {
		b.fails(exitUsage, c.stderr, c.args...)
	}
}

func TestConnection(t *testing.T) {
	t.Parallel()
	b := newBackend(t)
	c, ctx := b.client(), ctxT(t)
	_, err := c.Enqueue(ctx, "from-env", []byte("x"))
	require.NoError(t, err)

	// The address and prefix come from the environment when not given.
	cmd := b.bare("queues")
	cmd.Env = append(cmd.Env, "WORQR_ADDR="+b.addr, "WORQR_PREFIX="+b.prefix)
	r := execute(t, cmd, "")
	require.Equal(t, exitOK, r.code, "%s", r)
	assert.Equal(t, []string{"from-env", "1", "0", "0", "0"}, row(t, r.stdout, "from-env"))

	// Flags win over the environment.
	cmd = b.bare("queues", "--prefix", b.prefix+"-other")
	cmd.Env = append(cmd.Env, "WORQR_ADDR="+b.addr, "WORQR_PREFIX="+b.prefix)
	r = execute(t, cmd, "")
	require.Equal(t, exitOK, r.code, "%s", r)
	assert.Empty(t, r.stdout)
	assert.Contains(t, r.stderr, "no queues (prefix")

	// Nothing listens: exit 1 and say where it tried.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	closed := l.Addr().String()
	require.NoError(t, l.Close())
	cmd = b.bare("--addr", closed, "queues")
	r = execute(t, cmd, "")
	assert.Equal(t, exitFailure, r.code)
	assert.Contains(t, r.stderr, "worqr queues: cannot reach Redis at "+closed+": redis unavailable")

	// A URL's password is not shown.
	cmd = b.bare("--addr", "redis://user:hunter2@"+closed, "queues")
	r = execute(t, cmd, "")
	assert.Equal(t, exitFailure, r.code)
	assert.Contains(t, r.stderr, "redis://user:xxxxx@"+closed)
	assert.NotContains(t, r.stderr, "hunter2")

	// A server that never answers: --timeout bounds the command.
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer silent.Close()
	go func() {
		for {
			conn, err := silent.Accept()
			if err != nil {
				return
			}
			defer conn.Close()
		}
	}()
	cmd = b.bare("--addr", silent.Addr().String(), "queues", "--timeout", "300ms")
	start := time.Now()
	r = execute(t, cmd, "")
	assert.Equal(t, exitFailure, r.code)
	assert.Contains(t, r.stderr, "worqr queues: cannot reach Redis at "+silent.Addr().String()+": redis unavailable: no answer before the context ended: context deadline exceeded (gave up after --timeout 300ms)")
	assert.Less(t, time.Since(start), 5*time.Second)
}

func TestPreview(t *testing.T) {
	for _, c := range []struct {
		in   string
		max  int
		want string
	}{
		{"plain text", 40, "plain text"},
		{`{"to":"ada"}`, 40, `{"to":"ada"}`},
		{"a\nb\tc\rd\\e", 40, `a\nb\tc\rd\\e`},
		{"nul\x00esc\x1bbad\xff", 40, `nul\x00esc\x1bbad\xff`},
		{"zero\u200bwidth é 日本", 40, `zero\u200bwidth é 日本`},
		{"0123456789", 10, "0123456789"},
		{"0123456789a", 10, "012345678…"},
		{"日本語のテキストです", 5, "日本語の…"},
		{"\n\n\n\n\n\n", 5, `\n\n…`},
		{"", 10, ""},
	} {
		assert.Equal(t, c.want, preview([]byte(c.in), c.max), "%q", c.in)
	}
	assert.Equal(t, strings.Repeat("x", 1000), escape(strings.Repeat("x", 1000)))
}

func TestSpan(t *testing.T) {
	for d, want := range map[time.Duration]string{
		350 * time.Millisecond:          "350ms",
		4210 * time.Millisecond:         "4.2s",
		4*time.Minute + 12*time.Second:  "4m12s",
		5*time.Hour + 3*time.Minute:     "5h3m",
		3*24*time.Hour + 4*time.Hour:    "3d4h",
		59*time.Minute + 59*time.Second: "59m59s",
		47*time.Hour + 59*time.Minute:   "47h59m",
		time.Duration(0):                "0s",
		2*time.Hour + 30*time.Second:    "2h1m",
	} {
		assert.Equal(t, want, span(d), "%v", d)
	}
	now := time.Now()
	assert.Equal(t, "12s ago", ago(now, now.Add(-12*time.Second)))
	assert.Equal(t, "in 4m59s", ago(now, now.Add(4*time.Minute+59*time.Second)))
	assert.Equal(t, "-", ago(now, time.Time{}))
}

func TestParseInterspersed(t *testing.T) {
	for _, c := range []struct {
		args []string
		pos  []string
		n    int
		all  bool
	}{
		{[]string{"q", "--limit", "5"}, []string{"q"}, 5, false},
		{[]string{"--limit=5", "q", "--all"}, []string{"q"}, 5, true},
		{[]string{"q", "-1", "-5"}, []string{"q", "-1", "-5"}, 0, false},
		{[]string{"q", "-"}, []string{"q", "-"}, 0, false},
		{[]string{"q", "--", "--limit", "-x"}, []string{"q", "--limit", "-x"}, 0, false},
		{[]string{"--all", "q", "x"}, []string{"q", "x"}, 0, true},
	} {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		n := fs.Int("limit", 0, "")
		all := fs.Bool("all", false, "")
		pos, err := parseInterspersed(fs, c.args)
		require.NoError(t, err, "%v", c.args)
		assert.Equal(t, c.pos, pos, "%v", c.args)
		assert.Equal(t, c.n, *n, "%v", c.args)
		assert.Equal(t, c.all, *all, "%v", c.args)
	}
}
