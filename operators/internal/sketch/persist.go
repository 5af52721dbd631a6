package sketch

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"slices"

	"github.com/newsflow/newsflow/state"
)

// Key kinds: the byte after Options.Prefix. See Persistence in the
// package documentation.
const (
	kindLayout    = 'c'
	kindWatermark = 'm'
	kindBucket    = 'b'
	kindCategory  = 'g'
	kindID        = 'i'
	kindSet       = 'k'
)

const layoutVersion = 1

// ErrLayoutChanged is returned by [Counts.Load] when the stored state was
// written with a different sketch layout (depth, width, windows, or
// category cap) than the Counts was created with. The state cannot be
// reinterpreted; rebuild it by replaying the log.
var ErrLayoutChanged = errors.New("sketch: stored layout differs from options")

// ErrCorrupt is wrapped by the errors Load returns for stored state it
// cannot decode.
var ErrCorrupt = errors.New("sketch: malformed state")

func (c *Counts) layout() []byte {
	v := []byte{layoutVersion}
	v = binary.AppendUvarint(v, uint64(c.depth))
	v = binary.AppendUvarint(v, uint64(c.width))
	v = binary.AppendUvarint(v, PageSize)
	v = binary.AppendUvarint(v, uint64(c.opts.MaxCategories))
	v = binary.AppendUvarint(v, uint64(len(c.win)))
	for _, w := range c.win {
		v = binary.AppendUvarint(v, uint64(w.width))
		v = binary.AppendUvarint(v, uint64(w.n))
	}
	return v
}

func (c *Counts) kindKey(kind byte) []byte {
	c.key = append(c.key[:0], c.opts.Prefix, kind)
	return c.key
}

func (c *Counts) bucketKey(w int, b int64) []byte {
	k := append(c.kindKey(kindBucket), byte(w))
	c.key = binary.BigEndian.AppendUint64(k, uint64(b))
	return c.key
}

func (c *Counts) kindRange(kind byte) (lo, hi []byte) {
	return []byte{c.opts.Prefix, kind}, []byte{c.opts.Prefix, kind + 1}
}

// Flush stages into wr every change since the previous Flush: the pages of
// counters that changed, the masses of the buckets that changed, the
// removal of the buckets that expired, the watermark, the categories, and
// the candidate sets that changed with the article ids they refer to.
// Commit wr atomically with the input offsets the changes came from.
//
// After Flush, c assumes wr is committed. If it is not (wr discarded, the
// commit failed, or Flush returned an error), c no longer matches the
// store: discard c and Load a new one from committed state.
func (c *Counts) Flush(wr state.Writer) error {
	if !c.wroteLayout {
		if err := wr.Set(c.kindKey(kindLayout), c.layout()); err != nil {
			return fmt.Errorf("sketch: flush layout: %w", err)
		}
		c.wroteLayout = true
	}
	if !c.started {
		return nil
	}
	if !c.flushedAny || c.flushedWM != c.wm {
		c.val = binary.BigEndian.AppendUint64(c.val[:0], uint64(c.wm))
		if err := wr.Set(c.kindKey(kindWatermark), c.val); err != nil {
			return fmt.Errorf("sketch: flush watermark: %w", err)
		}
		c.flushedWM, c.flushedAny = c.wm, true
	}
	for w := range c.win {
		if err := c.flushWindow(wr, w); err != nil {
			return fmt.Errorf("sketch: flush window %d: %w", w, err)
		}
	}
	if err := c.flushCategories(wr); err != nil {
		return fmt.Errorf("sketch: flush categories: %w", err)
	}
	if err := c.flushIDs(wr); err != nil {
		return fmt.Errorf("sketch: flush ids: %w", err)
	}
	for w := range c.win {
		if err := c.flushSets(wr, w); err != nil {
			return fmt.Errorf("sketch: flush candidates of window %d: %w", w, err)
		}
	}
	// Every bucket's pages are stored now: pack the old ones.
	c.freezeOld()
	return nil
}

func (c *Counts) flushWindow(wr state.Writer, w int) error {
	win := &c.win[w]
	if win.lo > 0 && win.lo > win.deletedLo {
		start := bytes.Clone(c.bucketKey(w, 0))
		if err := wr.DeleteRange(start, c.bucketKey(w, win.lo)); err != nil {
			return err
		}
		win.deletedLo = win.lo
	}
	for i := range win.slots {
		s := &win.slots[i]
		if !s.live {
			continue
		}
		if s.metaDirty {
			c.val = binary.AppendUvarint(c.val[:0], s.mass)
			if err := wr.Set(c.bucketKey(w, s.id), c.val); err != nil {
				return err
			}
			s.metaDirty = false
		}
		var sorted []cell
		if !s.overflow && len(s.dirty) > 0 {
			sorted = c.sortCells(s)
		}
		for _, pi := range s.dirty {
			k := binary.BigEndian.AppendUint16(c.bucketKey(w, s.id), uint16(pi))
			c.key = k
			if s.overflow {
				c.val = c.appendPage(c.val[:0], s, int(pi))
			} else {
				c.val = c.appendCellPage(c.val[:0], sorted, int(pi))
			}
			if err := wr.Set(k, c.val); err != nil {
				return err
			}
			s.dirtyBits[pi/64] = 0
		}
		s.dirty = s.dirty[:0]
	}
	return nil
}

func (c *Counts) flushCategories(wr state.Writer) error {
	for slot := 1; slot < len(c.cats); slot++ {
		cat := &c.cats[slot]
		if !cat.dirty {
			continue
		}
		k := append(c.kindKey(kindCategory), byte(slot))
		c.key = k
		switch {
		case cat.live:
			c.val = binary.BigEndian.AppendUint64(c.val[:0], uint64(cat.lastTS))
			c.val = append(c.val, cat.name...)
			if err := wr.Set(k, c.val); err != nil {
				return err
			}
			cat.stored = true
		case cat.stored:
			if err := wr.Delete(k); err != nil {
				return err
			}
			cat.stored = false
		}
		cat.dirty = false
	}
	return nil
}

func (c *Counts) idKey(h uint64) []byte {
	c.key = binary.BigEndian.AppendUint64(c.kindKey(kindID), h)
	return c.key
}

func (c *Counts) flushIDs(wr state.Writer) error {
	sortUnique(&c.deletedIDs)
	for _, h := range c.deletedIDs {
		if c.ids.find(h) >= 0 {
			continue // kept again: written below
		}
		if err := wr.Delete(c.idKey(h)); err != nil {
			return err
		}
	}
	c.deletedIDs = c.deletedIDs[:0]
	if c.unstored == 0 {
		return nil
	}
	hs := c.newIDs[:0]
	c.ids.all(func(h uint64, r *idRef) {
		if !r.stored {
			hs = append(hs, h)
		}
	})
	slices.Sort(hs) // in hash order, whatever the table's
	for _, h := range hs {
		r := c.ids.ref(h)
		if err := wr.Set(c.idKey(h), []byte(r.id)); err != nil {
			return err
		}
		r.stored = true
		c.unstored--
	}
	c.newIDs = hs[:0]
	return nil
}

func (c *Counts) flushSets(wr state.Writer, w int) error {
	for slot, set := range c.win[w].sets {
		if set == nil || !set.dirty {
			continue
		}
		k := append(c.kindKey(kindSet), byte(w), byte(slot))
		c.key = k
		if len(set.heap) == 0 {
			if set.stored {
				if err := wr.Delete(k); err != nil {
					return err
				}
				set.stored = false
			}
		} else {
			v := c.val[:0]
			for _, e := range set.heap {
				v = binary.BigEndian.AppendUint64(v, e.h)
				v = binary.AppendUvarint(v, e.est)
			}
			c.val = v
			if err := wr.Set(k, v); err != nil {
				return err
			}
			set.stored = true
		}
		set.dirty = false
	}
	return nil
}

// Load replaces the contents of c with the committed state in r, as
// written by Flush. The result answers every query exactly as the flushed
// Counts did, and behaves identically under further calls (its next Flush
// writes the same bytes).
func (c *Counts) Load(r state.Reader) error {
	b := c.blocks
	b.drop()
	*c = *emptyCounts(c.opts)
	c.blocks = b
	v, ok, err := r.Get(c.kindKey(kindLayout))
	if err != nil {
		return fmt.Errorf("sketch: load layout: %w", err)
	}
	if ok && !bytes.Equal(v, c.layout()) {
		return ErrLayoutChanged
	}
	c.wroteLayout = ok
	v, ok, err = r.Get(c.kindKey(kindWatermark))
	if err != nil {
		return fmt.Errorf("sketch: load watermark: %w", err)
	}
	if !ok {
		return nil // nothing was ever counted
	}
	if len(v) != 8 || int64(binary.BigEndian.Uint64(v)) < 0 {
		return fmt.Errorf("sketch: load watermark %x: %w", v, ErrCorrupt)
	}
	c.start(int64(binary.BigEndian.Uint64(v)))
	c.flushedWM, c.flushedAny = c.wm, true
	bl := bucketLoader{c: c}
	for _, l := range []struct {
		kind byte
		fn   func(k, v []byte) error
	}{
		{kindCategory, c.loadCategory},
		{kindID, c.loadID},
		{kindBucket, bl.load},
		{kindSet, c.loadSet},
	} {
		lo, hi := c.kindRange(l.kind)
		err := r.Scan(lo, hi, func(k, v []byte) error {
			if err := l.fn(k, v); err != nil {
				return fmt.Errorf("sketch: load key %x: %w", k, err)
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	for w := range c.win {
		win := &c.win[w]
		for slot, set := range win.sets {
			if set == nil {
				continue
			}
			c.trim(set)
			for i := range set.heap {
				set.heap[i].m = c.watchStored(win, slot, set.heap[i].h, set.heap[i].k)
			}
		}
	}
	c.ids.all(func(h uint64, r *idRef) {
		if r.refs == 0 { // no set refers to it: delete it
			c.deletedIDs = append(c.deletedIDs, h)
		}
	})
	for _, h := range c.deletedIDs {
		c.ids.del(h)
	}
	c.ids.all(func(h uint64, _ *idRef) { c.filter.add(h) })
	for w := range c.win {
		win := &c.win[w]
		if !bl.stale {
			win.deletedLo = win.lo
		}
		for i := range win.slots {
			if s := &win.slots[i]; s.live && s.mass == 0 {
				return fmt.Errorf("sketch: load window %d bucket %d: no mass: %w", w, s.id, ErrCorrupt)
			}
		}
	}
	c.freezeOld()
	return nil
}

func (c *Counts) loadCategory(k, v []byte) error {
	if len(k) != 3 || k[2] == 0 || int(k[2]) > c.opts.MaxCategories || len(v) <= 8 {
		return ErrCorrupt
	}
	slot, name := int(k[2]), string(v[8:])
	if _, dup := c.catIdx[name]; dup {
		return fmt.Errorf("category %q twice: %w", name, ErrCorrupt)
	}
	for len(c.cats) <= slot {
		c.cats = append(c.cats, category{})
	}
	c.cats[slot] = category{name: name, salt: categorySalt(name), lastTS: int64(binary.BigEndian.Uint64(v)), live: true, stored: true}
	c.catIdx[name] = slot
	return nil
}

func (c *Counts) loadID(k, v []byte) error {
	if len(k) != 10 || len(v) == 0 || articleHash(string(v)) != binary.BigEndian.Uint64(k[2:]) {
		return ErrCorrupt
	}
	c.ids.put(binary.BigEndian.Uint64(k[2:]), idRef{id: string(v), stored: true}, math.MaxInt)
	return nil
}

// bucketLoader loads the bucket keys for Load. Buckets are stored one
// after another: once the next one starts, the last is whole and may be
// frozen, so that loading holds the blocks of about one bucket beyond what
// stays unpacked.
type bucketLoader struct {
	c       *Counts
	stale   bool // expired buckets are still stored
	last    *bucket
	lastWin int
}

func (bl *bucketLoader) load(k, v []byte) error {
	c := bl.c
	expired, err := c.loadBucket(k, v)
	bl.stale = bl.stale || expired
	if err != nil || expired {
		return err
	}
	w := int(k[2]) // loadBucket checked the key
	s := c.win[w].slot(int64(binary.BigEndian.Uint64(k[3:11])))
	if bl.last != nil && bl.last != s && c.freezable(&c.win[bl.lastWin], bl.last) {
		c.freeze(bl.last)
		c.compactBlocks()
	}
	bl.last, bl.lastWin = s, w
	return nil
}

// loadBucket loads a bucket's mass or one of its pages, and reports
// whether the bucket has expired (it is then skipped).
func (c *Counts) loadBucket(k, v []byte) (expired bool, err error) {
	if (len(k) != 11 && len(k) != 13) || int(k[2]) >= len(c.win) {
		return false, ErrCorrupt
	}
	win := &c.win[k[2]]
	b := int64(binary.BigEndian.Uint64(k[3:11]))
	switch {
	case b < win.lo:
		return true, nil
	case b > win.hi:
		return false, fmt.Errorf("bucket %d ahead of the watermark: %w", b, ErrCorrupt)
	}
	s := win.slot(b)
	if len(k) == 11 {
		mass, n := binary.Uvarint(v)
		if n != len(v) || mass == 0 || s.live {
			return false, fmt.Errorf("bucket mass %x: %w", v, ErrCorrupt)
		}
		c.open(s, b)
		s.mass, s.metaDirty = mass, false
		s.overflow = true // loaded into blocks
		c.ensureRefs(s)
		win.mass += mass
		return false, nil
	}
	pi := int(binary.BigEndian.Uint16(k[11:]))
	if !s.live || s.id != b || pi >= c.perBucket/blocksPerPage || s.pageAllocated(pi) {
		return false, fmt.Errorf("page %d of bucket %d: %w", pi, b, ErrCorrupt)
	}
	p := c.scratchPage()
	nz, err := decodePage(v, &p.c)
	if err != nil || nz == 0 {
		return false, fmt.Errorf("page %d of bucket %d: %w", pi, b, ErrCorrupt)
	}
	c.setPage(win, s, pi, p)
	return false, nil
}

// setPage sets page pi of bucket s of window win, all zeros, to p, each
// block in the narrowest class that holds it, and adds it to the window's
// totals.
func (c *Counts) setPage(win *window, s *bucket, pi int, p *page) {
	c.ensureRefs(s)
	for k := range blocksPerPage {
		vals := (*[blockSize]uint32)(p.c[k*blockSize:])
		var word uint64
		var most uint32
		for j, v := range vals {
			if v != 0 {
				word |= 1 << j
			}
			most = max(most, v)
		}
		if word == 0 {
			continue
		}
		bi := pi*blocksPerPage + k
		r := c.blocks.alloc(classOf(most), s.owner+uint32(bi))
		c.blocks.write(r, vals)
		s.refs[bi], s.nz[bi] = r, word
		s.nonzero += bits.OnesCount64(word)
	}
	c.addPage(win, pi, &p.c, 1)
}

// scratchPage returns c's page for encoding and decoding.
func (c *Counts) scratchPage() *page {
	if c.page == nil {
		c.page = new(page)
	}
	return c.page
}

// appendPage appends the encoding of page pi of bucket s to buf, as
// appendPage of the page would: a page with few nonzero counters is
// encoded sparse from its blocks, the others from the page.
func (c *Counts) appendPage(buf []byte, s *bucket, pi int) []byte {
	refs := s.refs[pi*blocksPerPage : (pi+1)*blocksPerPage]
	nz := s.nz[pi*blocksPerPage : (pi+1)*blocksPerPage]
	n := 0
	for _, word := range nz {
		n += bits.OnesCount64(word)
	}
	if n*(1+maxGapLen) >= PageSize {
		// Measure both encodings, as appendPage does.
		bl := c.blocks
		dense, sparse, gap := 0, 0, 0
		for k, r := range refs {
			var d int
			switch s := r.slot(); r.class() {
			case class8:
				d = denseLen8(bl.b8.counters(s))
			case class16:
				d = denseLen(bl.b16.counters(s))
			case class32:
				d = denseLen(bl.b32.counters(s))
			default:
				d = blockSize
			}
			// The sparse encoding has the nonzero counters' lengths, and
			// the gaps'.
			var g int
			g, gap = gapsLen(nz[k], gap)
			dense, sparse = dense+d, sparse+d-(blockSize-bits.OnesCount64(nz[k]))+g
		}
		if dense <= sparse {
			buf = append(buf, pageDense)
			for _, r := range refs {
				switch s := r.slot(); r.class() {
				case class8:
					buf = appendUvarints8(buf, bl.b8.counters(s))
				case class16:
					buf = appendUvarints(buf, bl.b16.counters(s))
				case class32:
					buf = appendUvarints(buf, bl.b32.counters(s))
				default:
					buf = append(buf, make([]byte, blockSize)...)
				}
			}
			return buf
		}
	}
	// appendSparse
	buf = append(buf, pageSparse)
	next := 0
	for k, word := range nz {
		r := refs[k]
		for ; word != 0; word &= word - 1 {
			j := bits.TrailingZeros64(word)
			v := uint32(0)
			if r.class() == class8 {
				v = c.blocks.get8(r.slot(), j)
			} else {
				v = c.blocks.get(r, j)
			}
			buf = binary.AppendUvarint(buf, uint64(k*blockSize+j-next))
			buf = binary.AppendUvarint(buf, uint64(v))
			next = k*blockSize + j + 1
		}
	}
	return buf
}

// denseLen returns the length of the uvarints of vals.
func denseLen[T uint16 | uint32](vals []T) int {
	n := 0
	for _, v := range vals {
		n += (bits.Len32(uint32(v)|1) + 6) / 7
	}
	return n
}

// denseLen8 is denseLen of 8-bit counters: one byte each, two from 128.
func denseLen8(vals []uint8) int {
	n := len(vals)
	for i := 0; i+8 <= len(vals); i += 8 {
		n += bits.OnesCount64(binary.LittleEndian.Uint64(vals[i:]) & 0x8080808080808080)
	}
	return n
}

// gapsLen returns the length of the uvarints of the gaps before the
// nonzero counters of a block whose nonzero bits are nz, which follows
// gap zeros, and the zeros at its end.
func gapsLen(nz uint64, gap int) (n, end int) {
	next := 0 // after the last nonzero counter
	for w := nz; w != 0; w &= w - 1 {
		j := bits.TrailingZeros64(w)
		n += uvarintLen(uint64(gap + j - next))
		gap, next = 0, j+1
	}
	return n, gap + blockSize - next
}

func appendUvarints[T uint8 | uint16 | uint32](buf []byte, vals []T) []byte {
	for _, v := range vals {
		if v < 0x80 {
			buf = append(buf, byte(v))
		} else {
			buf = binary.AppendUvarint(buf, uint64(v))
		}
	}
	return buf
}

// appendUvarints8 is appendUvarints of 8-bit counters: those below 128,
// as most are, are their own encoding.
func appendUvarints8(buf []byte, vals []uint8) []byte {
	var high uint8
	for _, v := range vals {
		high |= v
	}
	if high < 0x80 {
		return append(buf, vals...)
	}
	return appendUvarints(buf, vals)
}

// pageOf returns page pi of bucket s, in c's scratch page.
func (c *Counts) pageOf(s *bucket, pi int) *page {
	p := c.scratchPage()
	for k := range blocksPerPage {
		bi := pi*blocksPerPage + k
		c.blocks.read(s.refs[bi], (*[blockSize]uint32)(p.c[k*blockSize:]))
		p.nz[k] = s.nz[bi]
	}
	return p
}

// pageAllocated reports whether a block of page pi of s is allocated.
func (s *bucket) pageAllocated(pi int) bool {
	for _, nz := range s.nz[pi*blocksPerPage : (pi+1)*blocksPerPage] {
		if nz != 0 {
			return true
		}
	}
	return false
}

func (c *Counts) loadSet(k, v []byte) error {
	if len(k) != 4 || int(k[2]) >= len(c.win) || len(v) == 0 {
		return ErrCorrupt
	}
	win, slot := &c.win[k[2]], int(k[3])
	if slot >= len(c.cats) || (slot > 0 && !c.cats[slot].live) || win.sets[slot] != nil {
		return fmt.Errorf("candidates of category slot %d: %w", slot, ErrCorrupt)
	}
	set := newSet()
	set.stored = true
	for len(v) > 0 {
		if len(v) < 9 {
			return ErrCorrupt
		}
		h := binary.BigEndian.Uint64(v)
		est, n := binary.Uvarint(v[8:])
		if n <= 0 || est == 0 || est == math.MaxUint64 {
			return ErrCorrupt
		}
		v = v[8+n:]
		r := c.ids.ref(h)
		if _, dup := set.pos.get(h); r == nil || dup {
			return fmt.Errorf("candidate %016x: %w", h, ErrCorrupt)
		}
		r.refs++
		k := set.key(h, math.MaxInt)
		set.heap = append(set.heap, entry{est: est, h: h, pre: idPrefix(r.id), id: r.id, k: k})
	}
	set.heapify() // a no-op for a heap Flush wrote
	win.sets[slot] = set
	return nil
}

// trim drops the last members of a set loaded with more than the
// capacity, which was lowered (before they are watched).
func (c *Counts) trim(set *cset) {
	for len(set.heap) > c.capacity {
		last := len(set.heap) - 1
		set.swap(0, last)
		c.unref(set.heap[last].h)
		set.forget(&set.heap[last], math.MaxInt)
		set.heap[last] = entry{}
		set.heap = set.heap[:last]
		set.down(0)
		set.dirty = true
	}
}

// sortUnique sorts *s and removes repeated values.
func sortUnique(s *[]uint64) {
	slices.Sort(*s)
	*s = slices.Compact(*s)
}
