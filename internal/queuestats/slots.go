package queuestats

import (
	"strings"

	"github.com/worqr/worqr"
)

// PoolSlots are the slots of the pools of one name, summed.
type PoolSlots struct {
	// Pool is the pools' label value: their queues joined by ",",
	// bounded by the Queues given to SumSlots.
	Pool string
	// Busy, Free and Held add up to the pools' sizes: held slots are
	// neither busy nor free (an outcome still being written).
	Busy, Free, Held int64
}

// SumSlots sums the slots of the pools that have the same label value
// (names bounds them), in the order first seen.
func SumSlots(slots []worqr.PoolSlots, names *Queues) []PoolSlots {
	var out []PoolSlots
	at := map[string]int{}
	for _, ps := range slots {
		pool := names.Label(strings.Join(ps.Queues, ","))
		i, ok := at[pool]
		if !ok {
			i = len(out)
			at[pool] = i
			out = append(out, PoolSlots{Pool: pool})
		}
		out[i].Busy += int64(ps.Busy)
		out[i].Free += int64(ps.Free)
		out[i].Held += int64(ps.Size - ps.Busy - ps.Free)
	}
	return out
}
