package sketch

import (
	"cmp"
	"encoding/binary"
	"math/bits"
	"slices"
)

// A bucket that few shares touched (most of the 1m window's on a sparse
// stream, and every bucket at first) holds its nonzero counters as cells,
// (counter, value) pairs, rather than in blocks: 8 bytes a counter and a
// slot of an index, instead of a block of 64 for each. Its expiry visits
// the cells, and no block is allocated or freed. Once a bucket holds more
// than Counts.maxCells counters, it moves them into blocks (toBlocks) and
// keeps to blocks until it expires.

// cell is a nonzero counter of a bucket: its index in the sketch and its
// value.
type cell struct{ i, v uint32 }

// maxCellsLimit bounds Counts.maxCells: a position in cells fits in the
// uint16 slots of the index.
const maxCellsLimit = 1<<16 - 1

// find returns the position in s.cells of counter i, or -1.
func (s *bucket) find(i int) int {
	n := len(s.index)
	if n == 0 {
		return -1
	}
	sh := 32 - bits.TrailingZeros(uint(n))
	for h := int(uint32(i) * 0x9e3779b1 >> sh); ; h = (h + 1) & (n - 1) {
		p := int(s.index[h]) - 1
		if p < 0 || s.cells[p].i == uint32(i) {
			return p
		}
	}
}

// insert adds counter i, not in s.cells, with value v. The index has at
// least twice as many slots as cells.
func (s *bucket) insert(i int, v uint32) {
	s.cells = append(s.cells, cell{i: uint32(i), v: v})
	if 2*len(s.cells) > len(s.index) {
		s.index = make([]uint16, max(64, 2*len(s.index)))
		for p := range s.cells {
			s.place(p)
		}
		return
	}
	s.place(len(s.cells) - 1)
}

// place enters position p of s.cells in the index.
func (s *bucket) place(p int) {
	n := len(s.index)
	sh := 32 - bits.TrailingZeros(uint(n))
	h := int(s.cells[p].i * 0x9e3779b1 >> sh)
	for s.index[h] != 0 {
		h = (h + 1) & (n - 1)
	}
	s.index[h] = uint16(p + 1)
}

// toBlocks moves the cells of bucket s into blocks.
func (c *Counts) toBlocks(s *bucket) {
	c.ensureRefs(s)
	for _, cl := range s.cells {
		bi := int(cl.i) / blockSize
		c.blocks.set(&s.refs[bi], s.owner+uint32(bi), int(cl.i)%blockSize, cl.v)
		s.nz[bi] |= 1 << (cl.i % blockSize)
	}
	s.cells, s.index, s.overflow = nil, nil, true
}

// ensureRefs gives s its tables of blocks, if it has none.
func (c *Counts) ensureRefs(s *bucket) {
	if s.refs == nil {
		s.refs, s.nz = c.blocks.table(c.perBucket)
	}
}

// sortCells copies the cells of s into c's scratch, in counter order, for
// Flush.
func (c *Counts) sortCells(s *bucket) []cell {
	c.sorted = append(c.sorted[:0], s.cells...)
	slices.SortFunc(c.sorted, func(a, b cell) int { return cmp.Compare(a.i, b.i) })
	return c.sorted
}

// appendCellPage appends the encoding of page pi of a bucket whose cells,
// in counter order, are sorted: as appendPage of the page would.
func (c *Counts) appendCellPage(buf []byte, sorted []cell, pi int) []byte {
	lo, _ := slices.BinarySearchFunc(sorted, uint32(pi*PageSize), func(a cell, i uint32) int { return cmp.Compare(a.i, i) })
	hi, _ := slices.BinarySearchFunc(sorted, uint32((pi+1)*PageSize), func(a cell, i uint32) int { return cmp.Compare(a.i, i) })
	cs := sorted[lo:hi]
	if len(cs)*(1+maxGapLen) >= PageSize {
		p := c.scratchPage()
		*p = page{}
		for _, cl := range cs {
			j := int(cl.i) - pi*PageSize
			p.c[j] = cl.v
			p.nz[j/64] |= 1 << (j % 64)
		}
		return appendPage(buf, p)
	}
	// appendSparse
	buf = append(buf, pageSparse)
	next := pi * PageSize
	for _, cl := range cs {
		buf = binary.AppendUvarint(buf, uint64(int(cl.i)-next))
		buf = binary.AppendUvarint(buf, uint64(cl.v))
		next = int(cl.i) + 1
	}
	return buf
}
