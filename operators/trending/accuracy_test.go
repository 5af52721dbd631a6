package trending

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/newsflow/newsflow/engine/eventlog"
	"github.com/newsflow/newsflow/internal/testutil"
)

// articleIDs returns n ids shaped like real ones (hex of a hash).
func articleIDs(n int) []string {
	ids := make([]string, n)
	for i := range ids {
		x := uint64(i)*0x9E3779B97F4A7C15 + 0x632BE59BD9B4E019
		x ^= x >> 31
		x *= 0xBF58476D1CE4E5B9
		x ^= x >> 29
		ids[i] = fmt.Sprintf("%016x", x)
	}
	return ids
}

// zipfEvents calls fn for n shares of a Zipf(1) popularity over articles
// ranked 0..len(z.cdf)-1, spread evenly over span from t0, mostly in order:
// one share in ten is moved by up to ±30 s. The same seed gives the same
// events, so a caller can replay them instead of storing them.
func zipfEvents(z *testutil.Zipf, seed uint64, n int, t0, span int64, fn func(rank int, ts int64)) {
	rng := rand.New(rand.NewPCG(seed, 0x7a1f))
	for i := range n {
		r := z.Sample(rng)
		ts := t0 + int64(i)*span/int64(n)
		if rng.IntN(10) == 0 {
			ts += rng.Int64N(60_001) - 30_000
		}
		fn(r, ts)
	}
}

// TestZipfAccuracy is one scenario checked step by step (cyclomatic 27): the steps
// depend on each other's state, so they stay in order in one function.
func TestZipfAccuracy(t *testing.T) {
	if testing.Short() {
		t.Skip("10M shares; skipped with -short")
	}
	const (
		nArticles = 1_000_000
		nEvents   = 10_000_000
		parts     = 8
		nCats     = 8
		k         = 100
		seed      = 2024
		t0        = int64(1_750_000_000_000)
		span      = int64(2 * time.Hour / time.Millisecond)
	)
	opts := DefaultOptions()
	ids := articleIDs(nArticles)
	part := make([]uint8, nArticles)
	cat := make([]uint8, nArticles)
	catNames := make([]string, nCats)
	for i := range catNames {
		catNames[i] = fmt.Sprintf("category-%d", i)
	}
	crng := rand.New(rand.NewPCG(seed, 1))
	for i, id := range ids {
		part[i] = uint8(eventlog.PartitionFor([]byte(id), parts))
		cat[i] = uint8(crng.IntN(nCats))
	}
	z := testutil.NewZipf(nArticles, 1.0)

	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	counts := make([]*Counts, parts)
	for p := range counts {
		counts[p] = NewCounts(opts)
	}
	maxTs := make([]int64, parts)
	late := 0
	start := time.Now()
	zipfEvents(z, seed, nEvents, t0, span, func(r int, ts int64) {
		p := part[r]
		if !counts[p].Add(ids[r], catNames[cat[r]], ts) {
			late++
		}
		maxTs[p] = max(maxTs[p], ts)
	})
	elapsed := time.Since(start)
	runtime.GC()
	runtime.ReadMemStats(&after)
	memSum := 0
	for p, c := range counts {
		memSum += c.MemoryBytes()
		t.Logf("partition %d: %d live articles, %d pairs, MemoryBytes %.1f MiB",
			p, c.ids.n, len(c.pairs)/c.pairStride-len(c.pairFree), float64(c.MemoryBytes())/(1<<20))
	}
	t.Logf("%d shares into %d partitions in %v (%.0f ns/share incl. sampling), %d late",
		nEvents, parts, elapsed.Round(time.Millisecond), float64(elapsed.Nanoseconds())/nEvents, late)
	t.Logf("memory per partition: MemoryBytes %.1f MiB, HeapInuse delta %.1f MiB",
		float64(memSum)/parts/(1<<20), float64(int64(after.HeapInuse)-int64(before.HeapInuse))/parts/(1<<20))

	// Exact reference under the same bucket semantics: count the shares
	// whose bucket is live at the partition's final watermark.
	ref := make([][]uint32, len(opts.Windows))
	for w := range ref {
		ref[w] = make([]uint32, nArticles)
	}
	wm := make([]int64, parts)
	zipfEvents(z, seed, nEvents, t0, span, func(r int, ts int64) {
		p := part[r]
		wm[p] = max(wm[p], ts)
		for w, s := range opts.Windows {
			width := s.Width().Milliseconds()
			if ts/width >= maxTs[p]/width-int64(s.Buckets)+1 {
				ref[w][r]++
			}
		}
	})
	for p := range parts {
		if wm[p] != counts[p].Watermark() {
			t.Fatalf("partition %d: watermark %d, reference %d", p, counts[p].Watermark(), wm[p])
		}
	}

	byCount := func(x, y Entry) int {
		if c := cmp.Compare(y.Count, x.Count); c != 0 {
			return c
		}
		return cmp.Compare(x.ArticleID, y.ArticleID)
	}
	rank := make(map[string]int, nArticles)
	for i, id := range ids {
		rank[id] = i
	}
	for w, s := range opts.Windows {
		for _, category := range []string{"", catNames[3]} {
			var exact []Entry
			for r, n := range ref[w] {
				if n > 0 && (category == "" || catNames[cat[r]] == category) {
					exact = append(exact, Entry{ArticleID: ids[r], Count: uint64(n)})
				}
			}
			slices.SortFunc(exact, byCount)
			exact = exact[:min(k, len(exact))]
			kth := exact[len(exact)-1].Count

			var merged []Entry
			var firstMax, again time.Duration
			for _, c := range counts {
				t0 := time.Now()
				top := c.TopK(w, category, k) // rebuilds the candidate set
				t1 := time.Now()
				c.TopK(w, category, k)
				firstMax, again = max(firstMax, t1.Sub(t0)), again+time.Since(t1)
				merged = append(merged, top...)
			}
			slices.SortFunc(merged, byCount)
			merged = merged[:min(k, len(merged))]

			correct, relErr := 0, 0.0
			for _, e := range merged {
				truth := uint64(ref[w][rank[e.ArticleID]])
				if truth >= kth {
					correct++
				}
				relErr += math.Abs(float64(e.Count)-float64(truth)) / float64(max(truth, 1))
			}
			precision := float64(correct) / float64(len(merged))
			relErr /= float64(len(merged))
			t.Logf("window %-3s category %-12q: top-%d precision %.4f, mean relative error %.5f, %d-th count %5d; TopK(%d) first call max %v, then avg %v",
				s.Name, category, k, precision, relErr, k, kth, k, firstMax.Round(time.Microsecond), (again / parts).Round(time.Microsecond))
			if len(merged) != len(exact) {
				t.Errorf("window %s %q: %d merged entries, want %d", s.Name, category, len(merged), len(exact))
			}
			if precision < 0.99 {
				t.Errorf("window %s %q: precision %.4f < 0.99", s.Name, category, precision)
			}
			if relErr > 0.01 {
				t.Errorf("window %s %q: mean relative error %.4f > 1%%", s.Name, category, relErr)
			}
			// Counts are exact, so the merged answer must be the exact one.
			if !slices.Equal(merged, exact) {
				t.Errorf("window %s %q: merged top-%d differs from the exact top-%d", s.Name, category, k, k)
			}
		}
	}
	runtime.KeepAlive(counts)
}

// benchStream is one partition's share stream: Zipf(1) over the 125k
// articles a partition holds when 1M articles are spread over 8 partitions
// (a random eighth of Zipf(1) ranks is again Zipf(1)), at the per-partition
// rate of 10M shares per 2 hours (one per 5.76 ms).
//
// The ids of the events are laid out in event order, as the operator sees
// them: each freshly decoded from its record, so not a cache miss away.
type benchStream struct {
	ids    []string
	cats   []string
	artCat []uint8
	rank   []uint32
	id     []string // per event, copies laid out in event order
	ts     []int64
	span   int64 // event time covered by one pass over the events
}

var benchData = sync.OnceValue(func() *benchStream {
	const nArts, nEvents = 125_000, 1 << 20
	step := 5.76 // ms between shares
	s := &benchStream{ids: articleIDs(nArts), artCat: make([]uint8, nArts)}
	for i := range 8 {
		s.cats = append(s.cats, fmt.Sprintf("category-%d", i))
	}
	rng := rand.New(rand.NewPCG(7, 7))
	for i := range s.artCat {
		s.artCat[i] = uint8(rng.IntN(len(s.cats)))
	}
	s.span = int64(float64(nEvents) * step)
	arena := make([]byte, 0, nEvents*len(s.ids[0]))
	zipfEvents(testutil.NewZipf(nArts, 1.0), 11, nEvents, 0, s.span, func(r int, ts int64) {
		s.rank = append(s.rank, uint32(r))
		s.ts = append(s.ts, ts)
		arena = append(arena, s.ids[r]...)
	})
	for i, r := range s.rank {
		n := len(s.ids[r])
		s.id = append(s.id, unsafe.String(&arena[i*n], n))
	}
	return s
})

const benchT0 = int64(1_750_000_000_000)

// feed adds shares i..i+n-1 of the endless stream that repeats s shifted
// by s.span per pass.
func (s *benchStream) feed(c *Counts, i, n int) {
	for j := i; j < i+n; j++ {
		k := j % len(s.rank)
		c.Add(s.id[k], s.cats[s.artCat[s.rank[k]]], benchT0+int64(j/len(s.rank))*s.span+s.ts[k])
	}
}

func BenchmarkAdd(b *testing.B) {
	s := benchData()
	c := NewCounts(Options{})
	n := len(s.rank)
	s.feed(c, 0, n) // steady state: ~100 min of shares
	i := n
	for b.Loop() {
		k := i % n
		c.Add(s.id[k], s.cats[s.artCat[s.rank[k]]], benchT0+int64(i/n)*s.span+s.ts[k])
		i++
	}
	b.ReportMetric(float64(c.MemoryBytes())/(1<<20), "MiB")
}

func BenchmarkTopK(b *testing.B) {
	s := benchData()
	c := NewCounts(Options{})
	s.feed(c, 0, 2*len(s.rank))
	for w, spec := range c.Options().Windows {
		for _, cat := range []string{"", s.cats[0]} {
			name := fmt.Sprintf("window=%s/category=%q", spec.Name, cat)
			b.Run(name+"/steady", func(b *testing.B) {
				for b.Loop() {
					c.TopK(w, cat, 100)
				}
			})
			// Worst case: the candidate set must be rebuilt from all live articles.
			b.Run(name+"/rescan", func(b *testing.B) {
				for b.Loop() {
					g := &c.win[w].global
					if cat != "" {
						g = &c.catGroups[int(c.catIdx[cat])*c.nw+w]
					}
					g.tau = 0
					c.TopK(w, cat, 100)
				}
			})
		}
	}
	// Queries interleaved with ingestion: 1000 shares between TopK calls,
	// so candidate sets move and sometimes rescan. Reports the TopK part.
	pos := 2 * len(s.rank) // stream position, kept across sub-benchmark runs
	for w, spec := range c.Options().Windows {
		b.Run(fmt.Sprintf("window=%s/category=%q/churn", spec.Name, ""), func(b *testing.B) {
			var topK time.Duration
			rescans := c.rescans
			for b.Loop() {
				s.feed(c, pos, 1000)
				pos += 1000
				t0 := time.Now()
				c.TopK(w, "", 100)
				topK += time.Since(t0)
			}
			b.ReportMetric(float64(topK.Nanoseconds())/float64(b.N), "ns/TopK")
			b.ReportMetric(float64(c.rescans-rescans)/float64(b.N), "rescans/TopK")
		})
	}
}

// countingWriter counts staged writes.
type countingWriter struct{ sets, dels int }

func (w *countingWriter) Set(k, v []byte) error         { w.sets++; return nil }
func (w *countingWriter) Delete(k []byte) error         { w.dels++; return nil }
func (w *countingWriter) DeleteRange(s, e []byte) error { w.dels++; return nil }

// BenchmarkFlush measures one Flush after every 10k shares (about a minute
// of one partition's event time).
func BenchmarkFlush(b *testing.B) {
	s := benchData()
	const batch = 10_000
	b.Run("writer=count", func(b *testing.B) {
		c := NewCounts(Options{})
		s.feed(c, 0, len(s.rank))
		var w countingWriter
		if err := c.Flush(&w); err != nil {
			b.Fatal(err)
		}
		w = countingWriter{}
		i, flushes := len(s.rank), 0
		for b.Loop() {
			b.StopTimer()
			s.feed(c, i, batch)
			i += batch
			b.StartTimer()
			if err := c.Flush(&w); err != nil {
				b.Fatal(err)
			}
			flushes++
		}
		b.ReportMetric(float64(w.sets)/float64(flushes), "keys/flush")
		b.ReportMetric(float64(w.dels)/float64(flushes), "rangedels/flush")
	})
	b.Run("writer=pebble", func(b *testing.B) {
		_, ns := openNS(b)
		c := NewCounts(Options{})
		s.feed(c, 0, len(s.rank))
		flush(b, c, ns)
		i, ops, flushes := len(s.rank), 0, 0
		for b.Loop() {
			b.StopTimer()
			s.feed(c, i, batch)
			i += batch
			b.StartTimer()
			ops += flush(b, c, ns)
			flushes++
		}
		b.ReportMetric(float64(ops)/float64(flushes), "ops/flush")
	})
}

// BenchmarkLoad measures restoring one partition (about 100 minutes of
// shares) from Pebble.
func BenchmarkLoad(b *testing.B) {
	s := benchData()
	_, ns := openNS(b)
	c := NewCounts(Options{})
	for i := 0; i < len(s.rank); i += 10_000 {
		s.feed(c, i, min(10_000, len(s.rank)-i))
		flush(b, c, ns)
	}
	cells := len(c.dump())
	for b.Loop() {
		l := NewCounts(Options{})
		if err := l.Load(ns); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(cells), "cells")
}
