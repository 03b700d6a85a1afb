package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/worqr/worqr/dashboard"
)

func TestUIRefusesRemoteWithoutToken(t *testing.T) {
	t.Parallel()
	b := newBackend(t)
	for _, addr := range []string{"0.0.0.0:0", ":0", "192.0.2.1:8080"} {
		b.fails(exitUsage, "is not a loopback address", "ui", "--listen", addr)
	}
	assert.True(t, loopback("127.0.0.1:8080"))
	assert.True(t, loopback("[::1]:8080"))
	assert.True(t, loopback("localhost:80"))
	assert.False(t, loopback(":8080"))
}

// uiTestToken is a token long enough for the dashboard.
const uiTestToken = "correct-horse-battery-staple"

// startUI runs worqr ui with args and the extra environment, and returns
// the address it serves on and what it printed on stderr so far (call
// after stop). stop interrupts it and requires exit 0.
func startUI(t *testing.T, b *backend, env []string, args ...string) (addr string, stop func() string) {
	t.Helper()
	cmd := b.command(append([]string{"ui", "--listen", "127.0.0.1:0", "--poll", "200ms"}, args...)...)
	cmd.Env = append(cmd.Env, env...)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() { _ = cmd.Process.Kill() })

	line, err := bufio.NewReader(out).ReadString('\n')
	require.NoError(t, err)
	m := regexp.MustCompile(`http://(\S+)/`).FindStringSubmatch(line)
	require.NotNil(t, m, line)
	return m[1], func() string {
		require.NoError(t, cmd.Process.Signal(os.Interrupt))
		select {
		case err := <-exited:
			assert.NoError(t, err, "exit 0 on interrupt")
		case <-time.After(10 * time.Second):
			t.Fatal("worqr ui did not stop on interrupt")
		}
		return stderr.String()
	}
}

// uiFails runs worqr ui with args (on a free port unless they say
// otherwise), which must exit with code and this text on stderr; one
// that serves instead is stopped after a while.
func uiFails(t *testing.T, b *backend, code int, stderr string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := b.command(append([]string{"ui", "--listen", "127.0.0.1:0"}, args...)...)
	cmd := exec.CommandContext(ctx, c.Path, c.Args[1:]...)
	cmd.Env = c.Env
	r := execute(t, cmd, "")
	require.Equal(t, code, r.code, "worqr ui %s\n%s", strings.Join(args, " "), r)
	require.Contains(t, r.stderr, stderr)
	return r
}

// uiGet fetches / from addr with the Host and bearer token given ("" for
// none).
func uiGet(t *testing.T, addr, host, auth string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, "http://"+addr+"/", nil)
	require.NoError(t, err)
	if host != "" {
		req.Host = host
	}
	if auth != "" {
		req.Header.Set("Authorization", "Bearer "+auth)
	}
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(body)
}

func TestUIServes(t *testing.T) {
	t.Parallel()
	b := newBackend(t)
	c := b.client()
	_, err := c.Enqueue(ctxT(t), "mail", []byte("x"))
	require.NoError(t, err)

	addr, stop := startUI(t, b, nil, "--token", uiTestToken, "--read-only")
	code, _ := uiGet(t, addr, "", "")
	assert.Equal(t, http.StatusUnauthorized, code)
	code, body := uiGet(t, addr, "", uiTestToken)
	assert.Equal(t, http.StatusOK, code)
	assert.Contains(t, body, ">mail</a>")
	assert.Contains(t, body, "read-only")
	assert.Contains(t, stop(), "--token is visible to every user", "a token on the command line is warned about")
}

// The token comes from a file or the environment, which ps does not
// show, and is at least 16 characters from anywhere.
func TestUITokenSources(t *testing.T) {
	t.Parallel()
	b := newBackend(t)
	file := filepath.Join(t.TempDir(), "token")
	require.NoError(t, os.WriteFile(file, []byte(uiTestToken+"\n"), 0o600))

	addr, stop := startUI(t, b, nil, "--token-file", file)
	code, _ := uiGet(t, addr, "", uiTestToken)
	assert.Equal(t, http.StatusOK, code, "the file's token, without its newline")
	assert.NotContains(t, stop(), "visible")

	addr, stop = startUI(t, b, []string{envUIToken + "=" + uiTestToken})
	code, _ = uiGet(t, addr, "", uiTestToken)
	assert.Equal(t, http.StatusOK, code, "$"+envUIToken)
	code, _ = uiGet(t, addr, "", "")
	assert.Equal(t, http.StatusUnauthorized, code)
	stop()

	short := filepath.Join(t.TempDir(), "short")
	require.NoError(t, os.WriteFile(short, []byte("123456789012345"), 0o600))
	empty := filepath.Join(t.TempDir(), "empty")
	require.NoError(t, os.WriteFile(empty, []byte(" \n"), 0o600))
	uiFails(t, b, exitUsage, "at least 16", "--token", "tok")
	uiFails(t, b, exitUsage, "at least 16", "--token-file", short)
	uiFails(t, b, exitUsage, "is empty", "--token-file", empty)
	uiFails(t, b, exitUsage, "not both", "--token", uiTestToken, "--token-file", file)
	uiFails(t, b, exitFailure, "reading --token-file", "--token-file", filepath.Join(t.TempDir(), "nope"))
}

// Without a token the dashboard answers only to loopback names, so that
// no page elsewhere can rebind its name to it.
func TestUIHostAllowList(t *testing.T) {
	t.Parallel()
	b := newBackend(t)
	addr, stop := startUI(t, b, nil, "--allow-host", "ops.example, dash.example")
	port := addr[strings.LastIndex(addr, ":"):]
	code, body := uiGet(t, addr, "rebind.attacker.example"+port, "")
	assert.Equal(t, http.StatusForbidden, code)
	assert.NotContains(t, body, "csrf")
	for _, host := range []string{"", "localhost" + port, "ops.example" + port, "dash.example"} {
		code, _ = uiGet(t, addr, host, "")
		assert.Equal(t, http.StatusOK, code, host)
	}
	stop()

	uiFails(t, b, exitUsage, "--allow-host", "--listen", "0.0.0.0:0", "--allow-remote")
	r := uiFails(t, b, exitUsage, "without a port", "--allow-host", "ops.example:80")
	assert.NotContains(t, r.stderr, "worqr: ", "the worqr: prefix once")
	for addr, want := range map[string]string{"192.0.2.1:8080": "192.0.2.1", "ops.example:8080": "ops.example", ":8080": "", "0.0.0.0:8080": "", "[::]:8080": ""} {
		host, ok := listenHost(addr)
		assert.Equal(t, want, host, addr)
		assert.Equal(t, want != "", ok, addr)
	}
}

// The server ends a request that comes too slowly and a connection left
// idle, but not an event stream (which a write timeout would).
func TestUIServerTimeouts(t *testing.T) {
	t.Parallel()
	require.Positive(t, uiTimeouts.header)
	require.Positive(t, uiTimeouts.read)
	require.Positive(t, uiTimeouts.idle)
	b := newBackend(t)
	c := b.client()
	h, err := dashboard.New(c, dashboard.Options{PollInterval: 50 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	require.NoError(t, err)
	const short, long = 300 * time.Millisecond, time.Minute
	serve := func(to serverTimeouts) string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(context.Background())
		srv := uiServer(ctx, h, to)
		go func() { _ = srv.Serve(ln) }()
		t.Cleanup(func() { cancel(); _ = srv.Close() })
		return ln.Addr().String()
	}
	// closes sends a request's start and requires the server to close
	// the connection well before the client would give up.
	closes := func(addr, what, send string, read func(*bufio.Reader)) {
		conn, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		defer conn.Close()
		require.NoError(t, conn.SetDeadline(time.Now().Add(10*time.Second)))
		_, err = io.WriteString(conn, send)
		require.NoError(t, err)
		br := bufio.NewReader(conn)
		if read != nil {
			read(br)
		}
		_, err = io.Copy(io.Discard, br)
		var ne net.Error
		require.False(t, errors.As(err, &ne) && ne.Timeout(), "%s: the server kept the connection open", what)
	}
	closes(serve(serverTimeouts{header: short, read: long, idle: long}), "slow header", "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n", nil)
	closes(serve(serverTimeouts{header: long, read: short, idle: long}), "slow body",
		"POST /action HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 100\r\n\r\nop=pau", nil)
	closes(serve(serverTimeouts{header: long, read: long, idle: short}), "idle", "GET /static/app.css HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
		func(br *bufio.Reader) {
			res, err := http.ReadResponse(br, nil)
			require.NoError(t, err)
			_, _ = io.Copy(io.Discard, res.Body)
			res.Body.Close()
			require.Equal(t, http.StatusOK, res.StatusCode)
		})

	// An event stream is read past the read timeout.
	addr := serve(serverTimeouts{header: short, read: short, idle: short})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/events", nil)
	require.NoError(t, err)
	start := time.Now()
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	sc := bufio.NewScanner(res.Body)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "event: counts") && time.Since(start) > 4*short {
			return
		}
	}
	t.Fatalf("the event stream ended after %v (read timeout %v): %v", time.Since(start), short, sc.Err())
}
