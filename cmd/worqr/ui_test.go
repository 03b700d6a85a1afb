package main

import (
	"bufio"
	"io"
	"net/http"
	"os"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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

func TestUIServes(t *testing.T) {
	t.Parallel()
	b := newBackend(t)
	c := b.client()
	_, err := c.Enqueue(ctxT(t), "mail", []byte("x"))
	require.NoError(t, err)

	cmd := b.command("ui", "--listen", "127.0.0.1:0", "--token", "correct-horse-battery-staple", "--read-only", "--poll", "200ms")
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = io.Discard
	require.NoError(t, cmd.Start())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() { _ = cmd.Process.Kill() })

	line, err := bufio.NewReader(out).ReadString('\n')
	require.NoError(t, err)
	m := regexp.MustCompile(`http://(\S+)/`).FindStringSubmatch(line)
	require.NotNil(t, m, line)
	get := func(auth string) (int, string) {
		req, err := http.NewRequest(http.MethodGet, "http://"+m[1]+"/", nil)
		require.NoError(t, err)
		if auth != "" {
			req.Header.Set("Authorization", "Bearer "+auth)
		}
		res, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer res.Body.Close()
		body, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(body)
	}
	code, _ := get("")
	assert.Equal(t, http.StatusUnauthorized, code)
	code, body := get("correct-horse-battery-staple")
	assert.Equal(t, http.StatusOK, code)
	assert.Contains(t, body, ">mail</a>")
	assert.Contains(t, body, "read-only")

	require.NoError(t, cmd.Process.Signal(os.Interrupt))
	select {
	case err := <-exited:
		assert.NoError(t, err, "exit 0 on interrupt")
	case <-time.After(10 * time.Second):
		t.Fatal("worqr ui did not stop on interrupt")
	}
}
