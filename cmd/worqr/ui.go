package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/worqr/worqr"
	"github.com/worqr/worqr/dashboard"
)

const envUIToken = "WORQR_UI_TOKEN"

func uiCommands() []*command {
	return []*command{
		{name: "ui", synopsis: "[--listen addr] [--token-file f] [--read-only] [--poll d] [--allow-host h,...] [--allow-remote]", group: "Dashboard",
			summary: "serve the web dashboard", noLimit: true, run: cmdUI, help: `
Serves the web dashboard (queues with live counts, a page per queue and per
task, workers, and actions behind a confirmation) until interrupted. It
listens on 127.0.0.1:8080 unless told otherwise, and refuses an address
that is not loopback unless a token is set or --allow-remote is given.
The token (at least 16 characters) comes from --token-file, $` + envUIToken + `
or --token, which other users of the machine can see in ps. With a token,
browsers sign in with a form for 12 hours (or until they sign out), and
scripts send "Authorization: Bearer <token>"; a client gets 5 wrong tokens
a minute. Without a token the dashboard answers only to the Host names
localhost, loopback addresses, the --listen host and --allow-host (so that
no other site's page can rebind its name to it); with one, to any unless
--allow-host is given. --read-only hides and refuses every action. However
many browsers watch, Redis is read once per --poll.`},
	}
}

// uiTimeouts bound how long a client may take over a request, and keep
// an idle connection.
var uiTimeouts = serverTimeouts{header: 5 * time.Second, read: 10 * time.Second, idle: time.Minute}

type serverTimeouts struct{ header, read, idle time.Duration }

func cmdUI(e *env, args []string) error {
	fs := e.flags()
	listen := fs.String("listen", "127.0.0.1:8080", "`address` to serve on")
	token := fs.String("token", "", "require this `token` (visible in ps: prefer --token-file or $"+envUIToken+")")
	tokenFile := fs.String("token-file", "", "require the token in this `file` (white space around it ignored)")
	readOnly := fs.Bool("read-only", false, "show, but refuse every action")
	allowHosts := fs.String("allow-host", "", "also answer to these comma-separated host `names` (or addresses)")
	allowRemote := fs.Bool("allow-remote", false, "allow a non-loopback --listen address without a token")
	poll := duration(fs, "poll", "read live counts from Redis every `duration` (default 1s)")
	if _, err := e.parse(fs, args, 0, 0); err != nil {
		return err
	}
	tok, err := uiToken(*token, *tokenFile)
	if err != nil {
		return err
	}
	if *token != "" {
		fmt.Fprintln(e.stderr, "worqr ui: --token is visible to every user of this machine (ps); prefer --token-file or $"+envUIToken)
	}
	if !loopback(*listen) && tok == "" && !*allowRemote {
		return usagef("--listen %s is not a loopback address: set a token (--token-file or $%s), or give --allow-remote", *listen, envUIToken)
	}
	var hosts []string
	for _, h := range strings.Split(*allowHosts, ",") {
		if h = strings.TrimSpace(h); h != "" {
			hosts = append(hosts, h)
		}
	}
	// Where the dashboard checks Host (always without a token), the
	// host it listens on is one of its names.
	if host, ok := listenHost(*listen); ok && (tok == "" || len(hosts) > 0) {
		hosts = append(hosts, host)
	}
	if tok == "" && len(hosts) == 0 && !loopback(*listen) {
		return usagef("--listen %s without a token answers only to loopback names: give --allow-host with the names or addresses browsers will use", *listen)
	}
	c, err := e.client()
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	h, err := dashboard.New(c, dashboard.Options{ReadOnly: *readOnly, Token: tok, AllowedHosts: hosts, PollInterval: *poll, Logger: log})
	if errors.Is(err, worqr.ErrInvalidOptions) {
		return usagef("%s", strings.TrimPrefix(err.Error(), "worqr: "))
	}
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(e.base)
	defer cancel()
	srv := uiServer(ctx, h, uiTimeouts)
	fmt.Fprintf(e.stdout, "worqr dashboard on http://%s/ (Ctrl-C to stop)\n", ln.Addr())
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-e.base.Done():
	}
	cancel() // ends the event streams, which Shutdown would wait for
	closing, stop := context.WithTimeout(context.Background(), 5*time.Second)
	defer stop()
	if err := srv.Shutdown(closing); err != nil {
		return err
	}
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// uiServer serves h with timeouts, so that a client that sends a request
// slowly, or never, or keeps a connection idle, does not hold it for
// long. It sets no write timeout, which would end the event streams: the
// dashboard sets a deadline on each answer's writes itself.
func uiServer(ctx context.Context, h http.Handler, t serverTimeouts) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: t.header,
		ReadTimeout:       t.read,
		IdleTimeout:       t.idle,
		MaxHeaderBytes:    64 << 10,
		BaseContext:       func(net.Listener) context.Context { return ctx },
	}
}

// uiToken is the dashboard's token: from --token-file, --token or
// $WORQR_UI_TOKEN, in that order; "" for none.
func uiToken(flag, file string) (string, error) {
	tok := os.Getenv(envUIToken)
	switch {
	case flag != "" && file != "":
		return "", usagef("give --token or --token-file, not both")
	case file != "":
		b, err := os.ReadFile(file)
		if err != nil {
			return "", fmt.Errorf("reading --token-file: %w", err)
		}
		if tok = strings.TrimSpace(string(b)); tok == "" {
			return "", usagef("--token-file %s is empty", file)
		}
	case flag != "":
		tok = flag
	}
	if tok != "" && len(tok) < dashboard.MinTokenLength {
		return "", usagef("the token has %d characters: give at least %d", len(tok), dashboard.MinTokenLength)
	}
	return tok, nil
}

// listenHost is the host of a listen address, and whether it names one
// (not every interface).
func listenHost(addr string) (string, bool) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil || host == "" {
		return "", false
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		return "", false
	}
	return host, true
}

// loopback says whether a listen address is on the loopback interface
// only. An empty host listens on every interface.
func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
