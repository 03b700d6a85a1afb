package main

import (
	"io"
	"math/rand/v2"
	"os/exec"
	"testing"
	"time"
)

func TestFreezeStopsTheProcessUntilThawed(t *testing.T) {
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Skip("no sleep binary:", err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	f := &fleet{ledger: newLedger()}
	p := &proc{name: "w1.1", cmd: cmd}
	if err := f.freeze(p); err != nil {
		t.Fatal(err)
	}
	if st, err := procState(cmd.Process.Pid); err != nil || st != 'T' || !p.frozen.Load() {
		t.Fatalf("after freeze: state %c, %v, frozen %v", st, err, p.frozen.Load())
	}
	if err := f.thaw(p); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, err := procState(cmd.Process.Pid)
		if err != nil {
			t.Fatal(err)
		}
		if st != 'T' {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("still stopped 10s after SIGCONT")
		}
		time.Sleep(10 * time.Millisecond)
	}
	fz := f.ledger.insts["w1.1"].freezes
	if p.frozen.Load() || len(fz) != 1 || fz[0].sent == 0 || fz[0].stopped < fz[0].sent || fz[0].cont < fz[0].stopped {
		t.Errorf("frozen %v, ledger's freezes %+v", p.frozen.Load(), fz)
	}
}

func TestHoldersModeStrikesOnlyAwakeHolders(t *testing.T) {
	l := newLedger()
	f := &fleet{ledger: l, live: make(map[int]*proc)}
	for slot := 1; slot <= 3; slot++ {
		f.live[slot] = &proc{name: "w" + string(rune('0'+slot)) + ".1", slot: slot}
	}
	f.live[1].frozen.Store(true)
	l.apply("w1.1", report{Ev: "start", T: 1, Q: connQueue, PID: "1", Task: "conn-0"})
	l.apply("w2.1", report{Ev: "start", T: 2, Q: connQueue, PID: "2", Task: "conn-1"})
	l.apply("w3.1", report{Ev: "start", T: 3, Q: jobQueues[0], PID: "3", Task: "job-1"})
	fa := newFaults(nil, nil, f, time.Second, modeHolders, rand.New(rand.NewPCG(1, 2)), 0, io.Discard)
	for range 20 {
		if p, _ := fa.victim(time.Now()); p != f.live[2] {
			t.Fatalf("victim %v, want the only awake holder w2.1", p)
		}
	}
	l.apply("w2.1", report{Ev: "end", T: 4, Q: connQueue, PID: "2"})
	if p, _ := fa.victim(time.Now()); p != nil {
		t.Fatalf("victim %s, though no awake process holds a persistent task", p.name)
	}
	// Any awake process will do in the mixed mode.
	fa = newFaults(nil, nil, f, time.Second, modeMixed, rand.New(rand.NewPCG(1, 2)), 0, io.Discard)
	seen := make(map[string]bool)
	for range 50 {
		p, _ := fa.victim(time.Now())
		seen[p.name] = true
	}
	if len(seen) != 2 || seen["w1.1"] {
		t.Errorf("victims %v, want w2.1 and w3.1", seen)
	}
}
