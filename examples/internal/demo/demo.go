// Package demo holds what the example programs share: an embedded Redis
// when no address is given, the rueidis options it needs, a fresh key
// prefix per run, and running the program itself again as a worker
// process.
package demo

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"

	"github.com/alicebob/miniredis/v2"
	"github.com/google/uuid"
	"github.com/redis/rueidis"

	"github.com/worqr/worqr"
)

// Redis returns addr, or starts an embedded Redis (miniredis with TTLs on
// the wall clock) when addr is empty. stop shuts the embedded one down.
func Redis(addr string) (at string, embedded bool, stop func(), err error) {
	if addr != "" {
		return addr, false, func() {}, nil
	}
	m := miniredis.NewMiniRedis()
	m.ClockTTL(true) // leases expire on the wall clock, as in Redis
	if err := m.Start(); err != nil {
		return "", false, nil, err
	}
	return m.Addr(), true, m.Close, nil
}

// Connect opens a rueidis client to addr (one address, or a cluster's seed
// list separated by commas); miniredis needs RESP2 and no tracking.
func Connect(addr string, embedded bool) (rueidis.Client, error) {
	opt := rueidis.ClientOption{InitAddress: strings.Split(addr, ","), DisableCache: true}
	if embedded {
		opt.AlwaysRESP2, opt.ForceSingleClient = true, true
	}
	return rueidis.NewClient(opt)
}

// Prefix is a key prefix of its own for one run, so runs against a shared
// Redis never meet.
func Prefix(name string) string { return name + "-" + uuid.NewString()[:8] }

// Spawn runs this program again with args, as a separate OS process whose
// standard output the caller reads; its standard error goes to ours.
func Spawn(args ...string) (*exec.Cmd, io.Reader, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, nil, err
	}
	cmd := exec.Command(self, args...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, nil, err
	}
	return cmd, out, nil
}

// Env is where an example's client runs: what worker processes it starts
// need to join it.
type Env struct {
	Addr     string
	Embedded bool
	Prefix   string
}

// Start gives an example its worqr client, on addr or, when addr is empty,
// on an embedded Redis, under a fresh key prefix named after the example.
// A nil log discards worqr's logs. stop closes everything Start opened.
func Start(addr, name string, log *slog.Logger) (client *worqr.Client, env Env, stop func(), err error) {
	at, embedded, stopRedis, err := Redis(addr)
	if err != nil {
		return nil, Env{}, nil, err
	}
	if embedded {
		fmt.Println("embedded Redis at", at)
	}
	rdb, err := Connect(at, embedded)
	if err != nil {
		stopRedis()
		return nil, Env{}, nil, err
	}
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	env = Env{Addr: at, Embedded: embedded, Prefix: Prefix(name)}
	client, err = worqr.New(worqr.Options{Redis: rdb, Prefix: env.Prefix, Logger: log})
	if err != nil {
		rdb.Close()
		stopRedis()
		return nil, Env{}, nil, err
	}
	stop = func() {
		_ = client.Close(context.Background())
		rdb.Close()
		stopRedis()
	}
	return client, env, stop, nil
}

// JoinAsWorker is the start of a worker process that Spawn started: a
// context that SIGTERM or SIGINT ends, and a worker on the parent's Redis
// and prefix, logging at level to standard error. stop releases the
// signal handler and the connection (not the worker: the caller closes or
// shuts it down first).
func JoinAsWorker(name string, env Env, level slog.Level) (ctx context.Context, w *worqr.Worker, stop func(), err error) {
	ctx, stopSignals := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	rdb, err := Connect(env.Addr, env.Embedded)
	if err != nil {
		stopSignals()
		return nil, nil, nil, err
	}
	stop = func() { rdb.Close(); stopSignals() }
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})).With("process", name)
	client, err := worqr.New(worqr.Options{Redis: rdb, Prefix: env.Prefix, Logger: log})
	if err == nil {
		w, err = client.NewWorker(ctx, worqr.WorkerOptions{})
	}
	if err != nil {
		stop()
		return nil, nil, nil, err
	}
	return ctx, w, stop, nil
}
