package sketch

import (
	"cmp"
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
// work by set and article).
type watchIndex struct {
	stride  int      // nodes per member: 2 × depth
	limit   int      // members at most: Counts.maxMembers
	head    []int32  // by counter: 1 + the first node reading it, 0 if none
	read    []uint64 // by counter, a bit: head is not 0 (a smaller array to test)
	nodes   []watchNode
	members []watcher
	free    []int32 // indices of free members
	touched []touch // members an expiry touched, for refresh
}

type watchNode struct {
	next int32 // 1 + the next node reading the same counter, 0 if none
	cell int32 // the counter
}

type watcher struct {
	h       uint64 // article hash
	slot    int32  // category slot of the member's set
	n       int32  // nodes in use: depth, or 2 × depth in a category's set; 0 if free
	touched bool   // listed in touched
}

// touch is a member an expiry touched: its article hash, the slot of its
// set, and its index.
type touch struct {
	h       uint64
	slot, m int32
}

// watch lists the member of window win's set slot with article hash h
// under the counters its estimate reads: gcols, and in a category's set
// also ccols. It returns the member's index.
func (c *Counts) watch(win *window, slot int, h uint64, gcols, ccols *[MaxDepth]int) int32 {
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
		for range x.stride {
			x.nodes = appendCapped(x.nodes, watchNode{}, x.limit*x.stride)
		}
	}
	w := &x.members[m]
	w.h, w.slot = h, int32(slot)
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
func (c *Counts) watchStored(win *window, slot int, h uint64) int32 {
	var gcols, ccols [MaxDepth]int
	c.cols(keyOf(h, globalSalt), &gcols)
	if slot != 0 {
		c.cols(keyOf(h, c.salt(slot)), &ccols)
	}
	return c.watch(win, slot, h, &gcols, &ccols)
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

// collect lists, once each, the members whose estimates read counter cell.
func (x *watchIndex) collect(cell int) {
	for n := x.head[cell]; n != 0; n = x.nodes[n-1].next {
		m := (n - 1) / int32(x.stride)
		if w := &x.members[m]; !w.touched {
			w.touched = true
			x.touched = appendCapped(x.touched, touch{h: w.h, slot: w.slot, m: m}, x.limit)
		}
	}
}

// refresh re-estimates the members of window win's candidate sets whose
// counters held shares of the buckets that just expired (collected by
// expire): each takes the lesser of its estimate and the article's
// current one, and leaves its set at zero. The others' estimates read no
// counter the expiry lowered. The members are visited by set, then by
// article hash, so that the result depends on the sets alone.
func (c *Counts) refresh(win *window) {
	x := &win.watch
	ts := x.touched
	slices.SortFunc(ts, func(a, b touch) int {
		return cmp.Or(cmp.Compare(a.slot, b.slot), cmp.Compare(a.h, b.h))
	})
	nw := len(c.win)
	for _, t := range ts {
		set := win.sets[t.slot]
		w := &x.members[t.m]
		w.touched = false
		i := int(set.pos[t.h])
		old := set.heap[i].est
		est := old
		base := int(t.m) * x.stride
		for _, nd := range x.nodes[base : base+int(w.n)] {
			est = min(est, c.total[int(nd.cell)*nw+win.idx])
		}
		switch {
		case est == old:
		case est == 0:
			c.remove(win, set, i)
		default:
			set.heap[i].est = est
			set.up(i) // it ranks lower
			set.dirty = true
		}
	}
	x.touched = ts[:0]
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
