package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/rueidis"
)

// Fault kinds, each counted.
const (
	faultSigkill    = "sigkill"     // SIGKILL a worker process, start a new one in its slot
	faultFreeze     = "freeze"      // SIGSTOP a worker process past the TTL, SIGCONT it later (see freeze)
	faultKillNormal = "kill-normal" // CLIENT KILL workers' command connections
	faultKillPubsub = "kill-pubsub" // CLIENT KILL workers' pub/sub connections
	faultPause      = "pause"       // CLIENT PAUSE ALL for longer than the TTL: every worker fences itself
	faultRestart    = "restart"     // SHUTDOWN Redis, start it again on the same append-only file
)

var faultKinds = []string{faultSigkill, faultFreeze, faultKillNormal, faultKillPubsub, faultPause, faultRestart}

// Modes: which faults strike, how often, and whom.
const (
	// modeMixed injects every kind of fault, 1 to 4 s apart, each worker
	// process alike likely to be the victim.
	modeMixed = "mixed"
	// modeHolders only SIGKILLs or freezes, 1.5 to 3.5 s apart, a worker
	// process that holds persistent tasks at the time: the fault that
	// hands them over most, and makes holders die soon after taking them.
	modeHolders = "holders"
)

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
	// kinds are the faults drawn; each comes gap to gap+spread after the
	// one before; with holders set, processes die or freeze only while
	// they hold persistent tasks (see victim).
	kinds       []string
	gap, spread time.Duration
	holders     bool
	// thaws counts the frozen processes not yet sent SIGCONT; thawErr is
	// the first SIGCONT that failed.
	thaws   sync.WaitGroup
	thawMu  sync.Mutex
	thawErr error

	counts map[string]int
	// connections killed by CLIENT KILL, by kind
	killed map[string]int
	// restarts numbers the restarts, for the marker
	restarts int
	// until is when the faults stop; skipped counts the faults that found
	// no victim (see victim).
	until   time.Time
	skipped int
}

func newFaults(admin rueidis.Client, r *redisServer, f *fleet, ttl time.Duration, mode string, rng *rand.Rand, t0 int64, log io.Writer) *faults {
	fa := &faults{admin: admin, redis: r, fleet: f, ttl: ttl, rng: rng, t0: t0, log: log,
		kinds: faultKinds, gap: time.Second, spread: 3 * time.Second,
		counts: make(map[string]int), killed: make(map[string]int)}
	if mode == modeHolders {
		fa.kinds = []string{faultSigkill, faultFreeze}
		fa.gap, fa.spread = 1500*time.Millisecond, 2*time.Second
		fa.holders = true
	}
	return fa
}

func (fa *faults) logf(format string, args ...any) {
	fmt.Fprintf(fa.log, "[%7.1fs] %s\n", time.Duration(now()-fa.t0).Seconds(), fmt.Sprintf(format, args...))
}

// run injects faults one after another until the deadline, then waits
// until every frozen process has been sent SIGCONT. Kinds come from a
// shuffled bag holding each kind once, so every kind occurs about equally
// often, in random order.
func (fa *faults) run(until time.Time) error {
	fa.until = until
	err := fa.inject(until)
	fa.thaws.Wait()
	fa.thawMu.Lock()
	defer fa.thawMu.Unlock()
	return errors.Join(err, fa.thawErr)
}

func (fa *faults) inject(until time.Time) error {
	var bag []string
	for {
		gap := fa.gap + randDur(fa.rng, fa.spread)
		if time.Now().Add(gap).After(until) {
			return nil
		}
		time.Sleep(gap) // pacing the faults, not waiting for an outcome
		if len(bag) == 0 {
			bag = slices.Clone(fa.kinds)
			fa.rng.Shuffle(len(bag), func(i, j int) { bag[i], bag[j] = bag[j], bag[i] })
		}
		kind := bag[0]
		bag = bag[1:]
		skipped := fa.skipped
		if err := fa.strike(kind); err != nil {
			return fmt.Errorf("fault %s: %w", kind, err)
		}
		if fa.skipped == skipped {
			fa.counts[kind]++
		}
	}
}

func (fa *faults) strike(kind string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	switch kind {
	case faultSigkill:
		return fa.sigkill("")
	case faultFreeze:
		return fa.freeze()
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

// sigkill kills a worker process (see victim) and starts a new one in its
// slot. Kills during another fault are counted as kills too.
func (fa *faults) sigkill(when string) error {
	victim, holds := fa.victim(fa.until)
	if victim == nil {
		fa.skip(faultSigkill)
		return nil
	}
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
	fa.logf("SIGKILL %s%s%s, started %s", victim.name, holds, when, p.name)
	return nil
}

// skip logs and counts a fault that found no victim.
func (fa *faults) skip(kind string) {
	fa.skipped++
	who := "awake"
	if fa.holders {
		who = "awake holds a persistent task"
	}
	fa.logf("%s skipped: no worker process %s", kind, who)
}

// freeze stops a worker process (see victim) with SIGSTOP, as a long GC
// pause or a stalled VM would, and on a timer of its own sends it SIGCONT
// TTL plus 1.5 to 2.5 s later: its lease runs out while it cannot notice,
// peers take its tasks, and it wakes to find itself fenced and joins
// again. Other faults go on meanwhile; run waits for every SIGCONT before
// it returns.
func (fa *faults) freeze() error {
	victim, holds := fa.victim(fa.until)
	if victim == nil {
		fa.skip(faultFreeze)
		return nil
	}
	d := fa.ttl + 1500*time.Millisecond + randDur(fa.rng, time.Second)
	if err := fa.fleet.freeze(victim); err != nil {
		return err
	}
	fa.logf("SIGSTOP %s%s for %v", victim.name, holds, d.Round(time.Millisecond))
	fa.thaws.Add(1)
	time.AfterFunc(d, func() {
		defer fa.thaws.Done()
		if err := fa.fleet.thaw(victim); err != nil {
			fa.thawMu.Lock()
			fa.thawErr = cmp.Or(fa.thawErr, err)
			fa.thawMu.Unlock()
			return
		}
		fa.logf("SIGCONT %s", victim.name)
	})
	return nil
}

// victim picks the worker process that a SIGKILL or a freeze strikes,
// never a frozen one (its tasks are on their way to its peers already):
// any, or with holders set one that holds persistent tasks now, by its
// reports to the ledger. It waits for one, for up to 5 s and not past
// until (a frozen one to wake; the tasks to find new holders); with none
// by then, it returns nil and the fault is skipped. holds says how many
// persistent tasks it held, for the log.
func (fa *faults) victim(until time.Time) (p *proc, holds string) {
	deadline := time.Now().Add(5 * time.Second)
	if until.Before(deadline) {
		deadline = until
	}
	for {
		holding := fa.fleet.ledger.holding()
		var candidates []*proc
		for _, p := range fa.fleet.procs() {
			if !p.frozen.Load() && (!fa.holders || holding[p.name][connQueue] > 0) {
				candidates = append(candidates, p)
			}
		}
		if len(candidates) > 0 {
			p = candidates[fa.rng.IntN(len(candidates))]
			return p, fmt.Sprintf(" (holding %d persistent tasks)", holding[p.name][connQueue])
		}
		if time.Now().After(deadline) {
			return nil, ""
		}
		time.Sleep(20 * time.Millisecond)
	}
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
