// Package trending ranks articles by how often they are shared over sliding
// event-time windows (by default the last minute, hour and day), globally
// and per category.
//
// # Semantics
//
// [Counts] holds the exact share counts of one task (one partition). Its
// state is a deterministic function of the multiset of [Counts.Add] calls
// and of nothing else: only event time (the share's timestamp, in ms since
// the Unix epoch) is used, never the wall clock, and once every share has
// been added the counts do not depend on the order they were added in.
//
//   - The watermark W is the largest timestamp added so far.
//   - Each window is a ring of Buckets buckets of width Size/Buckets; the
//     bucket of a share is floor(ts/width). At watermark W a window covers
//     the buckets [floor(W/width) - (Buckets-1), floor(W/width)]: the 1h
//     window is "the last 60 one-minute buckets", including the current,
//     partial one.
//   - A share counts in every window that covers its bucket at the
//     watermark, whatever order it arrives in: nothing inside a window is
//     dropped for being late. It stays counted until W moves past its
//     bucket, which then expires. A share older than a window's oldest
//     bucket is not counted in that window (it may still be counted in a
//     longer one); a share older than every window is not applied at all,
//     and Add reports it (the operator dead-letters it). Since W only
//     grows, a bucket not covered when a share arrives is not covered at
//     any later W either, so the final counts are the same for every order
//     of the same shares, and a replay reproduces them.
//   - Every share counts in the global family. A share with a category also
//     counts in that category's family; category "" means "no category", and
//     queries for category "" answer for the global family.
//   - [Counts.AddToCategory] counts a share in one category's family only:
//     for a share Add already counted globally (under no category) that
//     also counts under other categories (its article's topics), so that
//     it counts once globally and once in each of them. The same window
//     rules apply to it: the final counts depend only on the multiset of
//     Add and AddToCategory calls.
//   - Counts are exact. Per partition, an article may be shared at most
//     2^31-1 times within one bucket and 2^32-1 times within one window.
//
// # Persistence
//
// [Counts.Flush] stages into the task's batch only what changed since the
// previous Flush, with keys relative to the task's namespace:
//
//	'w' | window index (1 byte) | bucket index (uint64 BE) |
//	    uvarint(len(category)) | category | article id   → uvarint(count)
//	'm'                                                   → watermark (uint64 BE)
//	'c'                                                   → window layout
//	'n'                     → uvarint(articles) uvarint(pairs) uvarint(id bytes)
//
// A count made by AddToCategory is stored with a NUL byte before its
// category (in the length too): no category begins with one (Add and
// AddToCategory refuse such categories). Values are absolute counts
// written with Set, so re-applying a batch is harmless. Global counts are
// not stored: [Counts.Load] derives them by summing the categories
// (category "" included), without the AddToCategory counts. Expired buckets are
// removed with one DeleteRange per window. (Keys under 's', per-source
// watermarks of an earlier lateness rule, are ignored and deleted by the
// first Flush after Load.) The 'c' key records every
// window's size and bucket count so that Load refuses state written under a
// different layout ([ErrLayoutChanged]) instead of misreading it. The 'n'
// key is a hint, rewritten when the live articles, (category, article)
// pairs or article id bytes have changed by more than an eighth since it
// was last written: Load allocates its arrays for that many at once
// instead of growing them cell by cell, which would touch several times
// the memory (state without it loads as well).
//
// # Design
//
// Article ids are interned to dense uint32 indexes, and so are (category,
// article) pairs; indexes go back to a free list when their counts are zero
// in every window, which happens when their last bucket expires. The ids
// live in one byte arena behind an open-addressing index (idTable), with
// no Go pointer per id, so the garbage collector does not scan millions of
// them and a restore interns them without an allocation each. An article
// is a row [first pair, total per window] in one flat []uint32, and a pair a
// row [article, category, next pair of the article, total per window], so
// an Add or an expiry touches one cache line per index. Recent buckets
// (within CompactAfter of the watermark) are small open-addressing hash
// tables from pair index to count; older buckets are compacted into
// exact-length slices of 8-byte (pair, count) entries, and subtracted from
// the totals when they expire. An older share may still land in a
// compacted bucket: it is reopened for the write and compacted again by
// the next Flush. Buckets hold pairs only: a
// pair knows its article, so expiring a bucket updates the category and the
// global totals at once, and it is exactly what is persisted. A bucket keys
// the AddToCategory counts of a pair apart from its Add counts (the pair
// index with bit 31 set, [categoryOnly]): both are in the pair's totals,
// only the Add counts in its article's.
//
// # Memory
//
// [Counts.MemoryBytes] estimates the heap the counts hold, within a few
// percent of what building them adds to the live heap
// (TestMemoryBytesHonest); the operator's memory guard (guard.go) compares
// it with a budget. With the default windows an article shared once in
// the day under one category costs about 125 bytes, one shared often in
// the last hour about 220, one counted under three topics about 265.
// Arrays keep their capacity when counts expire (indexes are reused), so
// the estimate, like the heap, stays at its peak until a restart loads
// the state compactly.
//
// Top-K does not scan all articles. Every window × group (global, or one
// category) has a threshold tau and keeps the exact set of indexes whose
// total is >= tau; an Add or an expiry that makes a total cross tau updates
// the set in O(1). TopK sorts only that set. When the set has fewer than k
// members (and tau > 1), or has grown far beyond what queries ask for, the
// group is rescanned once to pick a new tau that keeps about 4k members.
package trending

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/maphash"
	"math"
	"math/bits"
	"slices"
	"strings"
	"time"
	"unsafe"

	"github.com/newsflow/newsflow/state"
)

// WindowSpec describes one sliding window: Buckets buckets of width
// Size/Buckets. The width must be a positive whole number of milliseconds.
type WindowSpec struct {
	Name    string
	Size    time.Duration
	Buckets int
}

// Width returns the width of one bucket.
func (s WindowSpec) Width() time.Duration { return s.Size / time.Duration(s.Buckets) }

// DefaultWindows returns the windows trending uses unless configured:
// "1m" (60 buckets of 1 s), "1h" (60 of 1 min) and "24h" (96 of 15 min).
func DefaultWindows() []WindowSpec {
	return []WindowSpec{
		{Name: "1m", Size: time.Minute, Buckets: 60},
		{Name: "1h", Size: time.Hour, Buckets: 60},
		{Name: "24h", Size: 24 * time.Hour, Buckets: 96},
	}
}

// Limits on the window layout.
const (
	MaxWindows = 255     // the window index is one byte in keys
	MaxBuckets = 1 << 16 // buckets per window
)

// Options configures a [Counts]. The zero value means [DefaultOptions].
type Options struct {
	// Windows are the sliding windows to count, addressed by their index in
	// this slice. Empty means DefaultWindows().
	Windows []WindowSpec
	// CompactAfter is how far behind the watermark a bucket is compacted
	// into an exact-length array (in whole milliseconds; zero means 5
	// minutes). It trades memory for the cost of a share that lands in a
	// compacted bucket, which is reopened; it never changes a count.
	CompactAfter time.Duration
}

// DefaultOptions returns the default windows and compaction after 5 minutes.
func DefaultOptions() Options {
	return Options{Windows: DefaultWindows(), CompactAfter: 5 * time.Minute}
}

func (o Options) withDefaults() Options {
	d := DefaultOptions()
	if len(o.Windows) == 0 {
		o.Windows = d.Windows
	}
	if o.CompactAfter == 0 {
		o.CompactAfter = d.CompactAfter
	}
	return o
}

// Validate reports invalid option values. Zero values are valid: they
// stand for the defaults.
func (o Options) Validate() error {
	if o.CompactAfter < 0 {
		return fmt.Errorf("trending: compact_after %v is negative", o.CompactAfter)
	}
	if len(o.Windows) > MaxWindows {
		return fmt.Errorf("trending: %d windows, at most %d allowed", len(o.Windows), MaxWindows)
	}
	seen := make(map[string]bool, len(o.Windows))
	for i, w := range o.Windows {
		switch {
		case w.Name == "":
			return fmt.Errorf("trending: window %d has no name", i)
		case seen[w.Name]:
			return fmt.Errorf("trending: window name %q is used twice", w.Name)
		case w.Buckets <= 0 || w.Buckets > MaxBuckets:
			return fmt.Errorf("trending: window %q: %d buckets, want 1..%d", w.Name, w.Buckets, MaxBuckets)
		case w.Size <= 0:
			return fmt.Errorf("trending: window %q: size %v is not positive", w.Name, w.Size)
		case w.Size%time.Duration(w.Buckets) != 0 || w.Width()%time.Millisecond != 0 || w.Width() < time.Millisecond:
			return fmt.Errorf("trending: window %q: bucket width %v/%d is not a whole number of milliseconds",
				w.Name, w.Size, w.Buckets)
		}
		seen[w.Name] = true
	}
	return nil
}

// ErrLayoutChanged is returned by [Counts.Load] when the stored state was
// written with different windows (sizes or bucket counts) than the Counts
// was created with. The state cannot be reinterpreted; rebuild it by
// replaying the log.
var ErrLayoutChanged = errors.New("trending: stored window layout differs from options")

// Entry is one article in a top-K answer.
type Entry struct {
	ArticleID string
	Count     uint64
	// Bound is the error bound of Count: 0 for exact counts; for the
	// sketch (CounterCMS) the true count is in [Count-Bound, Count] with
	// high probability (package sketch).
	Bound uint64
}

const (
	noID      = math.MaxUint32 // end of a pair chain
	dirtyBit  = 1 << 31        // in a bucket entry: changed since the last Flush
	countMask = dirtyBit - 1   // in a bucket entry: the count
	// categoryOnly, in the key of a bucket entry (its high half), marks the
	// AddToCategory counts of the pair in the other bits. Pair indexes stay
	// below it: 2^31 pairs would take far more memory than a task has.
	categoryOnly = 1 << 31
	// categoryOnlyMark starts the stored category of an AddToCategory cell.
	categoryOnlyMark = 0
)

// Counts holds exact sliding-window share counts for one task. See the
// package documentation for the semantics.
//
// Counts is not safe for concurrent use, not even for reads: TopK updates
// internal candidate sets. The owner must serialize every call.
type Counts struct {
	opts         Options
	nw           int   // len(opts.Windows)
	compactAfter int64 // ms
	win          []window

	started bool
	wm      int64

	// Articles, by dense index. ids maps article ids to indexes and back;
	// arts holds one row of artStride values per article (layout at
	// artHead). artPos rows have nw entries: [idx*nw + w].
	ids       idTable
	arts      []uint32
	artStride int
	artPos    []int32 // position in the window's global candidate list, or -1
	artFree   []uint32

	// (category, article) pairs, by dense index; rows as for articles
	// (layout at pairArt).
	pairs      []uint32
	pairStride int
	pairPos    []int32
	pairFree   []uint32

	// Categories, by dense index; catGroups rows have nw entries.
	catIdx    map[string]uint32
	catName   []string
	catPairs  []int32 // live pairs per category
	catGroups []group
	catFree   []uint32

	// Persistence.
	wroteLayout bool
	oldSources  bool // Load found per-source watermarks to delete
	flushedWM   int64
	flushedAny  bool // flushedWM is valid
	hint        sizes
	hinted      bool // hint is what the store holds
	key, val    []byte

	rescans int // for tests and benchmarks

	// Scratch for TopK.
	heap  []uint32
	seen  []uint32
	cands []cand
}

// Row layouts. An article row is [head, total_0 .. total_nw-1]: the first
// pair of the article's chain and its global total per window. A pair row
// is [article, category, next, total_0 .. total_nw-1], next being the next
// pair of the same article.
const (
	artHead   = 0
	artTotal  = 1
	pairArt   = 0
	pairCat   = 1
	pairNext  = 2
	pairTotal = 3
)

func (c *Counts) artRow(a uint32) []uint32 {
	i := int(a) * c.artStride
	return c.arts[i : i+c.artStride : i+c.artStride]
}

func (c *Counts) pairRow(p uint32) []uint32 {
	i := int(p) * c.pairStride
	return c.pairs[i : i+c.pairStride : i+c.pairStride]
}

// family is the global family (ids are articles) or the category family
// (ids are pairs) of a window, as seen by top-K.
type family struct {
	rows   []uint32
	stride int
	total  int // offset of window w's total in a row: total + w
	pos    []int32
	cat    int // category of the group, or -1 for the global family
}

func (c *Counts) family(cat int) family {
	if cat < 0 {
		return family{c.arts, c.artStride, artTotal, c.artPos, -1}
	}
	return family{c.pairs, c.pairStride, pairTotal, c.pairPos, cat}
}

// in reports whether row id is in the family's group.
func (f *family) in(id int) bool {
	return f.cat < 0 || int(f.rows[id*f.stride+pairCat]) == f.cat
}

type window struct {
	width     int64 // ms
	n         int64 // buckets
	hi, lo    int64 // live buckets are [lo, hi]; valid once started
	wlo       int64 // buckets >= wlo are kept open
	slots     []bucket
	global    group
	deletedLo int64 // stored buckets below this are deleted
}

// group is the top-K candidate set of one window × group (global or one
// category): list holds exactly the indexes whose total is >= tau, and the
// family's pos array holds each one's position in list. tau == 0 means the
// set is not maintained yet.
type group struct {
	tau       uint32
	list      []uint32
	kWant     int // largest k asked for recently: over the last period or this one
	kPeriod   int // largest k asked for in this period of kPeriodCalls calls
	calls     int // TopK calls in this period
	rescanK   int // kWant at the last rescan
	rescanLen int // len(list) right after the last rescan
}

// kPeriodCalls is how many TopK calls a large k is remembered for, at
// least: a one-off large query does not keep a group's candidate set large.
const kPeriodCalls = 64

// bucket is one time bucket of a window, held in ring slot id mod n. It is
// open (a hash table keyed by pair index) while it is recent, and closed
// (a compact slice of entries) after that. An entry is
// pair<<32 | dirtyBit? | count; 0 marks an empty hash slot.
type bucket struct {
	id          int64
	n           int // entries; 0 means the slot holds no bucket
	open        bool
	closedDirty bool     // closed, with entries changed since the last Flush
	tab         []uint64 // open: hash table, len a power of two; closed: entries
	dirty       []uint32 // open: pairs changed since the last Flush
}

type cand struct {
	n  uint32
	id uint32
}

// NewCounts returns empty counts. It panics if opts.Validate fails:
// validate options that come from configuration first.
func NewCounts(opts Options) *Counts {
	if err := opts.Validate(); err != nil {
		panic(err)
	}
	opts = opts.withDefaults()
	opts.Windows = slices.Clone(opts.Windows)
	c := &Counts{
		opts:         opts,
		nw:           len(opts.Windows),
		compactAfter: opts.CompactAfter.Milliseconds(),
		ids:          newIDTable(),
		catIdx:       make(map[string]uint32),
	}
	c.artStride = artTotal + c.nw
	c.pairStride = pairTotal + c.nw
	c.win = make([]window, c.nw)
	for i, s := range opts.Windows {
		c.win[i] = window{
			width:     s.Width().Milliseconds(),
			n:         int64(s.Buckets),
			slots:     make([]bucket, s.Buckets),
			deletedLo: math.MinInt64,
		}
	}
	return c
}

// Options returns the options in effect, defaults filled in.
func (c *Counts) Options() Options {
	o := c.opts
	o.Windows = slices.Clone(o.Windows)
	return o
}

// WindowIndex returns the index of the window named name.
func (c *Counts) WindowIndex(name string) (int, bool) {
	for i, w := range c.opts.Windows {
		if w.Name == name {
			return i, true
		}
	}
	return 0, false
}

// Articles returns the number of distinct articles counted in some window.
func (c *Counts) Articles() int { return c.ids.n }

// Watermark returns the largest event time applied so far, or 0 if none.
func (c *Counts) Watermark() int64 { return c.wm }

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}

func (w *window) slot(b int64) *bucket { return &w.slots[b%w.n] }

// Add applies one share of articleID, in category ("" for none), at event
// time ts (ms): it counts in every window that covers its bucket once the
// watermark has moved to ts (if ts is newer). It returns false, changing
// nothing, if ts is older than every window at the watermark, or negative,
// if category begins with a NUL byte, or if articleID is longer than
// MaxArticleIDBytes.
func (c *Counts) Add(articleID, category string, ts int64) bool {
	return c.add(articleID, category, ts, false)
}

// AddToCategory applies one share of articleID at ts to category's family
// only, not to the global family, with the window rules of Add: for a
// share that Add counted globally (under no category) and that counts
// under category too (one of its article's topics). It returns false,
// changing nothing, for category "" (the global family) and where Add
// would.
func (c *Counts) AddToCategory(articleID, category string, ts int64) bool {
	return category != "" && c.add(articleID, category, ts, true)
}

func (c *Counts) add(articleID, category string, ts int64, only bool) bool {
	if ts < 0 || (c.started && c.tooOld(ts)) || (category != "" && category[0] == categoryOnlyMark) || len(articleID) > MaxArticleIDBytes {
		return false
	}
	if !c.started {
		c.start(ts)
	} else if ts > c.wm {
		c.advance(ts)
	}
	a := c.internArticle(articleID)
	p := c.internPair(a, category)
	key := p
	if only {
		key |= categoryOnly
	}
	nw := c.nw
	arow, prow := c.artRow(a), c.pairRow(p)
	ci := int(prow[pairCat])
	gs := c.catGroups[ci*nw : ci*nw+nw]
	for w := range c.win {
		win := &c.win[w]
		b := ts / win.width
		if b < win.lo {
			continue
		}
		s := win.slot(b)
		if s.n == 0 {
			s.id, s.open = b, true
		} else if !s.open {
			s.reopen()
		}
		if s.inc(key) {
			s.dirty = append(s.dirty, key)
		}
		t := prow[pairTotal+w] + 1
		prow[pairTotal+w] = t
		if t == gs[w].tau {
			addCand(&gs[w], c.pairPos, p, nw, w)
		}
		if only {
			continue
		}
		t = arow[artTotal+w] + 1
		arow[artTotal+w] = t
		if t == win.global.tau {
			addCand(&win.global, c.artPos, a, nw, w)
		}
	}
	return true
}

// TooOld reports whether a share at ts would be older than every window
// at the current watermark, so that Add would not apply it.
func (c *Counts) TooOld(ts int64) bool { return ts < 0 || (c.started && c.tooOld(ts)) }

func (c *Counts) tooOld(ts int64) bool {
	for w := range c.win {
		if ts/c.win[w].width >= c.win[w].lo {
			return false
		}
	}
	return true
}

// Horizon returns the longest window's span: a share older than the
// watermark minus Horizon is older than every window.
func (c *Counts) Horizon() time.Duration {
	var h time.Duration
	for _, w := range c.opts.Windows {
		h = max(h, w.Size)
	}
	return h
}

func (c *Counts) start(ts int64) {
	c.started = true
	c.wm = ts
	for i := range c.win {
		w := &c.win[i]
		w.hi = ts / w.width
		w.lo = w.hi - w.n + 1
		w.wlo = floorDiv(ts-c.compactAfter, w.width)
	}
}

// advance moves the watermark to ts > c.wm: buckets that leave a window
// expire, and buckets older than CompactAfter are compacted.
func (c *Counts) advance(ts int64) {
	c.wm = ts
	for i := range c.win {
		w := &c.win[i]
		if hi := ts / w.width; hi > w.hi {
			lo := hi - w.n + 1
			for b := max(w.lo, 0); b < lo && b <= w.hi; b++ {
				if s := w.slot(b); s.n > 0 && s.id == b {
					c.expire(i, s)
				}
			}
			w.hi, w.lo = hi, lo
		}
		if wlo := floorDiv(ts-c.compactAfter, w.width); wlo > w.wlo {
			for b := max(w.wlo, w.lo, 0); b < wlo && b <= w.hi; b++ {
				if s := w.slot(b); s.n > 0 && s.id == b && s.open {
					s.close()
				}
			}
			w.wlo = wlo
		}
	}
}

// expire subtracts bucket s of window w from the totals and empties it.
func (c *Counts) expire(w int, s *bucket) {
	for _, e := range s.tab {
		if e != 0 {
			c.sub(w, uint32(e>>32), uint32(e)&countMask)
		}
	}
	s.n = 0
	s.dirty = s.dirty[:0]
	s.closedDirty = false
	if s.open {
		clear(s.tab) // keep the table for the bucket that reuses the slot
	} else {
		s.tab = nil
	}
}

// sub subtracts cnt from the totals in window w of the pair of bucket key
// (and of its article, unless the key marks AddToCategory counts) and
// releases the pair, its article and its category when nothing counts
// them any more.
func (c *Counts) sub(w int, key, cnt uint32) {
	nw := c.nw
	p := key &^ categoryOnly
	prow := c.pairRow(p)
	old := prow[pairTotal+w]
	nv := old - cnt
	prow[pairTotal+w] = nv
	if g := &c.catGroups[int(prow[pairCat])*nw+w]; nv < g.tau && old >= g.tau {
		dropCand(g, c.pairPos, p, nw, w)
	}
	a := prow[pairArt]
	arow := c.artRow(a)
	if key&categoryOnly == 0 {
		oldA := arow[artTotal+w]
		nvA := oldA - cnt
		arow[artTotal+w] = nvA
		if g := &c.win[w].global; nvA < g.tau && oldA >= g.tau {
			dropCand(g, c.artPos, a, nw, w)
		}
	}
	if nv == 0 && allZero(prow[pairTotal:]) {
		c.freePair(p)
		// The article's totals are the Add counts of its pairs: zero
		// once it has none.
		if arow[artHead] == noID {
			c.freeArticle(a)
		}
	}
}

func allZero(row []uint32) bool {
	for _, v := range row {
		if v != 0 {
			return false
		}
	}
	return true
}

func addCand(g *group, pos []int32, id uint32, nw, w int) {
	pos[int(id)*nw+w] = int32(len(g.list))
	g.list = append(g.list, id)
}

func dropCand(g *group, pos []int32, id uint32, nw, w int) {
	i := pos[int(id)*nw+w]
	last := g.list[len(g.list)-1]
	g.list[i] = last
	pos[int(last)*nw+w] = i
	g.list = g.list[:len(g.list)-1]
	pos[int(id)*nw+w] = -1
}

// Interning.

func (c *Counts) internArticle(id string) uint32 {
	h := c.ids.hash(id)
	if a, ok := c.ids.find(id, h); ok {
		return a
	}
	return c.newArticle(id, h)
}

// newArticle interns id, which is not interned yet and hashes to h.
func (c *Counts) newArticle(id string, h uint32) uint32 {
	var a uint32
	if n := len(c.artFree); n > 0 {
		a = c.artFree[n-1]
		c.artFree = c.artFree[:n-1]
	} else {
		a = uint32(len(c.arts) / c.artStride)
		for range c.artStride {
			c.arts = append(c.arts, 0)
		}
		for range c.nw {
			c.artPos = append(c.artPos, -1)
		}
	}
	c.artRow(a)[artHead] = noID
	c.ids.insert(id, h, a)
	return a
}

func (c *Counts) freeArticle(a uint32) {
	c.ids.remove(a)
	c.artFree = append(c.artFree, a)
}

func (c *Counts) internPair(a uint32, category string) uint32 {
	for p := c.arts[int(a)*c.artStride+artHead]; p != noID; {
		row := c.pairRow(p)
		if c.catName[row[pairCat]] == category {
			return p
		}
		p = row[pairNext]
	}
	return c.newPair(a, c.internCat(category))
}

// internPairCat is internPair for the category of index ci.
func (c *Counts) internPairCat(a, ci uint32) uint32 {
	for p := c.arts[int(a)*c.artStride+artHead]; p != noID; {
		row := c.pairRow(p)
		if row[pairCat] == ci {
			return p
		}
		p = row[pairNext]
	}
	return c.newPair(a, ci)
}

// newPair adds the pair of article a and category ci, which a does not
// have yet.
func (c *Counts) newPair(a, ci uint32) uint32 {
	var p uint32
	if n := len(c.pairFree); n > 0 {
		p = c.pairFree[n-1]
		c.pairFree = c.pairFree[:n-1]
	} else {
		p = uint32(len(c.pairs) / c.pairStride)
		for range c.pairStride {
			c.pairs = append(c.pairs, 0)
		}
		for range c.nw {
			c.pairPos = append(c.pairPos, -1)
		}
	}
	row, arow := c.pairRow(p), c.artRow(a)
	row[pairArt] = a
	row[pairCat] = ci
	row[pairNext] = arow[artHead]
	arow[artHead] = p
	c.catPairs[ci]++
	return p
}

func (c *Counts) freePair(p uint32) {
	row := c.pairRow(p)
	for q := &c.artRow(row[pairArt])[artHead]; *q != noID; q = &c.pairRow(*q)[pairNext] {
		if *q == p {
			*q = row[pairNext]
			break
		}
	}
	ci := row[pairCat]
	if c.catPairs[ci]--; c.catPairs[ci] == 0 {
		delete(c.catIdx, c.catName[ci])
		c.catName[ci] = ""
		for i := range c.nw {
			c.catGroups[int(ci)*c.nw+i] = group{}
		}
		c.catFree = append(c.catFree, ci)
	}
	c.pairFree = append(c.pairFree, p)
}

func (c *Counts) internCat(name string) uint32 {
	if ci, ok := c.catIdx[name]; ok {
		return ci
	}
	name = strings.Clone(name)
	var ci uint32
	if n := len(c.catFree); n > 0 {
		ci = c.catFree[n-1]
		c.catFree = c.catFree[:n-1]
		c.catName[ci] = name
	} else {
		ci = uint32(len(c.catName))
		c.catName = append(c.catName, name)
		c.catPairs = append(c.catPairs, 0)
		c.catGroups = append(c.catGroups, make([]group, c.nw)...)
	}
	c.catIdx[name] = ci
	return ci
}

// idTable interns the article ids of a Counts as dense indexes, which the
// caller chooses (the article rows' free list). It holds no Go pointer per
// id, so the garbage collector never scans the millions of ids a busy
// partition holds, and an id costs its bytes plus about 20: the bytes of
// every id live in one arena, refs[a] locates id a in it, and an
// open-addressing table with linear probing maps an id to its index.
//
// A slot holds hash<<32 | index+1 (0: empty), hash being the id's 32-bit
// hash, whose top bits are also the slot's home: a probe compares hashes
// first and the bytes only when they match, and a resize moves slots
// without hashing an id again. Removal shifts the rest of the probe run
// back, so there are no tombstones. The arena is compacted when removed
// ids make up more than half of it.
type idTable struct {
	seed  maphash.Seed
	slots []uint64 // len a power of two
	bits  uint8    // log2(len(slots))
	n     int      // ids held
	arena []byte
	refs  []uint64 // by index: refLive | offset<<16 | length; 0 when free
	dead  int      // arena bytes of removed ids
}

const (
	refLive = 1 << 63
	// MaxArticleIDBytes is the longest article id Counts accepts.
	MaxArticleIDBytes = 1<<16 - 1
	idTableMin        = 16 // slots
)

func newIDTable() idTable {
	return idTable{seed: maphash.MakeSeed(), slots: make([]uint64, idTableMin), bits: 4}
}

func (t *idTable) hash(id string) uint32 { return uint32(maphash.String(t.seed, id) >> 32) }

// home returns the slot a hash probes first.
func (t *idTable) home(h uint32) int { return int(uint64(h) << t.bits >> 32) }

// view returns id a's bytes as a string that shares the arena's memory:
// valid as long as the caller holds it (a compaction or a growing arena
// moves to new memory and leaves the old one as it was), never to be
// modified.
func (t *idTable) view(a uint32) string {
	r := t.refs[a]
	n := int(r & 0xffff)
	if n == 0 {
		return ""
	}
	off := int(r &^ refLive >> 16)
	return unsafe.String(&t.arena[off], n)
}

// find returns the index of id, which hashes to h.
func (t *idTable) find(id string, h uint32) (uint32, bool) {
	mask := len(t.slots) - 1
	for i := t.home(h); ; i = (i + 1) & mask {
		s := t.slots[i]
		if s == 0 {
			return 0, false
		}
		if uint32(s>>32) == h {
			if a := uint32(s) - 1; t.view(a) == id {
				return a, true
			}
		}
	}
}

// insert adds id, which hashes to h and is not in the table, as index a,
// which is free.
func (t *idTable) insert(id string, h uint32, a uint32) {
	if (t.n+1)*4 > len(t.slots)*3 {
		t.resize(len(t.slots) * 2)
	}
	mask := len(t.slots) - 1
	i := t.home(h)
	for t.slots[i] != 0 {
		i = (i + 1) & mask
	}
	t.slots[i] = uint64(h)<<32 | uint64(a+1)
	t.n++
	for len(t.refs) <= int(a) {
		t.refs = append(t.refs, 0)
	}
	t.refs[a] = refLive | uint64(len(t.arena))<<16 | uint64(len(id))
	t.arena = append(t.arena, id...)
}

// remove releases index a.
func (t *idTable) remove(a uint32) {
	id := t.view(a)
	h := t.hash(id)
	mask := len(t.slots) - 1
	want := uint64(h)<<32 | uint64(a+1)
	i := t.home(h)
	for t.slots[i] != want {
		i = (i + 1) & mask
	}
	// Shift back every later slot of the run whose home does not lie in
	// the cyclic range (i, j], so that each stays reachable from its home.
	for j := (i + 1) & mask; t.slots[j] != 0; j = (j + 1) & mask {
		k := t.home(uint32(t.slots[j] >> 32))
		if (j > i && (k <= i || k > j)) || (j < i && k <= i && k > j) {
			t.slots[i] = t.slots[j]
			i = j
		}
	}
	t.slots[i] = 0
	t.n--
	t.dead += len(id)
	t.refs[a] = 0
	if t.dead > 4096 && t.dead*2 > len(t.arena) {
		t.compact()
	}
	if len(t.slots) > idTableMin && t.n*8 < len(t.slots) {
		t.resize(len(t.slots) / 4)
	}
}

// resize moves the slots into a table of size slots (a power of two,
// larger than the ids held).
func (t *idTable) resize(size int) {
	old := t.slots
	t.slots = make([]uint64, size)
	t.bits = uint8(bits.TrailingZeros(uint(size)))
	mask := size - 1
	for _, s := range old {
		if s == 0 {
			continue
		}
		i := t.home(uint32(s >> 32))
		for t.slots[i] != 0 {
			i = (i + 1) & mask
		}
		t.slots[i] = s
	}
}

// compact copies the live ids into a new arena.
func (t *idTable) compact() {
	arena := make([]byte, 0, len(t.arena)-t.dead+len(t.arena)/8)
	for a, r := range t.refs {
		if r == 0 {
			continue
		}
		id := t.view(uint32(a))
		t.refs[a] = refLive | uint64(len(arena))<<16 | uint64(len(id))
		arena = append(arena, id...)
	}
	t.arena, t.dead = arena, 0
}

// reserve makes room for n ids of bytes bytes in all.
func (t *idTable) reserve(n, bytes int) {
	size := len(t.slots)
	for size*3 < (n+1)*4 {
		size *= 2
	}
	if size > len(t.slots) {
		t.resize(size)
	}
	t.refs = slices.Grow(t.refs, n-len(t.refs))
	t.arena = slices.Grow(t.arena, bytes-len(t.arena))
}

func (t *idTable) memoryBytes() int { return cap(t.slots)*8 + cap(t.arena) + cap(t.refs)*8 }

// Buckets.

func hashIdx(p uint32, mask int) int {
	h := p * 0x9E3779B1
	return int(h^h>>15) & mask
}

// inc adds one to the count of key (a pair, maybe with categoryOnly) in
// open bucket s and marks it dirty. It reports whether the entry was clean
// before.
func (s *bucket) inc(p uint32) bool {
	if (s.n+1)*4 > len(s.tab)*3 {
		s.grow()
	}
	mask := len(s.tab) - 1
	for i := hashIdx(p, mask); ; i = (i + 1) & mask {
		e := s.tab[i]
		if e == 0 {
			s.tab[i] = uint64(p)<<32 | dirtyBit | 1
			s.n++
			return true
		}
		if uint32(e>>32) == p {
			s.tab[i] = (e + 1) | dirtyBit
			return e&dirtyBit == 0
		}
	}
}

// put stores entry e (its key in the high half) in open bucket s, which
// must not hold the key yet.
func (s *bucket) put(e uint64) {
	if (s.n+1)*4 > len(s.tab)*3 {
		s.grow()
	}
	mask := len(s.tab) - 1
	i := hashIdx(uint32(e>>32), mask)
	for s.tab[i] != 0 {
		i = (i + 1) & mask
	}
	s.tab[i] = e
	s.n++
}

// find returns the position of key p in open bucket s, which must hold it.
func (s *bucket) find(p uint32) int {
	mask := len(s.tab) - 1
	i := hashIdx(p, mask)
	for uint32(s.tab[i]>>32) != p || s.tab[i] == 0 {
		i = (i + 1) & mask
	}
	return i
}

func (s *bucket) grow() {
	old := s.tab
	s.tab = make([]uint64, max(16, 2*len(old)))
	s.n = 0
	for _, e := range old {
		if e != 0 {
			s.put(e)
		}
	}
}

// reopen turns a compacted bucket back into a hash table, keeping each
// entry's dirty bit, for an older share.
func (s *bucket) reopen() {
	old := s.tab
	size := 16
	for size*3 < len(old)*4+4 {
		size *= 2
	}
	s.tab = make([]uint64, size)
	s.n, s.open, s.closedDirty = 0, true, false
	s.dirty = s.dirty[:0]
	for _, e := range old {
		s.put(e)
		if e&dirtyBit != 0 {
			s.dirty = append(s.dirty, uint32(e>>32))
		}
	}
}

// close compacts an open bucket that can no longer be written.
func (s *bucket) close() {
	out := make([]uint64, 0, s.n)
	for _, e := range s.tab {
		if e != 0 {
			out = append(out, e)
		}
	}
	s.tab = out
	s.open = false
	s.closedDirty = len(s.dirty) > 0
	s.dirty = nil
}

// Queries.

func (c *Counts) validWindow(w int) bool { return w >= 0 && w < c.nw && c.started }

// Count returns articleID's global share count in window w (an index into
// Options().Windows).
func (c *Counts) Count(w int, articleID string) uint64 {
	if !c.validWindow(w) {
		return 0
	}
	a, ok := c.ids.find(articleID, c.ids.hash(articleID))
	if !ok {
		return 0
	}
	return uint64(c.artRow(a)[artTotal+w])
}

// CategoryCount returns articleID's share count in category in window w.
// Category "" is the global family: CategoryCount(w, "", id) == Count(w, id).
func (c *Counts) CategoryCount(w int, category, articleID string) uint64 {
	if category == "" {
		return c.Count(w, articleID)
	}
	if !c.validWindow(w) {
		return 0
	}
	a, ok := c.ids.find(articleID, c.ids.hash(articleID))
	if !ok {
		return 0
	}
	for p := c.artRow(a)[artHead]; p != noID; {
		row := c.pairRow(p)
		if c.catName[row[pairCat]] == category {
			return uint64(row[pairTotal+w])
		}
		p = row[pairNext]
	}
	return 0
}

// Categories returns, sorted, the categories that currently have a
// nonzero count in some window. Category "" (no category) is not listed.
func (c *Counts) Categories() []string {
	out := make([]string, 0, len(c.catIdx))
	for name := range c.catIdx {
		if name != "" {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// TopK returns the k articles with the highest counts in window w, globally
// (category "") or in category, ordered by count descending and then
// article id ascending. Articles with a zero count are never returned, so
// the answer may be shorter than k.
func (c *Counts) TopK(w int, category string, k int) []Entry {
	if !c.validWindow(w) || k <= 0 {
		return nil
	}
	var g *group
	cat := -1
	if category == "" {
		g = &c.win[w].global
	} else {
		ci, ok := c.catIdx[category]
		if !ok {
			return nil
		}
		cat = int(ci)
		g = &c.catGroups[cat*c.nw+w]
	}
	g.kPeriod = max(g.kPeriod, k)
	if g.calls++; g.calls >= kPeriodCalls {
		g.kWant, g.kPeriod, g.calls = g.kPeriod, 0, 0
	}
	g.kWant = max(g.kWant, k)
	// Rescan when the set is not maintained, too small to answer, or far
	// larger than needed: either because queries now ask for less, or
	// because it doubled since it was built (unless ties made it large
	// from the start, which a rescan would not fix).
	if g.tau == 0 || (len(g.list) < k && g.tau > 1) ||
		(len(g.list) > 8*g.kWant+256 && (g.rescanK > g.kWant || len(g.list) > 2*g.rescanLen)) {
		c.rescan(g, w, cat)
	}
	f := c.family(cat)
	off := f.total + w
	cands := c.cands[:0]
	for _, id := range g.list {
		cands = append(cands, cand{f.rows[int(id)*f.stride+off], id})
	}
	if len(cands) > k {
		h := c.heap[:0]
		for _, x := range cands {
			h = pushTop(h, k, x.n)
		}
		c.heap = h
		kth := h[0]
		cands = slices.DeleteFunc(cands, func(x cand) bool { return x.n < kth })
	}
	// id views the article id in the table: valid until c changes,
	// copied into the answer.
	id := func(x cand) string {
		if cat >= 0 {
			return c.ids.view(c.pairs[int(x.id)*c.pairStride+pairArt])
		}
		return c.ids.view(x.id)
	}
	slices.SortFunc(cands, func(x, y cand) int {
		if x.n != y.n {
			if x.n > y.n {
				return -1
			}
			return 1
		}
		return strings.Compare(id(x), id(y))
	})
	c.cands = cands
	out := make([]Entry, min(k, len(cands)))
	for i := range out {
		out[i] = Entry{ArticleID: strings.Clone(id(cands[i])), Count: uint64(cands[i].n)}
	}
	return out
}

// pushTop keeps h a min-heap of the (at most) k largest values pushed.
func pushTop(h []uint32, k int, v uint32) []uint32 {
	if len(h) < k {
		h = append(h, v)
		for i := len(h) - 1; i > 0; {
			p := (i - 1) / 2
			if h[p] <= h[i] {
				break
			}
			h[p], h[i] = h[i], h[p]
			i = p
		}
		return h
	}
	if v <= h[0] {
		return h
	}
	h[0] = v
	for i := 0; ; {
		l, m := 2*i+1, i
		if l < len(h) && h[l] < h[m] {
			m = l
		}
		if r := l + 1; r < len(h) && h[r] < h[m] {
			m = r
		}
		if m == i {
			return h
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
}

// rescan picks a new tau for group g of window w (cat < 0: global) so that
// about 4k members qualify, and rebuilds the candidate list.
func (c *Counts) rescan(g *group, w, cat int) {
	c.rescans++
	f := c.family(cat)
	nw := c.nw
	for _, id := range g.list {
		f.pos[int(id)*nw+w] = -1
	}
	g.list = g.list[:0]
	g.rescanK = g.kWant
	target := 4*g.kWant + 64
	// One pass: keep a min-heap of the target largest totals, whose minimum
	// (floor) only rises, and collect every id whose total was >= floor
	// when seen: that includes every id >= the final tau.
	h, seen := c.heap[:0], c.seen[:0]
	floor := uint32(1)
	for i, id := f.total+w, 0; i < len(f.rows); i, id = i+f.stride, id+1 {
		if t := f.rows[i]; t >= floor && f.in(id) {
			seen = append(seen, uint32(id))
			if len(h) < target || t > h[0] {
				h = pushTop(h, target, t)
				if len(h) == target {
					floor = max(h[0], 1)
				}
			}
		}
	}
	tau := floor
	for _, id := range seen {
		if f.rows[int(id)*f.stride+f.total+w] >= tau {
			addCand(g, f.pos, id, nw, w)
		}
	}
	c.heap, c.seen = h, seen[:0]
	g.tau = tau
	g.rescanLen = len(g.list)
}

// MemoryBytes estimates the heap bytes held by c.
func (c *Counts) MemoryBytes() int {
	const (
		strHdr   = int(unsafe.Sizeof(""))
		mapEntry = 48 // swiss-table slot (16+4, padded) / load factor, plus control bytes
	)
	n := int(unsafe.Sizeof(*c))
	n += c.ids.memoryBytes()
	n += cap(c.arts)*4 + cap(c.artPos)*4 + cap(c.artFree)*4
	n += cap(c.pairs)*4 + cap(c.pairPos)*4 + cap(c.pairFree)*4
	n += len(c.catIdx)*mapEntry + cap(c.catName)*strHdr + cap(c.catPairs)*4 + cap(c.catFree)*4
	n += cap(c.catGroups) * int(unsafe.Sizeof(group{}))
	for _, g := range c.catGroups {
		n += cap(g.list) * 4
	}
	for _, name := range c.catName {
		n += len(name)
	}
	for i := range c.win {
		w := &c.win[i]
		n += int(unsafe.Sizeof(*w)) + cap(w.global.list)*4 + cap(w.slots)*int(unsafe.Sizeof(bucket{}))
		for j := range w.slots {
			n += cap(w.slots[j].tab)*8 + cap(w.slots[j].dirty)*4
		}
	}
	n += cap(c.heap)*4 + cap(c.seen)*4 + cap(c.cands)*int(unsafe.Sizeof(cand{})) + cap(c.key) + cap(c.val)
	return n
}

// Persistence.

var (
	layoutKey    = []byte{'c'}
	sizesKey     = []byte{'n'}
	watermarkKey = []byte{'m'}
	bucketsLo    = []byte{'w'}
	bucketsHi    = []byte{'w' + 1}
)

// oldSourcePrefix starts the keys of the per-source watermarks that an
// earlier version kept; Flush deletes them.
const oldSourcePrefix byte = 's'

const layoutVersion = 1

func (c *Counts) layout() []byte {
	v := []byte{layoutVersion}
	for _, w := range c.win {
		v = binary.AppendUvarint(v, uint64(w.width))
		v = binary.AppendUvarint(v, uint64(w.n))
	}
	return v
}

func bucketKey(buf []byte, w int, b int64) []byte {
	buf = append(buf[:0], 'w', byte(w))
	return binary.BigEndian.AppendUint64(buf, uint64(b))
}

// Flush stages into wr every change since the previous Flush: the counts of
// the (bucket, category, article) cells that changed, the removal of the
// buckets that expired, and the watermark. Commit wr atomically with the
// input offsets the changes came from.
//
// After Flush, c assumes wr is committed. If it is not (wr discarded, the
// commit failed, or Flush returned an error), c no longer matches the store:
// discard c and Load a new one from committed state.
func (c *Counts) Flush(wr state.Writer) error {
	if !c.wroteLayout {
		if err := wr.Set(layoutKey, c.layout()); err != nil {
			return fmt.Errorf("trending: flush layout: %w", err)
		}
		c.wroteLayout = true
	}
	if !c.started {
		return nil
	}
	if !c.flushedAny || c.flushedWM != c.wm {
		if err := wr.Set(watermarkKey, binary.BigEndian.AppendUint64(c.val[:0], uint64(c.wm))); err != nil {
			return fmt.Errorf("trending: flush watermark: %w", err)
		}
		c.flushedWM, c.flushedAny = c.wm, true
	}
	if cur := c.sizes(); !c.hinted || cur.far(c.hint) {
		v := binary.AppendUvarint(c.val[:0], cur.arts)
		v = binary.AppendUvarint(v, cur.pairs)
		c.val = binary.AppendUvarint(v, cur.idBytes)
		if err := wr.Set(sizesKey, c.val); err != nil {
			return fmt.Errorf("trending: flush sizes: %w", err)
		}
		c.hint, c.hinted = cur, true
	}
	if c.oldSources {
		if err := wr.DeleteRange([]byte{oldSourcePrefix}, []byte{oldSourcePrefix + 1}); err != nil {
			return fmt.Errorf("trending: flush: delete old source watermarks: %w", err)
		}
		c.oldSources = false
	}
	for w := range c.win {
		win := &c.win[w]
		if win.lo > 0 && win.lo > win.deletedLo {
			start := bucketKey(nil, w, 0)
			c.key = bucketKey(c.key, w, win.lo)
			if err := wr.DeleteRange(start, c.key); err != nil {
				return fmt.Errorf("trending: flush expiry of window %d: %w", w, err)
			}
			win.deletedLo = win.lo
		}
		for i := range win.slots {
			s := &win.slots[i]
			switch {
			case s.n == 0:
			case s.open:
				for _, p := range s.dirty {
					j := s.find(p)
					if err := c.writeCell(wr, w, s.id, s.tab[j]); err != nil {
						return err
					}
					s.tab[j] &^= dirtyBit
				}
				s.dirty = s.dirty[:0]
				if s.id < win.wlo {
					s.close() // reopened for an older share
				}
			case s.closedDirty:
				for j, e := range s.tab {
					if e&dirtyBit == 0 {
						continue
					}
					if err := c.writeCell(wr, w, s.id, e); err != nil {
						return err
					}
					s.tab[j] &^= dirtyBit
				}
				s.closedDirty = false
			}
		}
	}
	return nil
}

func (c *Counts) writeCell(wr state.Writer, w int, b int64, e uint64) error {
	k := c.cellKey(c.key, w, b, uint32(e>>32))
	c.key = k
	c.val = binary.AppendUvarint(c.val[:0], uint64(uint32(e)&countMask))
	if err := wr.Set(k, c.val); err != nil {
		return fmt.Errorf("trending: flush window %d bucket %d: %w", w, b, err)
	}
	return nil
}

// cellKey appends to buf[:0] the stored key of the cell of bucket b of
// window w for bucket key (see Persistence in the package documentation).
func (c *Counts) cellKey(buf []byte, w int, b int64, key uint32) []byte {
	row := c.pairRow(key &^ categoryOnly)
	cat := c.catName[row[pairCat]]
	k := bucketKey(buf, w, b)
	if key&categoryOnly != 0 {
		k = binary.AppendUvarint(k, uint64(len(cat)+1))
		k = append(k, categoryOnlyMark)
	} else {
		k = binary.AppendUvarint(k, uint64(len(cat)))
	}
	k = append(k, cat...)
	return append(k, c.ids.view(row[pairArt])...)
}

// Load replaces the contents of c with the committed state in r, as written
// by Flush. The result answers every query exactly as the flushed Counts
// did, and behaves identically under further Adds.
func (c *Counts) Load(r state.Reader) error {
	*c = *NewCounts(c.opts)
	v, ok, err := r.Get(layoutKey)
	if err != nil {
		return fmt.Errorf("trending: load layout: %w", err)
	}
	if ok && !bytes.Equal(v, c.layout()) {
		return ErrLayoutChanged
	}
	c.wroteLayout = ok
	v, ok, err = r.Get(watermarkKey)
	if err != nil {
		return fmt.Errorf("trending: load watermark: %w", err)
	}
	if !ok {
		return nil // nothing was ever counted
	}
	if len(v) != 8 || int64(binary.BigEndian.Uint64(v)) < 0 {
		return fmt.Errorf("trending: load: bad watermark %x", v)
	}
	c.start(int64(binary.BigEndian.Uint64(v)))
	c.flushedWM, c.flushedAny = c.wm, true
	if v, ok, err = r.Get(sizesKey); err != nil {
		return fmt.Errorf("trending: load sizes: %w", err)
	} else if ok {
		arts, n1 := binary.Uvarint(v)
		pairs, n2 := binary.Uvarint(v[max(n1, 0):])
		idBytes, n3 := binary.Uvarint(v[max(n1, 0)+max(n2, 0):])
		if n1 <= 0 || n2 <= 0 || n3 <= 0 {
			return fmt.Errorf("trending: load: bad sizes %x", v)
		}
		c.hint, c.hinted = sizes{arts, pairs, idBytes}, true
		c.reserve(c.hint)
	}
	err = r.Scan([]byte{oldSourcePrefix}, []byte{oldSourcePrefix + 1}, func(k, v []byte) error {
		c.oldSources = true
		return nil
	})
	if err != nil {
		return err
	}
	ld := loader{c: c}
	err = r.Scan(bucketsLo, bucketsHi, func(k, v []byte) error {
		if err := ld.cell(k, v); err != nil {
			return fmt.Errorf("trending: load key %x: %w", k, err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	ld.flush()
	return nil
}

// sizes are what a Counts holds: live articles, live (category, article)
// pairs and the bytes of the live article ids.
type sizes struct{ arts, pairs, idBytes uint64 }

func (c *Counts) sizes() sizes {
	return sizes{uint64(c.ids.n), uint64(len(c.pairs)/c.pairStride - len(c.pairFree)), uint64(len(c.ids.arena) - c.ids.dead)}
}

// far reports whether s differs from o by more than an eighth (plus a
// little) in some respect.
func (s sizes) far(o sizes) bool {
	far := func(a, b uint64) bool { return a > b+b/8+1024 || b > a+a/8+1024 }
	return far(s.arts, o.arts) || far(s.pairs, o.pairs) || far(s.idBytes, o.idBytes)
}

// reserve allocates room for the articles, pairs and id bytes of s at once
// (Load, before the cells). A hint is no more than that: beyond 2^22
// articles or pairs and 2^28 bytes of ids (far over the default memory
// budget) the arrays grow as the cells come, and a corrupt hint cannot
// allocate more.
func (c *Counts) reserve(s sizes) {
	const most = 1 << 22
	arts, pairs := int(min(s.arts, most)), int(min(s.pairs, most))
	c.arts = slices.Grow(c.arts, arts*c.artStride)
	c.artPos = slices.Grow(c.artPos, arts*c.nw)
	c.pairs = slices.Grow(c.pairs, pairs*c.pairStride)
	c.pairPos = slices.Grow(c.pairPos, pairs*c.nw)
	c.ids.reserve(arts, int(min(s.idBytes, 1<<28)))
}

// loader applies the stored cells to a Counts during Load, in batches of
// loadBatch: looking a cell's article up takes a few dependent cache
// misses (the table slot, the id's reference, its bytes, the article's
// row), and issuing each kind for a whole batch at once lets the memory
// system serve them in parallel instead of one after another.
type loader struct {
	c     *Counts
	cells []loadCell
	ids   []byte // the batch's article ids and categories
	sink  uint64 // what the touching passes read, so that they are kept

	// The category of the previous cell: cells come sorted by window,
	// bucket and category, so most cells repeat it.
	cat  []byte
	ci   uint32
	have bool
}

// loadBatch is the number of cells a loader applies together.
const loadBatch = 256

// loadCell is one stored cell, checked, waiting in a batch.
type loadCell struct {
	w         int
	b         int64
	cnt       uint64
	only      bool
	art, cat  [2]int // start and end in loader.ids
	h         uint32
	a         uint32
	slot, ref uint64 // touched ahead of use (ref: then the first pair)
}

var errBadCell = errors.New("malformed cell")

func (ld *loader) cell(k, v []byte) error {
	c := ld.c
	if len(k) < 10 {
		return errBadCell
	}
	w := int(k[1])
	if w >= c.nw {
		return fmt.Errorf("window %d: %w", w, errBadCell)
	}
	b := int64(binary.BigEndian.Uint64(k[2:10]))
	win := &c.win[w]
	if b < win.lo {
		return nil // expired; removed by the next Flush
	}
	if b > win.hi {
		return fmt.Errorf("bucket %d ahead of the watermark: %w", b, errBadCell)
	}
	k = k[10:]
	n, sz := binary.Uvarint(k)
	if sz <= 0 || n > uint64(len(k)-sz) {
		return errBadCell
	}
	cat, art := k[sz:sz+int(n)], k[sz+int(n):]
	cnt, sz := binary.Uvarint(v)
	if sz != len(v) || cnt == 0 || cnt > countMask || len(art) == 0 || len(art) > MaxArticleIDBytes {
		return fmt.Errorf("count %x: %w", v, errBadCell)
	}
	only := len(cat) > 0 && cat[0] == categoryOnlyMark
	if only {
		if cat = cat[1:]; len(cat) == 0 {
			return fmt.Errorf("category-only cell without a category: %w", errBadCell)
		}
	}
	cl := loadCell{w: w, b: b, cnt: cnt, only: only}
	cl.art[0] = len(ld.ids)
	ld.ids = append(ld.ids, art...)
	cl.art[1], cl.cat[0] = len(ld.ids), len(ld.ids)
	ld.ids = append(ld.ids, cat...)
	cl.cat[1] = len(ld.ids)
	if ld.cells = append(ld.cells, cl); len(ld.cells) == loadBatch {
		ld.flush()
	}
	return nil
}

// flush applies the batch, as if each cell were applied in turn: the
// articles are interned in cell order first, then the cells counted in
// cell order, which is the same since interning an article does not
// depend on the counts.
func (ld *loader) flush() {
	c, t, cells := ld.c, &ld.c.ids, ld.cells
	// The article ids are only read (and copied when interned): views of
	// the batch's bytes spare an allocation per cell.
	id := func(cl *loadCell) string { return unsafe.String(&ld.ids[cl.art[0]], cl.art[1]-cl.art[0]) }
	// Touch the table slot, then the reference and the bytes of the id it
	// holds, for every cell; a slot may move while the batch is interned,
	// which only makes a touch useless.
	for i := range cells {
		cl := &cells[i]
		cl.h = t.hash(id(cl))
		cl.slot = t.slots[t.home(cl.h)]
	}
	for i := range cells {
		if s := cells[i].slot; s != 0 && uint32(s>>32) == cells[i].h {
			cells[i].ref = t.refs[uint32(s)-1]
		}
	}
	for i := range cells {
		if r := cells[i].ref; r&0xffff != 0 {
			ld.sink += uint64(t.arena[r&^refLive>>16])
		}
	}
	for i := range cells {
		cl := &cells[i]
		a, ok := t.find(id(cl), cl.h)
		if !ok {
			a = c.newArticle(id(cl), cl.h)
		}
		cl.a = a
	}
	// Touch each article's row, then its first pair's.
	for i := range cells {
		cells[i].ref = uint64(c.arts[int(cells[i].a)*c.artStride+artHead])
	}
	for i := range cells {
		if p := uint32(cells[i].ref); p != noID {
			ld.sink += uint64(c.pairs[int(p)*c.pairStride])
		}
	}
	for i := range cells {
		cl := &cells[i]
		cat := ld.ids[cl.cat[0]:cl.cat[1]]
		if !ld.have || !bytes.Equal(cat, ld.cat) {
			ld.ci, ld.cat, ld.have = c.internCat(string(cat)), append(ld.cat[:0], cat...), true
		}
		p := c.internPairCat(cl.a, ld.ci)
		key := p
		if cl.only {
			key |= categoryOnly
		}
		win := &c.win[cl.w]
		s := win.slot(cl.b)
		if s.n == 0 {
			s.id, s.open = cl.b, cl.b >= win.wlo
		}
		e := uint64(key)<<32 | cl.cnt
		if s.open {
			s.put(e)
		} else {
			s.tab = append(s.tab, e)
			s.n++
		}
		c.pairRow(p)[pairTotal+cl.w] += uint32(cl.cnt)
		if !cl.only {
			c.artRow(cl.a)[artTotal+cl.w] += uint32(cl.cnt)
		}
	}
	ld.cells, ld.ids = ld.cells[:0], ld.ids[:0]
}
