package sketch

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestSizes(t *testing.T) {
	for _, tc := range []struct {
		opts         Options
		depth, width int
	}{
		{Options{}, 4, 16384},
		{DefaultOptions(), 4, 16384},
		{Options{Epsilon: 0.001}, 4, 4096},   // e/0.001 = 2718.3
		{Options{Epsilon: 0.5}, 4, PageSize}, // at least a page
		{Options{Delta: 0.01}, 5, 16384},     // ln 100 = 4.6
		{Options{Delta: 0.5}, 1, 16384},      // ln 2 = 0.69
		{Options{Width: 1024, Depth: 2}, 2, 1024},
		{Options{Epsilon: 1e-5, Width: 512}, 4, 512}, // Width wins
	} {
		d, w := tc.opts.Sizes()
		if d != tc.depth || w != tc.width {
			t.Errorf("%+v: depth %d width %d, want %d %d", tc.opts, d, w, tc.depth, tc.width)
		}
		if err := tc.opts.Validate(); err != nil {
			t.Errorf("%+v: %v", tc.opts, err)
		}
	}
}

func TestValidate(t *testing.T) {
	win := func(ws ...WindowSpec) Options { return Options{Windows: ws} }
	for _, o := range []Options{
		{Epsilon: -1}, {Epsilon: 1}, {Epsilon: 1e-9}, // width beyond MaxWidth
		{Delta: -0.1}, {Delta: 1}, {Delta: 1e-9}, // depth beyond MaxDepth
		{Width: 100}, {Width: 128}, {Width: 3000}, {Width: MaxWidth * 2}, {Width: -1},
		{Depth: -1}, {Depth: MaxDepth + 1},
		{MaxK: -1}, {CandidatesPerK: -1}, {CandidatesPerK: 65},
		{MaxCategories: -1}, {MaxCategories: MaxCategories + 1},
		{MaxIDLen: -1}, {MaxIDLen: MaxIDLen + 1},
		{MaxK: 100_000, CandidatesPerK: 64},
		win(WindowSpec{Size: time.Minute, Buckets: 60}),
		win(WindowSpec{Name: "a", Size: time.Minute, Buckets: 60}, WindowSpec{Name: "a", Size: time.Hour, Buckets: 60}),
		win(WindowSpec{Name: "a", Size: time.Minute, Buckets: 0}),
		win(WindowSpec{Name: "a", Size: time.Minute, Buckets: MaxBuckets + 1}),
		win(WindowSpec{Name: "a", Size: 0, Buckets: 1}),
		win(WindowSpec{Name: "a", Size: time.Second, Buckets: 7}),
		win(WindowSpec{Name: "a", Size: time.Millisecond, Buckets: 2}),
	} {
		err := o.Validate()
		if !errors.Is(err, ErrInvalidOptions) {
			t.Errorf("%+v: %v, want ErrInvalidOptions", o, err)
			continue
		}
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("New(%+v) did not panic", o)
				}
			}()
			New(o)
		}()
	}
	if err := (Options{}).Validate(); err != nil {
		t.Fatal(err)
	}
	if o := New(Options{}).Options(); o.MaxK != DefaultMaxK || len(o.Windows) != 3 || o.Prefix != DefaultPrefix {
		t.Fatalf("defaults not filled in: %+v", o)
	}
}

// newCounts returns counts with the default windows and small sketches.
func newCounts(t testing.TB, o Options) *Counts {
	t.Helper()
	if o.Width == 0 {
		o.Width = 4096
	}
	return New(o)
}

// TestWindowExpiry follows one share through the default windows: it
// leaves each window exactly when the watermark moves past its bucket.
func TestWindowExpiry(t *testing.T) {
	c := newCounts(t, Options{})
	ts := day0 + ms(10*time.Hour+7*time.Minute+13*time.Second+500*time.Millisecond)
	if !c.Add("a", "sports", ts) {
		t.Fatal("Add refused")
	}
	for w, spec := range c.Options().Windows {
		width := spec.Width().Milliseconds()
		gone := (ts/width + int64(spec.Buckets)) * width // first watermark without a's bucket
		// Move the watermark to just before, then to the expiry, with
		// shares of another article.
		c.Add("b", "", gone-1)
		if got := c.Count(w, "a"); got.Count != 1 {
			t.Fatalf("%s at %d ms before expiry: count %+v, want 1", spec.Name, 1, got)
		}
		if got := c.CategoryCount(w, "sports", "a"); got.Count != 1 {
			t.Fatalf("%s: category count %+v, want 1", spec.Name, got)
		}
		if top := c.TopK(w, "sports", 10); len(top) != 1 || top[0].ArticleID != "a" || top[0].Count != 1 {
			t.Fatalf("%s: top %v", spec.Name, entriesString(top))
		}
		c.Add("b", "", gone)
		if got := c.Count(w, "a"); got.Count != 0 {
			t.Fatalf("%s at expiry: count %+v, want 0", spec.Name, got)
		}
		if top := c.TopK(w, "", 10); slices.ContainsFunc(top, func(e Entry) bool { return e.ArticleID == "a" }) {
			t.Fatalf("%s: expired a still in top %v", spec.Name, entriesString(top))
		}
		// Longer windows still count it.
		for w2 := w + 1; w2 < len(c.Options().Windows); w2++ {
			if got := c.Count(w2, "a"); got.Count != 1 {
				t.Fatalf("%s expired, %s: count %+v, want 1", spec.Name, c.Options().Windows[w2].Name, got)
			}
		}
	}
	if !c.TooOld(ts) || c.Add("a", "", ts) {
		t.Fatal("a share older than every window was applied")
	}
	if cats := c.Categories(); len(cats) != 0 {
		t.Fatalf("categories %v after their shares expired", cats)
	}
}

// randomShares returns n shares of articles a0..a(articles-1) over span
// from day0, in random time order. Some have a category; some without one
// are followed by an AddToCategory to "topic" (as AddToCategory requires,
// right after their Add).
func randomShares(seed uint64, n, articles int, span time.Duration) []share {
	rng := rand.New(rand.NewPCG(seed, 1))
	cats := []string{"", "", "sports", "politics", "tech"}
	out := make([]share, 0, n)
	for range n {
		s := share{
			id:  fmt.Sprintf("a%d", min(rng.IntN(articles), rng.IntN(articles))),
			cat: cats[rng.IntN(len(cats))],
			ts:  day0 + rng.Int64N(ms(span)),
		}
		out = append(out, s)
		if s.cat == "" && rng.IntN(3) == 0 {
			out = append(out, share{id: s.id, cat: "topic", ts: s.ts, only: true})
		}
	}
	return out
}

// sortShares sorts shares by time, keeping each AddToCategory after its Add.
func sortShares(shares []share) []share {
	var groups [][]share
	for _, s := range shares {
		if s.only {
			groups[len(groups)-1] = append(groups[len(groups)-1], s)
		} else {
			groups = append(groups, []share{s})
		}
	}
	slices.SortStableFunc(groups, func(a, b []share) int { return int(a[0].ts - b[0].ts) })
	return slices.Concat(groups...)
}

// checkExact compares every estimate with the reference model, which they
// must equal: few articles in a wide sketch do not collide.
func checkExact(t *testing.T, c *Counts, e *exact, ids []string) {
	t.Helper()
	cats := append([]string{""}, c.Categories()...)
	for w := range c.Options().Windows {
		for _, cat := range cats {
			var want []Entry
			for _, id := range ids {
				x := e.count(w, cat, id)
				if got := c.CategoryCount(w, cat, id); got.Count != x {
					t.Fatalf("window %d category %q %s: %+v, want %d", w, cat, id, got, x)
				}
				if x > 0 {
					want = append(want, Entry{ArticleID: id, Count: x})
				}
			}
			slices.SortFunc(want, func(a, b Entry) int {
				if a.Count != b.Count {
					return int(b.Count) - int(a.Count)
				}
				return strings.Compare(a.ArticleID, b.ArticleID)
			})
			got := c.TopK(w, cat, 1000)
			for i := range got {
				got[i].Bound = 0
			}
			if !slices.Equal(got, want[:min(len(want), c.Options().Capacity())]) {
				t.Fatalf("window %d category %q: top\n%v\nwant\n%v", w, cat, entriesString(got), entriesString(want))
			}
		}
	}
}

// TestOutOfOrder applies the same shares sorted by time and shuffled: a
// share counts in every window that covers its bucket at the watermark,
// whatever order it arrives in.
func TestOutOfOrder(t *testing.T) {
	shares := randomShares(1, 5000, 40, 3*time.Hour)
	sorted := sortShares(shares)
	var ids []string
	for i := range 40 {
		ids = append(ids, fmt.Sprintf("a%d", i))
	}
	for name, order := range map[string][]share{"sorted": sorted, "shuffled": shares} {
		t.Run(name, func(t *testing.T) {
			c := newCounts(t, Options{MaxK: 50})
			e := &exact{opts: c.Options()}
			for i, s := range order {
				applied := apply(c, s)
				if applied != !e.tooOld(s.ts) {
					t.Fatalf("share %d (%+v): applied %v", i, s, applied)
				}
				e.add(s)
				if i%997 == 0 {
					checkExact(t, c, e, ids)
				}
			}
			checkExact(t, c, e, ids)
		})
	}
}

// tooOld is TooOld in the reference model, before s is added.
func (e *exact) tooOld(ts int64) bool {
	if len(e.shares) == 0 {
		return ts < 0
	}
	for _, spec := range e.opts.withDefaults().Windows {
		width := spec.Width().Milliseconds()
		if ts/width >= max(e.wm, ts)/width-int64(spec.Buckets)+1 {
			return false
		}
	}
	return true
}

func TestTooOld(t *testing.T) {
	c := newCounts(t, Options{})
	if !c.TooOld(-1) || c.Add("a", "", -1) {
		t.Fatal("negative time accepted")
	}
	wm := day0 + ms(30*time.Hour)
	c.Add("a", "", wm)
	m := newMemStore()
	flushTo(t, c, m)
	day := ms(24 * time.Hour)
	width := ms(15 * time.Minute)
	oldest := (wm/width - 95) * width // first ms of the 24h window's oldest bucket
	if c.TooOld(oldest) || !c.TooOld(oldest-1) {
		t.Fatalf("TooOld around the oldest bucket %d (watermark %d, day %d)", oldest, wm, day)
	}
	m.reset()
	if c.Add("b", "x", oldest-1) || c.AddToCategory("b", "x", oldest-1) {
		t.Fatal("share older than every window applied")
	}
	flushTo(t, c, m)
	if len(m.log) != 0 || c.Count(2, "b").Count != 0 || len(c.Categories()) != 0 {
		t.Fatalf("a refused share changed state: %v", m.log)
	}
	// Within the 24h window only.
	if !c.Add("b", "x", oldest) {
		t.Fatal("share in the 24h window refused")
	}
	if c.Count(2, "b").Count != 1 || c.Count(1, "b").Count != 0 || c.Count(0, "b").Count != 0 {
		t.Fatal("old share counted in the wrong windows")
	}
}

func TestCategories(t *testing.T) {
	c := newCounts(t, Options{})
	ts := day0
	c.Add("a", "sports", ts)
	c.Add("a", "sports", ts+1)
	c.Add("a", "", ts+2)
	if !c.AddToCategory("a", "politics", ts+2) {
		t.Fatal("AddToCategory refused")
	}
	c.Add("b", "politics", ts+3)
	if c.AddToCategory("a", "", ts) {
		t.Fatal("AddToCategory to the global group applied")
	}
	for w := range c.Options().Windows {
		for _, tc := range []struct {
			cat, id string
			want    uint64
		}{
			{"", "a", 3}, {"", "b", 1}, {"sports", "a", 2}, {"politics", "a", 1}, {"politics", "b", 1},
			{"sports", "b", 0}, {"nope", "a", 0},
		} {
			if got := c.CategoryCount(w, tc.cat, tc.id); got.Count != tc.want {
				t.Errorf("window %d %q %s: %+v, want %d", w, tc.cat, tc.id, got, tc.want)
			}
		}
		if got := entriesString(c.TopK(w, "politics", 10)); got != "a=1±1 b=1±1 " {
			t.Errorf("politics top: %s", got)
		}
		if got := entriesString(c.TopK(w, "", 10)); got != "a=3±1 b=1±1 " {
			t.Errorf("global top: %s", got)
		}
		if top := c.TopK(w, "nope", 10); top != nil {
			t.Errorf("unknown category: %v", top)
		}
		if top := c.TopK(w, "", 1); len(top) != 1 {
			t.Errorf("k=1: %v", top)
		}
	}
	if got := c.Categories(); !slices.Equal(got, []string{"politics", "sports"}) {
		t.Fatalf("categories %v", got)
	}
	// Mass: 4 shares counted globally, 3 with a category, 1 AddToCategory.
	if m := c.Mass(0); m != 8 {
		t.Fatalf("mass %d, want 8", m)
	}
}

func TestCategoryCap(t *testing.T) {
	c := newCounts(t, Options{MaxCategories: 2, MaxIDLen: 8})
	ts := day0
	c.Add("x", "c1", ts)
	c.Add("x", "c2", ts)
	c.Add("y", "c3", ts) // beyond the cap: counted globally only
	c.Add("y", "long-category", ts)
	if c.AddToCategory("y", "c3", ts) {
		t.Fatal("AddToCategory beyond the cap applied")
	}
	if got := c.Categories(); !slices.Equal(got, []string{"c1", "c2"}) {
		t.Fatalf("categories %v", got)
	}
	if c.Count(0, "y").Count != 2 || c.CategoryCount(0, "c3", "y").Count != 0 || c.TopK(0, "c3", 5) != nil {
		t.Fatal("a category beyond the cap was counted")
	}
	// Once every share of c1 and c2 has expired, c3 gets a slot.
	later := ts + ms(24*time.Hour+15*time.Minute)
	c.Add("y", "c3", later)
	if got := c.Categories(); !slices.Equal(got, []string{"c3"}) {
		t.Fatalf("categories after expiry %v", got)
	}
	if c.CategoryCount(2, "c3", "y").Count != 1 || c.CategoryCount(2, "c1", "x").Count != 0 {
		t.Fatal("counts after a slot was reused")
	}
}

// TestLongID: an article id longer than MaxIDLen is counted but never
// reported by TopK.
func TestLongID(t *testing.T) {
	c := newCounts(t, Options{MaxIDLen: 10})
	long := strings.Repeat("z", 11)
	c.Add(long, "c", day0)
	c.Add(long, "c", day0)
	c.Add("short", "c", day0)
	if got := c.Count(0, long); got.Count != 2 {
		t.Fatalf("long id: %+v", got)
	}
	if got := entriesString(c.TopK(0, "", 10)); got != "short=1±1 " {
		t.Fatalf("top: %s", got)
	}
	if got := entriesString(c.TopK(0, "c", 10)); got != "short=1±1 " {
		t.Fatalf("category top: %s", got)
	}
}

// TestDecay: after older shares expire, the candidates are re-estimated,
// so the top reflects what is left.
func TestDecay(t *testing.T) {
	c := newCounts(t, Options{MaxK: 1, CandidatesPerK: 1})
	for range 10 {
		c.Add("old", "", day0)
	}
	for range 5 {
		c.Add("new", "", day0+ms(30*time.Second))
	}
	if got := entriesString(c.TopK(0, "", 5)); got != "old=10±1 " {
		t.Fatalf("top before expiry: %s", got)
	}
	// old's bucket leaves the 1m window; new's does not. new was not a
	// candidate, and gets no share: it is not reported (see the package
	// documentation), but old is gone.
	c.AddToCategory("other", "c", day0+ms(time.Minute))
	if got := entriesString(c.TopK(0, "", 5)); got != "" {
		t.Fatalf("top after expiry: %s", got)
	}
	c.Add("new", "", day0+ms(time.Minute))
	if got := entriesString(c.TopK(0, "", 5)); got != "new=6±1 " {
		t.Fatalf("top after a new share: %s", got)
	}
	if got := entriesString(c.TopK(1, "", 5)); got != "old=10±1 " {
		t.Fatalf("1h top: %s", got)
	}
}

// TestMemoryBounded feeds far more distinct articles and categories than
// the candidate sets hold: memory stays under MaxMemoryBytes.
func TestMemoryBounded(t *testing.T) {
	o := Options{
		Windows:       []WindowSpec{{Name: "a", Size: time.Minute, Buckets: 6}, {Name: "b", Size: 10 * time.Minute, Buckets: 5}},
		Width:         PageSize * 4,
		Depth:         3,
		MaxK:          5,
		MaxCategories: 4,
		MaxIDLen:      20,
	}
	c := New(o)
	limit := c.Options().MaxMemoryBytes()
	rng := rand.New(rand.NewPCG(3, 3))
	m := newMemStore()
	peak := 0
	for i := range 300_000 {
		id := fmt.Sprintf("article-%d-%d", i, rng.IntN(1000))
		c.Add(id, fmt.Sprintf("cat%d", rng.IntN(10)), day0+int64(i)*7)
		if i%5000 == 0 {
			peak = max(peak, c.MemoryBytes())
			if c.MemoryBytes() > limit {
				t.Fatalf("after %d shares: %d bytes, more than MaxMemoryBytes %d", i, c.MemoryBytes(), limit)
			}
			flushTo(t, c, m)
		}
	}
	if c.ids.len() > len(c.win)*(o.MaxCategories+1)*c.capacity {
		t.Fatalf("%d ids kept", c.ids.len())
	}
	t.Logf("peak %d bytes of at most %d", peak, limit)
}

// TestConcurrentQueries: the query methods only read, so they may run
// concurrently with each other (run with -race).
func TestConcurrentQueries(t *testing.T) {
	c := newCounts(t, Options{MaxK: 5})
	for _, s := range randomShares(5, 3000, 30, time.Hour) {
		apply(c, s)
	}
	want := answers(c, streamIDs(randomShares(5, 3000, 30, time.Hour)))
	got := make([]string, 4)
	done := make(chan int)
	for g := range got {
		go func() {
			got[g] = answers(c, streamIDs(randomShares(5, 3000, 30, time.Hour)))
			c.MemoryBytes()
			done <- g
		}()
	}
	for range got {
		<-done
	}
	for g := range got {
		if got[g] != want {
			t.Fatalf("goroutine %d saw other answers", g)
		}
	}
}

// checkCandidates checks every candidate set of c against the window's
// totals and the watch index: each member's estimate is at most the
// article's current one (so a refresh of every member would change
// nothing) and not zero, the heap and its positions are consistent, and
// the index lists each member under exactly the counters it reads. It
// also checks each page's count of nonzero counters.
//
// It checks every invariant of the candidate sets in one pass (cyclomatic
// 40): one branch per invariant.
func checkCandidates(t *testing.T, c *Counts) {
	t.Helper()
	for w := range c.win {
		win := &c.win[w]
		x := &win.watch
		listed := map[int32]int{} // member → nodes found in chains
		for i := range win.slots {
			s := &win.slots[i]
			if s.packed != 0 {
				continue // its blocks are released (checkBlocks checks it)
			}
			for bi, r := range s.refs {
				if r == 0 {
					if s.nz[bi] != 0 {
						t.Fatalf("window %d bucket %d block %d: none, nonzero bits %x", w, s.id, bi, s.nz[bi])
					}
					continue
				}
				var vals [blockSize]uint32
				c.blocks.read(r, &vals)
				var q page
				copy(q.c[:], vals[:])
				q.mark()
				if q.nz[0] != s.nz[bi] || q.nz[0] == 0 || classOf(slices.Max(vals[:])) > r.class() {
					t.Fatalf("window %d bucket %d block %d (class %d): nonzero bits %x, counters %x", w, s.id, bi, r.class(), s.nz[bi], q.nz[0])
				}
				if owner := s.owner + uint32(bi); *c.refAt(owner) != r || *c.blocks.owner(r) != owner {
					t.Fatalf("window %d bucket %d block %d: owner %d", w, s.id, bi, *c.blocks.owner(r))
				}
			}
		}
		for cell := range x.head {
			if x.reads(cell) != (x.head[cell] != 0) {
				t.Fatalf("window %d: counter %d read bit %v, chain %d", w, cell, x.reads(cell), x.head[cell])
			}
			for n := x.head[cell]; n != 0; n = x.nodes[n-1].next {
				if got := int(x.nodes[n-1].cell); got != cell {
					t.Fatalf("window %d: node %d in the chain of counter %d reads %d", w, n-1, cell, got)
				}
				listed[(n-1)/int32(x.stride)]++
			}
		}
		members := 0
		for slot, set := range win.sets {
			if set == nil {
				continue
			}
			if set.pos.len() != len(set.heap) || len(set.where)-len(set.free) != len(set.heap) {
				t.Fatalf("window %d slot %d: %d members, %d keys, %d of %d free", w, slot, len(set.heap), set.pos.len(), len(set.free), len(set.where))
			}
			for i, e := range set.heap {
				members++
				if i > 0 && worse(&set.heap[i], &set.heap[(i-1)/2]) {
					t.Fatalf("window %d slot %d: heap order broken at %d", w, slot, i)
				}
				if p, ok := set.index(e.h); !ok || p != i || set.pos.slots[set.pos.find(e.h)].val != e.k {
					t.Fatalf("window %d slot %d: position of %s", w, slot, e.id)
				}
				cur := c.estimate(win, keyOf(e.h, globalSalt))
				want := c.depth
				if slot != 0 {
					cur = min(cur, c.estimate(win, keyOf(e.h, c.salt(slot))))
					want *= 2
				}
				if e.est == 0 || e.est > cur {
					t.Fatalf("window %d slot %d: %s has estimate %d, current %d", w, slot, e.id, e.est, cur)
				}
				wt := x.members[e.m]
				if wt.h != e.h || int(wt.slot) != slot || wt.k != e.k || int(wt.n) != want || listed[e.m] != want || x.marks[e.m/64]&(1<<(e.m%64)) != 0 {
					t.Fatalf("window %d slot %d: %s watched as %+v with %d nodes listed", w, slot, e.id, wt, listed[e.m])
				}
				// Under exactly the counters its estimate reads.
				var gcols, ccols [MaxDepth]int
				c.cols(keyOf(e.h, globalSalt), &gcols)
				wantCells := slices.Clone(gcols[:c.depth])
				if slot != 0 {
					c.cols(keyOf(e.h, c.salt(slot)), &ccols)
					wantCells = append(wantCells, ccols[:c.depth]...)
				}
				var gotCells []int
				for j := int(e.m) * x.stride; j < int(e.m)*x.stride+int(wt.n); j++ {
					gotCells = append(gotCells, int(x.nodes[j].cell))
				}
				slices.Sort(wantCells)
				slices.Sort(gotCells)
				if !slices.Equal(gotCells, wantCells) {
					t.Fatalf("window %d slot %d: %s watched under counters %v, reads %v", w, slot, e.id, gotCells, wantCells)
				}
			}
		}
		if members != len(listed) || members+len(x.free) != len(x.members) {
			t.Fatalf("window %d: %d members, %d listed, %d free of %d", w, members, len(listed), len(x.free), len(x.members))
		}
	}
}

// TestRefreshVisits: refresh finds the same members, and gives the same
// result, whether it visits the members an expiry touched or every member.
func TestRefreshVisits(t *testing.T) {
	shares := persistStream(3, 20_000)
	var cs []*Counts
	var ms []*memStore
	for _, visitAll := range []int{defaultVisitAll, 0, 1 << 30} {
		c := New(smallOptions())
		for w := range c.win {
			c.win[w].watch.visitAll = visitAll
		}
		cs, ms = append(cs, c), append(ms, newMemStore())
	}
	for i, s := range shares {
		for j, c := range cs {
			apply(c, s)
			if i%500 == 499 {
				flushTo(t, c, ms[j])
			}
		}
		if i%2000 == 1999 {
			checkCandidates(t, cs[1])
		}
	}
	for j := range cs {
		flushTo(t, cs[j], ms[j])
		if !slices.Equal(ms[j].log, ms[0].log) {
			t.Fatalf("visitAll %d flushed differently", cs[j].win[0].watch.visitAll)
		}
	}
}

// TestRefresh: in a narrow sketch, where keys collide, a share stream
// with expiries in every window keeps every candidate's estimate within
// [exact count, current estimate] and the watch index exact, as state
// loaded from a Flush does.
func TestRefresh(t *testing.T) {
	o := Options{
		Windows:        []WindowSpec{{Name: "s", Size: 10 * time.Second, Buckets: 10}, {Name: "m", Size: time.Minute, Buckets: 6}},
		Width:          PageSize,
		Depth:          3,
		MaxK:           4,
		CandidatesPerK: 2,
		MaxCategories:  3,
	}
	rng := rand.New(rand.NewPCG(6, 6))
	c := New(o)
	e := &exact{opts: c.Options()}
	m := newMemStore()
	ts := day0
	for i := range 20_000 {
		ts += rng.Int64N(40)
		if rng.IntN(50) == 0 {
			ts += rng.Int64N(15_000) // a gap: several buckets expire at once
		}
		s := share{id: fmt.Sprintf("a%d", min(rng.IntN(300), rng.IntN(300))), cat: []string{"", "x", "y", "z"}[rng.IntN(4)], ts: ts - rng.Int64N(3000)}
		apply(c, s)
		e.add(s)
		if i%97 == 0 {
			checkCandidates(t, c)
			for w := range c.win {
				for _, cat := range append([]string{""}, c.Categories()...) {
					for _, en := range c.TopK(w, cat, 100) {
						if x := e.count(w, cat, en.ArticleID); en.Count < x {
							t.Fatalf("window %d %q: %s at %d, exact %d", w, cat, en.ArticleID, en.Count, x)
						}
					}
				}
			}
		}
		if i%1999 == 0 {
			flushTo(t, c, m)
			loaded := New(o)
			if err := loaded.Load(m); err != nil {
				t.Fatal(err)
			}
			checkCandidates(t, loaded)
		}
	}
}
