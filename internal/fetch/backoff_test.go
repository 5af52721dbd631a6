package fetch

import (
	"math"
	"testing"
	"time"
)

func TestBackoff(t *testing.T) {
	const (
		base = time.Second
		max  = time.Hour
	)
	lo := func() float64 { return 0 }
	hi := func() float64 { return math.Nextafter(1, 0) }
	for attempt, ceiling := range []time.Duration{
		1 * time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second,
	} {
		if got := Backoff(attempt, base, max, lo); got != ceiling/2 {
			t.Errorf("attempt %d low: %v, want %v", attempt, got, ceiling/2)
		}
		if got := Backoff(attempt, base, max, hi); got < ceiling-time.Microsecond || got >= ceiling {
			t.Errorf("attempt %d high: %v, want just under %v", attempt, got, ceiling)
		}
	}
	// Capped, including attempts that would overflow.
	for _, attempt := range []int{12, 13, 62, 63, 64, 1000, math.MaxInt} {
		if got := Backoff(attempt, base, max, lo); got != max/2 {
			t.Errorf("attempt %d: %v, want %v", attempt, got, max/2)
		}
		if got := Backoff(attempt, base, 0, hi); got <= 0 {
			t.Errorf("attempt %d uncapped: %v overflowed", attempt, got)
		}
	}
	// Degenerate inputs.
	if got := Backoff(-1, base, max, lo); got != 0 {
		t.Errorf("negative attempt: %v", got)
	}
	if got := Backoff(3, 0, max, lo); got != 0 {
		t.Errorf("zero base: %v", got)
	}
	if got := Backoff(0, base, max, func() float64 { return math.NaN() }); got != base/2 {
		t.Errorf("NaN rnd: %v", got)
	}
	if got := Backoff(0, base, max, func() float64 { return 7 }); got >= base {
		t.Errorf("rnd > 1: %v", got)
	}
	if got := Backoff(0, 10*time.Second, time.Second, lo); got != time.Second/2 {
		t.Errorf("max below base: %v", got)
	}
	// Default source stays within [c/2, c).
	for range 1000 {
		if got := Backoff(3, base, max, nil); got < 4*time.Second || got >= 8*time.Second {
			t.Fatalf("random backoff %v outside [4s, 8s)", got)
		}
	}
}
