// Package embedded runs worqr on an in-process Redis, for tests, demos
// and single-process programs that do not want a Redis server:
//
//	redis, err := embedded.Start(embedded.Options{})
//	if err != nil {
//		return err
//	}
//	defer redis.Close(context.Background())
//	client := redis.Client() // a *worqr.Client, ready
//
// The Redis is miniredis (github.com/alicebob/miniredis), with key TTLs
// on the wall clock as in Redis. It keeps everything in memory: tasks are lost when it closes or the program exits. It listens
// on a TCP port of the loopback interface, so other clients, in this
// program or others, can join it at Addr with worqr.New. It runs Lua
// scripts more slowly than Redis and has no cluster; for load or
// durability use a real Redis.
package embedded

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/alicebob/miniredis/v2"

	"github.com/worqr/worqr"
)

// Options configure Start. The zero value starts a Redis on a free port
// of 127.0.0.1 and a client with worqr's defaults.
type Options struct {
	// Addr is where the Redis listens ("127.0.0.1:6380"). Default
	// "127.0.0.1:0": a free port, which Redis.Addr reports.
	Addr string
	// Client configures the client Start returns (prefix, logger,
	// observer...). Its Addr and Redis must be empty: Start sets them.
	Client worqr.Options
}

// Redis is an in-process Redis with the worqr clients made on it. It is
// safe for concurrent use.
type Redis struct {
	m      *miniredis.Miniredis
	client *worqr.Client

	mu      sync.Mutex      // guards clients
	clients []*worqr.Client // every client made on it, closed by Close
}

// Start starts an in-process Redis and a worqr client on it. It fails
// with worqr.ErrInvalidOptions if opts.Client names a Redis of its own,
// and with the listener's error if Addr cannot be listened on.
func Start(opts Options) (*Redis, error) {
	if err := checkClientOptions(opts.Client); err != nil {
		return nil, err
	}
	m := miniredis.NewMiniRedis()
	m.ClockTTL(true) // keys expire on the wall clock, as in Redis
	var err error
	if opts.Addr == "" {
		err = m.Start()
	} else {
		err = m.StartAddr(opts.Addr)
	}
	if err != nil {
		return nil, fmt.Errorf("worqr/embedded: start Redis: %w", err)
	}
	r := &Redis{m: m}
	if r.client, err = r.NewClient(opts.Client); err != nil {
		m.Close()
		return nil, err
	}
	return r, nil
}

func checkClientOptions(opts worqr.Options) error {
	if opts.Addr != "" || opts.Redis != nil {
		return fmt.Errorf("worqr/embedded: %w: the client options must not name a Redis (Addr or Redis)", worqr.ErrInvalidOptions)
	}
	return nil
}

// Client is the client Start made.
func (r *Redis) Client() *worqr.Client { return r.client }

// Addr is the Redis's address, "127.0.0.1:port": worqr.New(worqr.Options{Addr:
// addr}) gives another client on it, from this program or another one.
func (r *Redis) Addr() string { return r.m.Addr() }

// NewClient makes another client on the Redis, on connections of its own
// (under another prefix, or to stand for another process). Close closes
// it too. opts must not name a Redis (Addr or Redis).
func (r *Redis) NewClient(opts worqr.Options) (*worqr.Client, error) {
	if err := checkClientOptions(opts); err != nil {
		return nil, err
	}
	opts.Addr = r.m.Addr() // worqr.New recognises miniredis and speaks RESP2 to it
	c, err := worqr.New(opts)
	if err != nil {
		return nil, fmt.Errorf("worqr/embedded: %w", err)
	}
	r.mu.Lock()
	r.clients = append(r.clients, c)
	r.mu.Unlock()
	return c, nil
}

// Close closes every client made on the Redis (and so their workers: see
// worqr.Client.Close), then the Redis. Everything in it is lost. A second
// call does nothing.
func (r *Redis) Close(ctx context.Context) error {
	r.mu.Lock()
	clients := r.clients
	r.clients = nil
	r.mu.Unlock()
	var errs []error
	for _, c := range clients {
		errs = append(errs, c.Close(ctx))
	}
	r.m.Close()
	return errors.Join(errs...)
}
