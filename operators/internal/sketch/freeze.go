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
// (68 KiB) pack into about 2 KiB, and in the 24h window into about 20 KiB
// (BenchmarkPartitionMemory).

// freezable reports whether bucket s of window win is to be frozen: it is
// held in blocks, has no changes that Flush has not stored, was not found
// too small to gain from packing since it last changed, is not one of
// the window's two newest buckets, and is at least FreezeAfter behind the
// newest.
func (c *Counts) freezable(win *window, s *bucket) bool {
	return c.freezeAfter >= 0 && s.live && s.overflow && s.packed == 0 && !s.packLarger && len(s.dirty) == 0 &&
		s.id < win.hi-1 && (win.hi-s.id)*win.width >= c.freezeAfter
}

// freezeOld freezes every bucket that is freezable, and returns the
// chunks its released blocks leave empty to the operating system.
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
		buf = appendPacked(buf, c.blocks.gather(r, nz, &vals))
		held += c.blocks.blockBytes(r)
	}
	c.packScratch = buf
	page := os.Getpagesize()
	if len(buf) == 0 || (len(buf)+page-1)/page*page >= held {
		s.packLarger = true
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
	var packed, vals [blockSize]uint32
	for bi, nz := range s.nz {
		if nz == 0 {
			continue
		}
		var nzVals []uint32
		b, nzVals = unpack(b, nz, &packed)
		vals = [blockSize]uint32{}
		most := uint32(0)
		for i, w := 0, nz; w != 0; i, w = i+1, w&(w-1) {
			vals[bits.TrailingZeros64(w)] = nzVals[i]
			most = max(most, nzVals[i])
		}
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
	var packed [blockSize]uint32
	for bi, nz := range s.nz {
		if nz == 0 {
			continue
		}
		var vals []uint32
		b, vals = unpack(b, nz, &packed)
		base := bi * blockSize
		for i, w := 0, nz; w != 0; i, w = i+1, w&(w-1) {
			c.total[(base+bits.TrailingZeros64(w))*nw+win.idx] -= uint64(vals[i])
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
// whose nonzero counters, in bit order, are vals.
func appendPacked(buf []byte, vals []uint32) []byte {
	var most uint32
	for _, v := range vals {
		most = max(most, v)
	}
	width := uint(bits.Len32(most - 1))
	buf = append(buf, byte(width))
	if width == 0 {
		return buf
	}
	var acc uint64
	var n uint // bits in acc
	for _, v := range vals {
		acc |= uint64(v-1) << n
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

// gather copies the counters of block r at the nonzero bits nz, in bit
// order, into vals and returns them.
func (a *blocks) gather(r blockRef, nz uint64, vals *[blockSize]uint32) []uint32 {
	n := 0
	switch sl := r.slot(); r.class() {
	case class8:
		cnt := a.counters8(sl)
		for w := nz; w != 0; w &= w - 1 {
			vals[n] = uint32(cnt[bits.TrailingZeros64(w)])
			n++
		}
	case class16:
		cnt := a.b16.counters(sl)
		for w := nz; w != 0; w &= w - 1 {
			vals[n] = uint32(cnt[bits.TrailingZeros64(w)])
			n++
		}
	case class32:
		cnt := a.b32.counters(sl)
		for w := nz; w != 0; w &= w - 1 {
			vals[n] = cnt[bits.TrailingZeros64(w)]
			n++
		}
	}
	return vals[:n]
}

// unpack decodes the packed block at the start of b, whose nonzero bits
// are nz, into vals. It returns the rest of b and the block's nonzero
// counters in bit order (in vals).
func unpack(b []byte, nz uint64, vals *[blockSize]uint32) ([]byte, []uint32) {
	n := bits.OnesCount64(nz)
	width := uint(b[0])
	b = b[1:]
	if width == 0 {
		for i := range n {
			vals[i] = 1
		}
		return b, vals[:n]
	}
	mask := uint64(1)<<width - 1
	var acc uint64
	var have uint // bits in acc
	i := 0
	for k := range n {
		for ; have < width; have += 8 {
			acc |= uint64(b[i]) << have
			i++
		}
		vals[k] = uint32(acc&mask) + 1
		acc >>= width
		have -= width
	}
	return b[i:], vals[:n]
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
