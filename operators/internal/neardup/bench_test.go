package neardup

import (
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"testing"
)

// BenchmarkFingerprint: features and SimHash of one article (a headline and
// a 30-word summary), with a reused Hasher and with the allocating
// functions.
func BenchmarkFingerprint(b *testing.B) {
	b.Run("hasher", func(b *testing.B) {
		var h Hasher
		var fs []Feature
		i := 0
		for b.Loop() {
			a := edited[i%len(edited)].orig
			fs = h.AppendFeatures(fs[:0], a.title, a.summary)
			_ = SimHash(fs)
			i++
		}
	})
	b.Run("alloc", func(b *testing.B) {
		i := 0
		for b.Loop() {
			a := edited[i%len(edited)].orig
			_ = SimHash(Features(a.title, a.summary))
			i++
		}
	})
	b.Run("headline", func(b *testing.B) {
		var h Hasher
		i := 0
		for b.Loop() {
			_ = h.Fingerprint(edited[i%len(edited)].orig.title, "")
			i++
		}
	})
}

// million is an Index of 1,000,000 random fingerprints, built once for the
// query benchmarks.
var million = sync.OnceValue(func() *Index {
	rng := rand.New(rand.NewPCG(1, 1))
	ix := NewIndex()
	for id := range uint64(1_000_000) {
		ix.Add(id, rng.Uint64())
	}
	return ix
})

// BenchmarkIndexQuery queries an Index of 1,000,000 random fingerprints with
// random fingerprints, as for a stream of new articles, at the default K and
// Borderline distances.
func BenchmarkIndexQuery(b *testing.B) {
	for _, k := range []int{3, 6} {
		b.Run("k="+string(rune('0'+k)), func(b *testing.B) {
			ix := million()
			rng := rand.New(rand.NewPCG(2, 2))
			qs := make([]uint64, 1024)
			for i := range qs {
				qs[i] = rng.Uint64()
			}
			matches, i := 0, 0
			fn := func(uint64, uint64, int) bool { matches++; return true }
			for b.Loop() {
				if err := ix.Query(qs[i%len(qs)], k, fn); err != nil {
					b.Fatal(err)
				}
				i++
			}
			b.ReportMetric(float64(matches)/float64(i), "matches/op")
		})
	}
}

// BenchmarkIndexAdd adds random fingerprints to an Index, starting a new one
// at 1,000,000 entries, so growth is included.
func BenchmarkIndexAdd(b *testing.B) {
	rng := rand.New(rand.NewPCG(3, 3))
	ix := NewIndex()
	id := uint64(0)
	for b.Loop() {
		ix.Add(id, rng.Uint64())
		id++
		if ix.Len() == 1_000_000 {
			ix = NewIndex()
		}
	}
}

// BenchmarkIndexReplace removes the oldest entry and adds a new one in an
// Index of 1,000,000: the steady state of a sliding window.
func BenchmarkIndexReplace(b *testing.B) {
	const n = 1_000_000
	rng := rand.New(rand.NewPCG(4, 4))
	ix := NewIndex()
	fps := make([]uint64, n) // the window: fps[id%n]
	for id := range uint64(n) {
		fps[id] = rng.Uint64()
		ix.Add(id, fps[id])
	}
	id := uint64(n)
	for b.Loop() {
		old := id - n
		if !ix.Remove(old, fps[old%n]) {
			b.Fatal("entry missing")
		}
		fps[id%n] = rng.Uint64()
		ix.Add(id, fps[id%n])
		id++
	}
}

// BenchmarkIndexMemory builds an Index of 1,000,000 random fingerprints and
// reports its size per entry: as counted by MemoryBytes, and as measured on
// the heap (live bytes after a GC, allocator rounding included).
func BenchmarkIndexMemory(b *testing.B) {
	const n = 1_000_000
	var ms runtime.MemStats
	var heap, counted float64
	for b.Loop() {
		runtime.GC()
		runtime.ReadMemStats(&ms)
		before := ms.HeapAlloc
		rng := rand.New(rand.NewPCG(5, 5))
		ix := NewIndex()
		for id := range uint64(n) {
			ix.Add(id, rng.Uint64())
		}
		runtime.GC()
		runtime.ReadMemStats(&ms)
		heap = float64(ms.HeapAlloc-before) / n
		counted = float64(ix.MemoryBytes()) / n
		runtime.KeepAlive(ix)
	}
	b.ReportMetric(heap, "heap-bytes/entry")
	b.ReportMetric(counted, "bytes/entry")
}

// BenchmarkSignature: shingles and a 128-permutation MinHash signature of a
// headline with summary (~40 words) and of a long article (~250 words, the
// size of the minhash_planted articles).
func BenchmarkSignature(b *testing.B) {
	var sb strings.Builder
	for _, e := range edited {
		sb.WriteString(e.orig.summary)
		sb.WriteByte(' ')
	}
	long := sb.String()
	short := edited[0].orig.title + " " + edited[0].orig.summary
	m := NewMinHasher(DefaultPermutations, 0)
	for _, tc := range []struct{ name, text string }{{"article", short}, {"long", long}} {
		b.Run(tc.name, func(b *testing.B) {
			var h Hasher
			var sh []uint64
			var sig []uint32
			for b.Loop() {
				sh = h.AppendShingles(sh[:0], tc.text)
				sig = m.AppendSignature(sig[:0], sh)
			}
			b.ReportMetric(float64(len(sh)), "shingles")
		})
	}
}

// BenchmarkDetectorDoc: everything the Detector computes for one article,
// the signature allocation included.
func BenchmarkDetectorDoc(b *testing.B) {
	d, err := NewDetector(Options{})
	if err != nil {
		b.Fatal(err)
	}
	i := 0
	for b.Loop() {
		a := edited[i%len(edited)].orig
		_ = d.Doc(a.title, a.summary)
		i++
	}
}
