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

	"github.com/worqr/worqr/dashboard"
)

const envUIToken = "WORQR_UI_TOKEN"

func uiCommands() []*command {
	return []*command{
		{name: "ui", synopsis: "[--listen addr] [--token t] [--read-only] [--poll d] [--allow-remote]", group: "Dashboard",
			summary: "serve the web dashboard", noLimit: true, run: cmdUI, help: `
Serves the web dashboard (queues with live counts, a page per queue and per
task, workers, and actions behind a confirmation) until interrupted. It
listens on 127.0.0.1:8080 unless told otherwise, and refuses an address
that is not loopback unless --token (or $` + envUIToken + `) is set or
--allow-remote is given. With a token, browsers sign in with a form, and
scripts send "Authorization: Bearer <token>". --read-only hides and refuses
every action. However many browsers watch, Redis is read once per --poll.`},
	}
}

func cmdUI(e *env, args []string) error {
	fs := e.flags()
	listen := fs.String("listen", "127.0.0.1:8080", "`address` to serve on")
	token := fs.String("token", "", "require this `token` (default $"+envUIToken+")")
	readOnly := fs.Bool("read-only", false, "show, but refuse every action")
	allowRemote := fs.Bool("allow-remote", false, "allow a non-loopback --listen address without a token")
	poll := duration(fs, "poll", "read live counts from Redis every `duration` (default 1s)")
	if _, err := e.parse(fs, args, 0, 0); err != nil {
		return err
	}
	if *token == "" {
		*token = os.Getenv(envUIToken)
	}
	if !loopback(*listen) && *token == "" && !*allowRemote {
		return usagef("--listen %s is not a loopback address: set --token (or $%s), or give --allow-remote", *listen, envUIToken)
	}
	c, err := e.client()
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	h, err := dashboard.New(c, dashboard.Options{ReadOnly: *readOnly, Token: *token, PollInterval: *poll, Logger: log})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(e.base)
	defer cancel()
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, BaseContext: func(net.Listener) context.Context { return ctx }}
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
