package trending

import (
	"slices"
	"strings"
	"unsafe"

	"github.com/newsflow/newsflow/operators/internal/sketch"
)

// Queries: counts, categories, top-K and memory.

func (c *Counts) validWindow(w int) bool { return w >= 0 && w < c.nw && c.started }

// Count returns articleID's global share count in window w (an index into
// Options().Windows).
func (c *Counts) Count(w int, articleID string) uint64 {
	if !c.validWindow(w) {
		return 0
	}
	a, ok := c.ids.find(articleID, c.ids.hash(articleID))
	if !ok {
		return 0
	}
	return uint64(c.artRow(a)[artTotal+w])
}

// CategoryCount returns articleID's share count in category in window w.
// Category "" is the global family: CategoryCount(w, "", id) == Count(w, id).
func (c *Counts) CategoryCount(w int, category, articleID string) uint64 {
	if category == "" {
		return c.Count(w, articleID)
	}
	if !c.validWindow(w) {
		return 0
	}
	a, ok := c.ids.find(articleID, c.ids.hash(articleID))
	if !ok {
		return 0
	}
	for p := c.artRow(a)[artHead]; p != noID; {
		row := c.pairRow(p)
		if c.catName[row[pairCat]] == category {
			return uint64(row[pairTotal+w])
		}
		p = row[pairNext]
	}
	return 0
}

// Categories returns, sorted, the categories that currently have a
// nonzero count in some window. Category "" (no category) is not listed.
func (c *Counts) Categories() []string {
	out := make([]string, 0, len(c.catIdx))
	for name := range c.catIdx {
		if name != "" {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// TopK returns the k articles with the highest counts in window w, globally
// (category "") or in category, ordered by count descending and then
// article id ascending. Articles with a zero count are never returned, so
// the answer may be shorter than k.
func (c *Counts) TopK(w int, category string, k int) []Entry {
	if !c.validWindow(w) || k <= 0 {
		return nil
	}
	var g *group
	cat := -1
	if category == "" {
		g = &c.win[w].global
	} else {
		ci, ok := c.catIdx[category]
		if !ok {
			return nil
		}
		cat = int(ci)
		g = &c.catGroups[cat*c.nw+w]
	}
	g.kPeriod = max(g.kPeriod, k)
	if g.calls++; g.calls >= kPeriodCalls {
		g.kWant, g.kPeriod, g.calls = g.kPeriod, 0, 0
	}
	g.kWant = max(g.kWant, k)
	// Rescan when the set is not maintained, too small to answer, or far
	// larger than needed: either because queries now ask for less, or
	// because it doubled since it was built (unless ties made it large
	// from the start, which a rescan would not fix).
	if g.tau == 0 || (len(g.list) < k && g.tau > 1) ||
		(len(g.list) > 8*g.kWant+256 && (g.rescanK > g.kWant || len(g.list) > 2*g.rescanLen)) {
		c.rescan(g, w, cat)
	}
	f := c.family(cat)
	off := f.total + w
	cands := c.cands[:0]
	for _, id := range g.list {
		cands = append(cands, cand{f.rows[int(id)*f.stride+off], id})
	}
	if len(cands) > k {
		h := c.heap[:0]
		for _, x := range cands {
			h = sketch.PushTop(h, k, x.n)
		}
		c.heap = h
		kth := h[0]
		cands = slices.DeleteFunc(cands, func(x cand) bool { return x.n < kth })
	}
	// id views the article id in the table: valid until c changes,
	// copied into the answer.
	id := func(x cand) string {
		if cat >= 0 {
			return c.ids.view(c.pairs[int(x.id)*c.pairStride+pairArt])
		}
		return c.ids.view(x.id)
	}
	slices.SortFunc(cands, func(x, y cand) int {
		if x.n != y.n {
			if x.n > y.n {
				return -1
			}
			return 1
		}
		return strings.Compare(id(x), id(y))
	})
	c.cands = cands
	out := make([]Entry, min(k, len(cands)))
	for i := range out {
		out[i] = Entry{ArticleID: strings.Clone(id(cands[i])), Count: uint64(cands[i].n)}
	}
	return out
}

// rescan picks a new tau for group g of window w (cat < 0: global) so that
// about 4k members qualify, and rebuilds the candidate list.
func (c *Counts) rescan(g *group, w, cat int) {
	c.rescans++
	f := c.family(cat)
	nw := c.nw
	for _, id := range g.list {
		f.pos[int(id)*nw+w] = -1
	}
	g.list = g.list[:0]
	g.rescanK = g.kWant
	target := 4*g.kWant + 64
	// One pass: keep a min-heap of the target largest totals, whose minimum
	// (floor) only rises, and collect every id whose total was >= floor
	// when seen: that includes every id >= the final tau.
	h, seen := c.heap[:0], c.seen[:0]
	floor := uint32(1)
	for i, id := f.total+w, 0; i < len(f.rows); i, id = i+f.stride, id+1 {
		if t := f.rows[i]; t >= floor && f.in(id) {
			seen = append(seen, uint32(id))
			if len(h) < target || t > h[0] {
				h = sketch.PushTop(h, target, t)
				if len(h) == target {
					floor = max(h[0], 1)
				}
			}
		}
	}
	tau := floor
	for _, id := range seen {
		if f.rows[int(id)*f.stride+f.total+w] >= tau {
			addCand(g, f.pos, id, nw, w)
		}
	}
	c.heap, c.seen = h, seen[:0]
	g.tau = tau
	g.rescanLen = len(g.list)
}

// MemoryBytes estimates the heap bytes held by c.
func (c *Counts) MemoryBytes() int {
	const (
		strHdr   = int(unsafe.Sizeof(""))
		mapEntry = 48 // swiss-table slot (16+4, padded) / load factor, plus control bytes
	)
	n := int(unsafe.Sizeof(*c))
	n += c.ids.memoryBytes()
	n += cap(c.arts)*4 + cap(c.artPos)*4 + cap(c.artFree)*4
	n += cap(c.pairs)*4 + cap(c.pairPos)*4 + cap(c.pairFree)*4
	n += len(c.catIdx)*mapEntry + cap(c.catName)*strHdr + cap(c.catPairs)*4 + cap(c.catFree)*4
	n += cap(c.catGroups) * int(unsafe.Sizeof(group{}))
	for _, g := range c.catGroups {
		n += cap(g.list) * 4
	}
	for _, name := range c.catName {
		n += len(name)
	}
	for i := range c.win {
		w := &c.win[i]
		n += int(unsafe.Sizeof(*w)) + cap(w.global.list)*4 + cap(w.slots)*int(unsafe.Sizeof(bucket{}))
		for j := range w.slots {
			n += cap(w.slots[j].tab)*8 + cap(w.slots[j].dirty)*4
		}
	}
	n += cap(c.heap)*4 + cap(c.seen)*4 + cap(c.cands)*int(unsafe.Sizeof(cand{})) + cap(c.key) + cap(c.val)
	return n
}
