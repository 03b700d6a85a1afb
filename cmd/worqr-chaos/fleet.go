package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// fleet runs the worker processes: one per slot, each a fresh OS process
// of this binary. A killed one is replaced in its slot by the next
// generation (w2.1, then w2.2, ...).
type fleet struct {
	self   string // this binary
	addr   string // Redis
	prefix string
	ttl    time.Duration
	logDir string
	// sabotage is passed to the worker processes: see -sabotage.
	sabotage string
	// resp2 makes even slots speak RESP2: see -resp2.
	resp2  bool
	ledger *ledger

	mu   sync.Mutex
	live map[int]*proc // by slot
	gens map[int]int
}

// proc is one worker process.
type proc struct {
	name   string
	slot   int
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	exited chan struct{} // closed once all its output was read and it was reaped
	// leaving is set before the harness kills or stops it: any other exit
	// is a worker that died by itself.
	leaving atomic.Bool
	// frozen is set from just before SIGSTOP until just after SIGCONT.
	frozen atomic.Bool
}

func newFleet(addr, prefix string, ttl time.Duration, logDir string, l *ledger) (*fleet, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	return &fleet{self: self, addr: addr, prefix: prefix, ttl: ttl, logDir: logDir, ledger: l,
		live: make(map[int]*proc), gens: make(map[int]int)}, nil
}

// spawn starts the next generation of a slot. Workers speak RESP3; with
// resp2 set, even slots speak RESP2, where rueidis carries pub/sub on a
// connection of its own.
func (f *fleet) spawn(slot int) (*proc, error) {
	f.mu.Lock()
	f.gens[slot]++
	name := fmt.Sprintf("w%d.%d", slot, f.gens[slot])
	f.mu.Unlock()

	logf, err := os.Create(filepath.Join(f.logDir, name+".log"))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(f.self, workerFlag,
		"-name", name, "-addr", f.addr, "-prefix", f.prefix, "-ttl", f.ttl.String(),
		fmt.Sprintf("-resp2=%v", f.resp2 && slot%2 == 0), "-sabotage", f.sabotage)
	cmd.Stderr = logf
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		logf.Close()
		return nil, err
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		logf.Close()
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, err
	}
	p := &proc{name: name, slot: slot, cmd: cmd, stdin: stdin, exited: make(chan struct{})}
	go func() {
		defer close(p.exited)
		defer logf.Close()
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 64<<10), 16<<20)
		for sc.Scan() {
			var r report
			if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
				f.ledger.problem("%s: unreadable report %q: %v", name, sc.Text(), err)
				continue
			}
			f.ledger.apply(name, r)
		}
		err := cmd.Wait() // after every line was read
		if !p.leaving.Load() {
			f.ledger.problem("worker process %s exited by itself (%v); see %s", name, err, filepath.Join(f.logDir, name+".log"))
		}
	}()
	f.mu.Lock()
	f.live[slot] = p
	f.mu.Unlock()
	return p, nil
}

// procs lists the live worker processes, by slot.
func (f *fleet) procs() []*proc {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]*proc, 0, len(f.live))
	for _, p := range f.live {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].slot < out[j].slot })
	return out
}

// kill sends SIGKILL, waits until the process is reaped and its last
// reports read, and records the kill in the ledger: its handlers held
// their tasks until then at the latest.
func (f *fleet) kill(p *proc) error {
	p.leaving.Store(true)
	sent := now()
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		return err
	}
	select {
	case <-p.exited:
	case <-time.After(10 * time.Second):
		return fmt.Errorf("%s not reaped within 10s of SIGKILL", p.name)
	}
	f.ledger.killed(p.name, sent, now())
	f.mu.Lock()
	if f.live[p.slot] == p {
		delete(f.live, p.slot)
	}
	f.mu.Unlock()
	return nil
}

// freeze sends SIGSTOP and waits until the process is stopped: from then
// on it runs no code, reports nothing and renews no lease, as in a long GC
// pause or a stalled VM. The ledger learns when it was sent and when the
// process was seen stopped.
func (f *fleet) freeze(p *proc) error {
	p.frozen.Store(true)
	sent := now()
	if err := p.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		p.frozen.Store(false)
		return err
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		state, err := procState(p.cmd.Process.Pid)
		if err != nil {
			return fmt.Errorf("%s after SIGSTOP: %w", p.name, err)
		}
		if state == 'T' {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not stopped within 10s of SIGSTOP (state %c)", p.name, state)
		}
		time.Sleep(time.Millisecond)
	}
	f.ledger.froze(p.name, sent, now())
	return nil
}

// thaw sends SIGCONT to a frozen process, and tells the ledger when.
func (f *fleet) thaw(p *proc) error {
	cont := now()
	if err := p.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		return fmt.Errorf("SIGCONT %s: %w", p.name, err)
	}
	f.ledger.thawed(p.name, cont)
	p.frozen.Store(false)
	return nil
}

// procState reads a process's state letter from /proc (R running, S
// sleeping, T stopped, ...).
func procState(pid int) (byte, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// pid (comm) state ...: comm may hold spaces and parentheses.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return 0, fmt.Errorf("unreadable /proc/%d/stat", pid)
	}
	return b[i+2], nil
}

// waitReady waits until every live worker process has joined.
func (f *fleet) waitReady(within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		var waiting []string
		for _, p := range f.procs() {
			if !f.ledger.isReady(p.name) {
				waiting = append(waiting, p.name)
			}
		}
		if len(waiting) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("worker processes %v not serving within %v", waiting, within)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// tell writes a line to every live worker process's standard input.
func (f *fleet) tell(line string) {
	for _, p := range f.procs() {
		_, _ = io.WriteString(p.stdin, line+"\n")
	}
}

// stop shuts every worker process down gracefully (SIGTERM) and waits for
// them; one that does not exit in time is killed and reported.
func (f *fleet) stop(within time.Duration) []string {
	var late []string
	ps := f.procs()
	for _, p := range ps {
		p.leaving.Store(true)
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		if p.frozen.Load() { // it handles SIGTERM once it runs again
			_ = f.thaw(p)
		}
	}
	deadline := time.Now().Add(within)
	for _, p := range ps {
		select {
		case <-p.exited:
		case <-time.After(time.Until(deadline)):
			late = append(late, p.name)
			_ = f.kill(p)
		}
	}
	f.mu.Lock()
	f.live = make(map[int]*proc)
	f.mu.Unlock()
	return late
}

// killAll is the cleanup when the harness itself fails.
func (f *fleet) killAll() {
	for _, p := range f.procs() {
		p.leaving.Store(true)
		_ = p.cmd.Process.Kill()
	}
}
