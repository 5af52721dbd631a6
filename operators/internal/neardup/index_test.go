package neardup

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
)

// flipBits returns fp with d distinct random bits flipped. When spread is
// set the bits are dealt to the bands in turn, so that as many bands as
// possible differ in two or more bits: the hardest neighbours for Query.
func flipBits(rng *rand.Rand, fp uint64, d int, spread bool) uint64 {
	var mask uint64
	if spread {
		// Band b gets bits d/4 (+1 for the first d%4 bands, shuffled).
		order := rng.Perm(Bands)
		for i, b := range order {
			n := d / Bands
			if i < d%Bands {
				n++
			}
			for _, bit := range rng.Perm(BandBits)[:n] {
				mask |= 1 << (b*BandBits + bit)
			}
		}
	} else {
		for _, bit := range rng.Perm(64)[:d] {
			mask |= 1 << bit
		}
	}
	return fp ^ mask
}

// model is the brute-force reference for Index.
type model map[uint64]uint64 // id → fp

// near returns the entries within MaxDistance of fp.
func (m model) near(fp uint64) model {
	out := make(model)
	for id, f := range m {
		if Hamming(fp, f) <= MaxDistance {
			out[id] = f
		}
	}
	return out
}

// checkQuery compares Query with the brute-force answer: every entry within
// k exactly once, with its fingerprint and distance, and nothing else. near
// holds the entries within MaxDistance of fp (see model.near).
func checkQuery(t *testing.T, ix *Index, near model, fp uint64, k int) {
	t.Helper()
	got := make(map[uint64]int)
	err := ix.Query(fp, k, func(id, f uint64, d int) bool {
		if _, dup := got[id]; dup {
			t.Errorf("query %016x k=%d: id %d reported twice", fp, k, id)
		}
		if want, ok := near[id]; !ok || d > k || f != want || d != Hamming(fp, f) {
			t.Errorf("query %016x k=%d: id %d reported with fp %016x, distance %d; stored fp %016x (stored %v)", fp, k, id, f, d, want, ok)
		}
		got[id] = d
		return true
	})
	if err != nil {
		t.Fatalf("Query(k=%d): %v", k, err)
	}
	for id, f := range near {
		if d := Hamming(fp, f); d <= k {
			if _, ok := got[id]; !ok {
				t.Errorf("query %016x k=%d: id %d at distance %d missing", fp, k, id, d)
			}
		}
	}
}

// checkModel checks that ix holds as many entries as m and answers every
// query of qs at every k as m does, reporting none of the removed ids.
func checkModel(t *testing.T, ix *Index, m model, qs []uint64, removed map[uint64]bool) {
	t.Helper()
	if ix.Len() != len(m) {
		t.Fatalf("Len() = %d with %d removed, want %d", ix.Len(), len(removed), len(m))
	}
	for _, q := range qs {
		near := m.near(q)
		for k := 0; k <= MaxDistance; k++ {
			checkQuery(t, ix, near, q, k)
			if len(removed) == 0 {
				continue
			}
			if err := ix.Query(q, k, func(id, _ uint64, _ int) bool {
				if removed[id] {
					t.Errorf("removed id %d reported", id)
				}
				return true
			}); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestIndexExact plants neighbours at every distance 0..8 of query points
// among random fingerprints, and checks that Query at every k in 0..7
// returns exactly the brute-force set, before and after removals.
func TestIndexExact(t *testing.T) {
	t.Parallel()
	n, queries := 50_000, 100
	if testing.Short() {
		n, queries = 10_000, 30
	}
	rng := rand.New(rand.NewPCG(42, 7))
	ix := NewIndex()
	m := make(model)
	add := func(id, fp uint64) {
		ix.Add(id, fp)
		m[id] = fp
	}
	id := uint64(0)
	for range n {
		add(id, rng.Uint64())
		id++
	}
	qs := make([]uint64, queries)
	for i := range qs {
		qs[i] = rng.Uint64()
		// Queries near each other share some neighbours.
		if i > 0 && i%10 == 0 {
			qs[i] = flipBits(rng, qs[i-1], 3, false)
		}
		for d := 0; d <= 8; d++ {
			add(id, flipBits(rng, qs[i], d, false))
			add(id+1, flipBits(rng, qs[i], d, true))
			id += 2
		}
	}
	checkModel(t, ix, m, qs, nil)
	if t.Failed() {
		return
	}

	// Remove every other planted neighbour and a tenth of the random
	// entries; removed ids must never be reported again.
	removed := make(map[uint64]bool)
	for rid := range id {
		if (rid >= uint64(n) && rid%2 == 0) || rng.IntN(10) == 0 {
			fp := m[rid]
			if !ix.Remove(rid, fp) {
				t.Fatalf("Remove(%d, %016x) = false for a stored entry", rid, fp)
			}
			if ix.Remove(rid, fp) {
				t.Fatalf("Remove(%d, %016x) of a removed entry = true", rid, fp)
			}
			delete(m, rid)
			removed[rid] = true
		}
	}
	checkModel(t, ix, m, qs, removed)
}

// TestIndexRandomOps runs random Adds, Removes and Queries against the
// brute-force model, with fingerprints crowded around a few centres so that
// buckets are long and slots move often.
func TestIndexRandomOps(t *testing.T) {
	for seed := range uint64(4) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			t.Parallel()
			rng := rand.New(rand.NewPCG(seed, 99))
			centres := make([]uint64, 8)
			for i := range centres {
				centres[i] = rng.Uint64()
			}
			near := func() uint64 {
				return flipBits(rng, centres[rng.IntN(len(centres))], rng.IntN(12), rng.IntN(2) == 0)
			}
			ix := new(Index) // the zero Index works too
			m := make(model)
			var ids, gone []uint64
			for op := range 10_000 {
				switch r := rng.IntN(10); {
				case r < 5 || len(ids) == 0:
					id := uint64(op)
					if len(gone) > 0 && rng.IntN(5) == 0 {
						// Re-add a removed id with a new fingerprint.
						i := rng.IntN(len(gone))
						id = gone[i]
						gone[i] = gone[len(gone)-1]
						gone = gone[:len(gone)-1]
					}
					fp := near()
					ix.Add(id, fp)
					m[id] = fp
					ids = append(ids, id)
				case r < 8:
					i := rng.IntN(len(ids))
					id := ids[i]
					if ix.Remove(id, m[id]^1) {
						t.Fatalf("Remove(%d) with a wrong fingerprint = true", id)
					}
					if !ix.Remove(id, m[id]) {
						t.Fatalf("Remove(%d) = false", id)
					}
					delete(m, id)
					gone = append(gone, id)
					ids[i] = ids[len(ids)-1]
					ids = ids[:len(ids)-1]
				default:
					q := near()
					checkQuery(t, ix, m.near(q), q, rng.IntN(MaxDistance+1))
				}
				if t.Failed() {
					t.FailNow()
				}
			}
			if ix.Len() != len(m) {
				t.Fatalf("Len() = %d, want %d", ix.Len(), len(m))
			}
			for id, fp := range m {
				if !ix.Remove(id, fp) {
					t.Fatalf("Remove(%d) = false", id)
				}
			}
			if ix.Len() != 0 || ix.bucketCap != 0 {
				t.Fatalf("emptied index has Len %d, bucket capacity %d", ix.Len(), ix.bucketCap)
			}
		})
	}
}

func TestIndexQueryEdges(t *testing.T) {
	var empty Index
	for _, k := range []int{-1, MaxDistance + 1, 64} {
		called := false
		err := empty.Query(0, k, func(uint64, uint64, int) bool { called = true; return true })
		if !errors.Is(err, ErrDistance) || called {
			t.Errorf("Query(k=%d) = %v, called %v; want ErrDistance and no call", k, err, called)
		}
	}
	if empty.Remove(1, 2) {
		t.Error("Remove on an empty index = true")
	}
	if err := empty.Query(0, 3, func(uint64, uint64, int) bool { t.Error("empty index reported an entry"); return true }); err != nil {
		t.Error(err)
	}

	ix := NewIndex()
	for id := range uint64(10) {
		ix.Add(id, 0xabcdef)
	}
	ix.Add(10, 0xabcdef) // the same id twice is stored twice
	ix.Add(10, 0xabcdef)
	n := 0
	if err := ix.Query(0xabcdef, 5, func(uint64, uint64, int) bool { n++; return n < 3 }); err != nil {
		t.Fatal(err)
	}
	if n != 3 {
		t.Errorf("Query went on after fn returned false: %d calls", n)
	}
	ms, err := ix.AppendMatches(nil, 0xabcdee, 1)
	if err != nil || len(ms) != 12 {
		t.Fatalf("AppendMatches = %d matches, %v; want 12", len(ms), err)
	}
	ids := make([]uint64, len(ms))
	for i, m := range ms {
		if m.FP != 0xabcdef || m.Dist != 1 {
			t.Errorf("match %+v", m)
		}
		ids[i] = m.ID
	}
	slices.Sort(ids)
	if want := []uint64{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 10}; !slices.Equal(ids, want) {
		t.Errorf("matched ids %v, want %v", ids, want)
	}
	for i, want := range []bool{true, true, false} {
		if got := ix.Remove(10, 0xabcdef); got != want {
			t.Errorf("removal %d of a doubly added id = %v, want %v", i+1, got, want)
		}
	}
}

// TestIndexQueryDoesNotAllocate: Query with a callback that does not
// escape is free of allocations, so it can run per article.
func TestIndexQueryDoesNotAllocate(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	ix := NewIndex()
	for id := range uint64(10_000) {
		ix.Add(id, rng.Uint64())
	}
	q := rng.Uint64()
	n := 0
	fn := func(uint64, uint64, int) bool { n++; return true }
	allocs := testing.AllocsPerRun(50, func() {
		_ = ix.Query(q, 3, fn)
		_ = ix.Query(q, 7, fn)
	})
	if allocs != 0 {
		t.Errorf("Query allocates %v times, want 0", allocs)
	}
}

// TestIndexMemory builds an index of random fingerprints and checks that
// MemoryBytes stays near what the layout promises: 32 bytes of entry data
// plus growth slack, plus the bucket heads.
func TestIndexMemory(t *testing.T) {
	const n = 200_000
	rng := rand.New(rand.NewPCG(8, 9))
	ix := NewIndex()
	for id := range uint64(n) {
		ix.Add(id, rng.Uint64())
	}
	heads := Bands << BandBits * 24
	perEntry := float64(ix.MemoryBytes()-heads) / n
	t.Logf("%d entries: %d bytes, %.1f bytes/entry without the %d bytes of bucket heads", n, ix.MemoryBytes(), perEntry, heads)
	if perEntry < 32 || perEntry > 48 {
		t.Errorf("%.1f bytes/entry, want 32..48", perEntry)
	}
}

// TestIndexConcurrentQueries: Query does not write to the Index, so readers
// may share it (run with -race).
func TestIndexConcurrentQueries(t *testing.T) {
	rng := rand.New(rand.NewPCG(10, 11))
	ix := NewIndex()
	for id := range uint64(20_000) {
		ix.Add(id, rng.Uint64())
	}
	qs := make([]uint64, 200)
	for i := range qs {
		qs[i] = rng.Uint64()
		ix.Add(uint64(100_000+i), flipBits(rng, qs[i], i%8, i%2 == 0))
	}
	want := make([]int, len(qs))
	for i, q := range qs {
		ms, err := ix.AppendMatches(nil, q, MaxDistance)
		if err != nil {
			t.Fatal(err)
		}
		want[i] = len(ms)
	}
	const readers = 4
	got := make([][]int, readers)
	var wg sync.WaitGroup
	for r := range readers {
		got[r] = make([]int, len(qs))
		wg.Go(func() {
			var ms []Match
			for i, q := range qs {
				ms, _ = ix.AppendMatches(ms[:0], q, MaxDistance)
				got[r][i] = len(ms)
			}
		})
	}
	wg.Wait()
	for r := range got {
		if !slices.Equal(got[r], want) {
			t.Errorf("reader %d got other match counts than a lone reader", r)
		}
	}
}
