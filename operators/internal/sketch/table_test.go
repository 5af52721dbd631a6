package sketch

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestTable puts, updates and deletes keys at random, clustered keys
// among them (so that probes wrap around the end), against a map.
//
// TestTable is one random walk checked step by step (cyclomatic 28): each
// step depends on the table the previous ones left.
func TestTable(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, limit := range []int{1, 7, 200, 5000, math.MaxInt} {
		var tb table[int32]
		want := map[uint64]int32{}
		keys := []uint64{}
		for i := range 50_000 {
			switch op := rng.IntN(10); {
			case op < 5 && len(want) < limit:
				h := rng.Uint64()
				if rng.IntN(3) == 0 {
					h = ^uint64(0) - rng.Uint64N(1<<40) // homes at the end
				}
				if _, ok := want[h]; !ok {
					keys = append(keys, h)
				}
				want[h] = int32(i)
				if i%2 == 0 {
					tb.put(h, int32(i), limit)
				} else if v, _ := tb.upsert(h, limit); true {
					*v = int32(i)
				}
			case op < 8 && len(keys) > 0:
				j := rng.IntN(len(keys))
				h := keys[j]
				keys[j] = keys[len(keys)-1]
				keys = keys[:len(keys)-1]
				delete(want, h)
				tb.del(h)
			case len(keys) > 0:
				h := keys[rng.IntN(len(keys))]
				if v, added := tb.upsert(h, limit); added {
					t.Fatalf("limit %d: upsert of a kept key adds it", limit)
				} else {
					*v = -int32(i)
				}
				want[h] = -int32(i)
			}
			if tb.len() != len(want) {
				t.Fatalf("limit %d step %d: %d keys, want %d", limit, i, tb.len(), len(want))
			}
			if i%97 == 0 {
				for h, v := range want {
					if got, ok := tb.get(h); !ok || got != v {
						t.Fatalf("limit %d step %d: key %x: %d %v, want %d", limit, i, h, got, ok, v)
					}
				}
				n := 0
				tb.all(func(h uint64, v *int32) {
					n++
					if want[h] != *v {
						t.Fatalf("limit %d: all gives %x=%d, want %d", limit, h, *v, want[h])
					}
				})
				if _, ok := tb.get(rng.Uint64()); ok || n != len(want) {
					t.Fatalf("limit %d: a missing key is found, or all visits %d of %d", limit, n, len(want))
				}
			}
		}
		if most := 2 * min(limit, 40_000); len(tb.slots) > max(16, most) {
			t.Fatalf("limit %d: %d slots", limit, len(tb.slots))
		}
	}
	// Without a limit, the slots double; keys put in order (as Load
	// does) do not pile up.
	var tb table[int32]
	grows := 0
	for i := range 100_000 {
		n := len(tb.slots)
		tb.put(uint64(i)<<40, 0, math.MaxInt)
		if len(tb.slots) != n {
			grows++
		}
	}
	if grows > 20 {
		t.Fatalf("%d grows for 100,000 keys", grows)
	}
	probes := 0
	for i := range 100_000 {
		h := uint64(i) << 40
		for j := home(h, len(tb.slots)); tb.slots[j].key != h; j = (j + 1) % len(tb.slots) {
			probes++
		}
	}
	if probes > 300_000 {
		t.Fatalf("%d probes to find 100,000 keys put in order", probes)
	}
}
