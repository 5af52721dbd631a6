package trending

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"unsafe"

	"github.com/newsflow/newsflow/state"
)

// Persistence: Flush and Load (see the package documentation).

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
//
// Flush is one sequence of stages: layout, watermark, table
// sizes, expired buckets, changed cells; each stage returns its error.
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
