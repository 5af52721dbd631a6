package sketch

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// checkBlocks checks c's counter blocks against its totals: each window's
// totals are the sums of its live buckets' counters, only live buckets
// hold blocks, each in the narrowest class its largest counter has needed,
// with its nonzero bits and owner right (checkCandidates), and the slabs
// hold no more free slots than compaction leaves.
//
// It checks every invariant of the blocks and slabs in one pass
// (cyclomatic 41): one branch per invariant.
func checkBlocks(t *testing.T, c *Counts) {
	t.Helper()
	checkCandidates(t, c)
	nw := len(c.win)
	blocks := 0
	for w := range c.win {
		win := &c.win[w]
		sum := make([]uint64, c.depth*c.width)
		for i := range win.slots {
			s := &win.slots[i]
			if s.live && !s.overflow {
				for p, cl := range s.cells {
					if s.find(int(cl.i)) != p || cl.v == 0 {
						t.Fatalf("window %d bucket %d: cell %d (%+v) found at %d", w, s.id, p, cl, s.find(int(cl.i)))
					}
					sum[cl.i] += uint64(cl.v)
				}
				n := 0
				for _, x := range s.index {
					if x != 0 {
						n++
					}
				}
				if n != len(s.cells) || len(s.cells) > c.maxCells {
					t.Fatalf("window %d bucket %d: %d cells, %d indexed", w, s.id, len(s.cells), n)
				}
			} else if len(s.cells) > 0 {
				t.Fatalf("window %d bucket %d (live %v): cells and blocks", w, s.id, s.live)
			}
			if s.packed != 0 {
				if !s.live || !s.overflow {
					t.Fatalf("window %d: bucket %d (live %v, in blocks %v) is frozen", w, s.id, s.live, s.overflow)
				}
				forFrozen(t, c, s, func(bi int, vals *[blockSize]uint32) {
					for j, v := range vals {
						sum[bi*blockSize+j] += uint64(v)
					}
				})
			}
			for bi, r := range s.refs {
				if r == 0 {
					continue
				}
				if !s.live || !s.overflow || s.packed != 0 {
					t.Fatalf("window %d: bucket %d (live %v) holds block %d", w, s.id, s.live, bi)
				}
				blocks++
				var vals [blockSize]uint32
				c.blocks.read(r, &vals)
				for j, v := range vals {
					sum[bi*blockSize+j] += uint64(v)
				}
			}
		}
		for i, v := range sum {
			if got := c.total[i*nw+w]; got != v {
				t.Fatalf("window %d counter %d: total %d, buckets hold %d", w, i, got, v)
			}
		}
	}
	if got := c.blocks.inUse(); got != blocks {
		t.Fatalf("%d blocks in use, buckets hold %d", got, blocks)
	}
	// Flush encodes each page from its blocks or cells as appendPage
	// would.
	for w := range c.win {
		for i := range c.win[w].slots {
			s := &c.win[w].slots[i]
			if !s.live {
				continue
			}
			if !s.overflow {
				sorted := c.sortCells(s)
				for pi := range c.perBucket / blocksPerPage {
					var p page
					for _, cl := range s.cells {
						if int(cl.i)/PageSize == pi {
							p.c[int(cl.i)%PageSize] = cl.v
						}
					}
					if p.mark(); p.nonzero() == 0 {
						continue
					}
					if got, want := c.appendCellPage(nil, sorted, pi), appendPage(nil, &p); !bytes.Equal(got, want) {
						t.Fatalf("window %d bucket %d page %d: encoded %x from cells, want %x", w, s.id, pi, got, want)
					}
				}
				continue
			}
			if s.packed != 0 {
				continue // no page to store: frozen only once stored
			}
			for pi := range len(s.refs) / blocksPerPage {
				if !s.pageAllocated(pi) {
					continue
				}
				got := c.appendPage(nil, s, pi)
				if want := appendPage(nil, c.pageOf(s, pi)); !bytes.Equal(got, want) {
					t.Fatalf("window %d bucket %d page %d: encoded %x, want %x", w, s.id, pi, got, want)
				}
			}
		}
	}
	for class, s := range map[int]interface{ stats() (int, int, int) }{8: &c.blocks.b8, 16: &c.blocks.b16, 32: &c.blocks.b32} {
		used, nfree, perChunk := s.stats()
		if most := max(perChunk, c.blocks.keep); nfree > most {
			t.Fatalf("%d-bit slab: %d free slots of %d, more than it keeps (%d)", class, nfree, used, most)
		}
	}
}

func (s *slab[T]) stats() (used, nfree, perChunk int) {
	return int(s.used), s.nfree, int(s.perChunk())
}

// TestBlocks counts shares whose counters outgrow 8 and 16 bits next to
// many that stay small, over enough buckets that blocks expire, move to
// wider classes and are compacted: the totals stay the sums of the
// buckets, and Flush and Load keep the answers and the next Flush.
func TestBlocks(t *testing.T) {
	o := Options{
		Windows: []WindowSpec{{Name: "s", Size: 4 * time.Second, Buckets: 4}, {Name: "m", Size: time.Minute, Buckets: 3}},
		Width:   16384, // more blocks than a chunk expire at once
		Depth:   2,
		MaxK:    5,
	}
	c := New(o)
	defer c.Release()
	m := newMemStore()
	rng := rand.New(rand.NewPCG(1, 2))
	var ids []string
	ts := day0
	for sec := range 50 {
		// A hot article whose counters pass 65,535 in a bucket of the
		// second window, warm ones that pass 255 in the first, and a
		// spread of cold ones that touch many blocks once.
		n := 0
		if sec == 3 {
			n = 70_000
		}
		for range n {
			c.Add("hot", "a", ts)
		}
		for i := range 300 {
			c.Add(fmt.Sprintf("warm-%d", i%3), "b", ts+int64(i))
		}
		for i := range 1000 + rng.IntN(3000) {
			id := fmt.Sprintf("cold-%d-%d", sec, i)
			ids = append(ids, id)
			c.Add(id, "", ts+rng.Int64N(1000))
		}
		checkBlocks(t, c)
		flushTo(t, c, m)
		if sec%7 == 3 {
			loaded := New(o)
			if err := loaded.Load(m); err != nil {
				t.Fatal(err)
			}
			checkBlocks(t, loaded)
			want := answers(c, append(ids[len(ids)-50:], "hot", "warm-0", "warm-1", "warm-2"))
			if got := answers(loaded, append(ids[len(ids)-50:], "hot", "warm-0", "warm-1", "warm-2")); got != want {
				t.Fatalf("second %d: loaded answers differ:\n%s\nwant\n%s", sec, got, want)
			}
			// The same next Flush.
			c.Add("after", "b", ts+999)
			loaded.Add("after", "b", ts+999)
			m.reset()
			flushTo(t, c, m)
			log := m.log
			other := newMemStore()
			other.kv = m.kv
			flushTo(t, loaded, other)
			if fmt.Sprint(other.log) != fmt.Sprint(log) {
				t.Fatalf("second %d: loaded counts flush\n%v\nwant\n%v", sec, other.log, log)
			}
			m.reset()
			loaded.Release()
		}
		if sec == 3 {
			if c.blocks.b32.used == 0 || c.blocks.b16.used == 0 {
				t.Fatalf("no 16- or 32-bit blocks: %d, %d", c.blocks.b16.used, c.blocks.b32.used)
			}
			if e := c.Count(1, "hot"); e.Count < 70_000 {
				t.Fatalf("hot: %+v", e)
			}
		}
		ts += 1000
	}
	// A minute later every bucket has expired: a share takes at most a
	// block per row in each window (its bucket's ring slot was dense), and
	// the chunks but a spare per class are returned.
	c.Add("last", "", ts+ms(time.Minute))
	checkBlocks(t, c)
	if got := c.blocks.inUse(); got > len(o.Windows)*o.Depth {
		t.Fatalf("%d blocks in use, want at most %d", got, len(o.Windows)*o.Depth)
	}
	if got, most := c.blocks.b8.mapped()+c.blocks.b16.mapped()+c.blocks.b32.mapped(), 2*(c.blocks.b8.chunkBytes()+c.blocks.b16.chunkBytes()+c.blocks.b32.chunkBytes()); got > most {
		t.Fatalf("%d bytes mapped, want at most %d", got, most)
	}
}

// TestSaturation: a counter stops at 2^32-1 (see Limits), in cells and in
// blocks.
func TestSaturation(t *testing.T) {
	for _, blocks := range []bool{false, true} {
		c := New(Options{Width: PageSize, Depth: 1, Windows: []WindowSpec{{Name: "h", Size: time.Hour, Buckets: 1}}})
		defer c.Release()
		c.Add("a", "", day0)
		s := c.win[0].slot(day0 / ms(time.Hour))
		var cols [MaxDepth]int
		c.cols(keyOf(articleHash("a"), globalSalt), &cols)
		// Set the counter near saturation, as that many Adds would.
		bi := cols[0] / blockSize
		if blocks {
			c.toBlocks(s)
			c.blocks.set(&s.refs[bi], s.owner+uint32(bi), cols[0]%blockSize, math.MaxUint32-1)
		} else {
			s.cells[s.find(cols[0])].v = math.MaxUint32 - 1
		}
		c.total[cols[0]] = math.MaxUint32 - 1
		for range 3 {
			c.Add("a", "", day0)
		}
		got := uint32(0)
		if blocks {
			got = c.blocks.get(s.refs[bi], cols[0]%blockSize)
		} else {
			got = s.cells[s.find(cols[0])].v
		}
		if got != math.MaxUint32 {
			t.Fatalf("blocks %v: counter %d, want %d", blocks, got, uint32(math.MaxUint32))
		}
		checkBlocks(t, c)
	}
}

// TestRelease: Release returns the counters' memory; the queries answer
// as before, and Load makes the counts whole again.
func TestRelease(t *testing.T) {
	c := newCounts(t, Options{})
	m := newMemStore()
	shares := persistStream(3, 3000)
	for _, s := range shares {
		apply(c, s)
	}
	flushTo(t, c, m)
	ids := streamIDs(shares)
	want := answers(c, ids)
	c.Release()
	if c.blocks.mapped() != 0 || c.blocks.inUse() != 0 {
		t.Fatalf("after Release: %d bytes mapped, %d blocks", c.blocks.mapped(), c.blocks.inUse())
	}
	if got := answers(c, ids); got != want {
		t.Fatalf("answers after Release differ")
	}
	if err := c.Load(m); err != nil {
		t.Fatal(err)
	}
	checkBlocks(t, c)
	if got := answers(c, ids); got != want {
		t.Fatalf("answers after Release and Load differ")
	}
	c.Release()
	c.Release()
}

// TestSlabCompact allocates and releases blocks at random, with bursts of
// each, and compacts as Add does: every block keeps its counters and
// owner wherever it moves, and the slab maps no more than its
// blocks need, a chunk of free slots and two more chunks.
func TestSlabCompact(t *testing.T) {
	s := &newBlocks().b16
	defer s.drop()
	rng := rand.New(rand.NewPCG(7, 7))
	refs := map[uint32]uint32{} // owner → slot
	var owners []uint32
	next := uint32(0)
	check := func() {
		t.Helper()
		for _, o := range owners {
			slot := refs[o]
			if *s.ownerOf(slot) != o {
				t.Fatalf("owner %d in slot %d: owner %d", o, slot, *s.ownerOf(slot))
			}
			for j, v := range s.counters(slot) {
				if v != uint16(o+uint32(j)) {
					t.Fatalf("owner %d counter %d: %d", o, j, v)
				}
			}
		}
		if most := (len(owners)/int(s.perChunk()) + 4) * s.chunkBytes(); s.mapped() > most {
			t.Fatalf("%d blocks in %d bytes, want at most %d", len(owners), s.mapped(), most)
		}
	}
	for round := range 200 {
		grow := round%40 < 20
		for range rng.IntN(3000) {
			if grow || len(owners) == 0 {
				o := next
				next++
				slot := s.alloc(o)
				for j := range s.counters(slot) {
					s.set(slot, j, o+uint32(j))
				}
				refs[o] = slot
				owners = append(owners, o)
				continue
			}
			i := rng.IntN(len(owners))
			o := owners[i]
			owners[i] = owners[len(owners)-1]
			owners = owners[:len(owners)-1]
			s.clear(refs[o])
			s.release(refs[o])
			delete(refs, o)
		}
		if s.nfree > int(s.perChunk()) {
			s.compact(class16, func(owner uint32, r blockRef) {
				if r.class() != class16 {
					t.Fatalf("moved to class %d", r.class())
				}
				refs[owner] = r.slot()
			})
		}
		check()
	}
}

// forFrozen calls fn with the counters of each block of frozen bucket s
// that has a nonzero bit, and checks that the packed form holds exactly
// its nonzero counters and ends with the last block.
func forFrozen(t *testing.T, c *Counts, s *bucket, fn func(bi int, vals *[blockSize]uint32)) {
	t.Helper()
	b := c.blocks.packedBytes(s.packed)
	var vals [blockSize]uint32
	for bi, nz := range s.nz {
		if nz == 0 {
			continue
		}
		if s.refs[bi] != 0 {
			t.Fatalf("frozen bucket %d holds block %d", s.id, bi)
		}
		if len(b) == 0 {
			t.Fatalf("frozen bucket %d: packed form ends before block %d", s.id, bi)
		}
		var packed [blockSize]uint32
		var nzVals []uint32
		b, nzVals = unpack(b, nz, &packed)
		vals = [blockSize]uint32{}
		for i, j := range bitsOf(nz) {
			if nzVals[i] == 0 {
				t.Fatalf("frozen bucket %d block %d: counter %d is 0, nonzero bits %x", s.id, bi, j, nz)
			}
			vals[j] = nzVals[i]
		}
		fn(bi, &vals)
	}
	if len(b) != 0 {
		t.Fatalf("frozen bucket %d: %d bytes packed beyond its blocks", s.id, len(b))
	}
}
