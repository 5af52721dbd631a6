package dedup

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// Every inserted entry is found with its bucket tag up to fillMax, a
// fingerprint never inserted matches rarely, and expiry removes exactly
// the expired tags.
func TestFilter(t *testing.T) {
	const n = 100_000
	rng := rand.New(rand.NewPCG(1, 2))
	c := newFilter(n)
	in := map[Fingerprint]uint16{}
	for !c.full() {
		f, b := Fingerprint(rng.Uint64()|2), uint16(rng.IntN(8))
		if _, ok := in[f]; ok {
			continue
		}
		if !c.insert(f, b) {
			t.Fatalf("insert failed at %d of %d slots", len(in), c.capacity())
		}
		in[f] = b
	}
	if c.count != len(in) {
		t.Fatalf("count %d, %d inserted", c.count, len(in))
	}
	for f, b := range in {
		if !slices.Contains(c.lookup(f, nil), b) {
			t.Fatalf("%x (bucket %d) not found", f, b)
		}
	}
	const probes = 1_000_000
	matched := 0
	for range probes {
		if f := Fingerprint(rng.Uint64() | 2); in[f] == 0 && len(c.lookup(f, nil)) > 0 {
			matched++
		}
	}
	if rate := float64(matched) / probes; rate > 4e-4 {
		t.Fatalf("false match rate %.2g at %.0f%% full", rate, 100*float64(c.count)/float64(c.capacity()))
	} else {
		t.Logf("false match rate %.2g at %.0f%% full, %.2f bytes per entry", rate,
			100*float64(c.count)/float64(c.capacity()), float64(c.memoryBytes())/float64(c.count))
	}
	c.expire(6, 4) // tags 6, 7, 8, 9
	kept := 0
	for f, b := range in {
		found := slices.Contains(c.lookup(f, nil), b)
		if found != (b < 6) {
			t.Fatalf("bucket %d after expiring 6..9: found %v", b, found)
		}
		if found {
			kept++
		}
	}
	if c.count != kept {
		t.Fatalf("count %d after expiry, %d kept", c.count, kept)
	}
}
