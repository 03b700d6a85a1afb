package store

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Stats values Redis printed with an exponent are read; stale and unknown
// fields are not.
func TestParseStatsValues(t *testing.T) {
	now := time.Unix(1000*60+30, 0)
	slots := ParseStats(now, map[string]string{
		"cur": "1000", "c:us": "1.5e+17", "c:f": "3", "c:zz": "9", "c:u40": "1",
		"m279": "999", "m279:f": "2", // the minute before (999 mod 360 = 279)
		"m278": "638", "m278:f": "7", // a minute of an older turn of the ring
	})
	require.Len(t, slots, 3, "two minutes, one hour")
	assert.EqualValues(t, 2, slots[0].Counts[StatFinished])
	assert.EqualValues(t, 3, slots[1].Counts[StatFinished])
	assert.EqualValues(t, int64(1.5e17), slots[1].RunSum)
	assert.True(t, slots[2].Hour)
	assert.EqualValues(t, 3, slots[2].Counts[StatFinished], "the current minute, read into its hour (no hour slot here)")
}
