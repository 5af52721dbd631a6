package sketch

import (
	"math/bits"
	"os"
)

// Frozen buckets.
//
// A bucket the window has moved well past is rarely written again: only a
// share that arrives that late lands in it. Once such a bucket is stored
// (it has no dirty pages), Flush and Load freeze it: its counters are
// packed, a few bits each, into one buffer off the Go heap, and its blocks
// are released. A write to a frozen bucket thaws it back into blocks
// first; expiry subtracts the packed counters from the window's totals
// without thawing. Freezing changes no counter, so answers, Flush and Load
// behave exactly as if it never happened; only memory differs.
//
// The packed form keeps the bucket's nonzero bits (bucket.nz) and, for
// each block with a nonzero bit, in block order: one byte w (0 to 32),
// then the block's nonzero counters in bit order, each as its value less
// one in w bits (least significant first), padded to a whole byte. w is
// the fewest bits that hold the block's largest value less one, so a
// block whose nonzero counters are all 1 takes its one byte. In the 1h
// window of a node taking 10 million shares a day a bucket's blocks
// (68 KiB) pack into about 2 KiB, and in the 24h window into about half.

// freezable reports whether bucket s of window win is to be frozen: it is
// held in blocks, has no changes that Flush has not stored, is not one of
// the window's two newest buckets, and is at least FreezeAfter behind the
// newest.
func (c *Counts) freezable(win *window, s *bucket) bool {
	return c.freezeAfter >= 0 && s.live && s.overflow && s.packed == 0 && len(s.dirty) == 0 &&
		s.id < win.hi-1 && (win.hi-s.id)*win.width >= c.freezeAfter
}

// freezeOld freezes every bucket that is freezable, and returns the
// memory of the blocks it released.
func (c *Counts) freezeOld() {
	if c.freezeAfter < 0 {
		return
	}
	for w := range c.win {
		win := &c.win[w]
		for i := range win.slots {
			if s := &win.slots[i]; c.freezable(win, s) {
				c.freeze(s)
			}
		}
	}
	c.compactBlocks()
}

// compactBlocks compacts the slabs if blocks were released.
func (c *Counts) compactBlocks() {
	if c.blocks.slack() {
		c.blocks.compact(func(owner uint32, r blockRef) { *c.refAt(owner) = r })
	}
}

// freeze packs the counters of bucket s, held in blocks, and releases its
// blocks, unless the packed form would take as much memory.
func (c *Counts) freeze(s *bucket) {
	buf, held := c.packScratch[:0], 0
	var vals [blockSize]uint32
	for bi, nz := range s.nz {
		if nz == 0 {
			continue
		}
		r := s.refs[bi]
		c.blocks.read(r, &vals)
		buf = appendPacked(buf, &vals, nz)
		held += c.blocks.blockBytes(r)
	}
	c.packScratch = buf
	page := os.Getpagesize()
	if len(buf) == 0 || (len(buf)+page-1)/page*page >= held {
		return
	}
	s.packed = c.blocks.storePacked(buf)
	for bi, nz := range s.nz {
		if nz == 0 {
			continue
		}
		c.blocks.clear(s.refs[bi])
		c.blocks.release(s.refs[bi])
		s.refs[bi] = 0
	}
}

// thaw moves the counters of frozen bucket s back into blocks, each in
// the narrowest class that holds it.
func (c *Counts) thaw(s *bucket) {
	b := c.blocks.packedBytes(s.packed)
	var vals [blockSize]uint32
	for bi, nz := range s.nz {
		if nz == 0 {
			continue
		}
		var most uint32
		b, most = unpackBlock(b, nz, &vals)
		r := c.blocks.alloc(classOf(most), s.owner+uint32(bi))
		c.blocks.write(r, &vals)
		s.refs[bi] = r
	}
	c.blocks.freePacked(s.packed)
	s.packed = 0
}

// expireFrozen subtracts frozen bucket s from the totals of window win
// and clears its nonzero bits, collecting the candidates that read its
// counters as expire does.
func (c *Counts) expireFrozen(win *window, s *bucket) {
	x := &win.watch
	nw := len(c.win)
	b := c.blocks.packedBytes(s.packed)
	var vals [blockSize]uint32
	for bi, nz := range s.nz {
		if nz == 0 {
			continue
		}
		b, _ = unpackBlock(b, nz, &vals)
		base := bi * blockSize
		for w := nz; w != 0; w &= w - 1 {
			j := bits.TrailingZeros64(w)
			c.total[(base+j)*nw+win.idx] -= uint64(vals[j])
		}
		if x.read != nil {
			for w := nz & x.read[bi]; w != 0 && !x.all; w &= w - 1 {
				x.collect(base + bits.TrailingZeros64(w))
			}
		}
		s.nz[bi] = 0
	}
	c.blocks.freePacked(s.packed)
	s.packed = 0
}

// appendPacked appends the packed form of a block (see Frozen buckets)
// whose counters are vals and nonzero bits nz.
func appendPacked(buf []byte, vals *[blockSize]uint32, nz uint64) []byte {
	var most uint32
	for w := nz; w != 0; w &= w - 1 {
		most = max(most, vals[bits.TrailingZeros64(w)])
	}
	width := uint(bits.Len32(most - 1))
	buf = append(buf, byte(width))
	if width == 0 {
		return buf
	}
	var acc uint64
	var n uint // bits in acc
	for w := nz; w != 0; w &= w - 1 {
		acc |= uint64(vals[bits.TrailingZeros64(w)]-1) << n
		for n += width; n >= 8; n -= 8 {
			buf = append(buf, byte(acc))
			acc >>= 8
		}
	}
	if n > 0 {
		buf = append(buf, byte(acc))
	}
	return buf
}

// unpackBlock decodes the packed block at the start of b, whose nonzero
// bits are nz, into vals (zeros where nz has no bit). It returns the rest
// of b and the block's largest counter.
func unpackBlock(b []byte, nz uint64, vals *[blockSize]uint32) ([]byte, uint32) {
	*vals = [blockSize]uint32{}
	width := uint(b[0])
	b = b[1:]
	if width == 0 {
		for w := nz; w != 0; w &= w - 1 {
			vals[bits.TrailingZeros64(w)] = 1
		}
		return b, 1
	}
	mask := uint64(1)<<width - 1
	var acc uint64
	var n uint // bits in acc
	var most uint32
	i := 0
	for w := nz; w != 0; w &= w - 1 {
		for ; n < width; n += 8 {
			acc |= uint64(b[i]) << n
			i++
		}
		v := uint32(acc&mask) + 1
		acc >>= width
		n -= width
		vals[bits.TrailingZeros64(w)] = v
		most = max(most, v)
	}
	return b[i:], most
}

// blockBytes returns the memory block r takes in its slab: its counters
// and its owner.
func (a *blocks) blockBytes(r blockRef) int {
	switch r.class() {
	case class8:
		return blockSize + 4
	case class16:
		return 2*blockSize + 4
	case class32:
		return 4*blockSize + 4
	}
	return 0
}

// storePacked copies p into memory off the Go heap and returns its handle
// (never 0).
func (a *blocks) storePacked(p []byte) int32 {
	b := allocChunk(len(p))[:len(p)]
	copy(b, p)
	if n := len(a.packedFree); n > 0 {
		h := a.packedFree[n-1]
		a.packedFree = a.packedFree[:n-1]
		a.packed[h-1] = b
		return h
	}
	a.packed = append(a.packed, b)
	return int32(len(a.packed))
}

// packedBytes returns the packed counters of handle h.
func (a *blocks) packedBytes(h int32) []byte { return a.packed[h-1] }

// freePacked returns the memory of handle h.
func (a *blocks) freePacked(h int32) {
	b := a.packed[h-1]
	freeChunk(b[:cap(b)])
	a.packed[h-1] = nil
	a.packedFree = append(a.packedFree, h)
}

// packedMapped returns the bytes mapped for packed counters.
func (a *blocks) packedMapped() int {
	n := 0
	for _, b := range a.packed {
		n += cap(b)
	}
	return n
}

// dropPacked returns the memory of every packed bucket.
func (a *blocks) dropPacked() {
	for _, b := range a.packed {
		if b != nil {
			freeChunk(b[:cap(b)])
		}
	}
	a.packed, a.packedFree = nil, nil
}
