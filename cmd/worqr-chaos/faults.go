package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"
)

// Fault kinds, each counted.
const (
	faultSigkill    = "sigkill"     // SIGKILL a worker process, start a new one in its slot
	faultKillNormal = "kill-normal" // CLIENT KILL workers' command connections
	faultKillPubsub = "kill-pubsub" // CLIENT KILL workers' pub/sub connections
	faultPause      = "pause"       // CLIENT PAUSE ALL for longer than the TTL: every worker fences itself
	faultRestart    = "restart"     // SHUTDOWN Redis, start it again on the same append-only file
)

var faultKinds = []string{faultSigkill, faultKillNormal, faultKillPubsub, faultPause, faultRestart}

// restartMarker is a key outside the worqr prefix that the harness sets
// to a fresh value before each restart and reads back after: the
// append-only file kept what Redis acknowledged.
const restartMarker = "harness:restarts"

// faults injects faults at random intervals until told to stop.
type faults struct {
	admin rueidis.Client // named chaos-harness: never a victim
	redis *redisServer
	fleet *fleet
	ttl   time.Duration
	rng   *rand.Rand
	t0    int64
	log   io.Writer

	counts map[string]int
	// connections killed by CLIENT KILL, by kind
	killed map[string]int
	// restarts numbers the restarts, for the marker
	restarts int
}

func newFaults(admin rueidis.Client, r *redisServer, f *fleet, ttl time.Duration, rng *rand.Rand, t0 int64, log io.Writer) *faults {
	return &faults{admin: admin, redis: r, fleet: f, ttl: ttl, rng: rng, t0: t0, log: log,
		counts: make(map[string]int), killed: make(map[string]int)}
}

func (fa *faults) logf(format string, args ...any) {
	fmt.Fprintf(fa.log, "[%7.1fs] %s\n", time.Duration(now()-fa.t0).Seconds(), fmt.Sprintf(format, args...))
}

// run injects faults one after another, 1 to 4 s apart, until the deadline.
// Kinds come from a shuffled bag holding each kind once, so every kind
// occurs about equally often, in random order.
func (fa *faults) run(until time.Time) error {
	var bag []string
	for {
		gap := time.Second + randDur(fa.rng, 3*time.Second)
		if time.Now().Add(gap).After(until) {
			return nil
		}
		time.Sleep(gap) // pacing the faults, not waiting for an outcome
		if len(bag) == 0 {
			bag = slices.Clone(faultKinds)
			fa.rng.Shuffle(len(bag), func(i, j int) { bag[i], bag[j] = bag[j], bag[i] })
		}
		kind := bag[0]
		bag = bag[1:]
		if err := fa.inject(kind); err != nil {
			return fmt.Errorf("fault %s: %w", kind, err)
		}
		fa.counts[kind]++
	}
}

func (fa *faults) inject(kind string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	switch kind {
	case faultSigkill:
		return fa.sigkill("")
	case faultKillNormal, faultKillPubsub:
		n, who, err := fa.clientKill(ctx, kind == faultKillPubsub)
		if err != nil {
			return err
		}
		fa.killed[kind] += n
		fa.logf("CLIENT KILL %d %s connections of %s", n, strings.TrimPrefix(kind, "kill-"), who)
	case faultPause:
		d := fa.ttl + fa.ttl/5 + randDur(fa.rng, fa.ttl*2/5) // 1.2 to 1.6 TTL
		if err := fa.admin.Do(ctx, fa.admin.B().ClientPause().Timeout(d.Milliseconds()).All().Build()).Error(); err != nil {
			return err
		}
		fa.logf("CLIENT PAUSE %v ALL", d.Round(time.Millisecond))
		// The pause is the fault: let it run its course, now and then
		// killing a worker process in the middle of it.
		if fa.rng.IntN(3) == 0 {
			mid := randDur(fa.rng, d)
			time.Sleep(mid)
			if err := fa.sigkill("during the pause"); err != nil {
				return err
			}
			d -= mid
		}
		time.Sleep(d)
	case faultRestart:
		down := randDur(fa.rng, fa.ttl*6/5) // sometimes short of the fencing time, sometimes beyond
		if err := fa.restart(ctx, down, fa.rng.IntN(3) == 0); err != nil {
			return err
		}
		fa.logf("Redis restarted, down %v plus start-up", down.Round(time.Millisecond))
	}
	return nil
}

// retry runs an idempotent admin command until it succeeds, for up to
// 10 s: the harness's own connection may be one that died with a
// restart. Repeated failures are logged, so a flaky connection shows.
func (fa *faults) retry(ctx context.Context, what string, op func() error) error {
	deadline := time.Now().Add(10 * time.Second)
	for attempt := 1; ; attempt++ {
		err := op()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: %w", what, err)
		}
		if attempt > 1 { // the first command on a connection that died may fail once
			fa.logf("%s failed again (%v); retrying", what, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// sigkill kills a random worker process and starts a new one in its slot.
// Kills during another fault are counted as kills too.
func (fa *faults) sigkill(when string) error {
	ps := fa.fleet.procs()
	victim := ps[fa.rng.IntN(len(ps))]
	if err := fa.fleet.kill(victim); err != nil {
		return err
	}
	p, err := fa.fleet.spawn(victim.slot)
	if err != nil {
		return err
	}
	if when != "" {
		fa.counts[faultSigkill]++
		when = " " + when
	}
	fa.logf("SIGKILL %s%s, started %s", victim.name, when, p.name)
	return nil
}

// clientKill kills the worker processes' connections of one type: all of
// them, or one process's, at random. The harness's own connections are
// named chaos-harness and never match.
func (fa *faults) clientKill(ctx context.Context, pubsub bool) (int, string, error) {
	list := fa.admin.B().ClientList().TypeNormal().Build()
	if pubsub {
		list = fa.admin.B().ClientList().TypePubsub().Build()
	}
	text, err := fa.admin.Do(ctx, list).ToString()
	if err != nil {
		return 0, "", err
	}
	text = strings.TrimPrefix(text, "txt:") // RESP3 verbatim string
	byName := make(map[string][]int64)
	for _, line := range strings.Split(strings.TrimSpace(text), "\n") {
		fields := make(map[string]string)
		for _, kv := range strings.Fields(line) {
			k, v, _ := strings.Cut(kv, "=")
			fields[k] = v
		}
		name := fields["name"]
		if !strings.HasPrefix(name, "chaos-w") {
			continue
		}
		id, err := strconv.ParseInt(fields["id"], 10, 64)
		if err != nil {
			return 0, "", fmt.Errorf("CLIENT LIST line %q: %w", line, err)
		}
		byName[name] = append(byName[name], id)
	}
	names := make([]string, 0, len(byName))
	for n := range byName {
		names = append(names, n)
	}
	slices.Sort(names)
	who := "every worker"
	if len(names) > 1 && fa.rng.IntN(2) == 0 {
		names = names[fa.rng.IntN(len(names)):][:1]
		who = strings.TrimPrefix(names[0], "chaos-")
	}
	n := 0
	for _, name := range names {
		for _, id := range byName[name] {
			// A connection that closed meanwhile is no error.
			if err := fa.admin.Do(ctx, fa.admin.B().ClientKill().Id(id).Build()).Error(); err == nil {
				n++
			}
		}
	}
	return n, who, nil
}

// restart shuts Redis down (it flushes the append-only file), leaves it
// down for a while (killing a worker process meanwhile if kill is set),
// starts it on the same directory, and checks that the marker written
// just before came back.
func (fa *faults) restart(ctx context.Context, down time.Duration, kill bool) error {
	// A fresh value each time, set idempotently: a write retried after
	// its reply was lost changes nothing.
	fa.restarts++
	want := int64(fa.restarts)
	if err := fa.retry(ctx, "writing the marker", func() error {
		return fa.admin.Do(ctx, fa.admin.B().Set().Key(restartMarker).Value(strconv.FormatInt(want, 10)).Build()).Error()
	}); err != nil {
		return err
	}
	_ = fa.admin.Do(ctx, fa.admin.B().Shutdown().Build()).Error() // the connection closes: no reply
	if err := fa.redis.waitExit(15 * time.Second); err != nil {
		return err
	}
	if kill { // a worker process dies while Redis is away; its successor starts meanwhile
		if err := fa.sigkill("while Redis is down"); err != nil {
			return err
		}
	}
	time.Sleep(down) // the outage is the fault
	if err := fa.redis.start(); err != nil {
		return err
	}
	// The admin client's connection died with the server: its first
	// command may fail once.
	var got int64
	if err := fa.retry(ctx, "reading the marker back", func() (err error) {
		got, err = fa.admin.Do(ctx, fa.admin.B().Get().Key(restartMarker).Build()).AsInt64()
		return err
	}); err != nil {
		return err
	}
	if got != want {
		return fmt.Errorf("marker is %d after the restart, want %d: the append-only file lost writes", got, want)
	}
	return nil
}
