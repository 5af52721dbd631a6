package trending

import (
	"hash/maphash"
	"math/bits"
	"slices"
	"strings"
	"unsafe"
)

// Interning: article ids, (article, category) pairs and category names
// to dense indexes (see Counts).

func (c *Counts) internArticle(id string) uint32 {
	h := c.ids.hash(id)
	if a, ok := c.ids.find(id, h); ok {
		return a
	}
	return c.newArticle(id, h)
}

// newArticle interns id, which is not interned yet and hashes to h.
func (c *Counts) newArticle(id string, h uint32) uint32 {
	a := c.takeRow(&c.artFree, &c.arts, c.artStride, &c.artPos)
	c.artRow(a)[artHead] = noID
	c.ids.insert(id, h, a)
	return a
}

// takeRow returns the index of a row for a new article or pair: the last
// of free, or else a new row of stride zeros at the end of rows, with its
// nw candidate positions in pos set to -1.
func (c *Counts) takeRow(free, rows *[]uint32, stride int, pos *[]int32) uint32 {
	if n := len(*free); n > 0 {
		i := (*free)[n-1]
		*free = (*free)[:n-1]
		return i
	}
	i := uint32(len(*rows) / stride)
	for range stride {
		*rows = append(*rows, 0)
	}
	for range c.nw {
		*pos = append(*pos, -1)
	}
	return i
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
	p := c.takeRow(&c.pairFree, &c.pairs, c.pairStride, &c.pairPos)
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
