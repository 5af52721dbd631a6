package dedup

import (
	"math/bits"
	"unsafe"
)

// filter is a cuckoo filter (Fan et al., "Cuckoo Filter: Practically Better
// Than Bloom", 2014) over fingerprints, specialised to this package: each
// entry holds 16 bits of an id's fingerprint and the 16-bit tag of the
// bucket the id was added in, so a hit names the one bucket to verify on
// disk and expiry drops a bucket's entries in one sweep.
//
// Entries sit in groups of eight (32 bytes). An id may sit in two groups: i1 from the
// fingerprint's high 32 bits, and i2 = (h(tag) - i1) mod groups, so either
// group yields the other from the entry alone (partial-key cuckoo hashing
// that works for any number of groups, not only powers of two). At the
// sizes used here (at most 93% full) a lookup of an id never added matches
// with probability below 16/2^16 = 2.4e-4. Eight entries per group, rather
// than the usual four, keep inserts near full to one or two cache misses
// (3x faster at 90% here) for twice the false matches.
//
// The filter cannot grow in place (the entries do not keep the bits that
// would choose their new groups); the Set rebuilds it from the flushed
// fingerprints instead.
type filter struct {
	slots  []uint32 // 4 per group; 0 is empty; tag<<16 | bucket tag
	groups uint64
	count  int
	rnd    uint64 // xorshift state for the eviction walk
}

const (
	groupSlots = 8
	maxKicks   = 500
	// A rebuilt filter is about fillAfter full; it is rebuilt bigger when
	// an insert would take it past fillMax, and smaller when expiry takes
	// it below fillMin.
	fillAfter = 0.75
	fillMax   = 0.93
	fillMin   = 0.35
)

// newFilter returns a filter sized to hold n entries at about fillAfter.
func newFilter(n int) *filter {
	groups := uint64(float64(n)/(fillAfter*groupSlots)) + 1
	return &filter{slots: make([]uint32, groups*groupSlots), groups: groups, rnd: 0x9e3779b97f4a7c15}
}

func (c *filter) capacity() int { return len(c.slots) }

// full reports whether one more entry would take the filter past fillMax.
func (c *filter) full() bool { return float64(c.count+1) > fillMax*float64(len(c.slots)) }

// sparse reports whether the filter is big for what it holds.
func (c *filter) sparse() bool {
	return len(c.slots) > 64 && float64(c.count) < fillMin*float64(len(c.slots))
}

func tagOf(f Fingerprint) uint16 {
	t := uint16(f >> 16)
	if t == 0 {
		t = 1 // 0 marks an empty slot
	}
	return t
}

// group1 maps the fingerprint's high bits onto [0, groups) (Lemire's
// multiply-shift reduction).
func (c *filter) group1(f Fingerprint) uint64 {
	hi, _ := bits.Mul64(uint64(f>>32)<<32, c.groups)
	return hi
}

// other returns the group an entry with tag t may sit in besides g.
func (c *filter) other(g uint64, t uint16) uint64 {
	h, _ := bits.Mul64(uint64(t)*0x9e3779b97f4a7c15, c.groups)
	if h >= g {
		return h - g
	}
	return h + c.groups - g
}

// lookup appends to out the bucket tags of the entries that match f.
func (c *filter) lookup(f Fingerprint, out []uint16) []uint16 {
	t := tagOf(f)
	g1 := c.group1(f)
	g2 := c.other(g1, t)
	for _, g := range [2]uint64{g1, g2} {
		for _, e := range c.slots[g*groupSlots : g*groupSlots+groupSlots] {
			if uint16(e>>16) == t {
				out = append(out, uint16(e))
			}
		}
		if g1 == g2 {
			break
		}
	}
	return out
}

// insert adds f with bucket tag b. It returns false when the eviction walk
// gives up, in which case one entry (maybe another id's) has been dropped:
// the caller must rebuild the filter.
func (c *filter) insert(f Fingerprint, b uint16) bool {
	t := tagOf(f)
	e := uint32(t)<<16 | uint32(b)
	g := c.group1(f)
	if c.put(g, e) || c.put(c.other(g, t), e) {
		c.count++
		return true
	}
	if c.next()&1 == 0 {
		g = c.other(g, t)
	}
	for range maxKicks {
		s := &c.slots[g*groupSlots+c.next()%groupSlots]
		e, *s = *s, e
		g = c.other(g, uint16(e>>16))
		if c.put(g, e) {
			c.count++
			return true
		}
	}
	return false
}

func (c *filter) put(g uint64, e uint32) bool {
	group := c.slots[g*groupSlots : g*groupSlots+groupSlots]
	for i, s := range group {
		if s == 0 {
			group[i] = e
			return true
		}
	}
	return false
}

func (c *filter) next() uint64 {
	c.rnd ^= c.rnd << 13
	c.rnd ^= c.rnd >> 7
	c.rnd ^= c.rnd << 17
	return c.rnd
}

// expire removes the entries whose bucket tag is in [from, from+span)
// (mod 2^16).
func (c *filter) expire(from, span uint16) {
	for i, e := range c.slots {
		if e != 0 && uint16(e)-from < span {
			c.slots[i] = 0
			c.count--
		}
	}
}

func (c *filter) memoryBytes() int { return int(unsafe.Sizeof(*c)) + cap(c.slots)*4 }
