package sketch

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/newsflow/newsflow/internal/testutil"
)

// TestPacked round-trips blocks through the packed form: every width from
// all ones (no bits) to 32 bits, sparse and full blocks.
func TestPacked(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var buf []byte
	type block struct {
		vals [blockSize]uint32
		nz   uint64
	}
	var blocks []block
	for _, most := range []uint32{1, 2, 3, 15, 16, 255, 256, 65_535, 65_536, 1<<31 + 5, 1<<32 - 1} {
		for _, density := range []int{1, 7, 40, blockSize} {
			var b block
			for range density {
				j := rng.IntN(blockSize)
				b.vals[j] = 1 + rng.Uint32N(most)
				b.nz |= 1 << j
			}
			j := bitsOf(b.nz)[0]
			b.vals[j] = most // the widest value is there
			blocks = append(blocks, b)
			buf = appendPacked(buf, nonzeroOf(&b.vals, b.nz))
		}
	}
	rest := buf
	for i, b := range blocks {
		var scratch [blockSize]uint32
		var got []uint32
		rest, got = unpack(rest, b.nz, &scratch)
		if want := nonzeroOf(&b.vals, b.nz); !slices.Equal(got, want) {
			t.Fatalf("block %d: unpacked %v, want %v", i, got, want)
		}
	}
	if len(rest) != 0 {
		t.Fatalf("%d bytes left", len(rest))
	}
	// A block of ones takes one byte; 40 counters below 16 take 21.
	var ones, small [blockSize]uint32
	for j := range 40 {
		ones[j], small[j] = 1, uint32(j%16)+1
	}
	if n := len(appendPacked(nil, nonzeroOf(&ones, 1<<40-1))); n != 1 {
		t.Errorf("40 ones packed into %d bytes, want 1", n)
	}
	if n := len(appendPacked(nil, nonzeroOf(&small, 1<<40-1))); n != 21 {
		t.Errorf("40 counters of 1..16 packed into %d bytes, want 21", n)
	}
}

// nonzeroOf returns the counters of vals at the bits of nz, in bit order.
func nonzeroOf(vals *[blockSize]uint32, nz uint64) []uint32 {
	var out []uint32
	for _, j := range bitsOf(nz) {
		out = append(out, vals[j])
	}
	return out
}

func bitsOf(w uint64) []int {
	var out []int
	for j := range blockSize {
		if w&(1<<j) != 0 {
			out = append(out, j)
		}
	}
	return out
}

// freezeStream returns dense shares over 3 hours, so that buckets of the
// 1h and 24h windows are held in blocks, with one in five moved up to 50
// minutes back: they land in frozen buckets and thaw them.
func freezeStream(seed uint64, n int) []share {
	z := testutil.NewZipf(20_000, 1)
	rng := rand.New(rand.NewPCG(seed, 11))
	cats := []string{"", "sports", "politics", "tech"}
	out := make([]share, 0, n)
	for i := range n {
		ts := day0 + int64(i)*ms(3*time.Hour)/int64(n)
		if rng.IntN(5) == 0 {
			ts = max(day0, ts-rng.Int64N(ms(50*time.Minute)))
		}
		out = append(out, share{id: articleID(z.Sample(rng)), cat: cats[rng.IntN(len(cats))], ts: ts})
	}
	return out
}

// TestFreeze feeds the same shares to counts that never freeze and to
// counts that freeze every bucket they may (FreezeAfter 1 ms): they
// answer alike and flush the same bytes throughout, the frozen ones hold
// their invariants, take less memory, and load into counts of either kind
// that answer alike.
func TestFreeze(t *testing.T) {
	shares := freezeStream(1, 120_000)
	ids := streamIDs(shares)
	opts := func(after time.Duration) Options {
		return Options{MaxK: 10, MaxCategories: 4, FreezeAfter: after}
	}
	never, frozen := New(opts(-1)), New(opts(time.Millisecond))
	mn, mf := newMemStore(), newMemStore()
	sawFrozen, sawThawed := 0, 0
	var before []*bucket
	for i, s := range shares {
		before = frozenBuckets(frozen, before[:0])
		apply(never, s)
		apply(frozen, s)
		for _, b := range before {
			if b.live && b.packed == 0 {
				sawThawed++
			}
		}
		if i%1500 != 1499 && i != len(shares)-1 {
			continue
		}
		flushTo(t, never, mn)
		flushTo(t, frozen, mf)
		if !slices.Equal(mn.log, mf.log) {
			t.Fatalf("after %d shares: the freezing counts flushed differently", i+1)
		}
		mn.reset()
		mf.reset()
		sawFrozen = max(sawFrozen, len(frozenBuckets(frozen, nil)))
		if i%15_000 == 14_999 {
			checkBlocks(t, frozen)
			if got, want := answers(frozen, ids), answers(never, ids); got != want {
				t.Fatalf("after %d shares, answers differ:\n%s\nnever frozen:\n%s", i+1, got, want)
			}
		}
	}
	if sawFrozen == 0 || sawThawed == 0 {
		t.Fatalf("%d buckets frozen at most, %d thawed: the stream does not exercise freezing", sawFrozen, sawThawed)
	}
	checkBlocks(t, frozen)
	want := answers(never, ids)
	if got := answers(frozen, ids); got != want {
		t.Fatalf("answers differ at the end:\n%s\nnever frozen:\n%s", got, want)
	}
	if f, nv := frozen.MemoryBytes(), never.MemoryBytes(); f >= nv*3/4 {
		t.Errorf("frozen counts hold %d bytes, never frozen %d: want at most 3/4", f, nv)
	}
	t.Logf("%d buckets frozen at most, %d thaws; memory %d bytes frozen, %d never frozen",
		sawFrozen, sawThawed, frozen.MemoryBytes(), never.MemoryBytes())
	for _, after := range []time.Duration{time.Millisecond, -1} {
		loaded := New(opts(after))
		if err := loaded.Load(mf); err != nil {
			t.Fatal(err)
		}
		checkBlocks(t, loaded)
		if got := answers(loaded, ids); got != want {
			gl, wl := strings.Split(got, "\n"), strings.Split(want, "\n")
			for i := range min(len(gl), len(wl)) {
				if gl[i] != wl[i] {
					t.Fatalf("loaded (freeze after %v): answers differ at line %d:\n%s\nwant\n%s", after, i, gl[i], wl[i])
				}
			}
			t.Fatalf("loaded (freeze after %v): answers differ", after)
		}
		if after > 0 && len(frozenBuckets(loaded, nil)) == 0 {
			t.Fatal("Load froze no bucket")
		}
		loaded.Release()
	}
}

// frozenBuckets appends the frozen buckets of c to dst.
func frozenBuckets(c *Counts, dst []*bucket) []*bucket {
	for w := range c.win {
		for i := range c.win[w].slots {
			if s := &c.win[w].slots[i]; s.packed != 0 {
				dst = append(dst, s)
			}
		}
	}
	return dst
}

// TestFreezeDeclinedOnce: a bucket whose packed form would take as much
// memory as its blocks (here 16 blocks, 1 KiB, against a page) stays in
// blocks, and Flush does not pack it again until one of its counters
// changes.
func TestFreezeDeclinedOnce(t *testing.T) {
	c := New(Options{Width: 1024, Depth: 1, MaxK: 10, FreezeAfter: time.Millisecond,
		Windows: []WindowSpec{{Name: "1h", Size: time.Hour, Buckets: 60}}})
	defer c.Release()
	m := newMemStore()
	for i := range 200 { // more counters than the bucket's cells
		c.Add(articleID(i), "", day0)
	}
	c.Add("later", "", day0+ms(5*time.Minute)) // the first bucket falls behind
	flushTo(t, c, m)
	s := c.win[0].slot(day0 / c.win[0].width)
	if !s.live || !s.overflow || s.packed != 0 || !s.packLarger {
		t.Fatalf("bucket live %v, in blocks %v, packed %d, too small to pack %v: want it in blocks, marked", s.live, s.overflow, s.packed, s.packLarger)
	}
	c.packScratch = nil // freeze sets it: it stays nil unless freeze runs
	flushTo(t, c, m)
	if c.packScratch != nil {
		t.Fatal("Flush packed the unchanged bucket again")
	}
	c.Add(articleID(0), "", day0) // a late share changes it
	if s.packLarger {
		t.Fatal("a change to the bucket did not clear its mark")
	}
	flushTo(t, c, m)
	if !s.packLarger || s.packed != 0 {
		t.Fatalf("after the next Flush: packed %d, marked %v", s.packed, s.packLarger)
	}
	checkBlocks(t, c)
}
