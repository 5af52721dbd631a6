package slo

import (
	"maps"
	"time"
)

// snapshot is the cumulative counts at one time.
type snapshot struct {
	at  time.Time
	cum map[key]counts
}

func cloneCounts(m map[key]counts) map[key]counts { return maps.Clone(m) }

// ring holds the newest snapshots, at most its capacity, oldest first.
type ring struct {
	buf  []snapshot
	next int // where the next push goes
	n    int // how many are held
}

func newRing(capacity int) ring { return ring{buf: make([]snapshot, max(capacity, 1))} }

// push adds s, dropping the oldest snapshot when the ring is full.
func (r *ring) push(s snapshot) {
	r.buf[r.next] = s
	r.next = (r.next + 1) % len(r.buf)
	r.n = min(r.n+1, len(r.buf))
}

// at returns the i-th snapshot held, 0 the oldest.
func (r *ring) at(i int) snapshot {
	return r.buf[(r.next-r.n+i+len(r.buf))%len(r.buf)]
}

// newest returns the newest snapshot, false when the ring is empty.
func (r *ring) newest() (snapshot, bool) {
	if r.n == 0 {
		return snapshot{}, false
	}
	return r.at(r.n - 1), true
}

// atOrBefore returns the newest snapshot taken at or before t, false when
// every one is later.
func (r *ring) atOrBefore(t time.Time) (snapshot, bool) {
	for i := r.n - 1; i >= 0; i-- {
		if s := r.at(i); !s.at.After(t) {
			return s, true
		}
	}
	return snapshot{}, false
}
