package sketch

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/newsflow/newsflow/internal/testutil"
	"github.com/newsflow/newsflow/state"
	"github.com/newsflow/newsflow/state/statetest"
)

// persistStream returns shares of Zipf-popular articles over 26 hours (so
// that buckets of every window expire), with categories and
// AddToCategory, mostly in time order.
func persistStream(seed uint64, n int) []share {
	z := testutil.NewZipf(5000, 1)
	rng := rand.New(rand.NewPCG(seed, 7))
	cats := []string{"", "", "sports", "politics", "tech", "science", "world"}
	var out []share
	for i := range n {
		ts := day0 + int64(i)*ms(26*time.Hour)/int64(n)
		if rng.IntN(10) == 0 {
			ts = max(0, ts+rng.Int64N(600_001)-300_000)
		}
		s := share{id: articleID(z.Sample(rng)), cat: cats[rng.IntN(len(cats))], ts: ts}
		out = append(out, s)
		if s.cat == "" && rng.IntN(2) == 0 {
			out = append(out, share{id: s.id, cat: "topic" + s.id[:1], ts: ts, only: true})
		}
	}
	return out
}

// smallOptions keep the tests quick: a narrow sketch and small candidate
// sets, so that candidates are evicted and categories are capped.
func smallOptions() Options {
	return Options{Width: 2048, MaxK: 10, MaxCategories: 12}
}

// answers renders every answer c gives for the articles in ids.
func answers(c *Counts, ids []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "watermark %d categories %v\n", c.Watermark(), c.Categories())
	groups := append([]string{""}, c.Categories()...)
	for w := range c.Options().Windows {
		fmt.Fprintf(&b, "window %d mass %d\n", w, c.Mass(w))
		for _, g := range groups {
			fmt.Fprintf(&b, "  top %q: %s\n", g, entriesString(c.TopK(w, g, 1000)))
			for _, id := range ids {
				if e := c.CategoryCount(w, g, id); e.Count > 0 {
					fmt.Fprintf(&b, "  %q %s %+v\n", g, id, e)
				}
			}
		}
	}
	return b.String()
}

func streamIDs(shares []share) []string {
	set := map[string]bool{}
	for _, s := range shares {
		set[s.id] = true
	}
	return slices.Sorted(maps.Keys(set))
}

func openState(t *testing.T) state.Namespace { return statetest.Open(t).Namespace("trending/0") }

func commitFlush(t *testing.T, c *Counts, ns state.Namespace) {
	t.Helper()
	statetest.Commit(t, c, ns)
}

// TestFlushLoad flushes into Pebble as the engine does, and at several
// points loads the committed state into new counts: they answer every
// query as the live ones do, and stay identical under the rest of the
// stream (their Flushes write the same bytes).
func TestFlushLoad(t *testing.T) {
	shares := persistStream(1, 30_000)
	ids := streamIDs(shares)
	ns := openState(t)
	live := New(smallOptions())
	checkpoints := map[int]bool{7_000: true, 20_001: true, len(shares) - 1: true}
	for i, s := range shares {
		apply(live, s)
		if i%2000 != 1999 && !checkpoints[i] {
			continue
		}
		commitFlush(t, live, ns)
		if !checkpoints[i] {
			continue
		}
		loaded := New(smallOptions())
		if err := loaded.Load(ns); err != nil {
			t.Fatal(err)
		}
		// The loaded counts keep every index the live ones keep (the
		// counters each candidate reads, global and category), not only
		// the answers.
		checkCandidates(t, loaded)
		checkBlocks(t, loaded)
		if got, want := answers(loaded, ids), answers(live, ids); got != want {
			t.Fatalf("after %d shares, loaded answers differ:\n%s\nlive:\n%s", i+1, got, want)
		}
		// Both go on with the same shares and flushes.
		a, b := live, loaded
		if i+1 < len(shares) {
			a = New(smallOptions())
			if err := a.Load(ns); err != nil {
				t.Fatal(err)
			}
		}
		ma, mb := newMemStore(), newMemStore()
		for j, s := range shares[i+1:] {
			apply(a, s)
			apply(b, s)
			if j%3000 == 0 || j == len(shares)-i-2 {
				flushTo(t, a, ma)
				flushTo(t, b, mb)
				if !slices.Equal(ma.log, mb.log) {
					t.Fatalf("checkpoint %d, %d shares later: the loaded counts flushed differently", i+1, j+1)
				}
			}
		}
		if answers(a, ids) != answers(b, ids) {
			t.Fatalf("checkpoint %d: answers differ at the end", i+1)
		}
	}
	if live.MemoryBytes() > live.Options().MaxMemoryBytes() {
		t.Fatalf("%d bytes", live.MemoryBytes())
	}
}

// TestDeterminism: the same calls give the same Flush bytes; flushing at
// other points gives the same stored state.
func TestDeterminism(t *testing.T) {
	shares := persistStream(2, 25_000)
	a, b, c := New(smallOptions()), New(smallOptions()), New(smallOptions())
	ma, mb, mc := newMemStore(), newMemStore(), newMemStore()
	for i, s := range shares {
		apply(a, s)
		apply(b, s)
		apply(c, s)
		if i%1000 == 999 {
			flushTo(t, a, ma)
			flushTo(t, b, mb)
		}
		if i%7777 == 0 {
			flushTo(t, c, mc)
		}
	}
	for _, x := range []struct {
		c *Counts
		m *memStore
	}{{a, ma}, {b, mb}, {c, mc}} {
		flushTo(t, x.c, x.m)
	}
	if !slices.Equal(ma.log, mb.log) {
		t.Fatal("two counts fed the same calls flushed different bytes")
	}
	if !maps.EqualFunc(ma.kv, mc.kv, bytes.Equal) {
		t.Fatalf("flushing at other points stored another state: %d and %d keys", len(ma.kv), len(mc.kv))
	}
	ids := streamIDs(shares)
	if answers(a, ids) != answers(c, ids) {
		t.Fatal("answers differ")
	}
}

// TestIncrementalFlush: a Flush writes only what changed.
func TestIncrementalFlush(t *testing.T) {
	c := New(Options{})
	m := newMemStore()
	rng := rand.New(rand.NewPCG(4, 4))
	ts := day0
	for i := range 100_000 {
		ts = day0 + int64(i)*10
		c.Add(articleID(rng.IntN(50_000)), fmt.Sprintf("c%d", rng.IntN(4)), ts)
	}
	flushTo(t, c, m)
	full := m.n
	m.reset()
	flushTo(t, c, m)
	if len(m.log) != 0 {
		t.Fatalf("a Flush without changes wrote %v", m.log)
	}
	// One share of an article that is no candidate: its counters (a page
	// per row, window and key: at most 3 × 2 × 4), its buckets' masses,
	// and its category's time.
	c.Add(articleID(49_999), "c1", ts)
	flushTo(t, c, m)
	pages := 0
	for _, l := range m.log {
		if strings.HasPrefix(l, fmt.Sprintf("set %x", []byte{DefaultPrefix, kindBucket})) && len(strings.Fields(l)[1]) == 2*13 {
			pages++
		}
	}
	t.Logf("full flush %d bytes; after one share %d bytes in %d writes, %d pages", full, m.n, len(m.log), pages)
	if pages == 0 || pages > 24 || len(m.log) > 24+3+1+6+1 || m.n > full/100 {
		t.Fatalf("flush after one share: %d bytes (full %d), %d pages:\n%s", m.n, full, pages, strings.Join(m.log, "\n"))
	}
}

func TestLoadLayout(t *testing.T) {
	c := New(smallOptions())
	c.Add("a", "x", day0)
	m := newMemStore()
	flushTo(t, c, m)
	for _, o := range []Options{
		{Width: 4096, MaxK: 10, MaxCategories: 12},
		{Width: 2048, Depth: 3, MaxK: 10, MaxCategories: 12},
		{Width: 2048, MaxK: 10, MaxCategories: 11},
		{Width: 2048, MaxK: 10, MaxCategories: 12, Windows: DefaultWindows()[:2]},
	} {
		if err := New(o).Load(m); !errors.Is(err, ErrLayoutChanged) {
			t.Errorf("%+v: %v, want ErrLayoutChanged", o, err)
		}
	}
	// Another prefix sees nothing; other candidate set sizes are fine.
	o := smallOptions()
	o.Prefix = 'z'
	other := New(o)
	if err := other.Load(m); err != nil || other.Watermark() != 0 {
		t.Fatalf("other prefix: %v, watermark %d", err, other.Watermark())
	}
	o = smallOptions()
	o.MaxK = 1
	o.CandidatesPerK = 1
	smaller := New(o)
	c.Add("b", "", day0)
	c.Add("b", "", day0)
	flushTo(t, c, m)
	if err := smaller.Load(m); err != nil {
		t.Fatal(err)
	}
	if got := entriesString(smaller.TopK(0, "", 5)); got != "b=2±1 " {
		t.Fatalf("top after loading into a smaller set: %s", got)
	}
}

// TestLoadCorrupt: stored state that does not decode is refused.
func TestLoadCorrupt(t *testing.T) {
	c := New(smallOptions())
	for i := range 100 {
		c.Add(articleID(i%7), "x", day0+int64(i))
	}
	good := newMemStore()
	flushTo(t, c, good)
	kinds := map[byte]int{}
	for k := range good.kv {
		kinds[k[1]]++
	}
	for _, kind := range []byte{kindBucket, kindCategory, kindID, kindSet} {
		if kinds[kind] == 0 {
			t.Fatalf("no keys of kind %c", kind)
		}
		for di, damage := range []func(v []byte) []byte{
			func(v []byte) []byte { return v[:len(v)-1] },
			func([]byte) []byte { return nil },
			func(v []byte) []byte { return append(v, 0x80) },
		} {
			if kind == kindCategory && di == 2 {
				continue // another name
			}
			m := newMemStore()
			maps.Copy(m.kv, good.kv)
			for _, k := range slices.Sorted(maps.Keys(m.kv)) {
				if k[1] == kind {
					m.kv[k] = damage(bytes.Clone(m.kv[k]))
					break
				}
			}
			if err := New(smallOptions()).Load(m); err == nil {
				t.Errorf("kind %c: damaged state loaded", kind)
			} else if !errors.Is(err, ErrCorrupt) {
				t.Errorf("kind %c: %v, want ErrCorrupt", kind, err)
			}
		}
	}
}

func TestPageEncoding(t *testing.T) {
	var dense, sparse, big [PageSize]uint32
	for i := range dense {
		dense[i] = uint32(i % 100)
	}
	sparse[0], sparse[17], sparse[PageSize-1] = 1, 300, 7
	for i := range big {
		big[i] = 1<<32 - 1
	}
	for name, p := range map[string]*[PageSize]uint32{"dense": &dense, "sparse": &sparse, "big": &big} {
		b := encodePage(p)
		var q [PageSize]uint32
		if nz, err := decodePage(b, &q); err != nil || nz != nonzero(p) || q != *p {
			t.Errorf("%s: %d bytes, %v %v", name, len(b), nz, err)
		}
	}
	if b := encodePage(&sparse); len(b) > 10 {
		t.Errorf("sparse page in %d bytes", len(b))
	}
}

func FuzzDecodePage(f *testing.F) {
	var p [PageSize]uint32
	p[3], p[200] = 5, 1<<20
	f.Add(encodePage(&p))
	for i := range p {
		p[i] = uint32(i)
	}
	f.Add(encodePage(&p))
	f.Add([]byte{pageSparse, 0xff, 0x01, 0x01})
	f.Fuzz(func(t *testing.T, b []byte) {
		var q [PageSize]uint32
		nz, err := decodePage(b, &q)
		if err != nil {
			return
		}
		var r [PageSize]uint32
		nz2, err := decodePage(encodePage(&q), &r)
		if err != nil || nz != nz2 || r != q {
			t.Fatalf("re-encoding %x: %v", b, err)
		}
	})
}

// TestPageEncodingShorter: appendPage picks the shorter encoding (dense
// on a tie) at every density, including where it decides by the count of
// nonzero counters alone.
func TestPageEncodingShorter(t *testing.T) {
	if maxGapLen != uvarintLen(PageSize-1) {
		t.Fatalf("maxGapLen %d, want %d", maxGapLen, uvarintLen(PageSize-1))
	}
	rng := rand.New(rand.NewPCG(8, 8))
	for i := range 3000 {
		var p [PageSize]uint32
		nz := rng.IntN(PageSize + 1)
		if i < PageSize+1 {
			nz = i
		}
		for _, j := range rng.Perm(PageSize)[:nz] {
			p[j] = uint32(1 + rng.Uint64N([]uint64{1, 127, 1 << 14, 1<<32 - 1}[rng.IntN(4)]))
		}
		dense := append([]byte{pageDense}, nil...)
		for _, v := range p {
			dense = binary.AppendUvarint(dense, uint64(v))
		}
		sparse, gap := []byte{pageSparse}, 0
		for _, v := range p {
			if v == 0 {
				gap++
				continue
			}
			sparse = binary.AppendUvarint(binary.AppendUvarint(sparse, uint64(gap)), uint64(v))
			gap = 0
		}
		want := dense
		if len(sparse) < len(dense) {
			want = sparse
		}
		if got := encodePage(&p); !bytes.Equal(got, want) {
			t.Fatalf("%d nonzero: %d bytes, want %d", nz, len(got), len(want))
		}
	}
}
