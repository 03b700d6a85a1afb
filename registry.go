package worqr

// The worker's registry entry is the engine's (engine.Registry, wired in
// engine.go): this is what it records of the worker's Handle runtimes.

import (
	"slices"
	"strings"

	"github.com/worqr/worqr/internal/store"
)

// slots are the handler slots of each queue of ss served by Handle,
// HandleBatch or HandleQueues, sorted by queue.
func (ss sessions) slots() []store.QueueSlots {
	var qs []store.QueueSlots
	for name, s := range ss {
		if s.Runtime != nil {
			qs = append(qs, store.QueueSlots{Queue: name, Slots: s.Runtime.Sched().Size()})
		}
	}
	slices.SortFunc(qs, func(a, b store.QueueSlots) int { return strings.Compare(a.Queue, b.Queue) })
	return qs
}
