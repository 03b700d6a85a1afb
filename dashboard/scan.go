package dashboard

import "github.com/worqr/worqr"

// The scripts that list a queue's tasks read each entry whole, whatever
// part of its payload they return: their time grows with the payloads'
// bytes, and Redis serves no one else meanwhile. A thousand tasks of a
// megabyte read in one call held Redis for seconds, longer than a
// worker's lease (worqr.DefaultTTL), and fenced the fleet. So the
// dashboard reads a list in calls of about callBytes of payloads each,
// or one task: the first call reads one task, each next as many as fit
// by the sizes seen so far.
const (
	callBytes = 1 << 20
	// entryOverhead is what an entry holds besides its payload, about.
	entryOverhead = 64
	// kindBytes bounds the payload bytes the kinds' counts read from
	// each list: past it they count what they read, and say so.
	kindBytes = 8 << 20
	// filterBytes bounds the payload bytes a filtered list's page reads
	// (see filtered): past it the page ends, and the next starts there.
	filterBytes = 32 << 20
)

// sized returns read (the tasks at positions from to from + n - 1),
// split into calls of about callBytes each. With limit > 0 it stops
// once it has read limit bytes, and says it stopped short (cut) when
// the list may hold more of the n.
func sized[T any](read func(from, n int) ([]T, error), size func(T) int, limit int) func(from, n int) (ts []T, cut bool, err error) {
	return func(from, n int) ([]T, bool, error) {
		var out []T
		seen, bytes, k := 0, 0, 1
		for len(out) < n {
			ask := min(k, n-len(out))
			ts, err := read(from+len(out), ask)
			if err != nil {
				return nil, false, err
			}
			out = append(out, ts...)
			for _, t := range ts {
				seen, bytes = seen+1, bytes+size(t)+entryOverhead
			}
			if len(ts) < ask {
				return out, false, nil
			}
			if limit > 0 && bytes >= limit && len(out) < n {
				return out, true, nil
			}
			room := callBytes
			if limit > 0 {
				room = min(room, limit-bytes)
			}
			k = max(1, room*seen/max(bytes, 1))
		}
		return out, false, nil
	}
}

// whole is sized without a limit, as the read it wraps.
func whole[T any](read func(from, n int) ([]T, error), size func(T) int) func(from, n int) ([]T, error) {
	r := sized(read, size, 0)
	return func(from, n int) ([]T, error) {
		ts, _, err := r(from, n)
		return ts, err
	}
}

func taskSize(t worqr.TaskInfo) int   { return t.Size }
func deadSize(d worqr.DeadLetter) int { return d.Size }
