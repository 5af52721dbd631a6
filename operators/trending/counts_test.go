package trending

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/newsflow/newsflow/state"
	"github.com/newsflow/newsflow/state/statetest"
)

// refModel is the brute-force reference: it stores every applied share and
// recomputes each answer from scratch.
type refModel struct {
	opts    Options
	started bool
	wm      int64
	events  []refEvent
}

type refEvent struct {
	art, cat string
	ts       int64
	counted  []bool // per window: bucket was live when the share was added
	only     bool   // in cat's family only (AddToCategory)
}

func newRef(opts Options) *refModel {
	return &refModel{opts: opts.withDefaults()}
}

func (r *refModel) span(w int) (width, lo, hi int64) {
	s := r.opts.Windows[w]
	width = s.Width().Milliseconds()
	hi = floorDiv(r.wm, width)
	return width, hi - int64(s.Buckets) + 1, hi
}

// add applies a share unless it is older than every window at the
// watermark (or negative).
func (r *refModel) add(art, cat string, ts int64) bool { return r.apply(art, cat, ts, false) }

// apply adds a share to cat's family and, unless only (AddToCategory),
// to the global one.
func (r *refModel) apply(art, cat string, ts int64, only bool) bool {
	if ts < 0 {
		return false
	}
	if r.started {
		old := true
		for w := range r.opts.Windows {
			width, lo, _ := r.span(w)
			old = old && floorDiv(ts, width) < lo
		}
		if old {
			return false
		}
	}
	if !r.started || ts > r.wm {
		r.started, r.wm = true, ts
	}
	ev := refEvent{art: art, cat: cat, ts: ts, counted: make([]bool, len(r.opts.Windows)), only: only}
	for w := range r.opts.Windows {
		width, lo, hi := r.span(w)
		b := floorDiv(ts, width)
		ev.counted[w] = b >= lo && b <= hi
	}
	r.events = append(r.events, ev)
	return true
}

// counts returns the counts of window w for category ("" = global).
func (r *refModel) counts(w int, cat string) map[string]uint64 {
	m := map[string]uint64{}
	if !r.started {
		return m
	}
	width, lo, _ := r.span(w)
	for _, ev := range r.events {
		if ev.counted[w] && floorDiv(ev.ts, width) >= lo && ((cat == "" && !ev.only) || (cat != "" && ev.cat == cat)) {
			m[ev.art]++
		}
	}
	return m
}

func topOf(m map[string]uint64, k int) []Entry {
	var out []Entry
	for a, n := range m {
		out = append(out, Entry{ArticleID: a, Count: n})
	}
	slices.SortFunc(out, func(x, y Entry) int {
		if c := cmp.Compare(y.Count, x.Count); c != 0 {
			return c
		}
		return cmp.Compare(x.ArticleID, y.ArticleID)
	})
	if len(out) > k {
		out = out[:k]
	}
	return out
}

// stream generates random shares over a small universe: skewed article
// popularity, a home category per article plus occasional other categories
// and "", time mostly moving forward with jitter, some late shares and
// occasional jumps that expire everything.
type stream struct {
	rng      *rand.Rand
	arts     []string
	cats     []string
	now      int64
	step     int64 // max forward step, ms
	jitter   int64 // max backward jitter, ms
	jumpProb float64
	jump     int64
}

func newStream(seed uint64, nArts, nCats int, step, jitter int64) *stream {
	s := &stream{rng: rand.New(rand.NewPCG(seed, seed^0x5eed)), now: 1_700_000_000_000, step: step, jitter: jitter}
	for i := range nArts {
		s.arts = append(s.arts, fmt.Sprintf("art-%03d", i))
	}
	for i := range nCats {
		s.cats = append(s.cats, fmt.Sprintf("cat%d", i))
	}
	return s
}

func (s *stream) next() (art, cat string, ts int64) {
	s.now += s.rng.Int64N(s.step + 1)
	if s.jumpProb > 0 && s.rng.Float64() < s.jumpProb {
		s.now += s.jump
	}
	f := s.rng.Float64()
	i := int(f * f * float64(len(s.arts)))
	art = s.arts[i]
	switch x := s.rng.IntN(10); {
	case x < 7:
		cat = s.cats[i%len(s.cats)]
	case x < 9:
		cat = s.cats[s.rng.IntN(len(s.cats))]
	}
	ts = s.now
	if s.rng.IntN(3) == 0 {
		ts -= s.rng.Int64N(s.jitter + 1)
	}
	return art, cat, ts
}

var testOptions = map[string]Options{
	"small": {Windows: []WindowSpec{
		{Name: "s", Size: 10 * time.Second, Buckets: 10},
		{Name: "m", Size: time.Minute, Buckets: 6},
		{Name: "l", Size: 5 * time.Minute, Buckets: 5},
	}, CompactAfter: 20 * time.Second},
	// Compaction sooner than every bucket's width: buckets close quickly,
	// and older shares reopen them.
	"tight": {Windows: []WindowSpec{
		{Name: "a", Size: 3 * time.Second, Buckets: 3},
		{Name: "b", Size: 20 * time.Second, Buckets: 4},
	}, CompactAfter: 700 * time.Millisecond},
	"default": {},
}

// streamFor returns a stream whose pace suits opts.
func streamFor(name string, seed uint64) *stream {
	switch name {
	case "small":
		return newStream(seed, 40, 4, 400, 30_000)
	case "tight":
		return newStream(seed, 30, 3, 150, 1_000)
	default:
		s := newStream(seed, 60, 5, 20_000, 400_000)
		s.jumpProb, s.jump = 0.002, 30*3600*1000
		return s
	}
}

// checkAgainstRef compares every answer of c with the reference.
func checkAgainstRef(t *testing.T, c *Counts, r *refModel, s *stream) {
	t.Helper()
	if c.Watermark() != r.wm {
		t.Fatalf("watermark %d, want %d", c.Watermark(), r.wm)
	}
	for w := range c.nw {
		for _, cat := range append([]string{""}, s.cats...) {
			want := r.counts(w, cat)
			for _, a := range s.arts {
				var got uint64
				if cat == "" {
					got = c.Count(w, a)
					if cc := c.CategoryCount(w, "", a); cc != got {
						t.Fatalf("window %d: CategoryCount(\"\", %s) = %d, Count = %d", w, a, cc, got)
					}
				} else {
					got = c.CategoryCount(w, cat, a)
				}
				if got != want[a] {
					t.Fatalf("window %d category %q article %s: count %d, want %d", w, cat, a, got, want[a])
				}
			}
			for _, k := range []int{1, 3, 10, len(s.arts) + 1} {
				got, exp := c.TopK(w, cat, k), topOf(want, k)
				if !slices.Equal(got, exp) {
					t.Fatalf("window %d category %q TopK(%d):\n got %v\nwant %v", w, cat, k, got, exp)
				}
			}
		}
	}
	if err := c.checkInvariants(); err != nil {
		t.Fatal(err)
	}
}

// flatView holds the article and pair rows as one slice per field, with
// per-window fields at [id*nw + w].
type flatView struct {
	artHead, artTotal, pairArt, pairCat, pairNext, pairTotal []uint32
}

func (c *Counts) flat() flatView {
	var v flatView
	for a := range c.articleSlots() {
		row := c.artRow(uint32(a))
		v.artHead = append(v.artHead, row[artHead])
		v.artTotal = append(v.artTotal, row[artTotal:]...)
	}
	for p := range len(c.pairs) / c.pairStride {
		row := c.pairRow(uint32(p))
		v.pairArt = append(v.pairArt, row[pairArt])
		v.pairCat = append(v.pairCat, row[pairCat])
		v.pairNext = append(v.pairNext, row[pairNext])
		v.pairTotal = append(v.pairTotal, row[pairTotal:]...)
	}
	return v
}

// checkInvariants verifies the internal indexes against each other.
//
// It checks every invariant of Counts in one pass (cyclomatic 58): one
// branch per invariant, each with the message that names it.
func (c *Counts) checkInvariants() error {
	nw := c.nw
	v := c.flat()
	pairSum := make([]uint32, len(v.pairTotal))
	// Article totals are the Add counts of their pairs, not the
	// AddToCategory ones.
	artSum := make([]uint32, len(v.artTotal))
	for w := range c.win {
		win := &c.win[w]
		for i := range win.slots {
			s := &win.slots[i]
			if s.n == 0 {
				if len(s.dirty) > 0 || s.closedDirty {
					return fmt.Errorf("window %d slot %d: empty but dirty", w, i)
				}
				continue
			}
			if s.id < win.lo || s.id > win.hi || s.id%win.n != int64(i) {
				return fmt.Errorf("window %d slot %d holds bucket %d outside [%d,%d]", w, i, s.id, win.lo, win.hi)
			}
			// Recent buckets are open; an older one only while it holds
			// changes of an older share (reopened) that Flush has yet to
			// write.
			if s.open != (s.id >= win.wlo) && (s.id >= win.wlo || len(s.dirty) == 0) {
				return fmt.Errorf("window %d bucket %d: open=%v, open from %d, %d dirty", w, s.id, s.open, win.wlo, len(s.dirty))
			}
			n, dirty := 0, 0
			for _, e := range s.tab {
				if e == 0 {
					continue
				}
				n++
				if e&dirtyBit != 0 {
					dirty++
				}
				key := uint32(e >> 32)
				p := key &^ categoryOnly
				pairSum[int(p)*nw+w] += uint32(e) & countMask
				if key&categoryOnly == 0 {
					artSum[int(v.pairArt[p])*nw+w] += uint32(e) & countMask
				}
			}
			if n != s.n {
				return fmt.Errorf("window %d bucket %d: %d entries, n=%d", w, s.id, n, s.n)
			}
			if s.open && dirty != len(s.dirty) {
				return fmt.Errorf("window %d bucket %d: %d dirty entries, list has %d", w, s.id, dirty, len(s.dirty))
			}
			if !s.open && (dirty > 0) != s.closedDirty {
				return fmt.Errorf("window %d bucket %d: %d dirty entries, closedDirty=%v", w, s.id, dirty, s.closedDirty)
			}
		}
	}
	if !slices.Equal(pairSum, v.pairTotal) {
		return errors.New("pair totals differ from the sum of buckets")
	}
	freePair := map[uint32]bool{}
	for _, p := range c.pairFree {
		freePair[p] = true
	}
	catLive := map[uint32]int32{}
	for p := range v.pairArt {
		if freePair[uint32(p)] {
			if !allZero(v.pairTotal[p*nw : p*nw+nw]) {
				return fmt.Errorf("free pair %d has counts", p)
			}
			continue
		}
		if allZero(v.pairTotal[p*nw : p*nw+nw]) {
			return fmt.Errorf("live pair %d has no counts", p)
		}
		catLive[v.pairCat[p]]++
	}
	if !slices.Equal(artSum, v.artTotal) {
		return errors.New("article totals differ from the sum of their pairs' Add counts")
	}
	if err := c.ids.check(); err != nil {
		return err
	}
	if c.ids.n != c.articleSlots()-len(c.artFree) {
		return fmt.Errorf("%d interned ids, %d slots, %d free", c.ids.n, c.articleSlots(), len(c.artFree))
	}
	for _, a := range c.artFree {
		if c.ids.refs[a] != 0 {
			return fmt.Errorf("free article %d has id %q", a, c.ids.view(a))
		}
	}
	for a, r := range c.ids.refs {
		if r == 0 {
			continue
		}
		id := c.ids.view(uint32(a))
		if got, ok := c.ids.find(id, c.ids.hash(id)); !ok || got != uint32(a) || v.artHead[a] == noID {
			return fmt.Errorf("article %q (%d) is interned as %d, %v, or has no counts", id, a, got, ok)
		}
		for p := v.artHead[a]; p != noID; p = v.pairNext[p] {
			if v.pairArt[p] != uint32(a) || freePair[p] {
				return fmt.Errorf("article %q chain holds pair %d", id, p)
			}
		}
	}
	for name, ci := range c.catIdx {
		if c.catName[ci] != name || c.catPairs[ci] != catLive[ci] || catLive[ci] == 0 {
			return fmt.Errorf("category %q: %d pairs recorded, %d live", name, c.catPairs[ci], catLive[ci])
		}
	}
	check := func(what string, g *group, w int, totals []uint32, pos []int32, n int, in func(int) bool) error {
		if g.tau == 0 {
			if len(g.list) > 0 {
				return fmt.Errorf("%s window %d: untracked group has a list", what, w)
			}
			return nil
		}
		want := 0
		for id := range n {
			if in(id) && totals[id*nw+w] >= g.tau {
				want++
				if p := pos[id*nw+w]; p < 0 || int(p) >= len(g.list) || g.list[p] != uint32(id) {
					return fmt.Errorf("%s window %d: id %d (total %d >= tau %d) not listed", what, w, id, totals[id*nw+w], g.tau)
				}
			}
		}
		if want != len(g.list) {
			return fmt.Errorf("%s window %d: list has %d ids, %d qualify", what, w, len(g.list), want)
		}
		return nil
	}
	for w := range nw {
		if err := check("global", &c.win[w].global, w, v.artTotal, c.artPos, c.articleSlots(), func(int) bool { return true }); err != nil {
			return err
		}
		for ci := range c.catName {
			in := func(p int) bool { return !freePair[uint32(p)] && v.pairCat[p] == uint32(ci) }
			if err := check("category "+c.catName[ci], &c.catGroups[ci*nw+w], w, v.pairTotal, c.pairPos, len(v.pairArt), in); err != nil {
				return err
			}
		}
	}
	return nil
}

func TestWindowSemanticsMatchReference(t *testing.T) {
	for name, opts := range testOptions {
		for seed := range uint64(3) {
			t.Run(fmt.Sprintf("%s/seed=%d", name, seed), func(t *testing.T) {
				c, r, s := NewCounts(opts), newRef(opts), streamFor(name, seed)
				steps := 3000
				if testing.Short() {
					steps = 1500
				}
				older := 0
				for i := range steps {
					a, cat, ts := s.next()
					if ts < c.Watermark() {
						older++
					}
					got, want := c.Add(a, cat, ts), r.add(a, cat, ts)
					if got != want {
						t.Fatalf("step %d: Add(%s, %s, %d) = %v, want %v", i, a, cat, ts, got, want)
					}
					if i%97 == 0 || i == steps-1 {
						checkAgainstRef(t, c, r, s)
					}
				}
				if older == 0 {
					t.Error("stream produced no out-of-order shares")
				}
			})
		}
	}
}

// TestAddBasics is one scenario checked step by step (cyclomatic 27): the steps
// depend on each other's state, so they stay in order in one function.
func TestAddBasics(t *testing.T) {
	c := NewCounts(Options{})
	if c.Watermark() != 0 || c.TopK(0, "", 10) != nil || c.Count(0, "a") != 0 {
		t.Fatal("empty counts answer")
	}
	const t0 = 1_000_000_000
	if !c.Add("a", "tech", t0) || !c.Add("a", "", t0+500) || !c.Add("b", "tech", t0+1500) {
		t.Fatal("in-order share dropped")
	}
	if c.Watermark() != t0+1500 {
		t.Fatalf("watermark %d", c.Watermark())
	}
	// Ten minutes out of order: older than the 1m window, counted in 1h and
	// 24h. Nothing inside a window is dropped for arriving late.
	if !c.Add("a", "tech", t0+1500-10*60*1000) {
		t.Fatal("share ten minutes out of order dropped")
	}
	if c.Add("a", "tech", -1) || c.TooOld(t0) || !c.TooOld(-1) {
		t.Fatal("negative timestamp applied")
	}
	if old := int64(t0 + 1500 - 25*3600*1000); !c.TooOld(old) || c.Add("x", "tech", old) || c.Count(2, "x") != 0 {
		t.Fatal("share older than every window applied")
	}
	for w, want := range []uint64{2, 3, 3} {
		if got := c.Count(w, "a"); got != want {
			t.Errorf("window %d: Count(a) = %d, want %d", w, got, want)
		}
	}
	if got := c.CategoryCount(1, "tech", "a"); got != 2 {
		t.Errorf("CategoryCount(1h, tech, a) = %d, want 2", got)
	}
	want := []Entry{{ArticleID: "a", Count: 3}, {ArticleID: "b", Count: 1}}
	if got := c.TopK(1, "", 5); !slices.Equal(got, want) {
		t.Errorf("TopK = %v, want %v", got, want)
	}
	if got := c.TopK(1, "sports", 5); got != nil {
		t.Errorf("unknown category TopK = %v", got)
	}
	if got := c.TopK(7, "", 5); got != nil {
		t.Errorf("bad window TopK = %v", got)
	}
	if i, ok := c.WindowIndex("24h"); !ok || i != 2 {
		t.Errorf("WindowIndex(24h) = %d, %v", i, ok)
	}
	// 24h later the old buckets expire and every id is released.
	c.Add("z", "", t0+25*3600*1000)
	if c.ids.n != 1 || len(c.catIdx) != 1 || c.Count(2, "a") != 0 {
		t.Fatalf("after expiry: %d ids, %d categories, Count(a)=%d", c.ids.n, len(c.catIdx), c.Count(2, "a"))
	}
	if err := c.checkInvariants(); err != nil {
		t.Fatal(err)
	}
}

func TestOptionsValidate(t *testing.T) {
	if err := (Options{}).Validate(); err != nil {
		t.Fatal(err)
	}
	if err := DefaultOptions().Validate(); err != nil {
		t.Fatal(err)
	}
	bad := []Options{
		{CompactAfter: -time.Second},
		{Windows: []WindowSpec{{Name: "", Size: time.Minute, Buckets: 60}}},
		{Windows: []WindowSpec{{Name: "a", Size: time.Minute, Buckets: 0}}},
		{Windows: []WindowSpec{{Name: "a", Size: 0, Buckets: 1}}},
		{Windows: []WindowSpec{{Name: "a", Size: time.Second, Buckets: 3}}},
		{Windows: []WindowSpec{{Name: "a", Size: time.Millisecond, Buckets: 2}}},
		{Windows: []WindowSpec{{Name: "a", Size: time.Minute, Buckets: 1}, {Name: "a", Size: time.Hour, Buckets: 1}}},
	}
	for _, o := range bad {
		if o.Validate() == nil {
			t.Errorf("%+v: no error", o)
		}
	}
}

// dump returns every nonzero bucket cell as it would be stored.
func (c *Counts) dump() map[string]uint64 {
	m := map[string]uint64{}
	for w := range c.win {
		for _, s := range c.win[w].slots {
			if s.n == 0 {
				continue
			}
			for _, e := range s.tab {
				if e == 0 {
					continue
				}
				m[string(c.cellKey(nil, w, s.id, uint32(e>>32)))] = uint64(uint32(e) & countMask)
			}
		}
	}
	return m
}

// stored returns the cells committed in ns.
func stored(t *testing.T, ns state.Namespace) map[string]uint64 {
	t.Helper()
	m := map[string]uint64{}
	err := ns.Scan(bucketsLo, bucketsHi, func(k, v []byte) error {
		n, sz := binary.Uvarint(v)
		if sz != len(v) {
			return fmt.Errorf("bad value %x", v)
		}
		m[string(k)] = n
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// sameState fails unless a and b answer every query alike.
func sameState(t *testing.T, a, b *Counts, s *stream) {
	t.Helper()
	if a.Watermark() != b.Watermark() {
		t.Fatalf("watermark %d vs %d", a.Watermark(), b.Watermark())
	}
	da, db := a.dump(), b.dump()
	if len(da) != len(db) {
		t.Fatalf("%d cells vs %d", len(da), len(db))
	}
	for k, v := range da {
		if db[k] != v {
			t.Fatalf("cell %x: %d vs %d", k, v, db[k])
		}
	}
	for w := range a.nw {
		for _, cat := range append([]string{""}, s.cats...) {
			for _, art := range s.arts {
				if x, y := a.CategoryCount(w, cat, art), b.CategoryCount(w, cat, art); x != y {
					t.Fatalf("window %d %q %s: %d vs %d", w, cat, art, x, y)
				}
			}
			for _, k := range []int{1, 5, len(s.arts)} {
				if x, y := a.TopK(w, cat, k), b.TopK(w, cat, k); !slices.Equal(x, y) {
					t.Fatalf("window %d %q TopK(%d): %v vs %v", w, cat, k, x, y)
				}
			}
		}
	}
}

// openNS opens a state DB in a temporary folder, closed when the test
// ends, and returns it and its namespace "t".
func openNS(tb testing.TB) (*state.DB, state.Namespace) {
	db := statetest.Open(tb)
	return db, db.Namespace("t")
}

// flush flushes c (Counts or a task) into one batch of ns, commits it and
// returns how many operations it held.
var flush = statetest.Commit

// countOp is one Add, or one AddToCategory when only is set.
type countOp struct {
	art, cat string
	ts       int64
	only     bool
}

func (o countOp) apply(c *Counts) bool {
	if o.only {
		return c.AddToCategory(o.art, o.cat, o.ts)
	}
	return c.Add(o.art, o.cat, o.ts)
}

// durable drives counts the way a task does: it commits them to ns at
// random points, checking the store against memory and sometimes going on
// from a reload, and crashes at others, going on from the committed state
// with the operations since the commit applied again.
type durable struct {
	t        *testing.T
	ns       state.Namespace
	opts     Options
	s        *stream
	rng      *rand.Rand
	cur      *Counts
	pending  []countOp // applied to cur since its last commit
	restarts int
}

func newDurable(t *testing.T, opts Options, s *stream, rng *rand.Rand) *durable {
	_, ns := openNS(t)
	return &durable{t: t, ns: ns, opts: opts, s: s, rng: rng, cur: NewCounts(opts)}
}

// apply applies o, then maybe commits or crashes.
func (d *durable) apply(o countOp) bool {
	d.t.Helper()
	ok := o.apply(d.cur)
	d.pending = append(d.pending, o)
	if d.rng.IntN(40) == 0 {
		d.commit()
	}
	if d.rng.IntN(400) == 0 { // crash: lose everything since the commit
		d.cur = load(d.t, d.opts, d.ns)
		for _, o := range d.pending {
			o.apply(d.cur)
		}
		d.restarts++
	}
	return ok
}

// commit flushes and checks that the store holds exactly what memory
// does; one time in three it goes on from a reload, which must answer
// alike.
func (d *durable) commit() {
	d.t.Helper()
	flush(d.t, d.cur, d.ns)
	d.pending = d.pending[:0]
	if got, want := stored(d.t, d.ns), d.cur.dump(); !maps.Equal(got, want) {
		d.t.Fatalf("store holds %d cells, memory %d", len(got), len(want))
	}
	if d.rng.IntN(3) != 0 {
		return
	}
	loaded := load(d.t, d.opts, d.ns)
	sameState(d.t, d.cur, loaded, d.s)
	if err := loaded.checkInvariants(); err != nil {
		d.t.Fatal(err)
	}
	d.cur = loaded
	d.restarts++
}

// final commits and returns the counts loaded from the store.
func (d *durable) final() *Counts {
	d.t.Helper()
	flush(d.t, d.cur, d.ns)
	return load(d.t, d.opts, d.ns)
}

func load(t *testing.T, opts Options, ns state.Namespace) *Counts {
	t.Helper()
	c := NewCounts(opts)
	if err := c.Load(ns); err != nil {
		t.Fatal(err)
	}
	return c
}

// TestFlushLoadRoundTrip runs a task that flushes at random points,
// sometimes restarts from committed state (replaying the shares it had not
// committed, as the engine does after a crash), and compares it throughout
// with a task that never restarted and with the reference.
func TestFlushLoadRoundTrip(t *testing.T) {
	for name, opts := range testOptions {
		for seed := range uint64(3) {
			t.Run(fmt.Sprintf("%s/seed=%d", name, seed), func(t *testing.T) {
				s := streamFor(name, seed+100)
				d := newDurable(t, opts, s, rand.New(rand.NewPCG(seed, 7)))
				never, r := NewCounts(opts), newRef(opts)
				steps := 4000
				if testing.Short() {
					steps = 2000
				}
				for i := range steps {
					a, cat, ts := s.next()
					want := r.add(a, cat, ts)
					if d.apply(countOp{a, cat, ts, false}) != want || never.Add(a, cat, ts) != want {
						t.Fatalf("step %d: Add disagrees with the reference", i)
					}
					if i%150 == 0 {
						sameState(t, d.cur, never, s)
						checkAgainstRef(t, d.cur, r, s)
					}
				}
				final := d.final()
				sameState(t, final, never, s)
				checkAgainstRef(t, final, r, s)
				if d.restarts == 0 {
					t.Error("no restart exercised")
				}
			})
		}
	}
}

// TestLoadAfterExpiry flushes, lets every bucket expire, and checks that
// the store and a reload are empty apart from the watermark.
func TestLoadAfterExpiry(t *testing.T) {
	opts := testOptions["small"]
	_, ns := openNS(t)
	c := NewCounts(opts)
	s := streamFor("small", 9)
	for range 500 {
		c.Add(s.next())
	}
	flush(t, c, ns)
	if len(stored(t, ns)) == 0 {
		t.Fatal("nothing stored")
	}
	c.Add("late-comer", "x", c.Watermark()+10*60*1000)
	flush(t, c, ns)
	got := stored(t, ns)
	if want := c.dump(); !maps.Equal(got, want) || len(got) != len(c.win) {
		t.Fatalf("store holds %d cells after expiry, want %d", len(got), len(want))
	}
	l := load(t, opts, ns)
	sameState(t, c, l, s)
	if l.ids.n != 1 || l.Count(0, "late-comer") != 1 {
		t.Fatalf("loaded %d ids", l.ids.n)
	}
}

func TestLoadEmptyAndLayoutChange(t *testing.T) {
	_, ns := openNS(t)
	c := load(t, Options{}, ns)
	if c.Watermark() != 0 || c.TopK(0, "", 3) != nil {
		t.Fatal("empty load not empty")
	}
	c.Add("a", "b", 5000)
	flush(t, c, ns)
	other := NewCounts(Options{Windows: []WindowSpec{{Name: "1m", Size: time.Minute, Buckets: 30}}})
	if err := other.Load(ns); !errors.Is(err, ErrLayoutChanged) {
		t.Fatalf("load with other windows: %v", err)
	}
	// Renaming windows or changing compaction is fine.
	renamed := DefaultOptions()
	renamed.Windows[0].Name = "minute"
	renamed.CompactAfter = time.Minute
	if l := load(t, renamed, ns); l.Count(0, "a") != 1 {
		t.Fatal("renamed load lost counts")
	}
}

// recorder is a state.Writer that records operations.
type recorder struct {
	ops []string
}

func (r *recorder) Set(k, v []byte) error {
	r.ops = append(r.ops, fmt.Sprintf("set %x=%x", k, v))
	return nil
}
func (r *recorder) Delete(k []byte) error {
	r.ops = append(r.ops, fmt.Sprintf("del %x", k))
	return nil
}
func (r *recorder) DeleteRange(s, e []byte) error {
	r.ops = append(r.ops, fmt.Sprintf("delrange %x %x", s, e))
	return nil
}

func TestDeterminism(t *testing.T) {
	run := func() ([]string, [][]Entry) {
		c := NewCounts(Options{})
		s := streamFor("default", 42)
		rng := rand.New(rand.NewPCG(1, 2))
		var rec recorder
		var tops [][]Entry
		for range 5000 {
			c.Add(s.next())
			if rng.IntN(50) == 0 {
				if err := c.Flush(&rec); err != nil {
					t.Fatal(err)
				}
				for w := range c.nw {
					tops = append(tops, c.TopK(w, "", 10), c.TopK(w, "cat1", 10))
				}
			}
		}
		return rec.ops, tops
	}
	ops1, tops1 := run()
	ops2, tops2 := run()
	if !slices.Equal(ops1, ops2) {
		t.Fatal("flushes differ between identical runs")
	}
	if len(tops1) == 0 || len(tops1) != len(tops2) {
		t.Fatal("no answers")
	}
	for i := range tops1 {
		if !slices.Equal(tops1[i], tops2[i]) {
			t.Fatalf("answer %d differs: %v vs %v", i, tops1[i], tops2[i])
		}
	}
}

// TestFreeListReuse lets generations of articles expire completely and
// return, so indexes are released and reused under other ids and
// categories.
func TestFreeListReuse(t *testing.T) {
	opts := testOptions["small"]
	c, r := NewCounts(opts), newRef(opts)
	s := newStream(5, 40, 4, 300, 5_000)
	distinct := map[string]bool{}
	for g := range 12 {
		// Ids come back every 3 generations, with their categories shifted
		// so that pairs change too.
		for range 600 {
			a, cat, ts := s.next()
			a = fmt.Sprintf("%s-g%d", a, g%3)
			if cat != "" {
				cat = s.cats[(len(a)+g)%len(s.cats)]
			}
			distinct[a] = true
			if c.Add(a, cat, ts) != r.add(a, cat, ts) {
				t.Fatalf("generation %d: Add disagrees", g)
			}
			if g > 0 && c.ids.n > len(s.arts) {
				t.Fatalf("generation %d: %d ids interned, the previous generation was not released", g, c.ids.n)
			}
		}
		gen := &stream{arts: slices.Collect(func(yield func(string) bool) {
			for _, a := range s.arts {
				if !yield(fmt.Sprintf("%s-g%d", a, g%3)) {
					return
				}
			}
		}), cats: s.cats}
		checkAgainstRef(t, c, r, gen)
		s.now += 6 * 60 * 1000 // past the largest window: everything expires
	}
	if c.articleSlots() > len(s.arts) || len(distinct) <= c.articleSlots() {
		t.Errorf("%d article slots for %d distinct ids: free list not reused", c.articleSlots(), len(distinct))
	}
	_, ns := openNS(t)
	flush(t, c, ns)
	sameState(t, c, load(t, opts, ns), s)
}

// TestTopKRescan checks candidate sets through tau changes: large k after
// small k, groups shrinking below k, and many ties.
func TestTopKRescan(t *testing.T) {
	opts := Options{Windows: []WindowSpec{{Name: "w", Size: 10 * time.Second, Buckets: 10}}, CompactAfter: time.Second}
	c, r := NewCounts(opts), newRef(opts)
	s := newStream(3, 2000, 2, 10, 500)
	for i := range 20000 {
		a, cat, ts := s.next()
		c.Add(a, cat, ts)
		r.add(a, cat, ts)
		if i%1000 == 999 {
			for _, k := range []int{1, 50, 7, 600, 3} {
				for _, cat := range []string{"", "cat0"} {
					if got, want := c.TopK(0, cat, k), topOf(r.counts(0, cat), k); !slices.Equal(got, want) {
						t.Fatalf("step %d TopK(%q, %d) differs:\n got %v\nwant %v", i, cat, k, got, want)
					}
				}
			}
			if err := c.checkInvariants(); err != nil {
				t.Fatal(err)
			}
		}
	}
	// A one-off query for everything must not keep the candidate set large.
	all := c.TopK(0, "", 1<<20)
	if len(all) < 1000 || len(c.win[0].global.list) < len(all) {
		t.Fatalf("TopK(all) returned %d, candidate set %d", len(all), len(c.win[0].global.list))
	}
	for range 2 * kPeriodCalls {
		c.TopK(0, "", 10)
	}
	if n := len(c.win[0].global.list); n > 8*10+256 {
		t.Errorf("candidate set still holds %d ids after %d small queries", n, 2*kPeriodCalls)
	}
	if got, want := c.TopK(0, "", 10), topOf(r.counts(0, ""), 10); !slices.Equal(got, want) {
		t.Fatalf("TopK after shrinking: %v, want %v", got, want)
	}
}

func TestFlushOnlyChanges(t *testing.T) {
	c := NewCounts(Options{})
	var rec recorder
	c.Add("a", "x", 10_000)
	c.Add("b", "", 10_000)
	if err := c.Flush(&rec); err != nil {
		t.Fatal(err)
	}
	// layout, watermark, sizes and 2 cells in each of 3 windows
	if len(rec.ops) != 3+6 {
		t.Fatalf("first flush: %d ops: %v", len(rec.ops), rec.ops)
	}
	rec.ops = nil
	if err := c.Flush(&rec); err != nil || len(rec.ops) != 0 {
		t.Fatalf("idle flush: %v %v", err, rec.ops)
	}
	c.Add("a", "x", 10_000)
	if err := c.Flush(&rec); err != nil || len(rec.ops) != 3 {
		t.Fatalf("flush after one share: %v %v", err, rec.ops)
	}
	for _, op := range rec.ops {
		if !bytes.HasSuffix([]byte(op), []byte("=02")) {
			t.Fatalf("op %s does not store count 2", op)
		}
	}
}

// articleSlots is the number of article rows, live or free.
func (c *Counts) articleSlots() int { return len(c.arts) / c.artStride }

// check verifies the id table's slots, references and arena against each
// other.
func (t *idTable) check() error {
	mask := len(t.slots) - 1
	n, live := 0, 0
	for i, s := range t.slots {
		if s == 0 {
			continue
		}
		n++
		h, a := uint32(s>>32), uint32(s)-1
		if int(a) >= len(t.refs) || t.refs[a] == 0 {
			return fmt.Errorf("slot %d: index %d is not live", i, a)
		}
		if t.hash(t.view(a)) != h {
			return fmt.Errorf("slot %d: hash of %q differs", i, t.view(a))
		}
		for j := t.home(h); j != i; j = (j + 1) & mask {
			if t.slots[j] == 0 {
				return fmt.Errorf("slot %d (%q) unreachable from its home %d", i, t.view(a), t.home(h))
			}
		}
	}
	for _, r := range t.refs {
		if r != 0 {
			live += int(r & 0xffff)
			if off := int(r &^ refLive >> 16); off+int(r&0xffff) > len(t.arena) {
				return fmt.Errorf("reference %x beyond the arena (%d bytes)", r, len(t.arena))
			}
		}
	}
	switch {
	case n != t.n:
		return fmt.Errorf("%d slots used, n=%d", n, t.n)
	case live+t.dead != len(t.arena):
		return fmt.Errorf("arena: %d live + %d dead bytes, %d in all", live, t.dead, len(t.arena))
	case t.n*4 > len(t.slots)*3:
		return fmt.Errorf("%d ids in %d slots", t.n, len(t.slots))
	}
	return nil
}

// TestIDTable interns and releases random ids against a map, through
// growth, shrinking and arena compaction.
func TestIDTable(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	tab := newIDTable()
	ref := map[string]uint32{}
	byIdx := map[uint32]string{}
	var free []uint32
	next := uint32(0)
	for step := range 200_000 {
		// Grow to about 20,000 ids, shrink to a few, grow again.
		grow := (step/50_000)%2 == 0
		id := fmt.Sprintf("id-%d-%s", rng.IntN(30_000), strings.Repeat("x", rng.IntN(20)))
		if step%7 == 0 {
			id = "" // the empty id is an id too
		}
		h := tab.hash(id)
		a, ok := tab.find(id, h)
		if want, has := ref[id]; ok != has || (ok && a != want) {
			t.Fatalf("step %d: find(%q) = %d, %v; want %d, %v", step, id, a, ok, want, has)
		}
		switch {
		case !ok && (grow || rng.IntN(4) == 0):
			if n := len(free); n > 0 {
				a, free = free[n-1], free[:n-1]
			} else {
				a, next = next, next+1
			}
			tab.insert(id, h, a)
			ref[id], byIdx[a] = a, id
		case ok && (!grow || rng.IntN(4) == 0):
			tab.remove(a)
			delete(ref, id)
			delete(byIdx, a)
			free = append(free, a)
		}
		if step%10_000 == 0 {
			if err := tab.check(); err != nil {
				t.Fatalf("step %d: %v", step, err)
			}
		}
	}
	if err := tab.check(); err != nil {
		t.Fatal(err)
	}
	for a, id := range byIdx {
		if tab.view(a) != id {
			t.Fatalf("view(%d) = %q, want %q", a, tab.view(a), id)
		}
	}
}

// TestSizesHint: Load allocates for the articles the stored hint names,
// and state with a wrong hint, or none, loads the same counts.
func TestSizesHint(t *testing.T) {
	_, ns := openNS(t)
	c := NewCounts(Options{})
	for i := range 50_000 {
		c.Add(fmt.Sprintf("article-%d", i), benchCategories[i%3], 1_780_000_000_000+int64(i)*1000)
	}
	flush(t, c, ns)
	l := load(t, Options{}, ns)
	if got := l.sizes(); got.far(c.sizes()) || l.hint != c.hint || got.arts != 50_000 {
		t.Fatalf("loaded sizes %+v, hint %+v, flushed %+v", got, l.hint, c.sizes())
	}
	if n := l.articleSlots(); cap(l.arts) > n*l.artStride*9/8 || cap(l.pairs) > len(l.pairs)*9/8 {
		t.Errorf("articles: %d rows, room for %d; pairs room %d for %d", n, cap(l.arts)/l.artStride, cap(l.pairs), len(l.pairs))
	}
	want := l.dump()
	for _, hint := range [][]byte{nil, {1, 1, 1}, {0xff, 0xff, 0xff, 0xff, 0x0f, 0xff, 0xff, 0xff, 0xff, 0x0f, 0xff, 0xff, 0xff, 0xff, 0x0f}} {
		b := ns.NewBatch()
		if hint == nil {
			b.Delete(sizesKey)
		} else {
			b.Set(sizesKey, hint)
		}
		if err := b.Commit(); err != nil {
			t.Fatal(err)
		}
		if got := load(t, Options{}, ns).dump(); !maps.Equal(got, want) {
			t.Fatalf("hint %x: counts differ", hint)
		}
	}
	b := ns.NewBatch()
	b.Set(sizesKey, []byte{0x80})
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := NewCounts(Options{}).Load(ns); err == nil || !strings.Contains(err.Error(), "bad sizes") {
		t.Fatalf("corrupt hint: %v", err)
	}
}
