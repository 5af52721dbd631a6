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
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/newsflow/newsflow/internal/option"
	"github.com/newsflow/newsflow/operators/internal/sketch"
)

// WindowSpec describes one sliding window: Buckets buckets of width
// Size/Buckets. The exact counts and the sketch share the type.
type WindowSpec = sketch.WindowSpec

// DefaultWindows returns the windows trending uses unless configured:
// "1m" (60 buckets of 1 s), "1h" (60 of 1 min) and "24h" (96 of 15 min).
func DefaultWindows() []WindowSpec { return sketch.DefaultWindows() }

// Limits on the window layout.
const (
	MaxWindows = sketch.MaxWindows // the window index is one byte in keys
	MaxBuckets = sketch.MaxBuckets // buckets per window
)

// Options configures a [Counts]. The zero value means [DefaultOptions].
type Options struct {
	// Windows are the sliding windows to count, addressed by their index in
	// this slice. Empty means DefaultWindows().
	Windows []WindowSpec `yaml:"windows"`
	// CompactAfter is how far behind the watermark a bucket is compacted
	// into an exact-length array (in whole milliseconds; zero means 5
	// minutes). It trades memory for the cost of a share that lands in a
	// compacted bucket, which is reopened; it never changes a count.
	CompactAfter time.Duration `yaml:"-"`
}

// DefaultOptions returns the default windows and compaction after 5 minutes.
func DefaultOptions() Options {
	return Options{Windows: DefaultWindows(), CompactAfter: 5 * time.Minute}
}

func (o Options) withDefaults() Options {
	if len(o.Windows) == 0 {
		o.Windows = nil // empty means the default windows too
	}
	option.Fill(&o, DefaultOptions())
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
	return c.add(articleID, category, ts, false, AllWindows)
}

// AddIn is Add counting only in the windows of mask (bit w for window w;
// windows from 64 on always count): the windows where the share is not a
// repeat (OperatorOptions.RepeatShares). The watermark moves to ts as with
// Add.
func (c *Counts) AddIn(articleID, category string, ts int64, mask uint64) bool {
	return c.add(articleID, category, ts, false, mask)
}

// AddToCategoryIn is AddToCategory counting only in the windows of mask,
// for a share AddIn counted with the same mask.
func (c *Counts) AddToCategoryIn(articleID, category string, ts int64, mask uint64) bool {
	return category != "" && c.add(articleID, category, ts, true, mask)
}

// Advance moves the watermark to ts if it is newer, counting nothing: for
// a share that counts in no window (a repeat in every one), which still
// moves event time on as any share does.
func (c *Counts) Advance(ts int64) {
	switch {
	case ts < 0:
	case !c.started:
		c.start(ts)
	case ts > c.wm:
		c.advance(ts)
	}
}

// AddToCategory applies one share of articleID at ts to category's family
// only, not to the global family, with the window rules of Add: for a
// share that Add counted globally (under no category) and that counts
// under category too (one of its article's topics). It returns false,
// changing nothing, for category "" (the global family) and where Add
// would.
func (c *Counts) AddToCategory(articleID, category string, ts int64) bool {
	return category != "" && c.add(articleID, category, ts, true, AllWindows)
}

func (c *Counts) add(articleID, category string, ts int64, only bool, mask uint64) bool {
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
		if b < win.lo || !inMask(mask, w) {
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
