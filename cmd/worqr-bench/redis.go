package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/google/uuid"
	"github.com/redis/rueidis"
)

// payloadSize is the size of every task the benchmark enqueues.
const payloadSize = 64

// payload is task number i of a run: unique (the baseline acknowledges by
// value) and payloadSize bytes long.
func payload(run string, i int) []byte {
	b := make([]byte, payloadSize)
	n := copy(b, fmt.Sprintf("%s-%010d-", run, i))
	for j := n; j < len(b); j++ {
		b[j] = 'x'
	}
	return b
}

// queueNames returns n queue names whose worqr hash tags ({q:<name>}) fall
// in n different, equal parts of the 16,384 Cluster slots: with the usual
// even split over n shards, each queue has a shard of its own.
func queueNames(n int) []string {
	names := make([]string, n)
	for i := range names {
		lo, hi := i*16384/n, (i+1)*16384/n
		for j := 0; ; j++ {
			name := fmt.Sprintf("bench-%d-%d", i, j)
			if s := slot("q:" + name); s >= lo && s < hi {
				names[i] = name
				break
			}
		}
	}
	return names
}

// slot is the Redis Cluster slot of a hash tag's contents: CRC16 (XMODEM)
// mod 16384.
func slot(tag string) int {
	var crc uint16
	for i := 0; i < len(tag); i++ {
		crc ^= uint16(tag[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return int(crc) % 16384
}

// baseKeys are the baseline's keys for one queue: the same hash tag as
// worqr's keys of the queue, so on a Cluster they live on the same shard.
type baseKeys struct {
	prefix, tag string
}

// baseKeysFor are the baseline keys of the queues, under a fresh prefix.
func baseKeysFor(queues []string) []baseKeys {
	prefix := "wqbase-" + uuid.NewString()[:8]
	keys := make([]baseKeys, len(queues))
	for i, q := range queues {
		keys[i] = baseKeys{prefix: prefix, tag: "{q:" + q + "}"}
	}
	return keys
}

func (k baseKeys) waiting() string { return k.prefix + ":" + k.tag + ":waiting" }

// consumer is the list consumer i moves its tasks into until it
// acknowledges them.
func (k baseKeys) consumer(i int) string {
	return k.prefix + ":" + k.tag + ":consumer:" + strconv.Itoa(i)
}

// payloadPool is poolSize distinct payloads, as bytes for worqr and as
// strings for the baseline, made before timing starts so that neither side
// pays for making them.
type payloadPool struct {
	bytes   [][]byte
	strings []string
}

const poolSize = 1000

func newPayloadPool(run string) payloadPool {
	p := payloadPool{bytes: make([][]byte, poolSize), strings: make([]string, poolSize)}
	for i := range poolSize {
		p.bytes[i] = payload(run, i)
		p.strings[i] = string(p.bytes[i])
	}
	return p
}

// baseEnqueue pushes total tasks, batch at a time (batch at most
// poolSize), from conc goroutines, spread round-robin over the queues, and
// returns how long it took.
func baseEnqueue(ctx context.Context, rdb rueidis.Client, keys []baseKeys, conc, total, batch int, pool payloadPool) (time.Duration, error) {
	calls := (total + batch - 1) / batch
	start := time.Now()
	err := parallel(conc, calls, func(call int) error {
		k := keys[call%len(keys)]
		n := min(batch, total-call*batch)
		var cmd rueidis.Completed
		if batch == 1 {
			cmd = rdb.B().Lpush().Key(k.waiting()).Element(pool.strings[call%poolSize]).Build()
		} else {
			cmd = rdb.B().Lpush().Key(k.waiting()).Element(pool.strings[:n]...).Build()
		}
		return rdb.Do(ctx, cmd).Error()
	})
	return time.Since(start), err
}

// timedBaseEnqueue is baseEnqueue in a measuring window, with the
// baseline's keys removed after: its rate (tasks/s) and what it cost.
func timedBaseEnqueue(ctx context.Context, rdb rueidis.Client, keys []baseKeys, conc, total, batch int, pool payloadPool) (float64, span, error) {
	w := openWindow(ctx, rdb)
	took, err := baseEnqueue(ctx, rdb, keys, conc, total, batch, pool)
	sp := w.close(ctx)
	if err != nil {
		return 0, sp, fmt.Errorf("baseline LPUSH of %d: %w", batch, err)
	}
	if err := cleanup(ctx, rdb, keys[0].prefix); err != nil {
		return 0, sp, err
	}
	return float64(total) / took.Seconds(), sp, nil
}

// baseFill loads tasks into the baseline queues without timing it.
func baseFill(ctx context.Context, rdb rueidis.Client, keys []baseKeys, perQueue int, run string) error {
	for qi, k := range keys {
		for start := 0; start < perQueue; start += 1000 {
			vals := make([]string, 0, 1000)
			for i := start; i < min(start+1000, perQueue); i++ {
				vals = append(vals, string(payload(run, qi*perQueue+i)))
			}
			if err := rdb.Do(ctx, rdb.B().Lpush().Key(k.waiting()).Element(vals...).Build()).Error(); err != nil {
				return err
			}
		}
	}
	return nil
}

// baseDrain runs conc consumers per queue, each taking a task with LMOVE
// into its own list and acknowledging it with LREM, until the queues are
// empty. It returns the number of tasks processed.
func baseDrain(ctx context.Context, rdb rueidis.Client, keys []baseKeys, conc int) (int64, error) {
	var done atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, len(keys)*conc)
	for _, k := range keys {
		for i := range conc {
			wg.Add(1)
			go func() {
				defer wg.Done()
				mine := k.consumer(i)
				for {
					task, err := rdb.Do(ctx, rdb.B().Lmove().Source(k.waiting()).Destination(mine).Right().Left().Build()).ToString()
					if rueidis.IsRedisNil(err) {
						return
					}
					if err == nil {
						err = rdb.Do(ctx, rdb.B().Lrem().Key(mine).Count(1).Element(task).Build()).Error()
					}
					if err != nil {
						errs <- err
						return
					}
					done.Add(1)
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	return done.Load(), <-errs
}

// parallel runs fn(0..n-1) on conc goroutines, each taking the next index,
// and returns the first error.
func parallel(conc, n int, fn func(i int) error) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	var first error
	var once sync.Once
	for range min(conc, n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if err := fn(i); err != nil {
					once.Do(func() { first = err })
					next.Store(int64(n)) // stop the others
					return
				}
			}
		}()
	}
	wg.Wait()
	return first
}

// cleanup deletes every key that starts with prefix, on every node.
func cleanup(ctx context.Context, rdb rueidis.Client, prefix string) error {
	seen := map[string]bool{}
	for _, node := range rdb.Nodes() {
		var cursor uint64
		for {
			e, err := node.Do(ctx, node.B().Scan().Cursor(cursor).Match(prefix+"*").Count(1000).Build()).AsScanEntry()
			if err != nil {
				break // a replica or a node on its way out: the masters hold the keys
			}
			for _, key := range e.Elements {
				if !seen[key] {
					seen[key] = true
					// Through the client, which routes each key to its master.
					if err := rdb.Do(ctx, rdb.B().Unlink().Key(key).Build()).Error(); err != nil {
						return err
					}
				}
			}
			if cursor = e.Cursor; cursor == 0 {
				break
			}
		}
	}
	return nil
}

// infoOf reads INFO sections from one node as a map of fields.
func infoOf(ctx context.Context, node rueidis.Client, sections ...string) (map[string]string, error) {
	s, err := node.Do(ctx, node.B().Info().Section(sections...).Build()).ToString()
	if err != nil {
		return nil, err
	}
	s = strings.TrimPrefix(s, "txt:") // RESP3 sends INFO as a verbatim string
	out := map[string]string{}
	for _, ln := range strings.Split(s, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(ln), ":"); ok {
			out[k] = v
		}
	}
	return out, nil
}

// masters are the nodes that hold data (every node of a single server).
func masters(ctx context.Context, rdb rueidis.Client) []rueidis.Client {
	var out []rueidis.Client
	for _, node := range rdb.Nodes() {
		info, err := infoOf(ctx, node, "replication")
		if err == nil && info["role"] == "slave" {
			continue
		}
		out = append(out, node)
	}
	return out
}

// serverStats are the Redis numbers a scenario looks at, summed over the
// masters: CPU time, memory, and calls per command (commands run from Lua
// scripts are counted as well).
type serverStats struct {
	ok         bool
	cpu        time.Duration
	usedMemory int64
	calls      map[string]int64
	usec       map[string]int64 // time spent in each command
}

func readStats(ctx context.Context, rdb rueidis.Client) serverStats {
	st := serverStats{ok: true, calls: map[string]int64{}, usec: map[string]int64{}}
	nodes := masters(ctx, rdb)
	if len(nodes) == 0 {
		st.ok = false
	}
	for _, node := range nodes {
		info, err := infoOf(ctx, node, "cpu", "memory", "commandstats")
		if err != nil || info["used_memory"] == "" {
			st.ok = false // miniredis has no such INFO
			continue
		}
		for _, k := range []string{"used_cpu_user", "used_cpu_sys"} {
			f, _ := strconv.ParseFloat(info[k], 64)
			st.cpu += time.Duration(f * float64(time.Second))
		}
		mem, _ := strconv.ParseInt(info["used_memory"], 10, 64)
		st.usedMemory += mem
		for k, v := range info {
			cmd, ok := strings.CutPrefix(k, "cmdstat_")
			if !ok {
				continue
			}
			for _, field := range strings.Split(v, ",") {
				name, val, _ := strings.Cut(field, "=")
				n, _ := strconv.ParseInt(val, 10, 64)
				switch name {
				case "calls":
					st.calls[cmd] += n
				case "usec":
					st.usec[cmd] += n
				}
			}
		}
	}
	return st
}

// window measures what the server and this process spent between its
// start and end.
type window struct {
	rdb     rueidis.Client
	start   time.Time
	server  serverStats
	process time.Duration
}

func openWindow(ctx context.Context, rdb rueidis.Client) *window {
	return &window{rdb: rdb, server: readStats(ctx, rdb), process: processCPU(), start: time.Now()}
}

// span is what a window measured.
type span struct {
	elapsed   time.Duration
	serverOK  bool
	serverCPU time.Duration
	clientCPU time.Duration
	calls     map[string]int64
	usec      map[string]int64
}

func (w *window) close(ctx context.Context) span {
	elapsed := time.Since(w.start)
	client := processCPU() - w.process
	end := readStats(ctx, w.rdb)
	sp := span{elapsed: elapsed, clientCPU: client, serverOK: w.server.ok && end.ok, calls: map[string]int64{}, usec: map[string]int64{}}
	if sp.serverOK {
		sp.serverCPU = end.cpu - w.server.cpu
		for k, v := range end.calls {
			sp.calls[k] = v - w.server.calls[k]
		}
		for k, v := range end.usec {
			sp.usec[k] = v - w.server.usec[k]
		}
	}
	return sp
}

// perTask adds the costs of a span, per task, to a result under a name
// prefix: the CPU of Redis and of this process, and the time Redis spent
// running the given commands (INFO commandstats: execution only, without
// reading and writing the network), all in µs.
func (sp span) perTask(r *result, name string, tasks int64, commands ...string) {
	if tasks <= 0 {
		return
	}
	n := float64(tasks)
	if sp.serverOK {
		r.add(name+"redis_cpu_us_per_task", "µs", float64(sp.serverCPU.Microseconds())/n)
		var usec int64
		for _, c := range commands {
			usec += sp.usec[c]
		}
		r.add(name+"redis_exec_us_per_task", "µs", float64(usec)/n)
	}
	r.add(name+"client_cpu_us_per_task", "µs", float64(sp.clientCPU.Microseconds())/n)
}

// scripts are the commands worqr sends for its state changes.
var scripts = []string{"evalsha", "eval"}

// processCPU is the CPU time (user and system) this process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
