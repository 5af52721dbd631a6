package crawl

import (
	"container/heap"
	"slices"
	"time"
)

// Hints are the server's own statements about how often to come back.
type Hints struct {
	TTL        time.Duration // RSS <ttl>
	MaxAge     time.Duration // Cache-Control: max-age
	Expires    time.Time     // Expires header
	RetryAfter time.Duration // Retry-After
}

// floor is the shortest wait the hints allow from now.
func (h Hints) floor(now time.Time) time.Duration {
	f := max(h.TTL, h.MaxAge, h.RetryAfter)
	if !h.Expires.IsZero() {
		f = max(f, h.Expires.Sub(now))
	}
	return f
}

// NextInterval adapts a source's crawl interval to how often it publishes.
//
// published are the publish times of the items the feed holds now. With at
// least two of them in the last week, the interval is half the mean gap
// between them (so a new item waits on average a quarter of a gap); with
// fewer, a crawl that found nothing new stretches the interval by half and
// one that found something keeps it. The result is clamped to [lo, hi],
// never below what the server's hints ask, and jittered by up to ±10% so
// that sources added together drift apart. rnd returns values in [0, 1).
func NextInterval(cur time.Duration, newItems int, published []time.Time, lo, hi time.Duration, h Hints, now time.Time, rnd func() float64) time.Duration {
	next := cur
	if gap, ok := meanGap(published, now); ok {
		next = gap / 2
	} else if newItems == 0 {
		next = cur + cur/2
	}
	next = min(max(next, lo), hi)
	if rnd != nil {
		next += time.Duration((rnd()*0.2 - 0.1) * float64(next))
		next = min(max(next, lo), hi)
	}
	return max(next, h.floor(now))
}

// meanGap is the mean time between the items published in the last week,
// or false if fewer than two.
func meanGap(published []time.Time, now time.Time) (time.Duration, bool) {
	cut := now.Add(-7 * 24 * time.Hour)
	var ts []time.Time
	for _, t := range published {
		if t.After(cut) && !t.After(now) {
			ts = append(ts, t)
		}
	}
	if len(ts) < 2 {
		return 0, false
	}
	slices.SortFunc(ts, func(a, b time.Time) int { return a.Compare(b) })
	span := ts[len(ts)-1].Sub(ts[0])
	if span <= 0 {
		return 0, false
	}
	return span / time.Duration(len(ts)-1), true
}

// dueQueue orders sources by next crawl time, then by authority (higher
// first), then by id.
type dueQueue []dueItem

type dueItem struct {
	id        string
	at        time.Time
	authority float64
}

func (q dueQueue) Len() int { return len(q) }
func (q dueQueue) Less(i, j int) bool {
	a, b := q[i], q[j]
	if !a.at.Equal(b.at) {
		return a.at.Before(b.at)
	}
	if a.authority != b.authority {
		return a.authority > b.authority
	}
	return a.id < b.id
}
func (q dueQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *dueQueue) Push(x any)   { *q = append(*q, x.(dueItem)) }
func (q *dueQueue) Pop() any {
	old := *q
	it := old[len(old)-1]
	*q = old[:len(old)-1]
	return it
}

// schedule is the set of sources waiting for their next crawl. It is not
// safe for concurrent use.
type schedule struct {
	q dueQueue
}

func (s *schedule) push(id string, at time.Time, authority float64) {
	heap.Push(&s.q, dueItem{id: id, at: at, authority: authority})
}

// popDue removes and returns the most urgent source due at now, if any.
func (s *schedule) popDue(now time.Time) (dueItem, bool) {
	if len(s.q) == 0 || s.q[0].at.After(now) {
		return dueItem{}, false
	}
	return heap.Pop(&s.q).(dueItem), true
}

// next returns when the most urgent source is due.
func (s *schedule) next() (time.Time, bool) {
	if len(s.q) == 0 {
		return time.Time{}, false
	}
	return s.q[0].at, true
}

func (s *schedule) len() int { return len(s.q) }
