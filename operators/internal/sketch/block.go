package sketch

import (
	"math"
	"math/bits"
	"os"
	"unsafe"
)

// Counter blocks.
//
// A bucket that holds more counters than its cells can (cells.go) holds
// them in blocks of blockSize consecutive counters of one row, allocated
// when one of their counters is first incremented: a block that is not
// allocated holds zeros. A block stores its counters in the narrowest of
// three widths (8, 16 or 32 bits) that holds them; it moves to a wider
// class when a counter outgrows its width, and never back while its
// bucket lives. Along with its counters a block has its owner (the
// position of the block in the buckets, to update the reference when the
// block moves); the bucket keeps the block's reference and a bit per
// counter (whether it is nonzero) in tables indexed by block.
//
// The blocks of a class are slots of one slab, allocated in chunks off the
// Go heap (see chunk_unix.go), and so are the buckets' tables: the garbage
// collector neither scans them nor counts them in its heap goal, and the
// references hold no pointers. A released block's slot goes to its
// class's free list; once a class has more free slots than two buckets'
// blocks (or a chunk's), compact moves its last blocks into the free slots
// and returns the chunks left empty (all but one spare), so that the
// memory of a class follows the blocks it holds.

// blockSize is the number of counters in a block: 64, so that its nonzero
// bits are one word. A page (PageSize counters, the unit of persistence)
// is blocksPerPage blocks.
const (
	blockSize     = 64
	blocksPerPage = PageSize / blockSize
)

// Width classes of a block; 0 stands for no block.
const (
	class8  = 1
	class16 = 2
	class32 = 3
)

// classMax is the largest counter a class holds.
var classMax = [4]uint32{0, math.MaxUint8, math.MaxUint16, math.MaxUint32}

// classOf returns the narrowest class that holds v.
func classOf(v uint32) uint32 {
	switch {
	case v <= math.MaxUint8:
		return class8
	case v <= math.MaxUint16:
		return class16
	}
	return class32
}

// blockRef names a block: its class in the top two bits, its slot in the
// class's slab below. 0 is no block.
type blockRef uint32

const (
	refClassShift = 30
	refSlotMask   = 1<<refClassShift - 1
	// maxBlocks bounds the blocks of a Counts (Options.Validate refuses
	// options with more block positions): a slot and an owner fit in
	// refClassShift bits.
	maxBlocks = refSlotMask
	// freeSlot marks the owner word of a free slot, whose other bits are
	// 1 + the next free slot (0: none).
	freeSlot = 1 << 31
)

func makeRef(class, slot uint32) blockRef { return blockRef(class<<refClassShift | slot) }
func (r blockRef) class() uint32          { return uint32(r) >> refClassShift }
func (r blockRef) slot() uint32           { return uint32(r) & refSlotMask }

// chunkCounterBytes is the size of the counters of one chunk of any class.
const chunkCounterBytes = 1 << shift8 * blockSize

// slab holds the blocks of one class: slot s is block s%perChunk of chunk
// s/perChunk. Slots below used are blocks or free (their owner word
// marked freeSlot, linking the free list); slots from used on are zero.
type slab[T uint8 | uint16 | uint32] struct {
	shift uint32                     // log2(slots per chunk)
	cnt   [][]T                      // by chunk, the counters of its slots
	raw   []*[chunkCounterBytes]byte // by chunk, the same as bytes
	owner [][]uint32                 // by chunk, per slot, its owner
	mem   [][]byte                   // by chunk, its memory
	used  uint32                     // slots handed out, free or not
	free  uint32                     // 1 + the first free slot; 0 if none
	nfree int                        // slots in the free list
}

func (s *slab[T]) perChunk() uint32 { return 1 << s.shift }

func (s *slab[T]) counters(slot uint32) []T {
	off := (slot & (s.perChunk() - 1)) * blockSize
	return s.cnt[slot>>s.shift][off : off+blockSize : off+blockSize]
}

func (s *slab[T]) ownerOf(slot uint32) *uint32 {
	return &s.owner[slot>>s.shift][slot&(s.perChunk()-1)]
}

func (s *slab[T]) get(slot uint32, j int) uint32 {
	return uint32(s.cnt[slot>>s.shift][(slot&(s.perChunk()-1))*blockSize+uint32(j)])
}

func (s *slab[T]) set(slot uint32, j int, v uint32) {
	s.cnt[slot>>s.shift][(slot&(s.perChunk()-1))*blockSize+uint32(j)] = T(v)
}

// chunkBytes returns the size of one chunk of s: counters and owners of
// its slots, in whole pages of the operating system.
func (s *slab[T]) chunkBytes() int {
	var zero T
	n, page := int(s.perChunk())*(blockSize*int(unsafe.Sizeof(zero))+4), os.Getpagesize()
	return (n + page - 1) / page * page
}

// alloc returns a slot of zeros owned by owner.
func (s *slab[T]) alloc(owner uint32) uint32 {
	var slot uint32
	if s.free != 0 {
		slot = s.free - 1
		s.free = *s.ownerOf(slot) &^ freeSlot
		s.nfree--
	} else {
		if s.used == maxBlocks {
			panic("sketch: too many counter blocks") // Validate bounds them
		}
		if s.used>>s.shift == uint32(len(s.cnt)) {
			s.grow()
		}
		slot = s.used
		s.used++
	}
	*s.ownerOf(slot) = owner
	return slot
}

// grow adds a chunk.
func (s *slab[T]) grow() {
	var zero T
	n := int(s.perChunk())
	b := allocChunk(s.chunkBytes())
	cnt := b[:n*blockSize*int(unsafe.Sizeof(zero))]
	s.cnt = append(s.cnt, unsafe.Slice((*T)(unsafe.Pointer(&cnt[0])), n*blockSize))
	s.raw = append(s.raw, (*[chunkCounterBytes]byte)(cnt))
	own := b[len(cnt):]
	s.owner = append(s.owner, unsafe.Slice((*uint32)(unsafe.Pointer(&own[0])), n))
	s.mem = append(s.mem, b)
}

// release returns slot, whose counters are zero, to the free list.
func (s *slab[T]) release(slot uint32) {
	*s.ownerOf(slot) = freeSlot | s.free
	s.free = slot + 1
	s.nfree++
}

// clear zeroes the counters of slot.
func (s *slab[T]) clear(slot uint32) { clear(s.counters(slot)) }

// drop returns every chunk's memory.
func (s *slab[T]) drop() {
	for _, b := range s.mem {
		freeChunk(b)
	}
	*s = slab[T]{shift: s.shift}
}

// mapped returns the bytes of s's chunks.
func (s *slab[T]) mapped() int {
	n := 0
	for _, b := range s.mem {
		n += len(b)
	}
	return n
}

// compact moves the blocks of the slots at the end of s into the free
// slots below them, so that s holds its blocks in its first slots, and
// returns the chunks left empty but one. move is told each block's new
// reference, by owner.
func (s *slab[T]) compact(class uint32, move func(owner uint32, r blockRef)) {
	target := s.used - uint32(s.nfree) // slots in use once compact
	src := s.used
	for f := s.free; f != 0; {
		dst := f - 1
		f = *s.ownerOf(dst) &^ freeSlot // before dst is overwritten
		if dst >= target {
			continue
		}
		for {
			src--
			if *s.ownerOf(src)&freeSlot == 0 {
				break
			}
		}
		owner := *s.ownerOf(src)
		copy(s.counters(dst), s.counters(src))
		*s.ownerOf(dst) = owner
		s.clear(src)
		move(owner, makeRef(class, dst))
	}
	s.used, s.free, s.nfree = target, 0, 0
	keep := int((target+s.perChunk()-1)>>s.shift) + 1 // one spare
	for len(s.mem) > keep {
		last := len(s.mem) - 1
		freeChunk(s.mem[last])
		s.mem, s.cnt, s.raw, s.owner = s.mem[:last], s.cnt[:last], s.raw[:last], s.owner[:last]
	}
}

// blocks holds the counter blocks of a Counts, one slab per class, and
// the buckets' tables of references and nonzero bits.
type blocks struct {
	b8     slab[uint8]
	b16    slab[uint16]
	b32    slab[uint32]
	tables [][]byte // memory of the buckets' tables
	keep   int      // free slots a slab keeps: two buckets' blocks
	// packed holds the counters of frozen buckets (freeze.go), by handle
	// less one; packedFree lists the handles of nil entries.
	packed     [][]byte
	packedFree []int32
}

// table returns a bucket's tables for n blocks, of zeros: the blocks'
// references, and a word of nonzero bits per block (bit j: counter j is
// not zero).
func (a *blocks) table(n int) ([]blockRef, []uint64) {
	b := allocChunk(n * (8 + 4))
	a.tables = append(a.tables, b)
	nz := unsafe.Slice((*uint64)(unsafe.Pointer(&b[0])), n)
	refs := unsafe.Slice((*blockRef)(unsafe.Pointer(&b[n*8])), n)
	return refs, nz
}

func newBlocks() *blocks {
	// chunkCounterBytes of counters per chunk in every class.
	return &blocks{
		b8:  slab[uint8]{shift: shift8},
		b16: slab[uint16]{shift: shift16},
		b32: slab[uint32]{shift: shift16 - 1},
	}
}

// shift8 and shift16 are log2 of the slots of an 8-bit and a 16-bit
// chunk (newBlocks), constants for the inlined paths of update.
const (
	shift8  = 10
	shift16 = shift8 - 1
)

// get8 returns counter j of the 8-bit block in slot s (inlined in
// update).
func (a *blocks) get8(s uint32, j int) uint32 {
	return uint32(a.b8.raw[s>>shift8][(s&(1<<shift8-1))*blockSize+uint32(j)&(blockSize-1)])
}

// set8 sets counter j of the 8-bit block in slot s to v.
func (a *blocks) set8(s uint32, j int, v uint32) {
	a.b8.raw[s>>shift8][(s&(1<<shift8-1))*blockSize+uint32(j)&(blockSize-1)] = uint8(v)
}

// get16 returns counter j of the 16-bit block in slot s.
func (a *blocks) get16(s uint32, j int) uint32 {
	return uint32(a.b16.cnt[s>>shift16][(s&(1<<shift16-1))*blockSize+uint32(j)&(blockSize-1)])
}

// set16 sets counter j of the 16-bit block in slot s to v.
func (a *blocks) set16(s uint32, j int, v uint32) {
	a.b16.cnt[s>>shift16][(s&(1<<shift16-1))*blockSize+uint32(j)&(blockSize-1)] = uint16(v)
}

// get returns counter j of block r (0 if r is 0).
func (a *blocks) get(r blockRef, j int) uint32 {
	switch r.class() {
	case class8:
		return a.get8(r.slot(), j)
	case class16:
		return a.b16.get(r.slot(), j)
	case class32:
		return a.b32.get(r.slot(), j)
	}
	return 0
}

// owner returns the owner of block r.
func (a *blocks) owner(r blockRef) *uint32 {
	switch r.class() {
	case class8:
		return a.b8.ownerOf(r.slot())
	case class16:
		return a.b16.ownerOf(r.slot())
	}
	return a.b32.ownerOf(r.slot())
}

// alloc returns a block of class, of zeros, owned by owner.
func (a *blocks) alloc(class, owner uint32) blockRef {
	switch class {
	case class8:
		return makeRef(class8, a.b8.alloc(owner))
	case class16:
		return makeRef(class16, a.b16.alloc(owner))
	}
	return makeRef(class32, a.b32.alloc(owner))
}

// set sets counter j of block *p to v (not zero), allocating the block
// (owned by owner) or moving it to a wider class as v needs. The caller
// keeps the nonzero bit.
func (a *blocks) set(p *blockRef, owner uint32, j int, v uint32) {
	r := *p
	if v > classMax[r.class()] {
		r = a.widen(r, owner, classOf(v))
		*p = r
	}
	switch s := r.slot(); r.class() {
	case class8:
		a.b8.set(s, j, v)
	case class16:
		a.b16.set(s, j, v)
	default:
		a.b32.set(s, j, v)
	}
}

// widen moves block r (0: none) to a new block of class, owned by owner,
// and returns it.
func (a *blocks) widen(r blockRef, owner, class uint32) blockRef {
	n := a.alloc(class, owner)
	if r == 0 {
		return n
	}
	var vals [blockSize]uint32
	a.read(r, &vals)
	a.write(n, &vals)
	a.clear(r)
	a.release(r)
	return n
}

// read copies the counters of block r into vals.
func (a *blocks) read(r blockRef, vals *[blockSize]uint32) {
	switch s := r.slot(); r.class() {
	case class8:
		for j, v := range a.b8.counters(s) {
			vals[j] = uint32(v)
		}
	case class16:
		for j, v := range a.b16.counters(s) {
			vals[j] = uint32(v)
		}
	case class32:
		copy(vals[:], a.b32.counters(s))
	default:
		*vals = [blockSize]uint32{}
	}
}

// write sets the counters of block r, of a class that holds them, to
// vals.
func (a *blocks) write(r blockRef, vals *[blockSize]uint32) {
	switch s := r.slot(); r.class() {
	case class8:
		c := a.b8.counters(s)
		for j, v := range vals {
			c[j] = uint8(v)
		}
	case class16:
		c := a.b16.counters(s)
		for j, v := range vals {
			c[j] = uint16(v)
		}
	case class32:
		copy(a.b32.counters(s), vals[:])
	}
}

// clear zeroes the counters of block r.
func (a *blocks) clear(r blockRef) {
	switch r.class() {
	case class8:
		a.b8.clear(r.slot())
	case class16:
		a.b16.clear(r.slot())
	case class32:
		a.b32.clear(r.slot())
	}
}

// release frees block r, whose counters are zero.
func (a *blocks) release(r blockRef) {
	switch r.class() {
	case class8:
		a.b8.release(r.slot())
	case class16:
		a.b16.release(r.slot())
	case class32:
		a.b32.release(r.slot())
	}
}

// counters8 returns the counters of the 8-bit block in slot s.
func (a *blocks) counters8(s uint32) *[blockSize]uint8 {
	return (*[blockSize]uint8)(a.b8.raw[s>>shift8][(s&(1<<shift8-1))*blockSize:])
}

// subtract subtracts the counters of block r, whose nonzero bits are nz,
// from tot[j*stride] for each counter j, and sets them to zero. It visits
// only the nonzero counters of a sparse block.
func (a *blocks) subtract(r blockRef, nz uint64, tot []uint64, stride int) {
	switch s := r.slot(); r.class() {
	case class8:
		subtractBlock(a.b8.counters(s), nz, tot, stride)
	case class16:
		subtractBlock(a.b16.counters(s), nz, tot, stride)
	case class32:
		subtractBlock(a.b32.counters(s), nz, tot, stride)
	}
}

func subtractBlock[T uint8 | uint16 | uint32](c []T, nz uint64, tot []uint64, stride int) {
	tot = tot[:(blockSize-1)*stride+1]
	if bits.OnesCount64(nz) > blockSize/4 {
		// Without a branch per counter.
		for j, v := range c[:blockSize] {
			tot[j*stride] -= uint64(v)
		}
		clear(c)
		return
	}
	for w := nz; w != 0; w &= w - 1 {
		j := bits.TrailingZeros64(w)
		tot[j*stride] -= uint64(c[j])
		c[j] = 0
	}
}

// inUse returns the blocks allocated.
func (a *blocks) inUse() int {
	return int(a.b8.used) - a.b8.nfree + int(a.b16.used) - a.b16.nfree + int(a.b32.used) - a.b32.nfree
}

// mapped returns the bytes of the chunks and the tables.
func (a *blocks) mapped() int {
	n := a.b8.mapped() + a.b16.mapped() + a.b32.mapped() + a.packedMapped()
	for _, t := range a.tables {
		n += len(t)
	}
	return n
}

// bytes returns the bytes a holds: its chunks, and on the heap the slices
// that hold them.
func (a *blocks) bytes() int {
	n := int(unsafe.Sizeof(*a)) + a.mapped()
	for _, c := range []int{cap(a.b8.mem), cap(a.b16.mem), cap(a.b32.mem)} {
		n += c * (3*int(unsafe.Sizeof([]byte(nil))) + 8) // mem, cnt, owner, raw
	}
	n += cap(a.packed)*int(unsafe.Sizeof([]byte(nil))) + cap(a.packedFree)*4
	return n + cap(a.tables)*int(unsafe.Sizeof([]byte(nil)))
}

// slack reports whether a slab has more than a chunk of free slots.
func (a *blocks) slack() bool {
	return a.b8.nfree > a.most(&a.b8.shift) || a.b16.nfree > a.most(&a.b16.shift) || a.b32.nfree > a.most(&a.b32.shift)
}

// most returns the free slots a slab (by its shift) keeps without
// compacting: a chunk's, or two buckets' blocks if more (a bucket's
// expiry frees its blocks, and the next bucket takes as many back).
func (a *blocks) most(shift *uint32) int { return max(1<<*shift, a.keep) }

// compact compacts each slab with more free slots than it keeps (see
// slab.compact).
func (a *blocks) compact(move func(owner uint32, r blockRef)) {
	if a.b8.nfree > a.most(&a.b8.shift) {
		a.b8.compact(class8, move)
	}
	if a.b16.nfree > a.most(&a.b16.shift) {
		a.b16.compact(class16, move)
	}
	if a.b32.nfree > a.most(&a.b32.shift) {
		a.b32.compact(class32, move)
	}
}

// drop returns the memory of every block and table.
func (a *blocks) drop() {
	a.b8.drop()
	a.b16.drop()
	a.b32.drop()
	a.dropPacked()
	for _, b := range a.tables {
		freeChunk(b)
	}
	a.tables = nil
}
