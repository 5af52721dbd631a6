package sketch

import (
	"cmp"
	"math"
	"math/bits"
	"runtime"
	"slices"
	"strings"
	"time"
	"unsafe"

	"github.com/cespare/xxhash/v2"
)

// Estimate is a sketched count: Count is never below the true count, and
// exceeds it by at most Bound with probability at least 1 - e^-depth.
type Estimate struct {
	Count uint64
	Bound uint64
}

// Entry is one article in a top-K answer, with its estimate.
type Entry struct {
	ArticleID string
	Count     uint64 // never below the true count
	Bound     uint64 // Count - Bound <= true count, with probability >= 1 - e^-depth
}

// Counts holds sketched sliding-window share counts for one task. See the
// package documentation for the semantics.
//
// Add, AddToCategory, Flush and Load modify c and must not run
// concurrently with any other method. The other methods only read: they
// may run concurrently with each other.
type Counts struct {
	opts     Options
	depth    int
	width    int
	shift    uint // 64 - log2(width): a column is the top bits of a hash
	capacity int  // of a candidate set
	maxCells int  // of a bucket's cell list
	win      []window
	// total holds every window's sum of its live buckets' sketches,
	// interleaved: counter i of window w is total[i*len(win)+w], so that
	// an Add finds a counter's totals in all windows in one cache line.
	total []uint64

	started bool
	wm      int64
	oldest  int64 // TooOld before it; valid once started

	// Categories by slot (1..MaxCategories); cats[0] stands for the
	// global group and is never live.
	catIdx map[string]int
	cats   []category

	// The article ids of candidate set members, by article hash, each
	// kept once. The next Flush writes the unstored ones and deletes the
	// stored ones that were dropped (deletedIDs); newIDs is its scratch.
	ids        table[idRef]
	filter     idFilter
	unstored   int
	deletedIDs []uint64
	newIDs     []uint64

	// The counter blocks of every bucket; a bucket's blocks are owned by
	// its first owner (bucket.owner) plus their index in the bucket.
	blocks    *blocks
	perBucket int    // blocks per bucket: depth × width / blockSize
	page      *page  // scratch of Flush and Load
	sorted    []cell // scratch of Flush
	// freezeAfter is Options.FreezeAfter in ms (negative: never), and
	// packScratch the scratch of freeze.
	freezeAfter int64
	packScratch []byte

	// Persistence.
	wroteLayout bool
	flushedWM   int64
	flushedAny  bool // flushedWM is valid
	key, val    []byte
}

type window struct {
	idx    int   // in Counts.win
	width  int64 // ms
	n      int64 // buckets
	hi, lo int64 // live buckets are [lo, hi]; valid once started
	// hiStart and loStart are the first ms of buckets hi and lo, and
	// hiSlot the ring slot of hi: most shares fall in bucket hi, found
	// without a division.
	hiStart, loStart int64
	hiSlot           int
	first            int // the number of buckets of the windows before this one
	slots            []bucket
	mass             uint64  // the sum of the live buckets' masses
	sets             []*cset // candidate sets by category slot; 0 is global
	watch            watchIndex
	deletedLo        int64 // stored buckets below this are deleted
}

// bucket is one time bucket of a window, held in ring slot id mod n: a
// sketch of depth × width counters in blocks (block.go), allocated as
// they are first incremented.
type bucket struct {
	id        int64
	live      bool
	metaDirty bool   // mass changed since the last Flush
	mass      uint64 // increments counted: shares × keys per share
	// owner is the owner of block 0 of the ring slot: block bi is owned
	// by owner + bi, whatever bucket the slot holds.
	owner uint32
	// refs holds the bucket's blocks by index (0: not allocated, zeros)
	// and nz their nonzero bits once it holds more than Counts.maxCells
	// counters (overflow); until then cells and index hold them
	// (cells.go). Both tables are off the Go heap, and kept by the ring
	// slot.
	refs     []blockRef
	nz       []uint64
	cells    []cell
	index    []uint16 // 1 + a position in cells; 0 empty
	overflow bool
	// packed is the handle of the bucket's packed counters while it is
	// frozen (freeze.go): its blocks are then released. 0 if not frozen.
	packed int32
	// packLarger is set when freeze found that packing would not save
	// memory; a change to the bucket clears it, so freeze tries again
	// only when the counters have changed.
	packLarger bool
	// nonzero counts the counters that became nonzero; dense is set at
	// expiry when the bucket overflowed with more than maxCells/2 of
	// them: the next bucket of the ring slot starts in blocks.
	nonzero int
	dense   bool
	// dirty lists the pages (PageSize counters) that changed since the
	// last Flush, in the order they changed; dirtyBits marks them.
	dirty     []int32
	dirtyBits []uint64
}

type category struct {
	name   string
	salt   uint64 // mixed into the keys of the category's counts
	lastTS int64  // newest share counted under it
	live   bool
	dirty  bool // changed (or freed) since the last Flush
	stored bool // a Flush wrote it
}

type idRef struct {
	id     string
	refs   int32 // candidate sets holding it
	stored bool  // a Flush wrote it
}

// New returns empty counts. It panics if opts.Validate fails: validate
// options that come from configuration first. Release returns the memory
// of its counters.
func New(opts Options) *Counts {
	if err := opts.Validate(); err != nil {
		panic(err)
	}
	c := emptyCounts(opts.withDefaults())
	c.blocks = newBlocks()
	c.blocks.keep = 2 * c.perBucket
	runtime.AddCleanup(c, (*blocks).drop, c.blocks)
	return c
}

// emptyCounts returns empty counts without blocks.
func emptyCounts(opts Options) *Counts {
	opts.Windows = slices.Clone(opts.Windows)
	depth, width := opts.Sizes()
	c := &Counts{
		opts:        opts,
		depth:       depth,
		width:       width,
		shift:       uint(64 - bits.TrailingZeros(uint(width))),
		capacity:    opts.Capacity(),
		maxCells:    min(depth*width/cellListDivisor, maxCellsLimit),
		catIdx:      make(map[string]int),
		cats:        make([]category, 1, opts.MaxCategories+1),
		perBucket:   depth * width / blockSize,
		freezeAfter: opts.FreezeAfter.Milliseconds(),
	}
	c.win = make([]window, len(opts.Windows))
	c.total = make([]uint64, depth*width*len(c.win))
	first := 0
	for i, s := range opts.Windows {
		c.win[i] = window{
			idx:       i,
			width:     s.Width().Milliseconds(),
			n:         int64(s.Buckets),
			first:     first,
			slots:     make([]bucket, s.Buckets),
			sets:      make([]*cset, opts.MaxCategories+1),
			watch:     watchIndex{visitAll: defaultVisitAll},
			deletedLo: math.MinInt64,
		}
		for j := range c.win[i].slots {
			c.win[i].slots[j].owner = uint32((first + j) * c.perBucket)
		}
		first += s.Buckets
	}
	if opts.FreezeAfter < 0 {
		c.freezeAfter = -1 // never
	}
	return c
}

// Release returns the memory of c's counters, which is not on the Go heap
// (see Memory in the package documentation). The queries answer as
// before, but c must not be changed after, except by Load, which makes it
// whole again. A Counts that is dropped without Release returns it when
// the garbage collector finds it unreachable.
func (c *Counts) Release() {
	c.blocks.drop()
	for w := range c.win {
		for i := range c.win[w].slots {
			s := &c.win[w].slots[i]
			s.refs, s.nz, s.packed = nil, nil, 0
		}
	}
}

// Options returns the options in effect, defaults filled in.
func (c *Counts) Options() Options {
	o := c.opts
	o.Windows = slices.Clone(o.Windows)
	return o
}

// Sizes returns the sketch depth and width.
func (c *Counts) Sizes() (depth, width int) { return c.depth, c.width }

// WindowIndex returns the index of the window named name.
func (c *Counts) WindowIndex(name string) (int, bool) {
	for i, w := range c.opts.Windows {
		if w.Name == name {
			return i, true
		}
	}
	return 0, false
}

// Watermark returns the largest event time applied so far, or 0 if none.
func (c *Counts) Watermark() int64 { return c.wm }

// Horizon returns the longest window's span: a share older than the
// watermark minus Horizon is older than every window.
func (c *Counts) Horizon() time.Duration {
	var h time.Duration
	for _, w := range c.opts.Windows {
		h = max(h, w.Size)
	}
	return h
}

// Hashing. Every hash is xxHash64 with seed 0, mixed with fixed
// constants: the same ids give the same cells in every process.
const (
	globalSalt   = 0x243f6a8885a308d3 // key salt of the global group
	categoryMix  = 0x13198a2e03707344 // mixed into a category's salt
	rowSeedMulti = 0x9e3779b97f4a7c15
)

// mix64 is the splitmix64 finalizer, a bijection that spreads every input
// bit over the output.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

func articleHash(id string) uint64 { return xxhash.Sum64String(id) }

func categorySalt(name string) uint64 { return mix64(xxhash.Sum64String(name) ^ categoryMix) }

// keyOf returns the sketch key of an article (by hash) in a group (by salt).
func keyOf(ha, salt uint64) uint64 { return mix64(ha ^ salt) }

// cols sets cols[r] to the index of key k's counter in row r of a sketch
// (rows are laid out one after the other).
func (c *Counts) cols(k uint64, cols *[MaxDepth]int) {
	for r := range c.depth {
		cols[r] = r*c.width + int(mix64(k+uint64(r+1)*rowSeedMulti)>>c.shift)
	}
}

func (c *Counts) salt(slot int) uint64 {
	if slot == 0 {
		return globalSalt
	}
	return c.cats[slot].salt
}

func (w *window) slot(b int64) *bucket { return &w.slots[b%w.n] }

// Add applies one share of articleID at event time ts (ms), globally and,
// if category is not "" and is counted (see Options.MaxCategories), in
// category: it counts in every window that covers its bucket once the
// watermark has moved to ts (if ts is newer). It returns false, changing
// nothing, if ts is negative or older than every window at the watermark.
func (c *Counts) Add(articleID, category string, ts int64) bool {
	return c.add(articleID, category, ts, false, AllWindows)
}

// AllWindows is the window mask of AddIn that counts in every window.
const AllWindows = ^uint64(0)

// AddIn is Add counting only in the windows of mask (bit w for window w;
// windows from 64 on always count). The watermark moves to ts as with Add.
func (c *Counts) AddIn(articleID, category string, ts int64, mask uint64) bool {
	return c.add(articleID, category, ts, false, mask)
}

// AddToCategoryIn is AddToCategory counting only in the windows of mask,
// for a share AddIn counted globally with the same mask.
func (c *Counts) AddToCategoryIn(articleID, category string, ts int64, mask uint64) bool {
	return category != "" && c.add(articleID, category, ts, true, mask)
}

// Advance moves the watermark to ts if it is newer, counting nothing.
func (c *Counts) Advance(ts int64) {
	switch {
	case ts < 0:
	case !c.started:
		c.start(ts)
	case ts > c.wm:
		c.advance(ts)
	}
	c.compactBlocks()
}

// AddToCategory applies one share of articleID at ts to category's group
// only, not to the global group, with the window rules of Add: for a
// share that Add counted globally (under no category) that also counts
// under category (one of its article's topics). Callers must keep to
// that: at most one AddToCategory per share and category, each for a
// share that Add counted globally at the same ts, so that no category
// count exceeds its article's global count; category estimates rely on
// it (see the package documentation). It returns false,
// changing nothing, for category "" and where Add would; it also returns
// false if category cannot be counted (MaxCategories other categories are
// live, or the name is longer than MaxIDLen), and then the share only
// moves the watermark.
func (c *Counts) AddToCategory(articleID, category string, ts int64) bool {
	return category != "" && c.add(articleID, category, ts, true, AllWindows)
}

func (c *Counts) add(id, category string, ts int64, only bool, mask uint64) bool {
	if ts < 0 || (c.started && c.tooOld(ts)) {
		return false
	}
	if !c.started {
		c.start(ts)
	} else if ts > c.wm {
		c.advance(ts)
	}
	slot := 0
	if category != "" {
		slot = c.slotFor(category)
	}
	if only && slot == 0 {
		return false
	}
	ha := articleHash(id)
	// An article no set holds is a member of none: offer need not look.
	// (The filter may say so of one no set holds.)
	kept := c.filter.mayHold(ha)
	var gcols, ccols [MaxDepth]int
	c.cols(keyOf(ha, globalSalt), &gcols)
	if slot != 0 {
		c.cols(keyOf(ha, c.cats[slot].salt), &ccols)
		if cat := &c.cats[slot]; ts > cat.lastTS {
			cat.lastTS, cat.dirty = ts, true
		}
	}
	for w := range c.win {
		if w < 64 && mask&(1<<w) == 0 {
			continue
		}
		win := &c.win[w]
		var b int64
		var s *bucket
		switch {
		case ts >= win.hiStart:
			b, s = win.hi, &win.slots[win.hiSlot]
		case ts < win.loStart:
			continue
		default:
			b = ts / win.width
			s = win.slot(b)
		}
		if !s.live {
			c.open(s, b)
		}
		s.metaDirty = true
		var g uint64
		if only {
			g = c.estimateCols(win, &gcols)
		} else {
			g = c.update(win, s, &gcols)
			c.offer(win, 0, ha, id, g, kept, &gcols, nil)
		}
		if slot != 0 {
			// A category count never exceeds the global count (see
			// AddToCategory), so both estimates bound it.
			c.offer(win, slot, ha, id, min(g, c.update(win, s, &ccols)), kept, &gcols, &ccols)
		}
	}
	// Blocks may have been released: by expiry, or moving to a wider
	// class.
	c.compactBlocks()
	return true
}

// update counts the key with counters cols once in bucket s of window win,
// with conservative update: only the counters equal to the key's minimum
// in the bucket are incremented. It returns the key's estimate in the
// window.
func (c *Counts) update(win *window, s *bucket, cols *[MaxDepth]int) uint64 {
	if s.packed != 0 {
		c.thaw(s)
	}
	if s.overflow {
		return c.updateBlocks(win, s, cols)
	}
	return c.updateCells(win, s, cols)
}

// updateCells is update of a bucket in cells.
func (c *Counts) updateCells(win *window, s *bucket, cols *[MaxDepth]int) uint64 {
	if len(s.cells)+c.depth > c.maxCells {
		c.toBlocks(s)
		return c.updateBlocks(win, s, cols)
	}
	s.mass++
	win.mass++
	var vals [MaxDepth]uint32
	var tots [MaxDepth]uint64
	var at [MaxDepth]int32 // positions in s.cells
	nw := len(c.win)
	m := uint32(math.MaxUint32)
	for r, i := range cols[:c.depth] {
		tots[r] = c.total[i*nw+win.idx]
		if at[r] = int32(s.find(i)); at[r] >= 0 {
			vals[r] = s.cells[at[r]].v
		}
		m = min(m, vals[r])
	}
	est := uint64(math.MaxUint64)
	if m == 0 {
		s.nonzero++ // at least one
	}
	for r, i := range cols[:c.depth] {
		t := tots[r]
		if vals[r] == m && m != math.MaxUint32 { // else saturated: see Limits
			if at[r] >= 0 {
				s.cells[at[r]].v = m + 1
			} else {
				s.insert(i, 1)
			}
			t++
			c.total[i*nw+win.idx] = t
			if pi := i / PageSize; s.dirtyBits[pi/64]&(1<<(pi%64)) == 0 {
				c.dirtyPage(s, pi)
			}
		}
		est = min(est, t)
	}
	return est
}

// updateBlocks is update of a bucket in blocks.
func (c *Counts) updateBlocks(win *window, s *bucket, cols *[MaxDepth]int) uint64 {
	s.mass++
	win.mass++
	var vals [MaxDepth]uint32
	var refs [MaxDepth]blockRef
	total, blockRefs, bl := c.total, s.refs, c.blocks
	nw, w := uint(len(c.win)), uint(win.idx)
	m := uint32(math.MaxUint32)
	for r, col := range cols[:c.depth] {
		i := uint(col)
		ref := blockRefs[i/blockSize]
		refs[r] = ref
		switch ref.class() { // 8 and 16 bits without a call
		case class8:
			vals[r] = bl.get8(ref.slot(), int(i%blockSize))
		case class16:
			vals[r] = bl.get16(ref.slot(), int(i%blockSize))
		case class32:
			vals[r] = bl.get(ref, int(i%blockSize))
		}
		m = min(m, vals[r])
	}
	est := uint64(math.MaxUint64)
	if m == 0 {
		s.nonzero++ // at least one
	}
	for r, col := range cols[:c.depth] {
		i := uint(col)
		t := total[i*nw+w]
		if vals[r] == m && m != math.MaxUint32 { // else saturated: see Limits
			switch ref := refs[r]; {
			case ref.class() == class8 && m < math.MaxUint8:
				bl.set8(ref.slot(), int(i%blockSize), m+1)
			case ref.class() == class16 && m < math.MaxUint16:
				bl.set16(ref.slot(), int(i%blockSize), m+1)
			default:
				bi := i / blockSize
				bl.set(&blockRefs[bi], s.owner+uint32(bi), int(i%blockSize), m+1)
			}
			if m == 0 {
				s.nz[i/blockSize] |= 1 << (i % blockSize)
			}
			t++
			total[i*nw+w] = t
			if pi := i / PageSize; s.dirtyBits[pi/64]&(1<<(pi%64)) == 0 {
				c.dirtyPage(s, int(pi))
			}
		}
		est = min(est, t)
	}
	return est
}

// dirtyPage lists page pi of s as changed.
func (c *Counts) dirtyPage(s *bucket, pi int) {
	s.packLarger = false
	s.dirtyBits[pi/64] |= 1 << (pi % 64)
	s.dirty = appendCapped(s.dirty, int32(pi), c.perBucket/blocksPerPage)
}

// estimate returns key k's estimate in window win: the least of its
// counters in the window's totals. For a category key, the estimate of
// the article is the lesser of this and its global key's estimate.
func (c *Counts) estimate(win *window, k uint64) uint64 {
	var cols [MaxDepth]int
	c.cols(k, &cols)
	return c.estimateCols(win, &cols)
}

func (c *Counts) estimateCols(win *window, cols *[MaxDepth]int) uint64 {
	est := uint64(math.MaxUint64)
	for _, i := range cols[:c.depth] {
		est = min(est, c.total[i*len(c.win)+win.idx])
	}
	return est
}

// open makes s the live bucket b: in blocks if the previous bucket of the
// ring slot was dense, else in cells.
func (c *Counts) open(s *bucket, b int64) {
	if s.dirtyBits == nil {
		s.dirtyBits = make([]uint64, (c.perBucket/blocksPerPage+63)/64)
	}
	s.id, s.live, s.mass, s.metaDirty, s.packLarger = b, true, 0, true, false
	s.nonzero, s.overflow = 0, s.dense
	if s.overflow {
		c.ensureRefs(s)
	}
}

// refAt returns the reference of the block owned by owner.
func (c *Counts) refAt(owner uint32) *blockRef {
	n := int(owner) / c.perBucket
	for w := range c.win {
		if win := &c.win[w]; n < win.first+int(win.n) {
			return &win.slots[n-win.first].refs[int(owner)%c.perBucket]
		}
	}
	panic("sketch: block owner out of range")
}

// addPage adds sign (1 or -1) times the counters of page pi of a bucket
// of window win to the window's totals.
func (c *Counts) addPage(win *window, pi int, p *[PageSize]uint32, sign int) {
	nw := len(c.win)
	tot := c.total[pi*PageSize*nw : (pi+1)*PageSize*nw]
	for j, v := range p {
		tot[j*nw+win.idx] += uint64(int64(sign) * int64(v))
	}
}

// cellListDivisor sets the most cells a bucket holds: depth × width /
// cellListDivisor (but at most maxCellsLimit).
const cellListDivisor = 32

// expire subtracts bucket s from the totals of window win and empties it.
// It collects the candidates whose estimates read a counter it held, for
// refresh.
func (c *Counts) expire(win *window, s *bucket) {
	x := &win.watch
	nw := len(c.win)
	if !s.overflow {
		for _, cl := range s.cells {
			c.total[int(cl.i)*nw+win.idx] -= uint64(cl.v)
			if !x.all && x.reads(int(cl.i)) {
				x.collect(int(cl.i))
			}
		}
		clear(s.index)
	} else if s.packed != 0 {
		c.expireFrozen(win, s)
	} else {
		for bi, nz := range s.nz {
			if nz == 0 {
				continue
			}
			base := bi * blockSize
			r := s.refs[bi]
			if r.class() == class8 && bits.OnesCount64(nz) <= blockSize/4 {
				// A sparse 8-bit block, as most are: without a call.
				cnt := c.blocks.counters8(r.slot())
				for w := nz; w != 0; w &= w - 1 {
					j := bits.TrailingZeros64(w)
					c.total[(base+j)*nw+win.idx] -= uint64(cnt[j])
					cnt[j] = 0
				}
			} else {
				c.blocks.subtract(r, nz, c.total[base*nw+win.idx:], nw)
			}
			if x.read != nil {
				// The block's counters candidates read.
				for w := nz & x.read[bi]; w != 0 && !x.all; w &= w - 1 {
					x.collect(base + bits.TrailingZeros64(w))
				}
			}
			c.blocks.release(r)
			s.refs[bi], s.nz[bi] = 0, 0
		}
	}
	s.dense = s.overflow && s.nonzero > c.maxCells/2
	for _, pi := range s.dirty {
		s.dirtyBits[pi/64] = 0
	}
	win.mass -= s.mass
	s.live, s.mass, s.metaDirty = false, 0, false
	s.dirty, s.cells, s.overflow = s.dirty[:0], s.cells[:0], false
}

// TooOld reports whether a share at ts would be older than every window
// at the current watermark, so that Add would not apply it.
func (c *Counts) TooOld(ts int64) bool { return ts < 0 || (c.started && c.tooOld(ts)) }

func (c *Counts) tooOld(ts int64) bool { return ts < c.oldest }

func (c *Counts) start(ts int64) {
	c.started = true
	c.wm = ts
	for i := range c.win {
		c.win[i].setRange(ts / c.win[i].width)
	}
	c.setOldest()
}

// setRange makes hi the newest bucket of w.
func (w *window) setRange(hi int64) {
	w.hi, w.lo = hi, hi-w.n+1
	w.hiStart, w.loStart, w.hiSlot = hi*w.width, w.lo*w.width, int(hi%w.n)
}

// setOldest sets c.oldest: a share before it is older than every window.
func (c *Counts) setOldest() {
	c.oldest = math.MaxInt64
	for i := range c.win {
		c.oldest = min(c.oldest, c.win[i].loStart)
	}
}

// advance moves the watermark to ts > c.wm: buckets that leave a window
// expire, the window's candidates whose counters they held are
// re-estimated, and categories whose every share expired are freed.
func (c *Counts) advance(ts int64) {
	c.wm = ts
	for i := range c.win {
		w := &c.win[i]
		if ts < w.hiStart+w.width { // in bucket hi
			continue
		}
		hi := ts / w.width
		lo := hi - w.n + 1
		for b := max(w.lo, 0); b < lo && b <= w.hi; b++ {
			if s := w.slot(b); s.live && s.id == b {
				c.expire(w, s)
			}
		}
		w.setRange(hi)
		if len(w.watch.touched) > 0 || w.watch.all {
			c.refresh(w)
		}
	}
	c.setOldest()
	for slot := 1; slot < len(c.cats); slot++ {
		if cat := &c.cats[slot]; cat.live && c.tooOld(cat.lastTS) {
			c.freeCategory(slot)
		}
	}
}

// slotFor returns the slot of category, giving it the lowest free one if
// it has none, or 0 if it cannot be counted.
func (c *Counts) slotFor(name string) int {
	if s, ok := c.catIdx[name]; ok {
		return s
	}
	if len(name) > c.opts.MaxIDLen {
		return 0
	}
	slot := 0
	for s := 1; s < len(c.cats); s++ {
		if !c.cats[s].live {
			slot = s
			break
		}
	}
	if slot == 0 {
		if len(c.cats) > c.opts.MaxCategories {
			return 0
		}
		slot = len(c.cats)
		c.cats = append(c.cats, category{})
	}
	name = strings.Clone(name)
	cat := &c.cats[slot]
	*cat = category{name: name, salt: categorySalt(name), live: true, dirty: true, stored: cat.stored}
	c.catIdx[name] = slot
	return slot
}

func (c *Counts) freeCategory(slot int) {
	cat := &c.cats[slot]
	delete(c.catIdx, cat.name)
	cat.live, cat.dirty = false, true
	for w := range c.win {
		if set := c.win[w].sets[slot]; set != nil {
			c.clearSet(&c.win[w], set)
		}
	}
}

// Queries.

func (c *Counts) validWindow(w int) bool { return w >= 0 && w < len(c.win) && c.started }

// bound returns the error bound of an estimate of n in window win.
func (c *Counts) bound(win *window, n uint64) uint64 {
	b := math.Ceil(float64(win.mass) * math.E / float64(c.width))
	return min(n, uint64(b))
}

// Mass returns the number of increments window w holds: one per share
// counted globally and one per share counted in a category. Error
// bounds are e/width × Mass (at most Epsilon × Mass).
func (c *Counts) Mass(w int) uint64 {
	if !c.validWindow(w) {
		return 0
	}
	return c.win[w].mass
}

// Count returns the estimate of articleID's global share count in window
// w (an index into Options().Windows).
func (c *Counts) Count(w int, articleID string) Estimate {
	return c.CategoryCount(w, "", articleID)
}

// CategoryCount returns the estimate of articleID's share count in
// category in window w. Category "" is the global group. A category that
// is not counted at the moment has no shares.
func (c *Counts) CategoryCount(w int, category, articleID string) Estimate {
	if !c.validWindow(w) {
		return Estimate{}
	}
	slot := 0
	if category != "" {
		s, ok := c.catIdx[category]
		if !ok {
			return Estimate{}
		}
		slot = s
	}
	win := &c.win[w]
	ha := articleHash(articleID)
	est := c.estimate(win, keyOf(ha, globalSalt))
	if slot != 0 {
		est = min(est, c.estimate(win, keyOf(ha, c.salt(slot))))
	}
	if set := win.sets[slot]; set != nil {
		if i, ok := set.index(ha); ok {
			est = min(est, set.heap[i].est)
		}
	}
	return Estimate{Count: est, Bound: c.bound(win, est)}
}

// Categories returns, sorted, the categories counted at the moment.
func (c *Counts) Categories() []string {
	out := make([]string, 0, len(c.catIdx))
	for name := range c.catIdx {
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}

// TopK returns the k articles with the highest estimates in window w,
// globally (category "") or in category, ordered by estimate descending
// and then article id ascending. They come from the window's candidate
// set for the group, so the answer may be shorter than k.
func (c *Counts) TopK(w int, category string, k int) []Entry {
	if !c.validWindow(w) || k <= 0 {
		return nil
	}
	slot := 0
	if category != "" {
		s, ok := c.catIdx[category]
		if !ok {
			return nil
		}
		slot = s
	}
	win := &c.win[w]
	set := win.sets[slot]
	if set == nil || len(set.heap) == 0 {
		return nil
	}
	// Sorted as small keys (estimate, id prefix, position), the ids read
	// only where estimates and prefixes tie.
	type key struct {
		est, pre uint64
		i        int
	}
	keys := make([]key, len(set.heap))
	for i, e := range set.heap {
		keys[i] = key{e.est, e.pre, i}
	}
	slices.SortFunc(keys, func(a, b key) int {
		if c := cmp.Compare(b.est, a.est); c != 0 {
			return c
		}
		if c := cmp.Compare(a.pre, b.pre); c != 0 {
			return c
		}
		return strings.Compare(set.heap[a.i].id, set.heap[b.i].id)
	})
	out := make([]Entry, min(k, len(keys)))
	for i := range out {
		e := &set.heap[keys[i].i]
		out[i] = Entry{ArticleID: e.id, Count: e.est, Bound: c.bound(win, e.est)}
	}
	return out
}

// MemoryBytes returns the bytes held by c: its counter blocks, off the Go
// heap, and its heap (an estimate for its maps). It is at most
// Options().MaxMemoryBytes().
func (c *Counts) MemoryBytes() int {
	n := int(unsafe.Sizeof(*c)) + cap(c.total)*8
	n += c.blocks.bytes()
	if c.page != nil {
		n += int(unsafe.Sizeof(page{}))
	}
	for i := range c.win {
		w := &c.win[i]
		n += int(unsafe.Sizeof(*w)) + cap(w.sets)*8
		n += cap(w.slots) * int(unsafe.Sizeof(bucket{}))
		for j := range w.slots {
			s := &w.slots[j]
			n += cap(s.refs)*4 + cap(s.dirty)*4 + cap(s.dirtyBits)*8 + cap(s.cells)*8 + cap(s.index)*2
		}
		for _, s := range w.sets {
			if s != nil {
				n += int(unsafe.Sizeof(*s)) + cap(s.heap)*int(unsafe.Sizeof(entry{})) + cap(s.pos.slots)*int(unsafe.Sizeof(tableSlot[int32]{})) + (cap(s.where)+cap(s.free))*4
			}
		}
		x := &w.watch
		n += cap(x.head)*4 + cap(x.read)*8 + cap(x.nodes)*int(unsafe.Sizeof(watchNode{})) + cap(x.members)*int(unsafe.Sizeof(watcher{}))
		n += cap(x.free)*4 + cap(x.touched)*4 + cap(x.marks)*8 + cap(x.changes)*int(unsafe.Sizeof(change{})) + cap(x.zeros)*8
	}
	n += cap(c.ids.slots)*int(unsafe.Sizeof(tableSlot[idRef]{})) + cap(c.filter.n)*2
	c.ids.all(func(_ uint64, r *idRef) { n += len(r.id) })
	n += (cap(c.newIDs) + cap(c.deletedIDs)) * 8
	n += cap(c.cats)*int(unsafe.Sizeof(category{})) + len(c.catIdx)*catMapEntry
	for _, cat := range c.cats {
		n += 2 * len(cat.name) // in cats and as the map key
	}
	return n + cap(c.key) + cap(c.val) + cap(c.sorted)*8 + cap(c.packScratch)
}
