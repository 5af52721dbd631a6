package sketch

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/newsflow/newsflow/internal/testutil"
	"github.com/newsflow/newsflow/state"
	"github.com/newsflow/newsflow/state/statetest"
)

// BenchmarkZipf10M runs the accuracy scenario of TestZipfAccuracy at
// 10,000,000 distinct articles (8M shares, 16M increments) with the
// default options, and reports the worst global top-100 precision and
// mean relative error over the windows, the same for the categories'
// top 100 and top 25, the largest error and bound, the memory, the time
// per Add, the bytes of a full Flush into Pebble and the time to Load them.
// max-err and max-bound are the largest error and bound of a global top-100
// count; cat-max-err the largest error of a category's top-100 count.
//
//	go test -run '^$' -bench Zipf10M -benchtime 1x ./operators/internal/sketch/
func BenchmarkZipf10M(b *testing.B) {
	s := genZipf(10_000_000, zipfPhases(2_000_000), 1)
	for b.Loop() {
		c := New(Options{})
		perAdd := s.feed(c)
		rep, rep25 := evaluate(c, s, 100), evaluate(c, s, 25)
		global := quality{precision: 1}
		for _, q := range rep.global {
			global.precision = min(global.precision, q[0].precision)
			global.mre = max(global.mre, q[0].mre)
			global.maxErr = max(global.maxErr, q[0].maxErr)
			global.maxBound = max(global.maxBound, q[0].maxBound)
		}
		catPrecision, catMRE := 1.0, 0.0
		for _, qs := range rep.cats {
			for _, q := range qs {
				catPrecision, catMRE = min(catPrecision, q.precision), max(catMRE, q.mre)
			}
		}
		cat25Precision, cat25MRE := 1.0, 0.0
		for _, qs := range rep25.cats {
			for _, q := range qs {
				cat25Precision, cat25MRE = min(cat25Precision, q.precision), max(cat25MRE, q.mre)
			}
		}
		if rep.worst.under > 0 || rep.worst.overBound > 0 {
			b.Errorf("%d counts under the exact count, %d beyond their bound", rep.worst.under, rep.worst.overBound)
		}
		stored, load := flushLoad(b, c)
		b.ReportMetric(global.precision, "precision")
		b.ReportMetric(global.mre, "mean-rel-err")
		b.ReportMetric(catPrecision, "cat-precision")
		b.ReportMetric(catMRE, "cat-mean-rel-err")
		b.ReportMetric(cat25Precision, "cat-top25-precision")
		b.ReportMetric(cat25MRE, "cat-top25-mean-rel-err")
		b.ReportMetric(float64(global.maxErr), "max-err")
		b.ReportMetric(float64(global.maxBound), "max-bound")
		b.ReportMetric(float64(rep.worst.maxErr), "cat-max-err")
		b.ReportMetric(float64(c.MemoryBytes()), "memory-bytes")
		b.ReportMetric(float64(perAdd.Nanoseconds()), "ns/add")
		b.ReportMetric(float64(stored), "flush-bytes")
		b.ReportMetric(load.Seconds()*1000, "load-ms")
	}
}

// flushLoad flushes c into a new Pebble database in one batch, and
// returns the bytes written and the time to Load them.
func flushLoad(b *testing.B, c *Counts) (int, time.Duration) {
	b.Helper()
	ns, n := flushToPebble(b, c)
	loaded := New(c.Options())
	start := time.Now()
	if err := loaded.Load(ns); err != nil {
		b.Fatal(err)
	}
	d := time.Since(start)
	if loaded.Mass(0) != c.Mass(0) || loaded.Watermark() != c.Watermark() {
		b.Fatal("loaded state differs")
	}
	return n, d
}

// flushToPebble flushes c into a new Pebble database in one batch,
// flushes that to sstables (Load then reads them, as after a restart),
// and returns the namespace and the bytes written.
func flushToPebble(b *testing.B, c *Counts) (state.Namespace, int) {
	b.Helper()
	db := statetest.Open(b)
	ns := db.Namespace("trending/0")
	batch := ns.NewBatch()
	w := &countingWriter{Writer: batch}
	if err := c.Flush(w); err != nil {
		b.Fatal(err)
	}
	if err := batch.Commit(); err != nil {
		b.Fatal(err)
	}
	if err := db.Pebble().Flush(); err != nil {
		b.Fatal(err)
	}
	return ns, w.n
}

type countingWriter struct {
	state.Writer
	n int
}

func (w *countingWriter) Set(k, v []byte) error {
	w.n += len(k) + len(v)
	return w.Writer.Set(k, v)
}

// productionStream returns shares of Zipf(1.0) over a million articles
// at 12,500 shares a second of event time (one partition of the design's
// 100,000 a second over 8), in time order, each with one of 8 categories.
func productionStream(n int) []share {
	z := testutil.NewZipf(1_000_000, 1)
	rng := rand.New(rand.NewPCG(9, 9))
	out := make([]share, n)
	var buf [32]byte
	for i := range out {
		r := z.Sample(rng)
		out[i] = share{id: rankID(&buf, r), cat: zipfCategoryNames[r%zipfCategories], ts: day0 + int64(i)*80/1000}
	}
	return out
}

// replay adds shares to c in order after a warm-up over the first warm of
// them, and starts over when they run out with times moved on past the
// last, so that event time keeps going forward.
type replay struct {
	c      *Counts
	shares []share
	i      int
	dt     int64
}

func newReplay(c *Counts, shares []share, warm int) *replay {
	for _, s := range shares[:warm] {
		c.Add(s.id, s.cat, s.ts)
	}
	return &replay{c: c, shares: shares, i: warm}
}

// add adds the next share.
func (r *replay) add() {
	if r.i == len(r.shares) {
		r.i, r.dt = 0, r.dt+r.shares[len(r.shares)-1].ts-day0+1
	}
	s := r.shares[r.i]
	r.c.Add(s.id, s.cat, s.ts+r.dt)
	r.i++
}

// BenchmarkAdd measures Add in the steady state of one partition at the
// design's rate, with the default options: the windows are full, buckets
// expire every second and the candidate sets are full.
func BenchmarkAdd(b *testing.B) {
	// Warm up over more than a minute of event time.
	r := newReplay(New(Options{}), productionStream(2_000_000), 1_000_000)
	for b.Loop() {
		r.add()
	}
}

// BenchmarkTopK measures the top 100 of a full candidate set of each
// window (global and one category), as the trending operator's snapshots
// ask for them, in the steady state of BenchmarkAdd.
func BenchmarkTopK(b *testing.B) {
	c := New(Options{})
	newReplay(c, productionStream(1_200_000), 1_200_000)
	cat := zipfCategoryNames[0]
	for b.Loop() {
		for w := range c.win {
			if len(c.TopK(w, "", 100)) != 100 || len(c.TopK(w, cat, 100)) == 0 {
				b.Fatal("short answer")
			}
		}
	}
}

// sparseStream returns n shares spread evenly over span, as the trending
// operator's BenchmarkOperatorIngest makes them: every other share is of
// a new article, the others of Zipf(1.1)-popular ones, each article in one
// of 8 categories.
func sparseStream(n int, span time.Duration) []share {
	arts := n / 2
	rng := rand.New(rand.NewPCG(uint64(n), 5))
	z := rand.NewZipf(rng, 1.1, 1, uint64(arts-1))
	out := make([]share, n)
	for i := range out {
		a := i / 2
		if i%2 == 1 {
			a = int((z.Uint64()*7919 + 13) % uint64(arts))
		}
		out[i] = share{id: "art-" + strconv.FormatInt(int64(a), 36), cat: zipfCategoryNames[a%zipfCategories], ts: day0 + int64(i)*ms(span)/int64(n)}
	}
	return out
}

// BenchmarkAddSparse measures Add on a sparse stream: 1,000,000 shares
// over 24 hours (about 12 a second, so that nearly every share moves the
// 1m window on a bucket), with a Flush every 20,000 shares as the
// operator's commits make, in the steady state (after 200,000 shares).
func BenchmarkAddSparse(b *testing.B) {
	c := New(Options{})
	r := newReplay(c, sparseStream(1_000_000, 24*time.Hour), 200_000)
	n := 0
	for b.Loop() {
		r.add()
		if n++; n%20_000 == 0 {
			if err := c.Flush(discard{}); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// BenchmarkFlush measures an incremental Flush every 3,125 shares (250 ms,
// the engine's commit interval, at the design's rate of one partition).
func BenchmarkFlush(b *testing.B) {
	c := New(Options{})
	r := newReplay(c, productionStream(2_000_000), 1_000_000)
	m := &countingWriter{Writer: discard{}}
	if err := c.Flush(m); err != nil {
		b.Fatal(err)
	}
	m.n = 0
	flushes := 0
	for b.Loop() {
		b.StopTimer()
		for range 3125 {
			r.add()
		}
		b.StartTimer()
		if err := c.Flush(m); err != nil {
			b.Fatal(err)
		}
		flushes++
	}
	b.ReportMetric(float64(m.n)/float64(flushes), "bytes/flush")
}

type discard struct{}

func (discard) Set(k, v []byte) error         { return nil }
func (discard) Delete(k []byte) error         { return nil }
func (discard) DeleteRange(s, e []byte) error { return nil }

// BenchmarkLoad loads the largest state the default options allow: every
// page of every bucket of the three windows allocated, with counters of
// the size the design's rate gives (about 1, 90 and 1,400 per counter in
// the 1m, 1h and 24h windows), 64 categories, and every candidate set
// full. It reports the stored bytes and the Load time of one partition;
// a node loads its partitions in parallel, one task each.
func BenchmarkLoad(b *testing.B) {
	c := New(Options{})
	fillFull(c)
	ns, stored := flushToPebble(b, c)
	loaded := New(Options{})
	for b.Loop() {
		if err := loaded.Load(ns); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(stored), "stored-bytes")
	b.ReportMetric(float64(c.MemoryBytes()), "memory-bytes")
	if loaded.Mass(2) != c.Mass(2) || loaded.blocks.inUse() != c.blocks.inUse() {
		b.Fatalf("loaded %d blocks, mass %d; want %d, %d", loaded.blocks.inUse(), loaded.Mass(2), c.blocks.inUse(), c.Mass(2))
	}
}

// fillFull fills c as a partition at the design's rate would after a day,
// but with every page allocated and every candidate set full.
func fillFull(c *Counts) {
	rng := rand.New(rand.NewPCG(5, 5))
	wm := day0 + ms(48*time.Hour)
	c.start(wm)
	c.wm = wm
	for w := range c.win {
		win := &c.win[w]
		perBucket := uint64(12_500 * 2 * win.width / 1000) // increments
		mean := perBucket / uint64(c.width)
		for b := win.lo; b <= win.hi; b++ {
			s := win.slot(b)
			c.open(s, b)
			s.overflow = true
			s.mass = perBucket
			win.mass += perBucket
			p := new(page)
			for pi := range c.perBucket / blocksPerPage {
				for j := range p.c {
					p.c[j] = uint32(rng.Uint64N(2*mean + 2))
				}
				p.c[0]++ // no page is all zeros
				c.setPage(win, s, pi, p)
				s.dirtyBits[pi/64] |= 1 << (pi % 64)
				s.dirty = append(s.dirty, int32(pi))
			}
		}
	}
	for i := range c.opts.MaxCategories {
		slot := c.slotFor(fmt.Sprintf("category-%d", i))
		c.cats[slot].lastTS = wm
	}
	var buf [32]byte
	for w := range c.win {
		win := &c.win[w]
		for slot := range win.sets {
			for range c.capacity {
				r := rng.IntN(10_000_000)
				id := rankID(&buf, r)
				ha := articleHash(id)
				var gcols, ccols [MaxDepth]int
				c.cols(keyOf(ha, globalSalt), &gcols)
				c.cols(keyOf(ha, c.salt(slot)), &ccols)
				c.offer(win, slot, ha, id, 1+rng.Uint64N(1_000_000), c.ids.find(ha) >= 0, &gcols, &ccols)
			}
		}
	}
}

// BenchmarkPartitionMemory reports the memory of one partition at the
// product's target of 10,000,000 shares a day on a node of 8 partitions:
// 1,250,000 shares spread evenly over 24 hours of event time, of
// Zipf(1.0)-popular articles among 625,000 or 1,250,000 (5M or 10M over
// the node), each in one of 8 categories, with a Flush every 20,000
// shares as the operator's commits make. It reports MemoryBytes
// (memory-MB), the memory off the Go heap (mapped-MB; packed-MB of it the
// frozen buckets' packed counters), the Go heap the counts hold after a GC
// (heap-MB) and its objects, and the distinct articles shared.
//
//	go test -run '^$' -bench PartitionMemory -benchtime 1x ./operators/internal/sketch/
func BenchmarkPartitionMemory(b *testing.B) {
	const n = 1_250_000
	for _, articles := range []int{625_000, 1_250_000} {
		b.Run(fmt.Sprintf("articles=%d", articles), func(b *testing.B) {
			z := testutil.NewZipf(articles, 1)
			rng := rand.New(rand.NewPCG(uint64(articles), 11))
			ranks := make([]uint32, n)
			seen := make(map[uint32]bool)
			for i := range ranks {
				ranks[i] = uint32(z.Sample(rng))
				seen[ranks[i]] = true
			}
			distinct := len(seen)
			z, seen = nil, nil
			var mem, mapped, packed int
			var heap, objects uint64
			for b.Loop() {
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				c := New(Options{})
				var buf [32]byte
				for i, r := range ranks {
					ts := day0 + int64(i)*ms(24*time.Hour)/n
					c.Add(rankID(&buf, int(r)), zipfCategoryNames[r%zipfCategories], ts)
					if i%20_000 == 19_999 {
						if err := c.Flush(discard{}); err != nil {
							b.Fatal(err)
						}
					}
				}
				runtime.GC()
				runtime.ReadMemStats(&after)
				mem, mapped, packed = c.MemoryBytes(), c.blocks.mapped(), c.blocks.packedMapped()
				for w := range c.win {
					nf, np := 0, 0
					for i := range c.win[w].slots {
						if s := &c.win[w].slots[i]; s.packed != 0 {
							nf, np = nf+1, np+len(c.blocks.packedBytes(s.packed))
						}
					}
					if nf > 0 {
						b.Logf("window %d: %d buckets frozen, %d bytes packed each on average", w, nf, np/nf)
					}
				}
				heap, objects = after.HeapAlloc-before.HeapAlloc, after.HeapObjects-before.HeapObjects
				runtime.KeepAlive(c)
			}
			b.ReportMetric(float64(mem)/(1<<20), "memory-MB")
			b.ReportMetric(float64(heap)/(1<<20), "heap-MB")
			b.ReportMetric(float64(mapped)/(1<<20), "mapped-MB")
			b.ReportMetric(float64(packed)/(1<<20), "packed-MB")
			b.ReportMetric(float64(objects), "heap-objects")
			b.ReportMetric(float64(distinct), "distinct")
		})
	}
}
