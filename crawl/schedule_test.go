package crawl

import (
	"testing"
	"time"
)

func TestNextInterval(t *testing.T) {
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	lo, hi := 5*time.Minute, 60*time.Minute
	every := func(gap time.Duration, n int) []time.Time {
		var ts []time.Time
		for i := 0; i < n; i++ {
			ts = append(ts, now.Add(-time.Duration(i)*gap))
		}
		return ts
	}
	for _, c := range []struct {
		name      string
		cur       time.Duration
		newItems  int
		published []time.Time
		h         Hints
		want      time.Duration
	}{
		{"publishes every 40 min: poll every 20", 15 * time.Minute, 1, every(40*time.Minute, 10), Hints{}, 20 * time.Minute},
		{"publishes every minute: clamped to 5", 15 * time.Minute, 3, every(time.Minute, 10), Hints{}, 5 * time.Minute},
		{"publishes daily: clamped to 60", 15 * time.Minute, 0, every(24*time.Hour, 5), Hints{}, 60 * time.Minute},
		{"no dates, nothing new: stretch by half", 20 * time.Minute, 0, nil, Hints{}, 30 * time.Minute},
		{"no dates, new items: keep", 20 * time.Minute, 2, nil, Hints{}, 20 * time.Minute},
		{"items older than a week are ignored", 20 * time.Minute, 0, every(30*24*time.Hour, 5)[1:], Hints{}, 30 * time.Minute},
		{"ttl above the bound wins", 5 * time.Minute, 1, every(time.Minute, 5), Hints{TTL: 90 * time.Minute}, 90 * time.Minute},
		{"max-age", 5 * time.Minute, 1, every(time.Minute, 5), Hints{MaxAge: 30 * time.Minute}, 30 * time.Minute},
		{"expires", 5 * time.Minute, 1, every(time.Minute, 5), Hints{Expires: now.Add(45 * time.Minute)}, 45 * time.Minute},
		{"retry-after", 5 * time.Minute, 1, every(time.Minute, 5), Hints{RetryAfter: 2 * time.Hour}, 2 * time.Hour},
	} {
		if got := NextInterval(c.cur, c.newItems, c.published, lo, hi, c.h, now, nil); got != c.want {
			t.Errorf("%s: got %s, want %s", c.name, got, c.want)
		}
	}
	// Jitter stays within ±10% and within the bounds.
	for _, r := range []float64{0, 0.5, 0.999} {
		got := NextInterval(20*time.Minute, 1, every(40*time.Minute, 10), lo, hi, Hints{}, now, func() float64 { return r })
		if got < 18*time.Minute || got > 22*time.Minute {
			t.Errorf("jitter %v: %s outside 18-22 min", r, got)
		}
		got = NextInterval(5*time.Minute, 1, every(time.Minute, 10), lo, hi, Hints{}, now, func() float64 { return r })
		if got < lo {
			t.Errorf("jitter took the interval below the bound: %s", got)
		}
	}
}

func TestScheduleOrder(t *testing.T) {
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	var s schedule
	s.push("late", now.Add(time.Minute), 1)
	s.push("low", now, 0.2)
	s.push("high", now, 0.9)
	s.push("early", now.Add(-time.Minute), 0.1)
	var got []string
	for {
		it, ok := s.popDue(now)
		if !ok {
			break
		}
		got = append(got, it.id)
	}
	if want := []string{"early", "high", "low"}; len(got) != 3 || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
		t.Fatalf("due order %v, want %v", got, want)
	}
	if at, ok := s.next(); !ok || !at.Equal(now.Add(time.Minute)) || s.len() != 1 {
		t.Fatalf("next = %v %v", at, ok)
	}
}
