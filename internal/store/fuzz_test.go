package store

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// FuzzKeyParse checks that every key of every valid queue name is read
// back as that queue, and that no key makes the parser panic or claim a
// key that is not the named queue's.
func FuzzKeyParse(f *testing.F) {
	for _, s := range []string{"q", "{", "}", "%", "%7B", "%7b", "%25%", "{q:x}:waiting", "a\x00b", "{r}:wq:x"} {
		f.Add(s)
	}
	k := NewKeys("p")
	f.Fuzz(func(t *testing.T, s string) {
		if valid(s) {
			q := k.Queue(s)
			for _, key := range q.all() {
				kind, name := k.Parse(key, valid)
				require.Equal(t, KeyQueue, kind, key)
				require.Equal(t, s, name, key)
			}
		}
		for _, key := range []string{s, "p:" + s, "p:{q:" + s} {
			kind, val := k.Parse(key, valid)
			switch kind {
			case KeyQueue:
				q := k.Queue(val)
				assert.Contains(t, q.all(), key)
			case KeyWorkerQueues:
				assert.Equal(t, k.WorkerQueues(val), key)
			}
		}
	})
}

// FuzzParseEvent feeds arbitrary messages to the event parser, as a
// hostile publisher on a queue's channel could.
func FuzzParseEvent(f *testing.F) {
	for _, s := range []string{"w1", "c1f", "c1f,20", "d0", "", "c", "w-1", "wffffffffffffffffffff", "c,", "hw,6a0,1f:x", "h,,"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, msg string) {
		e, ok := ParseEvent(msg)
		if !ok {
			return
		}
		switch e.Kind {
		case EventWork, EventCancel, EventDelete, EventSchedule, EventOutcome, EventProgress, EventHandOff:
		default:
			t.Fatalf("%q parsed as kind %d", msg, e.Kind)
		}
		if e.Kind == EventHandOff {
			require.Equal(t, msg, "h"+e.To+","+e.PID+","+e.Entry, "a hand-off event is its worker, pid and entry")
			e.HandedProc() // must not panic
		}
		if e.Kind == EventCancel {
			require.Equal(t, msg[1:], strings.Join(e.TaskIDs, ","), "a cancel event's ids are everything after the c")
		}
	})
}

// FuzzParseTask feeds arbitrary values to the task entry parser: it must
// never panic, and what it accepts must keep the payload byte-exact.
func FuzzParseTask(f *testing.F) {
	for _, s := range []string{"1f:", "1f,a2:x:y", ":", "", "a,:", "1,a99999999999999999999:x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, e string) {
		task, ok := ParseTask(e)
		if !ok {
			return
		}
		require.NotEmpty(t, task.ID)
		require.True(t, strings.HasSuffix(e, ":"+task.Payload))
		require.Equal(t, e[strings.IndexByte(e, ':')+1:], task.Payload)
	})
}
