package store

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"maps"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"

	"github.com/worqr/worqr/internal/scripts"
)

// The script tests: each seeds a queue's keys (and the registry's), runs
// one script through its Store method, and compares every key afterwards
// with what the script must have left, whole. Values the Redis clock
// decides are read back, checked against the clock around the call, and
// then written into the expected keys.
//
// Keys are named as in keyState. Their values are typed by kind: list
// (from its left end, the back of a queue, to its right end, the front),
// hash, zset (member -> score) and set.
type (
	list     []string
	hash     map[string]string
	zset     map[string]float64
	set      []string // sorted
	keyState map[string]any
)

// scriptEnv is one test's store, under a prefix of its own, and its queue
// "q".
type scriptEnv struct {
	t       *testing.T
	ctx     context.Context
	rdb     rueidis.Client
	s       *Store
	k       QueueKeys
	workers []string // whose queue sets ("wq:<id>") are read too
	flow    string   // the workflow whose keys ("wf.<suffix>") are read too

	prefix   string          // the store's
	calls    *scriptLog      // the scripts the store ran
	compared map[string]bool // the scripts run before a dump
}

// newScriptEnv is a store without stats (which the scripts would write
// under the clock's minute), on testRedis, for a test of the scripts
// named (their files, "finish.lua"). The test fails unless the keys are
// read (expect or dump) after each of them ran: TestEveryScriptHasAKeyTest
// counts the scripts named here.
func newScriptEnv(t *testing.T, script string, more ...string) *scriptEnv {
	t.Helper()
	named := append([]string{script}, more...)
	for _, name := range named {
		require.Contains(t, scripts.Files(), name, "no such script")
	}
	rdb := testRedis(t)
	e := &scriptEnv{t: t, ctx: context.Background(), rdb: rdb, calls: &scriptLog{}, compared: map[string]bool{}}
	e.prefix = "worqrtest-" + uuid.NewString()[:8]
	e.s = New(&logClient{Client: rdb, log: e.calls}, e.prefix, false, false)
	e.k = e.s.Keys().Queue("q")
	t.Cleanup(func() {
		for _, key := range e.keys() {
			rdb.Do(context.Background(), rdb.B().Del().Key(key).Build())
		}
		if t.Failed() || t.Skipped() {
			return
		}
		for _, name := range named {
			if !e.compared[name] {
				t.Errorf("a test of %s never read the keys after it ran (it ran %v)", name, e.calls.names())
			}
		}
	})
	return e
}

// scriptNames are the scripts by SHA1: worqr's, with stats off and on,
// and Check's.
var scriptNames = func() map[string]string {
	out := map[string]string{}
	for _, set := range []any{*scripts.Load(false, false), *scripts.Load(false, true), *scripts.LoadCheck(false)} {
		v := reflect.ValueOf(set)
		for i := range v.NumField() {
			if sc, ok := v.Field(i).Interface().(*scripts.Script); ok {
				out[sc.SHA1()] = sc.Name()
			}
		}
	}
	return out
}()

// scriptLog is the scripts a store ran, by file name, in order.
type scriptLog struct {
	mu  sync.Mutex
	ran []string
}

func (l *scriptLog) note(cmds ...rueidis.Completed) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, cmd := range cmds {
		args := cmd.Commands()
		if len(args) < 2 {
			continue
		}
		switch strings.ToUpper(args[0]) {
		case "EVALSHA":
			l.ran = append(l.ran, scriptNames[args[1]])
		case "EVAL":
			sum := sha1.Sum([]byte(args[1]))
			l.ran = append(l.ran, scriptNames[hex.EncodeToString(sum[:])])
		}
	}
}

func (l *scriptLog) names() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.ran)
}

// logClient notes in log every script its commands run.
type logClient struct {
	rueidis.Client
	log *scriptLog
}

func (c *logClient) Do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	c.log.note(cmd)
	return c.Client.Do(ctx, cmd)
}

func (c *logClient) DoMulti(ctx context.Context, cmds ...rueidis.Completed) []rueidis.RedisResult {
	c.log.note(cmds...)
	return c.Client.DoMulti(ctx, cmds...)
}

// statsOn makes the store one that keeps stats, for a test of what the
// scripts write to a queue's stats hash.
func (e *scriptEnv) statsOn() {
	e.s = New(&logClient{Client: e.rdb, log: e.calls}, e.prefix, false, true)
}

// workflow is a new workflow id, whose keys the dumps include: one per
// test, as they are named by their suffix alone.
func (e *scriptEnv) workflow() string {
	e.t.Helper()
	require.Empty(e.t, e.flow, "a second workflow in one test")
	e.flow = uuid.NewString()[:8]
	return e.flow
}

// worker is a new worker id, whose queue set the dumps include.
func (e *scriptEnv) worker() string {
	id := uuid.NewString()
	e.workers = append(e.workers, id)
	return id
}

// keys are every key a dump reads, by name: the queue's by their suffix
// ("waiting", "meta", ...), and the registry's ("workers", "reclaiming",
// "queues", "winfo", "wslots", "wq:<worker id>").
func (e *scriptEnv) keys() map[string]string {
	out := map[string]string{
		"workers":    e.s.Keys().Workers(),
		"reclaiming": e.s.Keys().Reclaiming(),
		"queues":     e.s.Keys().Queues(),
		"winfo":      e.s.Keys().WorkerInfo(),
		"wslots":     e.s.Keys().WorkerSlots(),
	}
	for _, id := range e.workers {
		out["wq:"+id] = e.s.Keys().WorkerQueues(id)
	}
	for _, key := range e.k.all() {
		out[key[strings.LastIndexByte(key, ':')+1:]] = key
	}
	if e.flow != "" {
		for _, key := range e.s.Keys().Workflow(e.flow).all() {
			out["wf."+key[strings.LastIndexByte(key, ':')+1:]] = key
		}
	}
	return out
}

// seed writes the keys of st.
func (e *scriptEnv) seed(st keyState) {
	e.t.Helper()
	keys := e.keys()
	for name, v := range st {
		key, ok := keys[name]
		require.True(e.t, ok, "no key named %q", name)
		b := e.rdb.B()
		var cmd rueidis.Completed
		switch v := v.(type) {
		case list:
			cmd = b.Rpush().Key(key).Element(v...).Build()
		case hash:
			c := b.Hset().Key(key).FieldValue()
			for f, x := range v {
				c = c.FieldValue(f, x)
			}
			cmd = c.Build()
		case zset:
			c := b.Zadd().Key(key).ScoreMember()
			for m, score := range v {
				c = c.ScoreMember(score, m)
			}
			cmd = c.Build()
		case set:
			cmd = b.Sadd().Key(key).Member(v...).Build()
		default:
			e.t.Fatalf("seed %s: a %T", name, v)
		}
		require.NoError(e.t, e.rdb.Do(e.ctx, cmd).Error(), name)
	}
}

// dump reads every key that exists, and counts the scripts run so far as
// compared.
func (e *scriptEnv) dump() keyState {
	e.t.Helper()
	for _, name := range e.calls.names() {
		e.compared[name] = true
	}
	out := keyState{}
	for name, key := range e.keys() {
		b := e.rdb.B()
		kind, err := e.rdb.Do(e.ctx, b.Type().Key(key).Build()).ToString()
		require.NoError(e.t, err)
		switch kind {
		case "none":
		case "list":
			v, err := e.rdb.Do(e.ctx, b.Lrange().Key(key).Start(0).Stop(-1).Build()).AsStrSlice()
			require.NoError(e.t, err)
			out[name] = list(v)
		case "hash":
			v, err := e.rdb.Do(e.ctx, b.Hgetall().Key(key).Build()).AsStrMap()
			require.NoError(e.t, err)
			out[name] = hash(v)
		case "zset":
			v, err := e.rdb.Do(e.ctx, b.Zrange().Key(key).Min("0").Max("-1").Withscores().Build()).AsZScores()
			require.NoError(e.t, err)
			z := zset{}
			for _, m := range v {
				z[m.Member] = m.Score
			}
			out[name] = z
		case "set":
			v, err := e.rdb.Do(e.ctx, b.Smembers().Key(key).Build()).AsStrSlice()
			require.NoError(e.t, err)
			slices.Sort(v)
			out[name] = set(v)
		default:
			e.t.Fatalf("%s is a %s", name, kind)
		}
	}
	return out
}

// expect compares every key with want.
func (e *scriptEnv) expect(want keyState) {
	e.t.Helper()
	e.same(want, e.dump())
}

// same fails the test, naming each key and field that differs, unless got
// is want; why says what the comparison checks.
func (e *scriptEnv) same(want, got keyState, why ...string) {
	e.t.Helper()
	if d := diffKeys(want, got); len(d) > 0 {
		e.t.Fatalf("%s\n\t%s", strings.Join(append([]string{"the keys differ:"}, why...), " "), strings.Join(d, "\n\t"))
	}
}

// diffKeys lists how got differs from want, one line per key, field,
// member or list position.
func diffKeys(want, got keyState) []string {
	var out []string
	names := slices.Sorted(maps.Keys(want))
	for name := range got {
		if _, ok := want[name]; !ok {
			names = append(names, name)
		}
	}
	for _, name := range names {
		w, g := want[name], got[name]
		switch {
		case g == nil:
			out = append(out, fmt.Sprintf("%s: missing, want %s", name, show(w)))
			continue
		case w == nil:
			out = append(out, fmt.Sprintf("%s: not wanted, got %s", name, show(g)))
			continue
		case reflect.TypeOf(w) != reflect.TypeOf(g):
			out = append(out, fmt.Sprintf("%s: a %T, want a %T", name, g, w))
			continue
		}
		switch w := w.(type) {
		case hash:
			out = append(out, diffFields(name, w, g.(hash))...)
		case zset:
			out = append(out, diffFields(name, w, g.(zset))...)
		case list:
			out = append(out, diffList(name, w, g.(list))...)
		case set:
			g := g.(set)
			for _, m := range w {
				if !slices.Contains(g, m) {
					out = append(out, fmt.Sprintf("%s: no member %q", name, m))
				}
			}
			for _, m := range g {
				if !slices.Contains(w, m) {
					out = append(out, fmt.Sprintf("%s: member %q not wanted", name, m))
				}
			}
		}
	}
	return out
}

// diffFields compares a hash's fields, or a sorted set's members.
func diffFields[V comparable](name string, want, got map[string]V) []string {
	var out []string
	for _, f := range slices.Sorted(maps.Keys(want)) {
		if g, ok := got[f]; !ok {
			out = append(out, fmt.Sprintf("%s[%q]: missing, want %s", name, f, value(want[f])))
		} else if g != want[f] {
			out = append(out, fmt.Sprintf("%s[%q]: %s, want %s", name, f, value(g), value(want[f])))
		}
	}
	for _, f := range slices.Sorted(maps.Keys(got)) {
		if _, ok := want[f]; !ok {
			out = append(out, fmt.Sprintf("%s[%q]: %s, not wanted", name, f, value(got[f])))
		}
	}
	return out
}

// diffList compares lists position by position (0 is the left end).
func diffList(name string, want, got list) []string {
	var out []string
	for i := range max(len(want), len(got)) {
		switch {
		case i >= len(got):
			out = append(out, fmt.Sprintf("%s[%d]: missing, want %q", name, i, want[i]))
		case i >= len(want):
			out = append(out, fmt.Sprintf("%s[%d]: %q, not wanted", name, i, got[i]))
		case want[i] != got[i]:
			out = append(out, fmt.Sprintf("%s[%d]: %q, want %q", name, i, got[i], want[i]))
		}
	}
	return out
}

// show is a key's value, for a diff.
func show(v any) string { return fmt.Sprintf("%T %v", v, v) }

// value is a field's value (quoted) or a member's score, for a diff.
func value(v any) string {
	if s, ok := v.(string); ok {
		return strconv.Quote(s)
	}
	return fmt.Sprint(v)
}

// clock is the Redis clock, in µs.
func (e *scriptEnv) clock() int64 {
	e.t.Helper()
	t, err := e.rdb.Do(e.ctx, e.rdb.B().Time().Build()).AsStrSlice()
	require.NoError(e.t, err)
	require.Len(e.t, t, 2)
	sec, err1 := strconv.ParseInt(t[0], 10, 64)
	usec, err2 := strconv.ParseInt(t[1], 10, 64)
	require.NoError(e.t, err1)
	require.NoError(e.t, err2)
	return sec*1_000_000 + usec
}

// clockMs is the Redis clock, in ms.
func (e *scriptEnv) clockMs() int64 { return e.clock() / 1000 }

// within checks that v lies in [lo, hi] (the clock read around a call,
// plus whatever the script adds) and returns it.
func (e *scriptEnv) within(v, lo, hi int64, what string) int64 {
	e.t.Helper()
	require.GreaterOrEqual(e.t, v, lo, what)
	require.LessOrEqual(e.t, v, hi, what)
	return v
}

// field is the value of header field letter in entry e, as a number in
// base (16 for 'd').
func field(t *testing.T, entry, letter string, base int) int64 {
	t.Helper()
	header, _, _ := strings.Cut(entry, ":")
	for _, f := range strings.Split(header, ",")[1:] {
		if strings.HasPrefix(f, letter) {
			n, err := strconv.ParseInt(f[len(letter):], base, 64)
			require.NoError(t, err, entry)
			return n
		}
	}
	t.Fatalf("no field %s in %q", letter, entry)
	return 0
}

// num is a decimal number the scripts wrote.
func num(t *testing.T, s string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(s, 10, 64)
	require.NoError(t, err, s)
	return n
}

// hexOf is a number as the scripts write ids and due times.
func hexOf(n int64) string { return strconv.FormatInt(n, 16) }

// decOf is a number as the scripts write counters.
func decOf(n int64) string { return strconv.FormatInt(n, 10) }

// inf is the score of a retained task that has not ended (outcome_pending).
var inf = math.Inf(1)

// hour is an hour in ms, to put leases well before or after the clock.
const hour = int64(time.Hour / time.Millisecond)
