// Package connect opens the client's Redis connection from Options.Addr:
// it checks the address, connects within a context (rueidis takes none),
// speaks RESP2 to a miniredis, and sorts a failure into refused
// credentials (errs.ErrInvalidOptions), an outage or a server that is not
// Redis (errs.ErrUnavailable).
package connect

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/rueidis"

	"github.com/worqr/worqr/internal/errs"
)

// The keep-alive of the connections of a client built from an address.
// rueidis PINGs a connection that received nothing for Dialer.KeepAlive
// (1 s by default), and gives it up when a PING or a pending call goes
// unanswered for ConnWriteTimeout (ten keep-alives by default). A worker
// renews its leases every second on one of the client's connections at
// random: two from two CPUs, four from four. After 1 s of quiet, the
// connections that answered no renewal in that second draw a PING each,
// one to three a worker a second, each a request that costs an otherwise
// idle Redis a wake-up, as the renewal does. After 5 s of quiet, a worker
// renewing every second draws one about once in 80 s on two connections,
// once in 5 s on four. The write timeout stays at 10 s, so a connection
// that stopped answering is given up within 15 s rather than 11 s (a
// worker fences itself at its TTL regardless).
const (
	KeepAlive    = 5 * time.Second
	WriteTimeout = 10 * time.Second
)

// Options checks an address (worqr.Options.Addr) and turns it into
// rueidis options: a URL as rueidis parses it, or host:port addresses,
// with the keep-alive above unless the URL sets its own write_timeout.
func Options(addr string) (rueidis.ClientOption, error) {
	var opt rueidis.ClientOption
	if addr == "" {
		return opt, fmt.Errorf("worqr: %w: neither Addr nor Redis given", errs.ErrInvalidOptions)
	}
	if strings.Contains(addr, "://") {
		parsed, err := rueidis.ParseURL(addr)
		if err != nil {
			return opt, fmt.Errorf("worqr: %w: %w", errs.ErrInvalidOptions, err)
		}
		if parsed.Dialer.KeepAlive == 0 {
			parsed.Dialer.KeepAlive = KeepAlive
		}
		if parsed.ConnWriteTimeout == 0 {
			parsed.ConnWriteTimeout = WriteTimeout
		}
		return parsed, nil
	}
	opt.Dialer.KeepAlive, opt.ConnWriteTimeout = KeepAlive, WriteTimeout
	opt.InitAddress = strings.Split(addr, ",")
	for _, a := range opt.InitAddress {
		_, port, err := net.SplitHostPort(a)
		if err != nil {
			var ae *net.AddrError
			if errors.As(err, &ae) {
				err = errors.New(ae.Err)
			}
			return opt, fmt.Errorf("worqr: %w: Addr %q: %v (want host:port, or a URL: redis://host:port)", errs.ErrInvalidOptions, a, err)
		}
		// A port may be a service name ("redis"); a number must be one.
		if n, err := strconv.Atoi(port); port == "" || err == nil && (n < 1 || n > 65535) {
			return opt, fmt.Errorf("worqr: %w: Addr %q: port %q is not one from 1 to 65535", errs.ErrInvalidOptions, a, port)
		}
	}
	return opt, nil
}

// Dial connects to addr (checked by Options into opt), bounded by
// ctx.
func Dial(ctx context.Context, opt rueidis.ClientOption, addr string, log *slog.Logger) (rueidis.Client, error) {
	where := redactAddr(addr)
	// worqr never reads a value twice, so client-side caching buys nothing.
	opt.DisableCache = true
	rdb, err := newRedis(ctx, opt, where)
	if err != nil || opt.AlwaysRESP2 || !isMiniredis(ctx, rdb) {
		return rdb, err
	}
	// miniredis answers HELLO 3 but then refuses every command on a
	// connection that has a subscription, which RESP3 allows and rueidis
	// relies on (it carries pub/sub on its command connection). Over
	// RESP2 rueidis gives pub/sub a connection of its own; miniredis has
	// no client tracking and no real cluster (it answers CLUSTER SLOTS,
	// which would make rueidis take it for one).
	rdb.Close()
	log.Debug("worqr: the Redis is miniredis; speaking RESP2 to it", "addr", where)
	opt.AlwaysRESP2, opt.ForceSingleClient = true, true
	return newRedis(ctx, opt, where)
}

// redactAddr is Options.Addr for error texts and logs: a URL's password
// hidden.
func redactAddr(addr string) string {
	if !strings.Contains(addr, "://") {
		return addr
	}
	u, err := url.Parse(addr)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Redacted()
}

// newRedis opens a rueidis client to where (Options.Addr, for error
// texts), bounded by ctx, sorting its errors into refused credentials,
// outages and a server that is not Redis.
func newRedis(ctx context.Context, opt rueidis.ClientOption, where string) (rueidis.Client, error) {
	bound := bindDials(ctx, &opt)
	rdb, err := rueidis.NewClient(opt)
	bound.release()
	switch {
	case err == nil && ctx.Err() != nil:
		// Connected just as ctx ended: the caller has given up, and a
		// connection of it may have been closed.
		rdb.Close()
		fallthrough
	case ctx.Err() != nil:
		return nil, fmt.Errorf("worqr: connect to %s: %w: no answer before the context ended: %w", where, errs.ErrUnavailable, context.Cause(ctx))
	case err == nil:
		return rdb, nil
	case refusedLogin(err):
		return nil, fmt.Errorf("worqr: connect to %s: %w: %w", where, errs.ErrInvalidOptions, err)
	}
	if first, ok := notRedis(err); ok {
		return nil, fmt.Errorf("worqr: connect to %s: %w: the server does not speak the Redis protocol: "+
			"its reply began with %q (an HTTP server? a TLS port, which wants rediss://?): %w", where, errs.ErrUnavailable, first, err)
	}
	return nil, fmt.Errorf("worqr: connect to %s: %w: %w", where, errs.ErrUnavailable, err)
}

// notRedis reports whether err is rueidis reading a reply that is not
// RESP, and the reply's first byte: the server at the address is
// something else (an HTTP server, a TLS port spoken to in the clear).
func notRedis(err error) (first rune, ok bool) {
	const unknown = "received unknown message type: "
	msg := err.Error()
	i := strings.Index(msg, unknown)
	if i < 0 {
		return 0, false
	}
	digits := msg[i+len(unknown):]
	if j := strings.IndexFunc(digits, func(r rune) bool { return r < '0' || r > '9' }); j >= 0 {
		digits = digits[:j]
	}
	b, err := strconv.Atoi(digits)
	if err != nil || b < 0 || b > 255 {
		return 0, false
	}
	return rune(b), true
}

// boundDials ties the dials rueidis makes while a client is being made to
// a context: rueidis.NewClient takes none, and connects at once. A dial
// still under way when ctx ends gives up, and a connection still waiting
// for the answer to its handshake is closed, so NewClient returns soon
// after. Dials once released (rueidis reconnecting later) are its own.
type boundDials struct {
	mu    sync.Mutex
	ctx   context.Context // nil once released
	stops []func() bool   // the closings of the connections made meanwhile
}

type dialFunc = func(context.Context, string, *net.Dialer, *tls.Config) (net.Conn, error)

// bindDials binds the dials of opt to ctx until release.
func bindDials(ctx context.Context, opt *rueidis.ClientOption) *boundDials {
	b := &boundDials{ctx: ctx}
	next := opt.DialCtxFn
	if next == nil {
		next = func(ctx context.Context, dst string, d *net.Dialer, tc *tls.Config) (net.Conn, error) {
			if tc != nil {
				return (&tls.Dialer{NetDialer: d, Config: tc}).DialContext(ctx, "tcp", dst)
			}
			return d.DialContext(ctx, "tcp", dst)
		}
	}
	opt.DialCtxFn = b.dial(next)
	return b
}

func (b *boundDials) dial(next dialFunc) dialFunc {
	return func(ctx context.Context, dst string, d *net.Dialer, tc *tls.Config) (net.Conn, error) {
		b.mu.Lock()
		bound := b.ctx
		b.mu.Unlock()
		if bound == nil {
			return next(ctx, dst, d, tc)
		}
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		stop := context.AfterFunc(bound, cancel)
		conn, err := next(ctx, dst, d, tc)
		stop()
		if err != nil {
			return nil, err
		}
		b.mu.Lock()
		defer b.mu.Unlock()
		switch {
		case b.ctx == nil: // released meanwhile
		case b.ctx.Err() != nil:
			_ = conn.Close()
			return nil, b.ctx.Err()
		default:
			b.stops = append(b.stops, context.AfterFunc(b.ctx, func() { _ = conn.Close() }))
		}
		return conn, nil
	}
}

// release ends the binding: the connections made meanwhile are no longer
// closed when ctx ends.
func (b *boundDials) release() {
	b.mu.Lock()
	stops := b.stops
	b.ctx, b.stops = nil, nil
	b.mu.Unlock()
	for _, stop := range stops {
		stop()
	}
}

// isMiniredis reports whether the server names itself "miniredis" in
// its HELLO reply. HELLO 3 leaves a connection rueidis set up with
// HELLO 3 as it was; an error (a server before Redis 6, a user not
// allowed HELLO) or a slow answer means a real Redis.
func isMiniredis(ctx context.Context, rdb rueidis.Client) bool {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	hello, err := rdb.Do(ctx, rdb.B().Hello().Protover(3).Build()).AsMap()
	if err != nil {
		return false
	}
	server, ok := hello["server"]
	if !ok {
		return false
	}
	name, err := server.ToString()
	return err == nil && name == "miniredis"
}

// refusedLogin reports whether Redis answered the connection handshake by
// refusing the credentials: wrong ones, none where some are needed, or a
// user not allowed to log in. Retrying cannot help, so it is not an outage.
func refusedLogin(err error) bool {
	var re *rueidis.RedisError
	if !errors.As(err, &re) {
		return false
	}
	msg := re.Error()
	return strings.HasPrefix(msg, "WRONGPASS") || strings.HasPrefix(msg, "NOAUTH") || strings.HasPrefix(msg, "NOPERM")
}
