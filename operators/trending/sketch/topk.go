package sketch

import "strings"

// cset is the candidate set of one window and group: at most capacity
// articles with their estimates, in a binary heap whose root is the
// member TopK would rank last. An estimate is refreshed from the window's
// totals when its article is added and when a bucket of the window
// expires; in between it is the tighter of the two upper bounds.
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
// ranks before the set's last member, which it replaces.
func (c *Counts) offer(win *window, slot int, ha uint64, id string, est uint64) {
	if len(id) > c.opts.MaxIDLen || est == 0 {
		return
	}
	set := win.sets[slot]
	if set == nil {
		set = &cset{pos: make(map[uint64]int32)}
		win.sets[slot] = set
	}
	full := len(set.heap) >= c.capacity
	// A member's estimate only grows between refreshes, and it is at
	// least the root's: a lower one cannot be a member's.
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
	set.dirty = true
	if full {
		old := set.heap[0].h
		delete(set.pos, old)
		c.unref(old)
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

// refresh re-estimates every candidate of window win from its totals,
// after buckets expired, and drops those whose estimate is zero.
func (c *Counts) refresh(win *window) {
	for slot, set := range win.sets {
		if set == nil || len(set.heap) == 0 {
			continue
		}
		salt := c.salt(slot)
		n := 0
		for i, e := range set.heap {
			e.est = c.estimate(win, keyOf(e.h, globalSalt))
			if slot != 0 {
				e.est = min(e.est, c.estimate(win, keyOf(e.h, salt)))
			}
			if e.est == 0 {
				delete(set.pos, e.h)
				c.unref(e.h)
				continue
			}
			if n != i {
				set.pos[e.h] = int32(n)
			}
			set.heap[n] = e
			n++
		}
		clear(set.heap[n:]) // release the ids
		set.heap = set.heap[:n]
		for i := n/2 - 1; i >= 0; i-- {
			set.down(i)
		}
		set.dirty = true
	}
}

func (c *Counts) clearSet(set *cset) {
	for _, e := range set.heap {
		c.unref(e.h)
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
