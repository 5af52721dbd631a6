package sketch

import (
	"encoding/binary"
	"math"
	"strings"
)

// cset is the candidate set of one window and group: at most capacity
// articles with their estimates, in a binary heap whose root is the
// member TopK would rank last. An estimate is set from the window's
// totals when its article is added, and lowered to them when a bucket
// that held one of its counters expires (refresh): it is the least of the
// article's estimates since its last Add.
type cset struct {
	heap []entry
	// pos maps an article hash to its member's key k, which it keeps
	// while a member; where[k] is the member's index in heap (so that
	// moving members in the heap does not write the map), and free lists
	// the keys not in use.
	pos    table[int32]
	where  []int32
	free   []int32
	dirty  bool // changed since the last Flush
	stored bool // a Flush wrote it
}

type entry struct {
	est uint64
	h   uint64 // article hash
	pre uint64 // the first 8 bytes of id, big-endian, zero-padded
	id  string
	m   int32 // the member's index in the window's watchIndex
	k   int32 // the member's key in the set (cset.pos)
}

// idPrefix returns the first 8 bytes of id as a big-endian number,
// zero-padded: ids compare as their prefixes do, unless those are equal.
func idPrefix(id string) uint64 {
	if len(id) >= 8 {
		return binary.BigEndian.Uint64([]byte(id[:8]))
	}
	var b [8]byte
	copy(b[:], id)
	return binary.BigEndian.Uint64(b[:])
}

func newSet() *cset { return &cset{} }

// index returns the heap index of the member with article hash h.
func (s *cset) index(h uint64) (int, bool) {
	k, ok := s.pos.get(h)
	if !ok {
		return 0, false
	}
	return int(s.where[k]), true
}

// key gives article hash h a key, and returns it.
func (s *cset) key(h uint64, limit int) int32 {
	var k int32
	if n := len(s.free); n > 0 {
		k, s.free = s.free[n-1], s.free[:n-1]
	} else {
		k = int32(len(s.where))
		s.where = appendCapped(s.where, 0, limit)
	}
	s.pos.put(h, k, limit)
	return k
}

// forget frees the key of the member e, which leaves the set.
func (s *cset) forget(e *entry, limit int) {
	s.pos.del(e.h)
	s.free = appendCapped(s.free, e.k, limit)
}

// worse reports whether a ranks after b: a lower estimate, or the same
// and a greater id.
func worse(a, b *entry) bool {
	if a.est != b.est {
		return a.est < b.est
	}
	if a.pre != b.pre {
		return a.pre > b.pre
	}
	return a.id > b.id
}

func (s *cset) swap(i, j int) {
	s.heap[i], s.heap[j] = s.heap[j], s.heap[i]
	s.where[s.heap[i].k] = int32(i)
	s.where[s.heap[j].k] = int32(j)
}

func (s *cset) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !worse(&s.heap[i], &s.heap[p]) {
			return
		}
		s.swap(i, p)
		i = p
	}
}

func (s *cset) down(i int) {
	n := len(s.heap)
	for {
		l, m := 2*i+1, i
		if l < n && worse(&s.heap[l], &s.heap[m]) {
			m = l
		}
		if r := l + 1; r < n && worse(&s.heap[r], &s.heap[m]) {
			m = r
		}
		if m == i {
			return
		}
		s.swap(i, m)
		i = m
	}
}

// heapify rebuilds where and the heap order after the entries changed.
func (s *cset) heapify() {
	for i, e := range s.heap {
		s.where[e.k] = int32(i)
	}
	for i := len(s.heap)/2 - 1; i >= 0; i-- {
		s.down(i)
	}
}

// offer gives the article (hash ha, id) with estimate est in window win a
// place in the candidate set of slot: it updates the estimate of a
// member, and admits a non-member if the set has room or the article
// ranks before the set's last member, which it replaces. gcols and ccols
// are the counters of the article's global and category keys (ccols only
// for a category's set). If kept is false, no set holds the article.
func (c *Counts) offer(win *window, slot int, ha uint64, id string, est uint64, kept bool, gcols, ccols *[MaxDepth]int) {
	if len(id) > c.opts.MaxIDLen || est == 0 {
		return
	}
	set := win.sets[slot]
	if set == nil {
		set = newSet()
		win.sets[slot] = set
	}
	full := len(set.heap) >= c.capacity
	// A member's estimate is at most the article's current one (est), and
	// at least the root's: a lower one cannot be a member's.
	if full && est < set.heap[0].est {
		return
	}
	if kept {
		if i, ok := set.index(ha); ok {
			set.heap[i].est = est
			set.down(i)
			set.dirty = true
			return
		}
	}
	e := entry{est: est, h: ha, pre: idPrefix(id), id: id}
	if full && !worse(&set.heap[0], &e) {
		return
	}
	sid, ok := c.ref(ha, id)
	if !ok {
		return // another id with the same 64-bit hash is a member
	}
	e.id = sid
	set.dirty = true
	if full {
		old := &set.heap[0]
		set.forget(old, c.capacity)
		c.unref(old.h)
		win.watch.unwatch(old.m)
		e.k = set.key(ha, c.capacity)
		e.m = c.watch(win, slot, ha, e.k, gcols, ccols)
		set.heap[0] = e
		set.where[e.k] = 0
		set.down(0)
		return
	}
	e.k = set.key(ha, c.capacity)
	e.m = c.watch(win, slot, ha, e.k, gcols, ccols)
	if len(set.heap) == cap(set.heap) {
		grown := make([]entry, len(set.heap), min(max(16, 2*cap(set.heap)), c.capacity))
		copy(grown, set.heap)
		set.heap = grown
	}
	set.heap = append(set.heap, e)
	set.where[e.k] = int32(len(set.heap) - 1)
	set.up(len(set.heap) - 1)
}

// remove drops the member at heap position i from set, a set of window
// win.
func (c *Counts) remove(win *window, set *cset, i int) {
	e := set.heap[i]
	set.forget(&e, c.capacity)
	c.unref(e.h)
	win.watch.unwatch(e.m)
	last := len(set.heap) - 1
	if i != last {
		set.heap[i] = set.heap[last]
		set.where[set.heap[i].k] = int32(i)
	}
	set.heap[last] = entry{} // release the id
	set.heap = set.heap[:last]
	if i != last {
		set.down(i)
		set.up(i)
	}
	set.dirty = true
}

func (c *Counts) clearSet(win *window, set *cset) {
	for _, e := range set.heap {
		c.unref(e.h)
		win.watch.unwatch(e.m)
	}
	clear(set.heap)
	set.heap = set.heap[:0]
	set.pos.clear()
	set.where, set.free = set.where[:0], set.free[:0]
	set.dirty = true
}

// ref counts one more reference to the article id with hash h and returns
// the kept copy of id; false if another id with hash h is kept.
func (c *Counts) ref(h uint64, id string) (string, bool) {
	r, added := c.ids.upsert(h, c.maxIDs())
	if !added {
		if r.id != id {
			return "", false
		}
		r.refs++
		return r.id, true
	}
	id = strings.Clone(id) // don't pin the caller's buffer
	*r = idRef{id: id, refs: 1}
	c.unstored++
	c.filter.add(h)
	return id, true
}

// idFilter counts the kept ids by the top bits of their hashes: an
// article whose count is zero is no set's member, and offer need not look
// it up (most articles of a sparse stream are new). A count that reaches
// its maximum stays there.
type idFilter struct{ n []uint16 }

const idFilterBits = 15

func (f *idFilter) add(h uint64) {
	if f.n == nil {
		f.n = make([]uint16, 1<<idFilterBits)
	}
	if p := &f.n[h>>(64-idFilterBits)]; *p != math.MaxUint16 {
		*p++
	}
}

func (f *idFilter) remove(h uint64) {
	if p := &f.n[h>>(64-idFilterBits)]; *p != math.MaxUint16 {
		*p--
	}
}

// mayHold reports whether an id with hash h may be kept.
func (f *idFilter) mayHold(h uint64) bool {
	return f.n != nil && f.n[h>>(64-idFilterBits)] != 0
}

// maxIDs returns the most article ids c keeps: one per candidate.
func (c *Counts) maxIDs() int { return len(c.win) * c.maxMembers() }

func (c *Counts) unref(h uint64) {
	i := c.ids.find(h)
	p := &c.ids.slots[i].val
	if p.refs--; p.refs > 0 {
		return
	}
	r := *p
	c.ids.delSlot(i)
	c.filter.remove(h)
	if r.stored {
		c.deletedIDs = append(c.deletedIDs, h)
	} else {
		c.unstored--
	}
}
