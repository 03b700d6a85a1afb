package worqrtype

import (
	"testing"
	"time"
)

// Quantile interpolates inside the bucket that holds the rank, and is 0
// for an empty histogram.
func TestQuantile(t *testing.T) {
	var h Histogram
	if got := h.Quantile(0.5); got != 0 {
		t.Errorf("empty: %v, want 0", got)
	}
	h.Buckets[3] = 4 // four durations in (4µs, 8µs]
	for q, want := range map[float64]time.Duration{0: 4 * time.Microsecond, 0.5: 6 * time.Microsecond, 1: 8 * time.Microsecond, 2: 8 * time.Microsecond} {
		if got := h.Quantile(q); got != want {
			t.Errorf("Quantile(%v) = %v, want %v", q, got, want)
		}
	}
}
