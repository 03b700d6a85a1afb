package store

import (
	"strconv"
	"testing"
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
