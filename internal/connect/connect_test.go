package connect

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/worqr/worqr/internal/errs"
)

func TestOptionsChecksTheAddress(t *testing.T) {
	for _, addr := range []string{"", "localhost", "h:0", "h:65536", "h:", "a:1,b", "ftp://h:1"} {
		_, err := Options(addr)
		assert.ErrorIs(t, err, errs.ErrInvalidOptions, "%q", addr)
	}
	opt, err := Options("a:1,b:redis")
	require.NoError(t, err)
	assert.Equal(t, []string{"a:1", "b:redis"}, opt.InitAddress)
	opt, err = Options("redis://u:secret@h:7/2")
	require.NoError(t, err)
	assert.Equal(t, []string{"h:7"}, opt.InitAddress)
	assert.Equal(t, 2, opt.SelectDB)
}

func TestRedactAddrHidesAPassword(t *testing.T) {
	assert.Equal(t, "h:1", redactAddr("h:1"))
	got := redactAddr("redis://u:secret@h:1")
	assert.NotContains(t, got, "secret")
	assert.Contains(t, got, "h:1")
}

// A server that answers in something other than RESP (an HTTP server)
// is named as such, as an outage.
func TestDialNamesAServerThatIsNotRedis(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			_, _ = conn.Write([]byte("HTTP/1.1 400 Bad Request\r\n\r\n"))
			_ = conn.Close()
		}
	}()
	addr := ln.Addr().String()
	opt, err := Options(addr)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = Dial(ctx, opt, addr, slog.Default())
	require.ErrorIs(t, err, errs.ErrUnavailable)
	assert.Contains(t, err.Error(), `does not speak the Redis protocol: its reply began with 'H'`)
}

// A miniredis is spoken to over RESP2, where its pub/sub works.
func TestDialSpeaksRESP2ToMiniredis(t *testing.T) {
	mr := miniredis.RunT(t)
	opt, err := Options(mr.Addr())
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rdb, err := Dial(ctx, opt, mr.Addr(), slog.Default())
	require.NoError(t, err)
	defer rdb.Close()
	require.NoError(t, rdb.Do(ctx, rdb.B().Set().Key("k").Value("v").Build()).Error())
	// A subscription and a command on the same client: miniredis refuses
	// commands on a connection with a subscription, which RESP3 would use.
	sub := make(chan error, 1)
	go func() {
		sub <- rdb.Receive(ctx, rdb.B().Subscribe().Channel("c").Build(), func(rueidis.PubSubMessage) {})
	}()
	require.Eventually(t, func() bool { return mr.PubSubNumSub("c")["c"] == 1 }, 5*time.Second, time.Millisecond, "subscribed")
	got, err := rdb.Do(ctx, rdb.B().Get().Key("k").Build()).ToString()
	require.NoError(t, err)
	assert.Equal(t, "v", got)
	cancel()
	if err := <-sub; err != nil && !errors.Is(err, context.Canceled) && !strings.Contains(err.Error(), "context") {
		t.Fatalf("subscribe: %v", err)
	}
}

// A client New builds from Addr lets its connections stay quiet for 5 s
// before rueidis PINGs them (not rueidis's 1 s: a fleet of one-worker
// processes would draw a PING a worker a second), and gives up a connection
// that stopped answering after rueidis's 10 s, unless a URL sets its own.
func TestClientFromAddressPingsQuietConnectionsAfterFiveSeconds(t *testing.T) {
	for _, addr := range []string{"127.0.0.1:6379", "a:1,b:2", "redis://127.0.0.1:6379/0", "rediss://u:p@h:6380"} {
		opt, err := Options(addr)
		require.NoError(t, err, addr)
		assert.Equal(t, 5*time.Second, opt.Dialer.KeepAlive, addr)
		assert.Equal(t, 10*time.Second, opt.ConnWriteTimeout, addr)
	}
	opt, err := Options("redis://127.0.0.1:6379/0?write_timeout=2s")
	require.NoError(t, err)
	assert.Equal(t, 2*time.Second, opt.ConnWriteTimeout, "the URL's own")
}
