package sketch

import "strings"

// cset is the candidate set of one window and group: at most capacity
// articles with their estimates, in a binary heap whose root is the
// member TopK would rank last. An estimate is set from the window's
// totals when its article is added, and lowered to them when a bucket
// that held one of its counters expires (refresh): it is the least of the
// article's estimates since its last Add.
type cset struct {
	heap   []entry
	pos    map[uint64]int32 // article hash → index in heap
	dirty  bool             // changed since the last Flush
	stored bool             // a Flush wrote it
}

type entry struct {
	est uint64
	h   uint64 // article hash
	id  string
	m   int32 // the member's index in the window's watchIndex
}

// worse reports whether a ranks after b: a lower estimate, or the same
// and a greater id.
func worse(a, b *entry) bool {
	return a.est < b.est || (a.est == b.est && a.id > b.id)
}

func (s *cset) swap(i, j int) {
	s.heap[i], s.heap[j] = s.heap[j], s.heap[i]
	s.pos[s.heap[i].h] = int32(i)
	s.pos[s.heap[j].h] = int32(j)
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

// heapify rebuilds pos and the heap order after the entries changed.
func (s *cset) heapify() {
	clear(s.pos)
	for i, e := range s.heap {
		s.pos[e.h] = int32(i)
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
// for a category's set).
func (c *Counts) offer(win *window, slot int, ha uint64, id string, est uint64, gcols, ccols *[MaxDepth]int) {
	if len(id) > c.opts.MaxIDLen || est == 0 {
		return
	}
	set := win.sets[slot]
	if set == nil {
		set = &cset{pos: make(map[uint64]int32)}
		win.sets[slot] = set
	}
	full := len(set.heap) >= c.capacity
	// A member's estimate is at most the article's current one (est), and
	// at least the root's: a lower one cannot be a member's.
	if full && est < set.heap[0].est {
		return
	}
	if i, ok := set.pos[ha]; ok {
		set.heap[i].est = est
		set.down(int(i))
		set.dirty = true
		return
	}
	e := entry{est: est, h: ha, id: id}
	if full && !worse(&set.heap[0], &e) {
		return
	}
	sid, ok := c.ref(ha, id)
	if !ok {
		return // another id with the same 64-bit hash is a member
	}
	e.id = sid
	e.m = c.watch(win, slot, ha, gcols, ccols)
	set.dirty = true
	if full {
		old := set.heap[0]
		delete(set.pos, old.h)
		c.unref(old.h)
		win.watch.unwatch(old.m)
		set.heap[0] = e
		set.pos[ha] = 0
		set.down(0)
		return
	}
	if len(set.heap) == cap(set.heap) {
		grown := make([]entry, len(set.heap), min(max(16, 2*cap(set.heap)), c.capacity))
		copy(grown, set.heap)
		set.heap = grown
	}
	set.heap = append(set.heap, e)
	set.pos[ha] = int32(len(set.heap) - 1)
	set.up(len(set.heap) - 1)
}

// remove drops the member at heap position i from set, a set of window
// win.
func (c *Counts) remove(win *window, set *cset, i int) {
	e := set.heap[i]
	delete(set.pos, e.h)
	c.unref(e.h)
	win.watch.unwatch(e.m)
	last := len(set.heap) - 1
	if i != last {
		set.heap[i] = set.heap[last]
		set.pos[set.heap[i].h] = int32(i)
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
	clear(set.pos)
	set.dirty = true
}

// ref counts one more reference to the article id with hash h and returns
// the kept copy of id; false if another id with hash h is kept.
func (c *Counts) ref(h uint64, id string) (string, bool) {
	if r, ok := c.ids[h]; ok {
		if r.id != id {
			return "", false
		}
		r.refs++
		c.ids[h] = r
		return r.id, true
	}
	id = strings.Clone(id) // don't pin the caller's buffer
	c.ids[h] = idRef{id: id, refs: 1}
	c.unstored++
	return id, true
}

func (c *Counts) unref(h uint64) {
	r := c.ids[h]
	if r.refs--; r.refs > 0 {
		c.ids[h] = r
		return
	}
	delete(c.ids, h)
	if r.stored {
		c.deletedIDs = append(c.deletedIDs, h)
	} else {
		c.unstored--
	}
}
