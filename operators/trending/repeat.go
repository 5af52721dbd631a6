package trending

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"unsafe"

	"github.com/cespare/xxhash/v2"
	"github.com/newsflow/newsflow/state"
)

// Repeated shares: one user sharing one article again.
//
// # Semantics (RepeatShares: once)
//
// A share counts in a window w unless a share of the same article by the
// same user (the same user_id) already counts in w: that is, unless a
// share of the pair counted in w lies in a bucket w still covers at the
// watermark the task has once it has seen this share. A share that counts
// in no window moves the watermark on and changes nothing else; one that
// counts in some windows only (a user who shares again 10 minutes later
// counts again in 1m, not in 1h or 24h) counts in those, globally and in
// its categories alike. So at every watermark each window counts each
// (user, article) pair at most once, whatever order the shares arrive in:
// the pair's counted shares in w are at least w's span apart, and a late
// share lands in a bucket the window covers, where the counted one, if it
// is still covered, is found. After the counted share leaves the window,
// the user's next share counts again; the repeats in between never count,
// so a window in which the user shared only such repeats holds none of
// the pair's shares (a window that does not move the counted share with
// every repeat cannot say otherwise without taking counts back, which the
// sketch cannot).
//
// Which of a pair's shares counts depends on the order the task applies
// them in (the first one applied, of those a window covers): a replay of
// one partition, a crash recovery and a restore from the changelog apply
// it in the same order and give the same counts; records forwarded from
// other partitions may interleave differently, as for the sketch. With
// RepeatShares every (the behaviour before the setting existed) every
// share counts.
//
// Anonymous shares: every share names a non-empty user_id (the schema
// requires one); an HTTP client without a session may send any user_id,
// so "once" holds one account to one share per window, and a client
// inventing user ids is the HTTP layer's to limit per client address. A
// share with an empty user_id (none decodes) would count every time.
//
// # State
//
// A table of pairs, by 64-bit fingerprint of (user_id, article_id):
// per window, the newest bucket in which a share of the pair counted. A
// pair sits in one of two groups of 8 slots (chosen from its fingerprint,
// the emptier one on insert); a slot whose buckets every window has left
// is free. Two pairs with one fingerprint would be taken for one: with n
// pairs live, a new pair does so with probability n/2^64, and then its
// share counts once where it should count again, never twice.
//
// With exact counts the table grows when both groups of a pair are full:
// exact, like the counts, and watched by no budget of its own (its bytes
// are in Operator.MemoryBytes). In cms mode its size is fixed by
// RepeatPairs (the distinct pairs counted within the largest window that
// it holds at 75% full): when both groups are full, the slot of the pair
// whose record expires first moves into its group's spill record: the
// per-window newest bucket of the pairs spilled from the group, and a
// 64-bit Bloom filter (2 bits a pair) of their fingerprints, cleared with
// the buckets once no window covers them. A pair found in neither group
// whose bits are set in the spill record of one of its groups is judged
// by that record. A spilled pair's repeat is still found (its bits are
// set and its bucket is in the record, or newer), so an overfull table can
// only make a share count once that should count again: a new pair that
// matches a spill record still covered. At RepeatPairs live pairs
// no slot spilled in TestRepeatTableSpill; at twice as many, 0.8% of the
// new pairs were taken for repeats. Under a sustained overload the spill
// records stay covered and their filters fill, and that share grows.
//
// Keys, relative to the task's namespace:
//
//	'u' 0                  → setting (1 byte: 'o' once, 'e' every), fixed (1 byte),
//	                         windows (1 byte), groups (uint64 BE), per window its origin (int64 BE)
//	'u' 1 | chunk (uint64 BE) → records, each one of
//	        slot (uint64 BE), fingerprint (uint64 BE), windows × bucket (uint32 BE)
//	        1<<63 | group (uint64 BE), windows × bucket (uint32 BE), the filter (2 × uint32 BE)
//
// The table is a log: each Flush writes one chunk with the slots and
// spill records changed since the previous one (a share of a new pair
// adds 28 bytes with the default windows, and no key of its own, so the
// memtable takes one insert per commit), and Load applies the chunks in
// order. When the table grows or moves its origin, the next Flush
// rewrites it: one DeleteRange, then every record in chunks of up to 4096.
// When the log holds more than twice the records the table has (and at
// least 64Ki), it is compacted over several Flushes, 8192 records each
// (logCompaction), then the chunks from before are deleted. A bucket is
// stored as its offset from the window's origin (0: none), the origin
// being 2^31 buckets before the first watermark; when the watermark
// nears 2^32 buckets past the origin the table moves its origin forward
// (rewriting every group), which with 1 s buckets happens every 68 years
// of event time.

// Settings of OperatorOptions.RepeatShares.
const (
	// RepeatOnce counts a user's repeated shares of an article once per
	// window (see repeat.go).
	RepeatOnce = "once"
	// RepeatEvery counts every share.
	RepeatEvery = "every"
)

// DefaultRepeatPairs is how many (user, article) pairs counted within the
// largest window a cms-mode task's table is sized for (RepeatPairs): about
// 7.5 MiB per partition with the default windows (about 30 bytes a pair),
// 60 MiB for a node's 8, so that a cms node keeps within its memory budget.
const DefaultRepeatPairs = 1 << 18

// AllWindows is the window mask that counts a share in every window.
const AllWindows = ^uint64(0)

// maxRepeatWindows bounds the windows when RepeatShares is once: a window
// mask is a uint64.
const maxRepeatWindows = 64

// inMask reports whether window w counts under mask.
func inMask(mask uint64, w int) bool { return w >= 64 || mask&(1<<w) != 0 }

// ErrRepeatSharesChanged is returned by a task's Restore when the
// partition's counts were made with the other repeat_shares setting:
// counts of one cannot continue as the other. Rebuild with a replay.
var ErrRepeatSharesChanged = errors.New("trending: stored counts were made with another repeat_shares setting")

const (
	pairsPrefix   = 'u'
	pairSlots     = 8 // per group
	pairFill      = 0.75
	pairOriginLag = 1 << 31
	// pairRebaseAt is how far past the origin a window's watermark bucket
	// may go before the origin moves.
	pairRebaseAt = 1<<32 - 1<<24
)

var (
	pairsMetaKey = []byte{pairsPrefix, 0}
	pairsLogLo   = []byte{pairsPrefix, 1}
	pairsLogHi   = []byte{pairsPrefix, 2}
)

// pairFingerprint returns the fingerprint of a (user, article) pair; never
// 0 (an empty slot). Neither id holds a control character, so the NUL
// between them keeps ("ab","c") and ("a","bc") apart.
func pairFingerprint(buf []byte, user, article string) (uint64, []byte) {
	buf = append(append(append(buf[:0], user...), 0), article...)
	f := xxhash.Sum64(buf)
	if f == 0 {
		f = 1
	}
	return f, buf
}

// pairWindow is one window's geometry, as the counters have it.
type pairWindow struct {
	width, n int64
}

// repeatPairs is a task's table of counted pairs. It belongs to the task
// goroutine.
type repeatPairs struct {
	win     []pairWindow
	nw      int
	longest int  // the window of the largest span: its bucket picks a spill victim
	fixed   bool // cms mode: never grows, spills
	groups  uint64
	fps     []uint64 // groups × pairSlots; 0: empty
	vals    []uint32 // groups × pairSlots × nw: newest counted bucket - origin; 0: none
	spill   []uint32 // groups × (nw + 2): buckets, then the filter (fixed only)
	// hasSpill is a bitset of the groups whose spill record is not empty,
	// small enough to stay in cache: most lookups need not read a record.
	hasSpill []uint64
	origin   []int64 // per window
	started  bool

	// chunks hold the records of the slots and spill records changed since
	// the last Flush, as they changed (a later record of one overrides an
	// earlier), at most rewriteChunk a chunk; nChunks are in use, the last
	// with chunkRecs records. Their buffers are kept for the next Flush.
	chunks    [][]byte
	nChunks   int
	chunkRecs int
	rewrite   bool // every record: the table grew or moved its origin
	// compact is the log's compaction under way (compactLog), if active.
	compact  logCompaction
	chunk    uint64 // the next chunk's number
	logged   int    // records in the log
	used     int    // slots with a fingerprint
	wroteSet bool   // the meta key holds the current layout
	spills   uint64 // slots spilled, ever (since Load)

	lo, b []int64  // scratch, per window
	judge []uint32 // scratch, per window
	key   []byte
}

// newRepeatPairs returns an empty table for the windows; fixed tables hold
// pairs live pairs at pairFill, growing ones start small.
func newRepeatPairs(ws []WindowSpec, fixed bool, pairs int) *repeatPairs {
	t := &repeatPairs{nw: len(ws), fixed: fixed}
	var span int64
	for i, w := range ws {
		t.win = append(t.win, pairWindow{width: w.Width().Milliseconds(), n: int64(w.Buckets)})
		if s := w.Size.Milliseconds(); s > span {
			span, t.longest = s, i
		}
	}
	n := 1024
	if fixed {
		n = pairs
	}
	t.alloc(uint64(math.Ceil(float64(n)/(pairFill*pairSlots))) + 1)
	t.origin = make([]int64, t.nw)
	t.lo, t.b, t.judge = make([]int64, t.nw), make([]int64, t.nw), make([]uint32, t.nw)
	return t
}

func (t *repeatPairs) alloc(groups uint64) {
	t.groups, t.used = groups, 0
	t.fps = make([]uint64, groups*pairSlots)
	t.vals = make([]uint32, groups*pairSlots*uint64(t.nw))
	if t.fixed {
		t.spill = make([]uint32, groups*uint64(t.nw+2))
		t.hasSpill = make([]uint64, (groups+63)/64)
	}
	t.nChunks, t.chunkRecs = 0, 0
}

// groupsOf returns the two groups a fingerprint may sit in.
func (t *repeatPairs) groupsOf(f uint64) (uint64, uint64) {
	g1, _ := bits.Mul64(f, t.groups)
	g2, _ := bits.Mul64(bits.RotateLeft64(f*0x9e3779b97f4a7c15, 32), t.groups)
	return g1, g2
}

func (t *repeatPairs) row(slot uint64) []uint32 {
	i := slot * uint64(t.nw)
	return t.vals[i : i+uint64(t.nw) : i+uint64(t.nw)]
}

// spillRow is group g's spill record: nw buckets, then 64 filter bits.
func (t *repeatPairs) spillRow(g uint64) []uint32 {
	n := uint64(t.nw + 2)
	return t.spill[g*n : g*n+n : g*n+n]
}

// spillBits are the filter bits of fingerprint f (bits apart from those
// that choose its groups).
func spillBits(f uint64) uint64 { return 1<<(f>>8&63) | 1<<(f>>20&63) }

func filterOf(sp []uint32, nw int) uint64 { return uint64(sp[nw])<<32 | uint64(sp[nw+1]) }

// spilled returns group g's spill record if f may be in it, after
// clearing a record no window covers any more.
func (t *repeatPairs) spilled(g, f uint64) []uint32 {
	if t.hasSpill[g/64]&(1<<(g%64)) == 0 {
		return nil
	}
	sp := t.spillRow(g)
	bits := filterOf(sp, t.nw)
	if bits == 0 {
		return nil
	}
	if !t.live(sp[:t.nw]) {
		clear(sp)
		t.hasSpill[g/64] &^= 1 << (g % 64)
		t.log(spillDirty | g)
		return nil
	}
	if b := spillBits(f); bits&b == b {
		return sp
	}
	return nil
}

// live reports whether a record row still covers a bucket of some window
// (t.lo set for the watermark).
func (t *repeatPairs) live(row []uint32) bool {
	for w, v := range row {
		if v != 0 && t.origin[w]+int64(v) >= t.lo[w] {
			return true
		}
	}
	return false
}

// spillDirty marks a spill record (by group) among the logged items.
const spillDirty = 1 << 63

// log appends the current record of item d (a slot, or spillDirty|group)
// to the chunks of the next Flush.
func (t *repeatPairs) log(d uint64) {
	if t.nChunks == 0 || t.chunkRecs == rewriteChunk {
		if t.nChunks == len(t.chunks) {
			t.chunks = append(t.chunks, nil)
		}
		t.chunks[t.nChunks] = t.chunks[t.nChunks][:0]
		t.nChunks++
		t.chunkRecs = 0
	}
	c := &t.chunks[t.nChunks-1]
	*c = t.appendRecord(*c, d)
	t.chunkRecs++
}

// Decide applies one share of the pair with fingerprint f at ts, with the
// partition's watermark wm before it: it returns the mask of the windows
// in which the share counts (0: a repeat in every window that covers it)
// and records the pair as counted in them, and the mask of the windows
// that cover ts at the watermark (the others count the share nowhere).
func (t *repeatPairs) Decide(f uint64, ts, wm int64) (mask, covered uint64) {
	wm = max(wm, ts)
	if !t.started {
		t.started = true
		for w, x := range t.win {
			t.origin[w] = wm/x.width - pairOriginLag
		}
		t.wroteSet = false
	}
	rebase := false
	for w, x := range t.win {
		hi := wm / x.width
		t.lo[w], t.b[w] = hi-x.n+1, ts/x.width
		rebase = rebase || hi-t.origin[w] >= pairRebaseAt
	}
	if rebase {
		t.rebase(wm)
	}
	g1, g2 := t.groupsOf(f)
	slot, found := t.find(f, g1, g2)
	var judged []uint32 // what the pair's record says: its slot, or the spill records
	if found {
		judged = t.row(slot)
	} else if t.fixed {
		judged = t.judge
		clear(judged)
		for _, g := range [2]uint64{g1, g2} {
			if sp := t.spilled(g, f); sp != nil {
				for w := range judged {
					judged[w] = max(judged[w], sp[w])
				}
			}
		}
	}
	for w := range t.win {
		if t.b[w] < t.lo[w] {
			continue // not covered: counts nowhere in w
		}
		covered |= 1 << w
		if judged != nil && judged[w] != 0 && t.origin[w]+int64(judged[w]) >= t.lo[w] {
			continue // a counted share of the pair is in w
		}
		mask |= 1 << w
	}
	if mask == 0 {
		return 0, covered
	}
	if !found {
		slot = t.insert(f, g1, g2)
		row := t.row(slot)
		if judged != nil {
			copy(row, judged) // the spill records' buckets bound the pair's
		} else {
			clear(row)
		}
	}
	row := t.row(slot)
	for w := range t.win {
		if mask&(1<<w) != 0 {
			row[w] = uint32(t.b[w] - t.origin[w])
		}
	}
	t.log(slot)
	return mask, covered
}

// find returns the slot holding f in g1 or g2.
func (t *repeatPairs) find(f, g1, g2 uint64) (uint64, bool) {
	for _, g := range [2]uint64{g1, g2} {
		base := g * pairSlots
		for i, x := range t.fps[base : base+pairSlots] {
			if x == f {
				return base + uint64(i), true
			}
		}
	}
	return 0, false
}

// empties returns the first empty slot of group g and how many g has;
// it reads the fingerprints only.
func (t *repeatPairs) empties(g uint64) (slot uint64, n int) {
	base := g * pairSlots
	for i, f := range t.fps[base : base+pairSlots] {
		if f == 0 {
			if n == 0 {
				slot = base + uint64(i)
			}
			n++
		}
	}
	return slot, n
}

// expired returns a slot of group g whose buckets every window has left.
func (t *repeatPairs) expired(g uint64) (uint64, bool) {
	for s := g * pairSlots; s < (g+1)*pairSlots; s++ {
		if !t.live(t.row(s)) {
			return s, true
		}
	}
	return 0, false
}

// free returns a free slot of g1 or g2: an empty one of the emptier
// group, else one whose record expired.
func (t *repeatPairs) free(g1, g2 uint64) (uint64, bool) {
	s1, n1 := t.empties(g1)
	s2, n2 := t.empties(g2)
	switch {
	case n1 > 0 && n1 >= n2:
		return s1, true
	case n2 > 0:
		return s2, true
	}
	if s, ok := t.expired(g1); ok {
		return s, true
	}
	return t.expired(g2)
}

// insert returns a slot for f, which neither group holds: a free one of
// the emptier group; else the table grows (exact) or spills the slot
// whose record in the longest window is oldest (fixed).
func (t *repeatPairs) insert(f, g1, g2 uint64) uint64 {
	for {
		s, ok := t.free(g1, g2)
		switch {
		case ok:
		case t.fixed:
			s = t.victim(g1, g2)
			g := s / pairSlots
			t.spilled(g, 0) // clears a record no window covers
			sp, row := t.spillRow(g), t.row(s)
			for w, v := range row {
				sp[w] = max(sp[w], v)
			}
			bits := filterOf(sp, t.nw) | spillBits(t.fps[s])
			sp[t.nw], sp[t.nw+1] = uint32(bits>>32), uint32(bits)
			t.hasSpill[g/64] |= 1 << (g % 64)
			t.log(spillDirty | g)
			t.spills++
		default:
			t.grow()
			g1, g2 = t.groupsOf(f)
			continue
		}
		if t.fps[s] == 0 {
			t.used++
		}
		t.fps[s] = f // Decide logs the slot once it holds the pair's buckets
		return s
	}
}

// victim returns the slot of g1 or g2 whose bucket in the longest window
// is oldest: the record that would expire first.
func (t *repeatPairs) victim(g1, g2 uint64) uint64 {
	best, bestV := uint64(math.MaxUint64), uint32(math.MaxUint32)
	for _, g := range [2]uint64{g1, g2} {
		for s := g * pairSlots; s < (g+1)*pairSlots; s++ {
			if v := t.row(s)[t.longest]; best == math.MaxUint64 || v < bestV {
				best, bestV = s, v
			}
		}
	}
	return best
}

// grow doubles the groups and moves the live records into them.
func (t *repeatPairs) grow() {
	fps, vals := t.fps, t.vals
	for groups := t.groups * 2; ; groups *= 2 {
		t.alloc(groups)
		if t.reinsert(fps, vals) {
			break
		}
	}
	t.rewrite = true
}

// reinsert puts the live records of fps/vals into the (empty, growing)
// table; false if a pair found both its groups full.
func (t *repeatPairs) reinsert(fps []uint64, vals []uint32) bool {
	for i, f := range fps {
		row := vals[i*t.nw : (i+1)*t.nw]
		if f == 0 || !t.live(row) {
			continue
		}
		g1, g2 := t.groupsOf(f)
		s, ok := t.free(g1, g2)
		if !ok {
			return false
		}
		if t.fps[s] == 0 {
			t.used++
		}
		t.fps[s] = f
		copy(t.row(s), row)
	}
	return true
}

// rebase moves every window's origin to pairOriginLag buckets behind the
// watermark wm, dropping the records no window covers (t.lo is set).
func (t *repeatPairs) rebase(wm int64) {
	shift := make([]int64, t.nw)
	for w, x := range t.win {
		o := wm/x.width - pairOriginLag
		shift[w], t.origin[w] = o-t.origin[w], o
	}
	move := func(row []uint32, lo []int64) {
		for w, v := range row {
			if v == 0 || t.origin[w]-shift[w]+int64(v) < lo[w] {
				row[w] = 0
			} else {
				row[w] = uint32(int64(v) - shift[w])
			}
		}
	}
	for s, f := range t.fps {
		if f != 0 {
			move(t.row(uint64(s)), t.lo)
		}
	}
	if t.fixed {
		for g := range t.groups {
			sp := t.spillRow(g)
			if move(sp[:t.nw], t.lo); !slices.ContainsFunc(sp[:t.nw], func(v uint32) bool { return v != 0 }) {
				clear(sp)
				t.hasSpill[g/64] &^= 1 << (g % 64)
			}
		}
	}
	t.rewrite, t.wroteSet = true, false
}

// Len returns the occupied slots (live or not yet reclaimed).
func (t *repeatPairs) Len() int { return t.used }

// MemoryBytes is the table's heap.
func (t *repeatPairs) MemoryBytes() int {
	n := int(unsafe.Sizeof(*t)) + 8*cap(t.fps) + 4*cap(t.vals) + 4*cap(t.spill) + 8*cap(t.hasSpill) + cap(t.key)
	for _, c := range t.chunks {
		n += cap(c) + 24
	}
	return n
}

// appendRecord appends the record of item d (a slot, or spillDirty|group) to b.
func (t *repeatPairs) appendRecord(b []byte, d uint64) []byte {
	b = binary.BigEndian.AppendUint64(b, d)
	var row []uint32
	if d&spillDirty != 0 {
		row = t.spillRow(d &^ spillDirty)
	} else {
		b = binary.BigEndian.AppendUint64(b, t.fps[d])
		row = t.row(d)
	}
	for _, v := range row {
		b = binary.BigEndian.AppendUint32(b, v)
	}
	return b
}

// rewriteChunk bounds the records of a chunk.
const rewriteChunk = 4096

// Flush stages the records changed since the last Flush, as chunks of the
// log, or the whole table (see repeat.go), and the layout.
func (t *repeatPairs) Flush(w state.Writer) error {
	if !t.started {
		return nil // nothing counted yet
	}
	if !t.wroteSet || t.rewrite {
		if err := w.Set(pairsMetaKey, t.meta(RepeatOnce)); err != nil {
			return fmt.Errorf("trending: flush repeat pairs: %w", err)
		}
		t.wroteSet = true
	}
	if !t.rewrite && !t.compact.active && t.logged > 1<<16 && t.logged > 2*t.Len() {
		t.compact = logCompaction{active: true, from: t.chunk, base: t.logged}
	}
	if t.compact.active && !t.rewrite {
		if err := t.compactLog(w); err != nil {
			return err
		}
	}
	if t.rewrite {
		t.compact = logCompaction{}
		if err := w.DeleteRange(pairsLogLo, pairsLogHi); err != nil {
			return fmt.Errorf("trending: flush repeat pairs: %w", err)
		}
		t.logged, t.nChunks, t.chunkRecs = 0, 0, 0
		for s, f := range t.fps {
			if f != 0 {
				t.log(uint64(s))
			}
		}
		if t.fixed {
			for g := range t.groups {
				if slices.ContainsFunc(t.spillRow(g), func(v uint32) bool { return v != 0 }) {
					t.log(spillDirty | g)
				}
			}
		}
		t.rewrite = false
	}
	for i, c := range t.chunks[:t.nChunks] {
		t.key = binary.BigEndian.AppendUint64(append(t.key[:0], pairsLogLo...), t.chunk)
		if err := w.Set(t.key, c); err != nil {
			return fmt.Errorf("trending: flush repeat pairs: %w", err)
		}
		t.chunk++
		if i < t.nChunks-1 {
			t.logged += rewriteChunk
		} else {
			t.logged += t.chunkRecs
		}
	}
	t.nChunks, t.chunkRecs = 0, 0
	// Keep the buffers of a usual commit, not those of a rewrite.
	if len(t.chunks) > keptChunks {
		clear(t.chunks[keptChunks:])
		t.chunks = t.chunks[:keptChunks]
	}
	return nil
}

// A log that holds more than twice the records the table has is
// compacted a part at a time, so that no commit carries the whole table
// (a node's tasks reach the threshold together, and eight tables in one
// set of commits took about 100 MB of batches): from the chunk the
// compaction starts at (from), each Flush also logs the current record of
// up to compactRecords more of the table's slots and spill records, in
// table order, and once every one is logged the chunks before from are
// deleted. Until then Load reads the old chunks first and every newer
// record after them, as it would without the compaction; after it, each
// slot's newest record is in the chunks kept (logged by the pass, or
// changed after it), as after a rewrite.
type logCompaction struct {
	active bool
	from   uint64 // the first chunk of the compaction
	next   uint64 // the next item: a slot, then len(fps)+g for group g's spill record
	base   int    // the records in the chunks before from
}

// compactRecords bounds the records a Flush logs for the compaction.
const compactRecords = 2 * rewriteChunk

// compactLog logs the next part of the table for the compaction and, when
// that was the last, deletes the chunks before it.
func (t *repeatPairs) compactLog(w state.Writer) error {
	c := &t.compact
	slots, end := uint64(len(t.fps)), uint64(len(t.fps))
	if t.fixed {
		end += t.groups
	}
	for n := 0; c.next < end && n < compactRecords; c.next++ {
		switch {
		case c.next < slots && t.fps[c.next] != 0:
			t.log(c.next)
			n++
		case c.next >= slots && slices.ContainsFunc(t.spillRow(c.next-slots), func(v uint32) bool { return v != 0 }):
			t.log(spillDirty | (c.next - slots))
			n++
		}
	}
	if c.next < end {
		return nil
	}
	hi := binary.BigEndian.AppendUint64(append([]byte(nil), pairsLogLo...), c.from)
	if err := w.DeleteRange(pairsLogLo, hi); err != nil {
		return fmt.Errorf("trending: flush repeat pairs: %w", err)
	}
	t.logged -= c.base
	*c = logCompaction{}
	return nil
}

// keptChunks is how many chunk buffers a table keeps between commits.
const keptChunks = 2

func (t *repeatPairs) meta(setting string) []byte {
	b := []byte{setting[0], 0, byte(t.nw)}
	if t.fixed {
		b[1] = 1
	}
	b = binary.BigEndian.AppendUint64(b, t.groups)
	for _, o := range t.origin {
		b = binary.BigEndian.AppendUint64(b, uint64(o))
	}
	return b
}

// storedRepeat returns the repeat_shares setting the state in r holds, ""
// for none (state written before the setting existed, or empty).
func storedRepeat(r state.Reader) (string, []byte, error) {
	v, ok, err := r.Get(pairsMetaKey)
	if err != nil || !ok {
		return "", nil, err
	}
	switch {
	case len(v) >= 1 && v[0] == 'e':
		return RepeatEvery, v, nil
	case len(v) >= 3 && v[0] == 'o':
		return RepeatOnce, v, nil
	}
	return "", nil, fmt.Errorf("trending: corrupt repeat pairs layout %x", v)
}

// Load replaces the table with the one stored in r (meta, the value of
// pairsMetaKey, nil for none). A stored table of another mode or window
// count is refused.
func (t *repeatPairs) Load(r state.Reader, meta []byte) error {
	if meta == nil {
		return nil
	}
	if len(meta) != 3+8+8*int(meta[2]) || int(meta[2]) != t.nw || (meta[1] == 1) != t.fixed {
		return fmt.Errorf("%w: the repeat pairs were stored for other windows or another counter", ErrLayoutChanged)
	}
	groups := binary.BigEndian.Uint64(meta[3:])
	if t.fixed && groups != t.groups {
		return fmt.Errorf("%w: the repeat pairs table has %d groups, trending.repeat_pairs asks for %d", ErrLayoutChanged, groups, t.groups)
	}
	t.alloc(groups)
	for w := range t.origin {
		t.origin[w] = int64(binary.BigEndian.Uint64(meta[11+8*w:]))
	}
	t.started, t.wroteSet = true, true
	slotLen, spillLen := 16+4*t.nw, 8+4*(t.nw+2)
	return r.Scan(pairsLogLo, pairsLogHi, func(k, v []byte) error {
		if len(k) != 10 {
			return fmt.Errorf("trending: corrupt repeat pairs key %x", k)
		}
		t.chunk = max(t.chunk, binary.BigEndian.Uint64(k[2:])+1)
		for len(v) > 0 {
			if len(v) < 8 {
				return fmt.Errorf("trending: corrupt repeat pairs chunk %x", k)
			}
			d := binary.BigEndian.Uint64(v)
			var row []uint32
			switch {
			case d&spillDirty == 0 && d < uint64(len(t.fps)) && len(v) >= slotLen:
				if t.fps[d] == 0 {
					t.used++
				}
				t.fps[d] = binary.BigEndian.Uint64(v[8:])
				row, v = t.row(d), v[16:]
			case d&spillDirty != 0 && t.fixed && d&^spillDirty < t.groups && len(v) >= spillLen:
				g := d &^ spillDirty
				row, v = t.spillRow(g), v[8:]
				t.hasSpill[g/64] |= 1 << (g % 64) // a cleared record reads as empty
			default:
				return fmt.Errorf("trending: corrupt repeat pairs chunk %x: record %x", k, d)
			}
			for i := range row {
				row[i] = binary.BigEndian.Uint32(v[4*i:])
			}
			v = v[4*len(row):]
			t.logged++
		}
		return nil
	})
}

// restoreRepeat loads the task's repeat pairs (once) from r, refusing
// state counted with the other setting. State written before the setting
// existed (counts, and no setting stored) counted every share; it is
// taken as it is, and with once a pair's share before that and one after
// may both count until the largest window has passed them.
func (t *task) restoreRepeat(r state.Reader) error {
	mode := t.op.opts.RepeatShares
	stored, meta, err := storedRepeat(r)
	if err != nil {
		return err
	}
	if stored != "" && stored != mode {
		return fmt.Errorf("%w: partition %d was counted with repeat_shares %s and trending.repeat_shares is %s: %s, or set trending.repeat_shares: %s again",
			ErrRepeatSharesChanged, t.p, stored, mode, replayHint, stored)
	}
	t.wroteEvery = stored == RepeatEvery
	t.pairs = nil
	if mode != RepeatOnce {
		return nil
	}
	if stored == "" {
		if counted, _, err := storedMode(r); err != nil {
			return err
		} else if counted != "" {
			t.log.Warn("trending counts made before repeat_shares existed counted every share; repeats count once from now on",
				"partition", t.p)
		}
	}
	t.pairs = newRepeatPairs(t.op.opts.Counts.Windows, t.op.opts.Counter == CounterCMS, t.op.opts.RepeatPairs)
	if err := t.pairs.Load(r, meta); err != nil {
		if errors.Is(err, ErrLayoutChanged) {
			return fmt.Errorf("partition %d: %w: %s, or restore the previous settings", t.p, err, replayHint)
		}
		return err
	}
	return nil
}

// flushRepeat stages the repeat pairs changed since the last Flush, or
// stores the every setting once.
func (t *task) flushRepeat(w state.Writer) error {
	if t.pairs != nil {
		return t.pairs.Flush(w)
	}
	if t.wroteEvery || t.part.counts.Watermark() == 0 {
		return nil // stored, or nothing counted yet: either setting may go on
	}
	if err := w.Set(pairsMetaKey, []byte{'e'}); err != nil {
		return fmt.Errorf("trending: flush repeat_shares: %w", err)
	}
	t.wroteEvery = true
	return nil
}
