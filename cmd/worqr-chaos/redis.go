package main

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// redisServer is the redis-server process the run owns: its own loopback
// port and directory, with the append-only file on so that what it
// acknowledged survives a restart.
type redisServer struct {
	bin   string
	dir   string
	port  int
	fsync string

	cmd    *exec.Cmd
	exited chan struct{} // closed when cmd has exited
}

// startRedis starts redis-server on a free loopback port, with its data
// in dir.
func startRedis(bin, dir, fsync string) (*redisServer, error) {
	path, err := exec.LookPath(bin)
	if err != nil {
		return nil, fmt.Errorf("%s not found: install redis-server or pass -redis-server: %w", bin, err)
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	r := &redisServer{bin: path, dir: dir, port: port, fsync: fsync}
	return r, r.start()
}

func (r *redisServer) addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(r.port)) }

// start runs the server with the same port, directory and append-only
// file as before, and waits until it has loaded its data and answers.
func (r *redisServer) start() error {
	r.cmd = exec.Command(r.bin,
		"--bind", "127.0.0.1",
		"--port", strconv.Itoa(r.port),
		"--dir", r.dir,
		"--appendonly", "yes",
		"--appendfsync", r.fsync,
		"--save", "",
		"--daemonize", "no",
		"--logfile", filepath.Join(r.dir, "redis.log"),
	)
	if err := r.cmd.Start(); err != nil {
		return fmt.Errorf("start redis-server: %w", err)
	}
	r.exited = make(chan struct{})
	go func(cmd *exec.Cmd, exited chan struct{}) {
		_ = cmd.Wait()
		close(exited)
	}(r.cmd, r.exited)
	return r.waitReady(15 * time.Second)
}

// waitReady waits until the server answers PING with PONG (not LOADING).
func (r *redisServer) waitReady(within time.Duration) error {
	deadline := time.Now().Add(within)
	var last error
	for time.Now().Before(deadline) {
		select {
		case <-r.exited:
			return fmt.Errorf("redis-server exited at start; see %s", filepath.Join(r.dir, "redis.log"))
		default:
		}
		if last = r.ping(); last == nil {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("redis-server on port %d not ready within %v: %w", r.port, within, last)
}

// ping talks RESP by hand, so no client library retries or reconnects
// hide what the server says.
func (r *redisServer) ping() error {
	conn, err := net.DialTimeout("tcp", r.addr(), time.Second)
	if err != nil {
		return err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(time.Second))
	if _, err := conn.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return err
	}
	if strings.TrimSpace(line) != "+PONG" {
		return errors.New(strings.TrimSpace(line))
	}
	return nil
}

// waitExit waits for the server process to end.
func (r *redisServer) waitExit(within time.Duration) error {
	select {
	case <-r.exited:
		return nil
	case <-time.After(within):
		return fmt.Errorf("redis-server did not exit within %v", within)
	}
}

// stop ends the server for good (SIGTERM: it writes its append-only file
// and exits).
func (r *redisServer) stop() {
	select {
	case <-r.exited:
		return
	default:
	}
	_ = r.cmd.Process.Signal(os.Interrupt)
	if r.waitExit(10*time.Second) != nil {
		_ = r.cmd.Process.Kill()
		<-r.exited
	}
}

// freePort asks the kernel for a free loopback port.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
