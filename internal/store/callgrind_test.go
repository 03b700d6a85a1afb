//go:build callgrind

package store

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"
)

// TestCallgrindRetry counts the Redis instructions a retried task costs
// against a plain one (BENCHMARKS.md, "Retry"), on a Redis run under
// valgrind --tool=callgrind (deterministic, where timings on a shared
// machine are not):
//
//	valgrind --tool=callgrind --dump-instr=no --callgrind-out-file=/tmp/cg/out.%p \
//	  redis-server --port 6475 --save '' --appendonly no
//	WORQR_CALLGRIND_REDIS=127.0.0.1:6475 WORQR_CALLGRIND_PID=<valgrind's pid> \
//	WORQR_CALLGRIND_OUT=/tmp/cg go test -tags callgrind ./internal/store -run TestCallgrindRetry -v
//
// Each phase runs over all the tasks, WORQR_CALLGRIND_B (14) a script
// call, between a zeroing of the counts and a dump of them.
func TestCallgrindRetry(t *testing.T) {
	addr, pid, dir := os.Getenv("WORQR_CALLGRIND_REDIS"), os.Getenv("WORQR_CALLGRIND_PID"), os.Getenv("WORQR_CALLGRIND_OUT")
	if addr == "" || pid == "" || dir == "" {
		t.Skip("WORQR_CALLGRIND_REDIS, _PID and _OUT name the Redis under callgrind")
	}
	n, b := envInt("WORQR_CALLGRIND_N", 4200), envInt("WORQR_CALLGRIND_B", 14)
	rdb, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: true, ConnWriteTimeout: time.Minute})
	require.NoError(t, err)
	defer rdb.Close()
	ctx := context.Background()
	s := New(rdb, fmt.Sprintf("cg%d", time.Now().UnixNano()), false, true)
	w := uuid.NewString()
	require.NoError(t, s.RegisterWorker(ctx, w, time.Hour))
	payloads := make([][]byte, n)
	for i := range payloads {
		payloads[i] = []byte(fmt.Sprintf("run-%010d-%s", i, strings.Repeat("x", 64-15)))
	}
	// phase counts the instructions f costs Redis, per task.
	phase := func(name string, f func()) float64 {
		callgrind(t, "-z", pid)
		f()
		before, _ := filepath.Glob(filepath.Join(dir, "*"))
		callgrind(t, "-d", pid)
		ir := newestDump(t, dir, before)
		per := float64(ir) / float64(n) / 1000
		t.Logf("%-16s %7.1f k instructions a task", name, per)
		return per
	}
	dequeue := func(q string) []Proc {
		var all []Proc
		for len(all) < n {
			got, _, _, err := s.Dequeue(ctx, q, w, min(b, n-len(all)), false)
			require.NoError(t, err)
			require.NotEmpty(t, got)
			all = append(all, got...)
		}
		return all
	}
	finish := func(q string, ps []Proc) {
		for i := 0; i < len(ps); i += b {
			var refs []ProcRef
			for _, p := range ps[i:min(i+b, len(ps))] {
				refs = append(refs, ProcRef{Worker: w, PID: p.PID})
			}
			_, _, err := s.Finish(ctx, q, refs)
			require.NoError(t, err)
		}
	}
	load := func(q string) {
		_, err := s.JoinQueue(ctx, q, w)
		require.NoError(t, err)
		_, err = s.Enqueue(ctx, q, payloads, EnqueueArgs{})
		require.NoError(t, err)
	}

	load("plain")
	var ps []Proc
	d := phase("plain dequeue", func() { ps = dequeue("plain") })
	f := phase("plain finish", func() { finish("plain", ps) })
	plain := d + f

	load("retried")
	d1 := phase("first dequeue", func() { ps = dequeue("retried") })
	r := phase("retry", func() {
		for i := 0; i < len(ps); i += b {
			var refs []RetryRef
			for _, p := range ps[i:min(i+b, len(ps))] {
				refs = append(refs, RetryRef{ProcRef: ProcRef{Worker: w, PID: p.PID}, Err: "first attempt fails", Plain: p.Plain})
			}
			out, err := s.Retry(ctx, "retried", refs)
			require.NoError(t, err)
			for _, o := range out {
				require.Equal(t, WasActive, o)
			}
		}
	})
	d2 := phase("second dequeue", func() { ps = dequeue("retried") })
	require.Equal(t, "first attempt fails", ps[0].Task.LastError)
	f2 := phase("finish", func() { finish("retried", ps) })
	retried := d1 + r + d2 + f2
	t.Logf("B=%d: retried %.1f k, plain %.1f k, plain÷retried %.3f", b, retried, plain, plain/retried)
	fmt.Printf("CG B=%d | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f | %.3f\n", b, d, f, d1, r, d2, f2, retried, plain, plain/retried)
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

func callgrind(t *testing.T, args ...string) {
	out, err := exec.Command("callgrind_control", args...).CombinedOutput()
	require.NoError(t, err, "callgrind_control %v: %s", args, out)
}

// newestDump is the instruction total of the dump in dir that was not
// among before.
func newestDump(t *testing.T, dir string, before []string) int64 {
	seen := map[string]bool{}
	for _, f := range before {
		seen[f] = true
	}
	after, err := filepath.Glob(filepath.Join(dir, "*"))
	require.NoError(t, err)
	for _, f := range after {
		if seen[f] {
			continue
		}
		data, err := os.ReadFile(f)
		require.NoError(t, err)
		for _, line := range strings.Split(string(data), "\n") {
			if v, ok := strings.CutPrefix(line, "summary: "); ok {
				ir, err := strconv.ParseInt(strings.Fields(v)[0], 10, 64)
				require.NoError(t, err)
				return ir
			}
		}
		t.Fatalf("%s: no summary line", f)
	}
	t.Fatalf("no new dump in %s", dir)
	return 0
}
