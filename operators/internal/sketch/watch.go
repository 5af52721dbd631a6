package sketch

import (
	"cmp"
	"math"
	"slices"
)

// watchIndex lists, for each counter of one window's sketch, the members
// of the window's candidate sets whose estimates read that counter in the
// window's totals: the depth counters of the article's global key and, in
// a category's set, the depth counters of its category key. A bucket that
// expires lowers only the totals of the counters it holds (nonzero), so
// only the members listed under those can see their estimates fall, and
// only they are re-estimated (refresh): the work of an expiry follows the
// bucket's counters, not the number of candidates.
//
// Member m (a watcher) owns the nodes [m × stride, m × stride + n); the
// nodes of one counter are chained from head. Which index a member gets
// and the order of a chain follow the history of admissions, which Load
// does not reproduce: no decision may depend on them (refresh orders its
// work by set and heap position).
type watchIndex struct {
	stride  int      // nodes per member: 2 × depth
	limit   int      // members at most: Counts.maxMembers
	head    []int32  // by counter: 1 + the first node reading it, 0 if none
	read    []uint64 // by counter, a bit: head is not 0 (a smaller array to test)
	nodes   []watchNode
	members []watcher
	free    []int32 // indices of free members
	touched []int32 // members an expiry touched, for refresh
	// marks has a bit per member: listed in touched (a smaller array to
	// test than members).
	marks []uint64
	all   bool // touched holds more than 1/visitAll of the members: refresh visits all
	// visitAll sets when refresh visits every member rather than the
	// touched ones (0: never): defaultVisitAll, but for tests, which check
	// that both ways give the same result.
	visitAll int
	changes  []change // scratch of refresh
	zeros    []uint64 // scratch of refresh
}

type watchNode struct {
	next int32 // 1 + the next node reading the same counter, 0 if none
	cell int32 // the counter
}

type watcher struct {
	h    uint64 // article hash
	slot int32  // category slot of the member's set
	k    int32  // its key in the set (cset.pos)
	n    int32  // nodes in use: depth, or 2 × depth in a category's set; 0 if free
}

// watch lists the member of window win's set slot with article hash h
// and key k under the counters its estimate reads: gcols, and in a
// category's set also ccols. It returns the member's index.
func (c *Counts) watch(win *window, slot int, h uint64, k int32, gcols, ccols *[MaxDepth]int) int32 {
	x := &win.watch
	if x.head == nil {
		x.stride, x.limit = 2*c.depth, c.maxMembers()
		x.head = make([]int32, c.depth*c.width)
		x.read = make([]uint64, c.depth*c.width/64)
	}
	var m int32
	if n := len(x.free); n > 0 {
		m, x.free = x.free[n-1], x.free[:n-1]
	} else {
		m = int32(len(x.members))
		x.members = appendCapped(x.members, watcher{}, x.limit)
		if int(m)/64 == len(x.marks) {
			x.marks = append(x.marks, 0)
		}
		for range x.stride {
			x.nodes = appendCapped(x.nodes, watchNode{}, x.limit*x.stride)
		}
	}
	w := &x.members[m]
	w.h, w.slot, w.k = h, int32(slot), k
	j := int(m) * x.stride
	link := func(cell int) {
		x.nodes[j] = watchNode{next: x.head[cell], cell: int32(cell)}
		x.head[cell] = int32(j + 1)
		x.read[cell/64] |= 1 << (cell % 64)
		j++
	}
	for _, cell := range gcols[:c.depth] {
		link(cell)
	}
	if slot != 0 {
		for _, cell := range ccols[:c.depth] {
			link(cell)
		}
	}
	w.n = int32(j - int(m)*x.stride)
	return m
}

// watchStored lists a member whose counters are not at hand (loaded).
func (c *Counts) watchStored(win *window, slot int, h uint64, k int32) int32 {
	var gcols, ccols [MaxDepth]int
	c.cols(keyOf(h, globalSalt), &gcols)
	if slot != 0 {
		c.cols(keyOf(h, c.salt(slot)), &ccols)
	}
	return c.watch(win, slot, h, k, &gcols, &ccols)
}

// unwatch removes member m from the index.
func (x *watchIndex) unwatch(m int32) {
	w := &x.members[m]
	base := int(m) * x.stride
	for j := base; j < base+int(w.n); j++ {
		cell := x.nodes[j].cell
		p := &x.head[cell]
		for *p != int32(j+1) {
			p = &x.nodes[*p-1].next
		}
		*p = x.nodes[j].next
		if x.head[cell] == 0 {
			x.read[cell/64] &^= 1 << (cell % 64)
		}
	}
	*w = watcher{}
	x.free = appendCapped(x.free, m, x.limit)
}

// reads reports whether a member's estimate reads counter cell.
func (x *watchIndex) reads(cell int) bool {
	return x.read != nil && x.read[cell/64]&(1<<(cell%64)) != 0
}

// collect lists, once each, the members whose estimates read counter
// cell, until they are more than 1/visitAll of the members: then refresh
// visits every member.
func (x *watchIndex) collect(cell int) {
	for n := x.head[cell]; n != 0 && !x.all; n = x.nodes[n-1].next {
		m := (n - 1) / int32(x.stride)
		if x.marks[m/64]&(1<<(m%64)) == 0 {
			x.marks[m/64] |= 1 << (m % 64)
			x.touched = appendCapped(x.touched, m, x.limit)
			x.all = x.visitAll > 0 && x.visitAll*len(x.touched) > len(x.members)-len(x.free)
		}
	}
}

// current returns the estimate member m's counters give in window win.
func (c *Counts) current(win *window, m int32) uint64 {
	x := &win.watch
	nw := len(c.win)
	est := uint64(math.MaxUint64)
	base := int(m) * x.stride
	for _, nd := range x.nodes[base : base+int(x.members[m].n)] {
		est = min(est, c.total[int(nd.cell)*nw+win.idx])
	}
	return est
}

// refresh re-estimates the members of window win's candidate sets whose
// counters held shares of the buckets that just expired (collected by
// expire): each takes the lesser of its estimate and the article's
// current one, and leaves its set at zero. The others' estimates read no
// counter the expiry lowered, so they are at most the current ones.
//
// In each set, the estimates that fall but not to zero are lowered in
// place, then sifted up in the order of their positions; then the members
// at zero are removed in the order of their article hashes. A sift-up
// moves only the member's ancestors, which sit at lower positions: the
// members yet to be sifted have not moved, and the result depends only on
// the set and the estimates that fell.
// Where an expiry touched many of the window's members, they are found by
// visiting every member in position order, which finds the same ones.
func (c *Counts) refresh(win *window) {
	x := &win.watch
	ch := x.changes[:0]
	if x.all {
		for _, m := range x.touched {
			x.marks[m/64] = 0
		}
		x.all = false
		for slot, set := range win.sets {
			if set == nil {
				continue
			}
			for i := range set.heap {
				e := &set.heap[i]
				if est := c.current(win, e.m); est < e.est {
					ch = appendCapped(ch, change{key: uint64(slot)<<32 | uint64(i), est: est}, x.limit)
				}
			}
		}
	} else {
		for _, m := range x.touched {
			w := &x.members[m]
			x.marks[m/64] = 0
			set := win.sets[w.slot]
			i := set.where[w.k]
			if est := c.current(win, m); est < set.heap[i].est {
				ch = appendCapped(ch, change{key: uint64(w.slot)<<32 | uint64(i), est: est}, x.limit)
			}
		}
		sortChanges(ch)
	}
	x.touched = x.touched[:0]
	x.changes = ch[:0] // before ch is consumed
	for len(ch) > 0 {
		slot := int(ch[0].key >> 32)
		n := 1
		for n < len(ch) && int(ch[n].key>>32) == slot {
			n++
		}
		set := win.sets[slot]
		zeros := x.zeros[:0]
		for _, d := range ch[:n] {
			if e := &set.heap[uint32(d.key)]; d.est > 0 {
				e.est = d.est
			} else {
				zeros = appendCapped(zeros, e.h, x.limit)
			}
		}
		for _, d := range ch[:n] {
			if d.est > 0 {
				set.up(int(uint32(d.key)))
			}
		}
		slices.Sort(zeros)
		for _, h := range zeros {
			i, _ := set.index(h)
			c.remove(win, set, i)
		}
		x.zeros = zeros[:0]
		set.dirty = true
		ch = ch[n:]
	}
}

// defaultVisitAll is watchIndex.visitAll: refresh visits every member
// once an expiry touched a quarter of them.
const defaultVisitAll = 4

// change is an estimate that falls in refresh: the set's slot and the
// member's position (slot<<32 | position), and the new estimate.
type change struct{ key, est uint64 }

// sortChanges sorts ch by key: by insertion when short, as most are.
func sortChanges(ch []change) {
	if len(ch) > 32 {
		slices.SortFunc(ch, func(a, b change) int { return cmp.Compare(a.key, b.key) })
		return
	}
	for i := 1; i < len(ch); i++ {
		for j := i; j > 0 && ch[j].key < ch[j-1].key; j-- {
			ch[j], ch[j-1] = ch[j-1], ch[j]
		}
	}
}

// maxMembers returns the most members the candidate sets of one window
// hold at once.
func (c *Counts) maxMembers() int { return (c.opts.MaxCategories + 1) * c.capacity }

// appendCapped appends v to s, growing it by doubling but to at most
// limit elements of capacity.
func appendCapped[T any](s []T, v T, limit int) []T {
	if len(s) == cap(s) {
		grown := make([]T, len(s), max(len(s)+1, min(max(16, 2*cap(s)), limit)))
		copy(grown, s)
		s = grown
	}
	return append(s, v)
}
