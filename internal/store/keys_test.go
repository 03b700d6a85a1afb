package store

import (
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

func valid(name string) bool { return name != "" && len(name) <= 1024 }

func TestKeyParseRoundTrips(t *testing.T) {
	k := NewKeys("p:x")
	for _, name := range []string{"q", "a:b", "{", "}", "%", "%7B", "%25", "{q:x}:waiting", "\x00\xff", "}{%"} {
		q := k.Queue(name)
		for _, key := range q.all() {
			kind, got := k.Parse(key, valid)
			assert.Equal(t, KeyQueue, kind, key)
			assert.Equal(t, name, got, key)
		}
	}
	for _, key := range k.Workflow("w1").all() {
		kind, got := k.Parse(key, valid)
		assert.Equal(t, KeyWorkflow, kind, key)
		assert.Equal(t, "w1", got, key)
	}
	for key, want := range map[string]KeyKind{
		"p:x:{r}:queues":         KeyRegistry,
		"p:x:{r}:workers":        KeyRegistry,
		"p:x:{r}:reclaiming":     KeyRegistry,
		"p:x:{r}:wq:abc":         KeyWorkerQueues,
		"p:x:{r}:wq:":            KeyUnknown,
		"p:x:{r}:other":          KeyUnknown,
		"p:x:{q:a}:events":       KeyUnknown,
		"p:x:{q:a%7b}:waiting":   KeyUnknown, // not what the escaping writes
		"p:x:{q:a%}:waiting":     KeyUnknown,
		"p:x:{q:}:waiting":       KeyUnknown, // an empty name is not a queue
		"p:x:{q:a}:waiting:more": KeyUnknown,
		"p:x:{q:a":               KeyUnknown,
		"p:x:junk":               KeyUnknown,
		"p:{q:a}:waiting":        KeyUnknown,
		"p:x:{wf:w1}:steps":      KeyWorkflow,
		"p:x:{wf:w1}:events":     KeyUnknown,
		"p:x:{wf:}:steps":        KeyUnknown,
		"p:x:{wf:w1}:other":      KeyUnknown,
	} {
		kind, _ := k.Parse(key, valid)
		assert.Equal(t, want, kind, key)
	}
}

func TestParseEvent(t *testing.T) {
	for msg, want := range map[string]Event{
		"w12":                                  {Kind: EventWork, Count: 12},
		"w3:a,b":                               {Kind: EventWork, Count: 3, To: "a,b"},
		"c1f":                                  {Kind: EventCancel, TaskIDs: []string{"1f"}},
		"c5a,5b":                               {Kind: EventCancel, TaskIDs: []string{"5a", "5b"}},
		"d6a0c5b3e2f":                          {Kind: EventDelete, UpTo: 0x6a0c5b3e2f},
		"hw-1,6a0,1f,m3:a,b:c":                 {Kind: EventHandOff, To: "w-1", PID: "6a0", Entry: "1f,m3:a,b:c"},
		"p1f,5a,40,1700000000000:row 4: of 10": {Kind: EventProgress, TaskIDs: []string{"1f"}, Progress: ProgressRecord{PID: "5a", Percent: 40, At: 1700000000000, Note: "row 4: of 10"}},
	} {
		got, ok := ParseEvent(msg)
		assert.True(t, ok, msg)
		assert.Equal(t, want, got, msg)
	}
	for _, bad := range []string{"", "wx", "zz", "c", "d", "dq", "h", "hw", "hw,1f", "h,6a0,1f:x", "hw,zz,1f:x", "hw,0,1f:x"} {
		_, ok := ParseEvent(bad)
		assert.False(t, ok, bad)
	}
}

func TestParseTask(t *testing.T) {
	for e, want := range map[string]Task{
		"1f:":             {ID: "1f"},
		"1f:a:b,c":        {ID: "1f", Payload: "a:b,c", Size: 5},
		"65f0,a3:payload": {ID: "65f0", Attempts: 3, Payload: "payload", Size: 7},
		"65f0,a3,p2:x":    {ID: "65f0", Attempts: 3, Payload: "x", Size: 1}, // fields it does not know are skipped
	} {
		got, ok := ParseTask(e)
		assert.True(t, ok, e)
		assert.Equal(t, want, got, e)
	}
	for _, bad := range []string{"", "payload without header", ":x", "1f,ax:y"} {
		_, ok := ParseTask(bad)
		assert.False(t, ok, bad)
	}
}

// Every key of a queue, the gatherings' included, has the queue's hash tag
// as the first '{...}' of its name, so that Redis Cluster puts them in one
// slot and each script's keys are in one slot.
func TestQueueKeysShareOneHashTag(t *testing.T) {
	k := NewKeys("p").Queue("a{b}c")
	for _, key := range append(k.all(), k.Channel) {
		open := strings.IndexByte(key, '{')
		end := strings.IndexByte(key[open+1:], '}')
		if open < 0 || end < 0 {
			t.Fatalf("%s has no hash tag", key)
		}
		if tag := key[open+1 : open+1+end]; tag != "q:a%7Bb%7Dc" {
			t.Errorf("%s hashes on %q", key, tag)
		}
	}
	if !slices.Contains(k.all(), k.Gather) || !slices.Contains(k.all(), k.GatherDue) {
		t.Error("the gathering keys are not among the queue's")
	}
}

// tagOf is the hash tag of key, as Redis Cluster reads it.
func tagOf(t *testing.T, key string) string {
	t.Helper()
	open := strings.IndexByte(key, '{')
	end := strings.IndexByte(key[open+1:], '}')
	if open < 0 || end <= 0 {
		t.Fatalf("%s has no hash tag", key)
	}
	return key[open+1 : open+1+end]
}

// A workflow id made for a queue puts the workflow's keys in that queue's
// slot (Redis Cluster's CRC16, checked against the value its
// specification gives), and is a valid workflow id.
func TestHomeWorkflowIDSharesTheQueuesSlot(t *testing.T) {
	assert.Equal(t, uint16(0x31C3), crc16(0, "123456789"))
	keys := NewKeys("p")
	for _, queue := range []string{"a", "etl", "a{b}c", "bench-0-0", "%", "reports"} {
		id := keys.HomeWorkflowID("5f0c0ffee5f0c0ffee5f0c0ffee5f0c0", queue)
		assert.LessOrEqual(t, len(id), 64, id)
		for _, b := range []byte(id) {
			assert.True(t, b == '-' || b >= '0' && b <= '9' || b >= 'a' && b <= 'z', "%q in %s", b, id)
		}
		wf, q := keys.Workflow(id), keys.Queue(queue)
		assert.Equal(t, slot(tagOf(t, q.Procs)), slot(tagOf(t, wf.Flow)), "workflow %s, queue %s", id, queue)
		assert.True(t, keys.WorkflowHome(id, queue), "workflow %s, queue %s", id, queue)
	}
	assert.False(t, keys.WorkflowHome("batched-carry", "p"))
}

// The four-byte suffixes of HomeWorkflowID reach every slot. CRC16 is
// linear: the CRC of a base and a suffix of a fixed length is the CRC of
// the base shifted past it XOR the suffix's own, so a base moves every
// suffix's slot by the same XOR, a bijection of the slots: the suffixes
// that reach every slot after one base reach every slot after any.
func TestHomeSuffixesCoverEverySlot(t *testing.T) {
	var hit [16384]bool
	var suffix [4]byte
	for n := 0; n < 36*36*36*36; n++ {
		for i, v := 0, n; i < len(suffix); i, v = i+1, v/36 {
			suffix[i] = homeDigits[v%36]
		}
		hit[crc16(0, string(suffix[:]))%16384] = true
	}
	missed := 0
	for _, h := range hit {
		if !h {
			missed++
		}
	}
	assert.Zero(t, missed, "slots no suffix reaches")
	// The linearity the argument rests on, for one base and suffix.
	base, s := "wf:5f0c0ffee-", "zz9a"
	assert.Equal(t, crc16(0, base+s), crc16(crc16(0, base), "\x00\x00\x00\x00")^crc16(0, s))
}

// HomeWorkflowID's search for a suffix, which every EnqueueWorkflow of a
// random id pays: some microseconds (a CRC of the whole suffix per try,
// bit by bit, took some 2 ms).
func BenchmarkHomeWorkflowID(b *testing.B) {
	keys := NewKeys("p")
	for b.Loop() {
		keys.HomeWorkflowID("5f0c0ffee5f0c0ffee5f0c0ffee5f0c0", "bench-0-0")
	}
}
