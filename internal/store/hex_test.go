package store

import (
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func FuzzParseHex(f *testing.F) {
	for _, s := range []string{"", "0", "19a3f0b2c4d5e", "FFFFFFFFFFFFFFFF", "7fffffffffffffff", "8000000000000000", "0x10", "1_0", "g", "-1", "+1", "00000000000000000001", "ffffffffffffffffff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, bits := range []int{63, 64} {
			want, werr := strconv.ParseUint(s, 16, bits)
			got, gerr := parseHex(s, bits)
			if got != want || (werr == nil) != (gerr == nil) || (werr != nil && werr.Error() != gerr.Error()) {
				t.Fatalf("parseHex(%q, %d) = %d, %v; ParseUint %d, %v", s, bits, got, gerr, want, werr)
			}
		}
	})
}

// A batch's ids count up in hex across a change of width, each its own
// string, and cost two allocations whatever their number.
func TestTaskIDs(t *testing.T) { // not parallel: AllocsPerRun
	ids, ok := taskIDs("fffe", 4)
	require.True(t, ok)
	assert.Equal(t, []string{"fffe", "ffff", "10000", "10001"}, ids)
	ids, ok = taskIDs("0", 2)
	require.True(t, ok)
	assert.Equal(t, []string{"0", "1"}, ids)
	_, ok = taskIDs("xyz", 2)
	assert.False(t, ok)
	ids, ok = taskIDs("5", 0)
	require.True(t, ok)
	assert.Empty(t, ids)
	allocs := testing.AllocsPerRun(20, func() { _, _ = taskIDs("18a7c2f00000000", 1000) })
	assert.LessOrEqual(t, allocs, 2.0, "allocations for 1,000 ids")
}
