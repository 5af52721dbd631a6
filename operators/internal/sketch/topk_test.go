package sketch

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// TestWorse: worse orders by estimate, then by id as strings compare,
// whatever the ids' lengths and bytes (the prefixes only shortcut it).
func TestWorse(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 4))
	alphabet := "\x00ab\xff"
	id := func() string {
		var b strings.Builder
		for range rng.IntN(12) {
			b.WriteByte(alphabet[rng.IntN(len(alphabet))])
		}
		return b.String()
	}
	for range 100_000 {
		a := entry{est: uint64(rng.IntN(2)), id: id()}
		b := entry{est: uint64(rng.IntN(2)), id: id()}
		a.pre, b.pre = idPrefix(a.id), idPrefix(b.id)
		want := a.est < b.est || (a.est == b.est && a.id > b.id)
		if got := worse(&a, &b); got != want {
			t.Fatalf("worse(%+v, %+v) = %v", a, b, got)
		}
	}
}
