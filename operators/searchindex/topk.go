package searchindex

import (
	"cmp"
	"container/heap"
	"context"
	"errors"
	"math"
	"slices"
	"time"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/blevesearch/bleve/v2/index/scorch"
	"github.com/blevesearch/bleve/v2/numeric"
	bsearch "github.com/blevesearch/bleve/v2/search"
	segment "github.com/blevesearch/scorch_segment_api/v2"
)

// The top-k path of relevance searches.
//
// Bleve scores every document a query matches: on a million documents a
// common word matches hundreds of thousands, and walking them through
// Bleve's searchers took tens of milliseconds. relevantTopK finds the same
// page, with the same scores and total, reading the segments' postings
// directly:
//
//   - The matching documents and their number (the total) come from the
//     postings' bitmaps, combined segment by segment (a term's fields are
//     OR'ed, terms AND'ed — OR'ed with Options.AnyTerm — and the filters
//     AND'ed), without visiting a document.
//   - Scores are Bleve's TF-IDF computed the way Bleve computes them for
//     the query textQuery builds, operation for operation, so that they are
//     equal to the last bit (TestTopKSameAsBleve compares every page).
//   - Only documents that can enter the page are scored. A document's score
//     is bounded from which fields each term matched (the bitmaps tell) and
//     sqrt(tf)·norm ≤ 1 for the fields not read yet (Bleve's norm is
//     1/sqrt(field length) and tf ≤ field length). The matches are split
//     into classes by the fields each term matched (bitmap operations).
//     Each segment's best class is visited in order of the classes' bounds
//     until a bound falls short of the page's lowest score; then, segment
//     by segment, the other classes whose bound still reaches the page, in
//     one pass in document order (zap's Advance walks a postings list from
//     where it stands, so each restart from the list's start costs a walk).
//     Within a class, a document's title postings are read first, then the
//     phrase's positions, and its other fields only if the bound with what
//     is known exactly still reaches the page. For a common word most classes
//     are never visited: the title counts three times, and Bleve multiplies
//     a term's score by the fraction of fields it matched.
//   - When a segment would have more than maxClasses classes (three or
//     more terms each in all three fields), the documents with a query term
//     in their title are visited first, testing each one's bitmaps, and the
//     others only if their bound reaches the page.
//
// Queries it does not handle (more than maxTopKTerms terms, or an index
// reader that is not a scorch snapshot of segments with bitmap postings)
// take Bleve's path.

// maxTopKTerms bounds the distinct terms (and the phrase's tokens) of a
// query on the top-k path. Bleve sorts the clauses of a conjunction or
// disjunction with sort.Sort, which is stable up to 12 elements; beyond
// 10 clauses a disjunction switches to a heap searcher that sums scores in
// another order.
const maxTopKTerms = 8

// errNotTopK makes relevant take Bleve's path.
var errNotTopK = errors.New("not on the top-k path")

// textField is one of the fields a query term is matched in.
type textField struct {
	name  string
	boost float64
}

var textFields = [3]textField{{fieldTitle, titleBoost}, {fieldSummary, summaryBoost}, {fieldContent, contentBoost}}

const titleField = 0 // index of the title in textFields

// xMax bounds sqrt(tf)·norm of a posting: norm is 1/sqrt(field length)
// rounded to float32, and tf ≤ field length.
const xMax = 1 + 1e-6

// fieldTerm is a term in one field: its statistics and query weight, as
// Bleve's TermQueryScorer has them.
type fieldTerm struct {
	field int // index in textFields
	count uint64
	idf   float64
	qw    float64 // query weight: boost · idf · query norm
	ub    float64 // the score of a posting with sqrt(tf)·norm = xMax
}

func (f *fieldTerm) weight() float64 {
	w := textFields[f.field].boost * f.idf
	return w * w
}

// score is Bleve's TermQueryScorer.Score for a posting (TF-IDF).
func (f *fieldTerm) score(freq uint64, norm float64) float64 {
	tf := math.Sqrt(float64(freq))
	s := float64(float64(tf*norm) * f.idf)
	if f.qw != 1.0 {
		s = float64(s * f.qw)
	}
	return s
}

// queryTerm is one distinct term of the text, matched in each text field.
type queryTerm struct {
	term string
	src  int // index in the distinct terms in order of appearance
	// fields in the order Bleve's disjunction sums them: by count
	// ascending, stable.
	fields [3]fieldTerm
	count  uint64
}

// topkQuery is the scoring of textQuery's query for one index snapshot.
type topkQuery struct {
	terms   []queryTerm // in the order Bleve sums them
	anyTerm bool
	// phrase, for texts of more than one token: the term (index in terms)
	// at each position of the phrase, -1 for a gap (a stop word).
	phrase []int
	// phraseSum lists the phrase's tokens (indexes in terms) in the order
	// Bleve sums their title scores.
	phraseSum []int
	// titleOf[i] is the index in terms[i].fields of the title.
	titleOf []int
}

// newTopkQuery computes the query's statistics as Bleve's searchers do:
// idf from the live documents (docTotal) and the live documents with each
// term in each field (counts, per distinct term of uniq and per textFields),
// the query norm from the sum of squared weights over the query tree.
func newTopkQuery(docTotal uint64, tokens []string, positions []int, uniq []string, counts [][3]uint64, anyTerm bool) (*topkQuery, error) {
	q := &topkQuery{anyTerm: anyTerm}
	index := map[string]int{}
	for u, t := range uniq {
		index[t] = len(q.terms)
		qt := queryTerm{term: t, src: u}
		for fi := range textFields {
			n := counts[u][fi]
			qt.fields[fi] = fieldTerm{field: fi, count: n, idf: 1.0 + math.Log(float64(docTotal)/float64(n+1.0))}
			qt.count += n
		}
		// Bleve's OrderedSearcherList, sorted by sort.Sort: insertion sort
		// (stable) for so few elements.
		stableByCount(qt.fields[:], func(f fieldTerm) uint64 { return f.count })
		q.terms = append(q.terms, qt)
	}
	// The terms' clauses, sorted by their counts (sums of their fields').
	order := make([]int, len(q.terms))
	for i := range order {
		order[i] = i
	}
	stableByCount(order, func(i int) uint64 { return q.terms[i].count })
	terms := make([]queryTerm, len(order))
	for i, o := range order {
		terms[i] = q.terms[o]
	}
	q.terms = terms
	for i, t := range q.terms {
		index[t.term] = i
	}
	q.titleOf = make([]int, len(q.terms))
	for i := range q.terms {
		for j, f := range q.terms[i].fields {
			if f.field == titleField {
				q.titleOf[i] = j
			}
		}
	}

	// Sum of squared weights, in the order of Bleve's searcher tree.
	var text float64
	for _, t := range q.terms {
		var w float64
		for i := range t.fields {
			w += t.fields[i].weight()
		}
		if len(q.terms) == 1 {
			text = w
		} else {
			text += w
		}
	}
	total := text
	if len(tokens) > 1 {
		first := positions[0]
		for _, p := range positions {
			first = min(first, p)
		}
		last := first
		for _, p := range positions {
			last = max(last, p)
		}
		q.phrase = make([]int, last-first+1)
		for i := range q.phrase {
			q.phrase[i] = -1
		}
		for i, t := range tokens {
			if q.phrase[positions[i]-first] != -1 {
				return nil, errNotTopK // two tokens at one position
			}
			q.phrase[positions[i]-first] = index[t]
		}
		for _, ti := range q.phrase {
			if ti >= 0 {
				q.phraseSum = append(q.phraseSum, ti)
			}
		}
		stableByCount(q.phraseSum, func(ti int) uint64 { return q.terms[ti].fields[q.titleOf[ti]].count })
		var phrase float64
		for _, ti := range q.phraseSum {
			phrase += q.terms[ti].fields[q.titleOf[ti]].weight()
		}
		// A disjunction of two: the order of two addends does not matter.
		total = text + phrase
	}
	norm := 1.0 / math.Sqrt(total)
	for i := range q.terms {
		for j := range q.terms[i].fields {
			f := &q.terms[i].fields[j]
			f.qw = float64(textFields[f.field].boost*f.idf) * norm
			f.ub = f.score(1, xMax)
		}
	}
	return q, nil
}

// stableByCount sorts s by key ascending, keeping the order of equal keys.
func stableByCount[T any](s []T, key func(T) uint64) {
	slices.SortStableFunc(s, func(a, b T) int {
		ka, kb := key(a), key(b)
		switch {
		case ka < kb:
			return -1
		case ka > kb:
			return 1
		}
		return 0
	})
}

// termScore is Bleve's disjunction score of one term over its fields: the
// sum of the matched fields' scores times the fraction matched. s[i] is
// the score of fields[i], matched[i] whether it matched.
func termScore(s *[3]float64, matched *[3]bool) (float64, bool) {
	var sum float64
	n := 0
	for i := range s {
		if matched[i] {
			sum += s[i]
			n++
		}
	}
	if n == 0 {
		return 0, false
	}
	return float64(sum * (float64(n) / float64(3))), true
}

// docScore combines the terms' scores as Bleve's query does: a conjunction
// (or, anyTerm, a disjunction) of the terms; with a phrase, a disjunction
// with the phrase's score. ok is false if the document does not match.
func (q *topkQuery) docScore(ts []float64, tm []bool, phrase float64, phraseMatched bool) (float64, bool) {
	var text float64
	if len(q.terms) == 1 {
		if !tm[0] {
			return 0, false
		}
		text = ts[0]
	} else {
		n := 0
		for i := range ts {
			if tm[i] {
				text += ts[i]
				n++
			} else if !q.anyTerm {
				return 0, false
			}
		}
		if n == 0 {
			return 0, false
		}
		if q.anyTerm {
			text = float64(text * (float64(n) / float64(len(ts))))
		}
	}
	if q.phrase == nil {
		return text, true
	}
	if phraseMatched {
		return float64(text+phrase) * (float64(2) / float64(2)), true
	}
	return float64(text * (float64(1) / float64(2))), true
}

// candidate is a document that may make the page.
type candidate struct {
	score float64
	seg   int
	num   uint64
	id    string // loaded when needed
}

func (a *candidate) better(b *candidate) bool {
	if a.score != b.score {
		return a.score > b.score
	}
	return a.id < b.id
}

// candHeap is a heap of candidates whose root is the worst (the shape of
// collect.go's topHeap, kept apart so that both heaps call better directly).
type candHeap []candidate

func (h candHeap) Len() int           { return len(h) }
func (h candHeap) Less(i, j int) bool { return h[j].better(&h[i]) }
func (h candHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *candHeap) Push(x any)        { *h = append(*h, x.(candidate)) }
func (h *candHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

// topkCollector keeps the first k documents in (score descending, ID
// ascending) order after the cursor, loading IDs only to break ties.
type topkCollector struct {
	k     int
	after *Cursor
	segs  []*scorch.SegmentSnapshot
	top   candHeap
}

// threshold is the score a document must reach to enter the page:
// -Inf until the page is full.
func (c *topkCollector) threshold() float64 {
	if len(c.top) < c.k {
		return math.Inf(-1)
	}
	return c.top[0].score
}

func (c *topkCollector) loadID(e *candidate) error {
	if e.id != "" {
		return nil
	}
	b, err := c.segs[e.seg].DocID(e.num)
	if err != nil {
		return err
	}
	if len(b) == 0 {
		return errDocMissing
	}
	e.id = string(b)
	return nil
}

func (c *topkCollector) offer(score float64, seg int, num uint64) error {
	e := candidate{score: score, seg: seg, num: num}
	if c.after != nil && score >= c.after.score {
		if score > c.after.score {
			return nil // before the cursor
		}
		if err := c.loadID(&e); err != nil {
			return err
		}
		if e.id <= c.after.id {
			return nil
		}
	}
	if len(c.top) == c.k && score <= c.top[0].score {
		if score < c.top[0].score {
			return nil
		}
		if err := c.loadID(&e); err != nil {
			return err
		}
		if err := c.loadID(&c.top[0]); err != nil {
			return err
		}
		if e.id > c.top[0].id {
			return nil
		}
	}
	// Entries in the heap are compared by ID only on equal scores; load
	// the IDs of ties now.
	if err := c.loadID(&e); err != nil {
		return err
	}
	heap.Push(&c.top, e)
	if len(c.top) > c.k {
		heap.Pop(&c.top)
	}
	return nil
}

// page returns the collected documents, best first, with their stored
// fields.
func (c *topkCollector) page() ([]*bsearch.DocumentMatch, error) {
	page := slices.Clone(c.top)
	slices.SortFunc(page, func(a, b candidate) int {
		switch {
		case a.better(&b):
			return -1
		case b.better(&a):
			return 1
		}
		return 0
	})
	dms := make([]*bsearch.DocumentMatch, len(page))
	for i, e := range page {
		fields, err := storedFieldsAt(c.segs[e.seg], e.num)
		if err != nil {
			return nil, err
		}
		dms[i] = &bsearch.DocumentMatch{ID: e.id, Score: e.score, Fields: fields}
	}
	return dms, nil
}

// storedFieldsAt returns the stored text fields of a document the way
// Bleve fills DocumentMatch.Fields (see storedFieldsOf).
func storedFieldsAt(ss *scorch.SegmentSnapshot, num uint64) (map[string]any, error) {
	fields := make(map[string]any, len(storedFields))
	err := ss.VisitDocument(num, func(name string, typ byte, value []byte, _ []uint64) bool {
		if name == "_id" || typ != 't' {
			return true
		}
		v := string(value)
		switch old := fields[name].(type) {
		case nil:
			fields[name] = v
		case string:
			fields[name] = []any{old, v}
		case []any:
			fields[name] = append(old, v)
		}
		return true
	})
	return fields, err
}

// livePostings returns the live documents of term in field of a segment
// (nil for none), and its postings list. The bitmap may be shared with the
// segment: do not modify it.
func livePostings(ss *scorch.SegmentSnapshot, field, term string) (*roaring.Bitmap, segment.PostingsList, error) {
	dict, err := ss.Segment().Dictionary(field)
	if err != nil {
		return nil, nil, err
	}
	pl, err := dict.PostingsList([]byte(term), ss.Deleted(), nil)
	if err != nil || pl == nil {
		return nil, nil, err
	}
	bm, err := postingsBitmap(pl)
	return bm, pl, err
}

func postingsBitmap(pl segment.PostingsList) (*roaring.Bitmap, error) {
	o, ok := pl.Iterator(false, false, false, nil).(segment.OptimizablePostingsIterator)
	if !ok {
		return nil, errNotTopK
	}
	if doc, one := o.DocNum1Hit(); one {
		return roaring.BitmapOf(uint32(doc)), nil
	}
	bm := o.ActualBitmap()
	if bm != nil && bm.IsEmpty() {
		return nil, nil
	}
	return bm, nil
}

// or returns the union of bitmaps (nil ones are empty), nil if empty.
func or(bms ...*roaring.Bitmap) *roaring.Bitmap {
	var live []*roaring.Bitmap
	for _, b := range bms {
		if b != nil {
			live = append(live, b)
		}
	}
	switch len(live) {
	case 0:
		return nil
	case 1:
		return live[0]
	}
	return roaring.FastOr(live...)
}

// and returns the intersection of a and b; nil is empty.
func and(a, b *roaring.Bitmap) *roaring.Bitmap {
	if a == nil || b == nil {
		return nil
	}
	r := roaring.And(a, b)
	if r.IsEmpty() {
		return nil
	}
	return r
}

// cursorState is a postings iterator with its current posting copied out.
type postingCursor struct {
	it      segment.PostingsIterator
	started bool
	done    bool
	num     uint64
	freq    uint64
	norm    float64
	locs    []uint64 // positions, for phrase iterators
}

// seek moves to the first posting at or after d and reports whether it is
// d. Calls must not go backwards.
func (c *postingCursor) seek(d uint64) (bool, error) {
	if c.done {
		return false, nil
	}
	if c.started && c.num >= d {
		return c.num == d, nil
	}
	p, err := c.it.Advance(d)
	if err != nil {
		return false, err
	}
	c.started = true
	if p == nil {
		c.done = true
		return false, nil
	}
	c.num, c.freq, c.norm = p.Number(), p.Frequency(), p.Norm()
	if c.locs != nil {
		c.locs = c.locs[:0]
		for _, l := range p.Locations() {
			c.locs = append(c.locs, l.Pos())
		}
	}
	return c.num == d, nil
}

// segmentSearch is one segment's part of a top-k search.
type segmentSearch struct {
	q    *topkQuery
	seg  int
	ss   *scorch.SegmentSnapshot
	bm   [][3]*roaring.Bitmap // per term and field (in q's order), live documents
	pl   [][3]segment.PostingsList
	m    *roaring.Bitmap      // matching documents, filters applied
	mbm  [][3]*roaring.Bitmap // bm ∩ m, once classes need them
	cur  [][3]*postingCursor
	locs []*postingCursor // per term, title positions (phrase only)
}

// matches fills s.bm and s.m: the documents matching the text and the
// filter (nil: no filter).
func (s *segmentSearch) matches(postings [][3]livePosting, filter *roaring.Bitmap, filtered bool) {
	q := s.q
	s.bm = make([][3]*roaring.Bitmap, len(q.terms))
	s.pl = make([][3]segment.PostingsList, len(q.terms))
	var m *roaring.Bitmap
	for i, t := range q.terms {
		for j, f := range t.fields {
			lp := postings[t.src][f.field]
			s.bm[i][j], s.pl[i][j] = lp.bm, lp.pl
		}
		u := or(s.bm[i][:]...)
		switch {
		case i == 0:
			m = u
		case q.anyTerm:
			m = or(m, u)
		default:
			m = and(m, u)
		}
		if m == nil && !q.anyTerm {
			return
		}
	}
	if filtered {
		m = and(m, filter)
	}
	if m != nil && !m.IsEmpty() {
		s.m = m
	}
}

// livePosting is a term's postings in a field of a segment: the list and
// its live documents (nil if none).
type livePosting struct {
	bm *roaring.Bitmap
	pl segment.PostingsList
}

// visit scores the documents of docs that can enter the page and offers
// them to c.
//
// pattern, if not nil, is what every document of docs matched: bit j of
// pattern[i] is set if it has term i in field j (of q.terms[i].fields);
// classBound bounds their scores. Without a pattern, visit tests each
// document's postings bitmaps.
func (s *segmentSearch) visit(ctx context.Context, docs *roaring.Bitmap, pattern []uint8, classBound float64, c *topkCollector) error {
	// Fresh cursors: visits go forward only.
	s.resetCursors()
	st := newDocScratch(len(s.q.terms))
	it := docs.Iterator()
	for visited := 0; it.HasNext(); visited++ {
		if visited&1023 == 1023 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		d := uint64(it.Next())
		theta := c.threshold()
		if pattern != nil && classBound < theta {
			return nil // no document left can make the page
		}
		score, ok, err := s.scoreDoc(d, pattern, theta, st)
		if err != nil {
			return err
		}
		if !ok {
			continue
		}
		if err := c.offer(score, s.seg, d); err != nil {
			return err
		}
	}
	return nil
}

// resetCursors opens new postings cursors at the start of every list of
// the segment: per term and field, and, for a phrase, each term's title
// positions.
func (s *segmentSearch) resetCursors() {
	q := s.q
	n := len(q.terms)
	s.cur = make([][3]*postingCursor, n)
	for i := range q.terms {
		for j := range q.terms[i].fields {
			if pl := s.pl[i][j]; pl != nil {
				s.cur[i][j] = &postingCursor{it: pl.Iterator(true, true, false, nil)}
			}
		}
	}
	s.locs = make([]*postingCursor, n)
	if q.phrase != nil {
		for i := range q.terms {
			if pl := s.pl[i][q.titleOf[i]]; pl != nil {
				s.locs[i] = &postingCursor{it: pl.Iterator(true, true, true, nil), locs: []uint64{}}
			}
		}
	}
}

// docScratch is what visit knows of the document it scores, per term and
// field (in q.terms[i].fields' order), reused from one document to the
// next.
type docScratch struct {
	matched [][3]bool          // the document has the term in the field
	known   [][3]bool          // fs is the field's exact score, its posting read
	fs      [][3]float64       // the field's score, or its bound until known
	ts      []float64          // per term, termScore of fs
	tm      []bool             // per term, whether it matched
	bounds  map[uint32]float64 // class bounds by matchedKey
}

func newDocScratch(n int) *docScratch {
	return &docScratch{
		matched: make([][3]bool, n),
		known:   make([][3]bool, n),
		fs:      make([][3]float64, n),
		ts:      make([]float64, n),
		tm:      make([]bool, n),
		bounds:  map[uint32]float64{},
	}
}

// scoreDoc returns the score of document d, reading only the postings
// needed to tell; false if it cannot reach theta. pattern is as visit's.
func (s *segmentSearch) scoreDoc(d uint64, pattern []uint8, theta float64, st *docScratch) (float64, bool, error) {
	q := s.q
	s.matchFields(d, pattern, st)
	if pattern == nil && st.classBound(q) < theta {
		return 0, false, nil
	}
	allTitles, err := s.readTitles(d, st)
	if err != nil {
		return 0, false, err
	}
	// The bound: unread fields at their maximum.
	st.scoreTerms()
	phrasePossible := q.phrase != nil && allTitles
	var phrase float64
	if phrasePossible {
		phrase = st.phraseSum(q)
	}
	ub, ok := q.docScore(st.ts, st.tm, phrase, phrasePossible)
	if !ok || ub < theta {
		return 0, false, nil
	}
	// The phrase (title positions) before the other fields: it seldom
	// matches, and without it the bound halves.
	phraseMatched := false
	if phrasePossible {
		if phraseMatched, err = s.phraseAt(d); err != nil {
			return 0, false, err
		}
		if !phraseMatched {
			if ub, _ = q.docScore(st.ts, st.tm, phrase, false); ub < theta {
				return 0, false, nil
			}
		}
	}
	if err := s.readOtherFields(d, st); err != nil {
		return 0, false, err
	}
	score, _ := q.docScore(st.ts, st.tm, phrase, phraseMatched)
	if score < theta {
		return 0, false, nil
	}
	return score, true, nil
}

// matchFields sets the fields each term of document d matched (from
// pattern if not nil, else from the postings bitmaps) and their bounds;
// no score is known yet.
func (s *segmentSearch) matchFields(d uint64, pattern []uint8, st *docScratch) {
	q := s.q
	for i := range q.terms {
		for j := range q.terms[i].fields {
			st.known[i][j] = false
			if pattern != nil {
				st.matched[i][j] = pattern[i]&(1<<j) != 0
			} else {
				bm := s.bm[i][j]
				if s.mbm != nil {
					bm = s.mbm[i][j]
				}
				st.matched[i][j] = bm != nil && bm.Contains(uint32(d))
			}
			if st.matched[i][j] {
				st.fs[i][j] = q.terms[i].fields[j].ub
			}
		}
	}
}

// classBound bounds the score of a document that matched the fields of
// st.matched, before any postings are read (-Inf if such a document does
// not match the query); computed once a class.
func (st *docScratch) classBound(q *topkQuery) float64 {
	key := st.matchedKey()
	b, ok := st.bounds[key]
	if ok {
		return b
	}
	pat := make([]uint8, len(st.matched))
	for i := range q.terms {
		for j := range 3 {
			if st.matched[i][j] {
				pat[i] |= 1 << j
			}
		}
	}
	if b, ok = q.patternBound(pat); !ok {
		b = math.Inf(-1)
	}
	st.bounds[key] = b
	return b
}

// matchedKey packs st.matched into bits, 3 a term.
func (st *docScratch) matchedKey() uint32 {
	key := uint32(0)
	for i := range st.matched {
		for j := range 3 {
			if st.matched[i][j] {
				key |= 1 << (3*i + j)
			}
		}
	}
	return key
}

// readTitles reads the title postings of the terms document d has in its
// title, for their exact scores; it reports whether d has every term in
// its title.
func (s *segmentSearch) readTitles(d uint64, st *docScratch) (bool, error) {
	q := s.q
	allTitles := true
	for i := range q.terms {
		tj := q.titleOf[i]
		if !st.matched[i][tj] {
			allTitles = false
			continue
		}
		if _, err := s.cur[i][tj].seek(d); err != nil {
			return false, err
		}
		cu := s.cur[i][tj]
		st.fs[i][tj] = q.terms[i].fields[tj].score(cu.freq, cu.norm)
		st.known[i][tj] = true
	}
	return allTitles, nil
}

// readOtherFields reads the postings of document d's matched fields whose
// scores are not known yet, and scores the terms exactly.
func (s *segmentSearch) readOtherFields(d uint64, st *docScratch) error {
	q := s.q
	for i := range q.terms {
		for j := range q.terms[i].fields {
			if !st.matched[i][j] || st.known[i][j] {
				continue
			}
			if _, err := s.cur[i][j].seek(d); err != nil {
				return err
			}
			cu := s.cur[i][j]
			st.fs[i][j] = q.terms[i].fields[j].score(cu.freq, cu.norm)
		}
		st.ts[i], st.tm[i] = termScore(&st.fs[i], &st.matched[i])
	}
	return nil
}

// scoreTerms sets each term's score from its fields' scores.
func (st *docScratch) scoreTerms() {
	for i := range st.fs {
		st.ts[i], st.tm[i] = termScore(&st.fs[i], &st.matched[i])
	}
}

// phraseSum is the sum of the phrase tokens' title scores, in the order
// Bleve sums them.
func (st *docScratch) phraseSum(q *topkQuery) float64 {
	var p float64
	for _, ti := range q.phraseSum {
		p += st.fs[ti][q.titleOf[ti]]
	}
	return p
}

// phraseAt reports whether the title of document d has the phrase: its
// tokens at consecutive positions (gaps for stop words kept), as Bleve's
// phrase searcher matches with slop 0.
func (s *segmentSearch) phraseAt(d uint64) (bool, error) {
	q := s.q
	for _, ti := range q.phrase {
		if ti < 0 {
			continue
		}
		lc := s.locs[ti]
		if lc == nil {
			return false, nil
		}
		if ok, err := lc.seek(d); err != nil || !ok {
			return false, err
		}
	}
	first := s.locs[q.phrase[0]].locs
	for _, p0 := range first {
		ok := true
		for off, ti := range q.phrase[1:] {
			if ti >= 0 && !slices.Contains(s.locs[ti].locs, p0+uint64(off)+1) {
				ok = false
				break
			}
		}
		if ok {
			return true, nil
		}
	}
	return false, nil
}

// maxClasses bounds the classes of documents a segment's search is split
// into; with more, visit tests each document's bitmaps instead. (A
// variable for tests.)
var maxClasses = 64

// docClass is the documents of one segment that match the query's terms in
// the same fields.
type docClass struct {
	search  int     // index in the searches
	pattern []uint8 // per term, bit j: matched in fields[j]
	bound   float64
}

// classes returns the classes of documents of every search by the fields
// their terms matched, best bound first; false if a segment has more than
// maxClasses.
func (q *topkQuery) classes(searches []*segmentSearch) ([]docClass, bool) {
	var out []docClass
	n := len(q.terms)
	for si, s := range searches {
		var present []uint8 // per term, the fields with postings in the segment
		combos := 1
		for i := range q.terms {
			var m uint8
			for j := range 3 {
				if s.bm[i][j] != nil {
					m |= 1 << j
				}
			}
			present = append(present, m)
			combos *= 1 << bitsSet(m)
		}
		if combos > maxClasses {
			return nil, false
		}
		pattern := make([]uint8, n)
		var rec func(i int)
		rec = func(i int) {
			if i == n {
				if b, ok := q.patternBound(pattern); ok {
					out = append(out, docClass{search: si, pattern: slices.Clone(pattern), bound: b})
				}
				return
			}
			// Every subset of the present fields, the empty one included
			// (a term may be missing with AnyTerm).
			for m := present[i]; ; m = (m - 1) & present[i] {
				pattern[i] = m
				rec(i + 1)
				if m == 0 {
					break
				}
			}
		}
		rec(0)
	}
	slices.SortStableFunc(out, func(a, b docClass) int {
		switch {
		case a.bound > b.bound:
			return -1
		case a.bound < b.bound:
			return 1
		}
		return 0
	})
	return out, true
}

func bitsSet(m uint8) int {
	n := 0
	for ; m != 0; m &= m - 1 {
		n++
	}
	return n
}

// patternBound bounds the score of a document that matched the fields of
// pattern; false if such a document does not match the query.
func (q *topkQuery) patternBound(pattern []uint8) (float64, bool) {
	n := len(q.terms)
	ts := make([]float64, n)
	tm := make([]bool, n)
	allTitles := true
	var fs [][3]float64 = make([][3]float64, n)
	for i, t := range q.terms {
		var matched [3]bool
		for j, f := range t.fields {
			if pattern[i]&(1<<j) != 0 {
				fs[i][j], matched[j] = f.ub, true
			}
		}
		if !matched[q.titleOf[i]] {
			allTitles = false
		}
		ts[i], tm[i] = termScore(&fs[i], &matched)
	}
	var phrase float64
	if q.phrase != nil && allTitles {
		for _, ti := range q.phraseSum {
			phrase += fs[ti][q.titleOf[ti]]
		}
	}
	return q.docScore(ts, tm, phrase, q.phrase != nil && allTitles)
}

// classDocs returns the matching documents of the segment with exactly
// the fields of pattern, nil if none.
func (s *segmentSearch) classDocs(pattern []uint8) *roaring.Bitmap {
	if s.mbm == nil {
		// The postings restricted to the matches, once: the classes'
		// operations then cost what the matches, not the postings, weigh.
		s.mbm = make([][3]*roaring.Bitmap, len(s.bm))
		for i := range s.bm {
			for j, bm := range s.bm[i] {
				s.mbm[i][j] = and(s.m, bm)
			}
		}
	}
	docs := s.m.Clone()
	for i := range s.q.terms {
		for j := range 3 {
			bm := s.mbm[i][j]
			switch {
			case pattern[i]&(1<<j) != 0:
				if bm == nil {
					return nil
				}
				docs.And(bm)
			case bm != nil:
				docs.AndNot(bm)
			}
			if docs.IsEmpty() {
				return nil
			}
		}
	}
	return docs
}

// nonTitleBound bounds the score of a document without any query term in
// its title.
func (q *topkQuery) nonTitleBound() float64 {
	n := len(q.terms)
	ts := make([]float64, n)
	tm := make([]bool, n)
	for i, t := range q.terms {
		var fs [3]float64
		var matched [3]bool
		for j, f := range t.fields {
			if f.field != titleField && f.count > 0 {
				fs[j], matched[j] = f.ub, true
			}
		}
		ts[i], tm[i] = termScore(&fs, &matched)
	}
	ub, ok := q.docScore(ts, tm, 0, false)
	if !ok {
		return math.Inf(-1)
	}
	return ub
}

// relevantTopK is relevant's top-k path; errNotTopK when it does not apply.
// It reads the terms' postings in every segment (their counts give the
// idf), finds each segment's matches with the filters applied (their
// number is the total), then visits the matches that can enter the page.
func (ix *Index) relevantTopK(ctx context.Context, p plan) ([]*bsearch.DocumentMatch, uint64, error) {
	if len(p.tokens) == 0 || p.anySource {
		return nil, 0, errNotTopK
	}
	adv, err := ix.bi.Advanced()
	if err != nil {
		return nil, 0, err
	}
	r, err := adv.Reader()
	if err != nil {
		return nil, 0, err
	}
	defer func() { _ = r.Close() }()
	snap, ok := r.(*scorch.IndexSnapshot)
	if !ok {
		return nil, 0, errNotTopK
	}
	if len(p.tokens) > maxTopKTerms {
		return nil, 0, errNotTopK
	}
	uniq := distinctTokens(p.tokens)
	segs := snap.Segments()
	postings, counts, err := termPostings(segs, uniq)
	if err != nil {
		return nil, 0, err
	}
	docTotal, err := r.DocCount()
	if err != nil {
		return nil, 0, err
	}
	q, err := newTopkQuery(docTotal, p.tokens, p.positions, uniq, counts, ix.opts.AnyTerm)
	if err != nil {
		return nil, 0, err
	}
	searches, total, err := p.segmentSearches(q, segs, postings)
	if err != nil {
		return nil, 0, err
	}
	c := &topkCollector{k: p.limit + 1, after: p.after, segs: segs}
	if err := q.fillPage(ctx, searches, c); err != nil {
		return nil, 0, err
	}
	return finishPage(ctx, c, total)
}

// distinctTokens returns the distinct tokens in order of appearance.
func distinctTokens(tokens []string) []string {
	var uniq []string
	for _, t := range tokens {
		if !slices.Contains(uniq, t) {
			uniq = append(uniq, t)
		}
	}
	return uniq
}

// termPostings returns every segment's postings of the terms, per segment,
// term (of uniq) and textFields, and the live documents with each term in
// each field over all segments: the counts Bleve's term searchers take the
// idf from.
func termPostings(segs []*scorch.SegmentSnapshot, uniq []string) ([][][3]livePosting, [][3]uint64, error) {
	postings := make([][][3]livePosting, len(segs))
	counts := make([][3]uint64, len(uniq))
	for si, ss := range segs {
		postings[si] = make([][3]livePosting, len(uniq))
		for u, t := range uniq {
			for fi, f := range textFields {
				bm, pl, err := livePostings(ss, f.name, t)
				if err != nil {
					return nil, nil, err
				}
				postings[si][u][fi] = livePosting{bm, pl}
				if bm != nil {
					counts[u][fi] += bm.GetCardinality()
				}
			}
		}
	}
	return postings, counts, nil
}

// segmentSearches returns the searches of the segments with documents
// matching q and p's filters, and the number of those documents (the
// total).
func (p plan) segmentSearches(q *topkQuery, segs []*scorch.SegmentSnapshot, postings [][][3]livePosting) ([]*segmentSearch, uint64, error) {
	var total uint64
	searches := make([]*segmentSearch, 0, len(segs))
	for si, ss := range segs {
		s, err := p.segmentSearch(q, si, ss, postings[si])
		if err != nil {
			return nil, 0, err
		}
		if s == nil {
			continue
		}
		total += s.m.GetCardinality()
		searches = append(searches, s)
	}
	return searches, total, nil
}

// segmentSearch returns the search of segment si (ss, with the terms'
// postings) with its matches, filters applied; nil if nothing matches.
func (p plan) segmentSearch(q *topkQuery, si int, ss *scorch.SegmentSnapshot, postings [][3]livePosting) (*segmentSearch, error) {
	filter, edge, filtered, err := p.segmentFilter(ss)
	if err != nil {
		return nil, err
	}
	s := &segmentSearch{q: q, seg: si, ss: ss}
	if filtered && filter == nil {
		return nil, nil
	}
	s.matches(postings, filter, filtered)
	if s.m == nil {
		return nil, nil
	}
	if e := and(s.m, edge); e != nil {
		// s.m is the filter's intersection with the text's: its own.
		lo, hi := p.bounds()
		out, err := exactTime(ss, e, lo, hi)
		if err != nil {
			return nil, err
		}
		if s.m.AndNot(out); s.m.IsEmpty() {
			return nil, nil
		}
	}
	return s, nil
}

// fillPage offers c the documents of searches that can enter the page:
// by classes of documents, or, if a segment has too many classes, the
// documents with a query term in their title first.
func (q *topkQuery) fillPage(ctx context.Context, searches []*segmentSearch, c *topkCollector) error {
	classes, ok := q.classes(searches)
	if !ok {
		return q.visitTitlesFirst(ctx, searches, c)
	}
	v := &classVisit{classes: classes, searches: searches, c: c, done: make([]bool, len(classes))}
	if err := v.visitFirst(ctx); err != nil {
		return err
	}
	return v.visitRest(ctx)
}

// classVisit visits the segments' classes of documents (by the fields
// each term matched) that can enter the page.
type classVisit struct {
	classes  []docClass // best bound first
	searches []*segmentSearch
	c        *topkCollector
	done     []bool // per class, visited by visitFirst
}

// visitFirst visits the classes in decreasing order of their bound, until
// the bound falls short of the page; but only each segment's first, as
// reading a postings list from its start again for each class of a segment
// would cost more than the documents read.
func (v *classVisit) visitFirst(ctx context.Context) error {
	started := make([]bool, len(v.searches))
	for ci, cl := range v.classes {
		if cl.bound < v.c.threshold() {
			break
		}
		if started[cl.search] {
			continue
		}
		started[cl.search], v.done[ci] = true, true
		s := v.searches[cl.search]
		docs := s.classDocs(cl.pattern)
		if docs == nil {
			continue
		}
		if err := s.visit(ctx, docs, cl.pattern, cl.bound, v.c); err != nil {
			return err
		}
	}
	return nil
}

// visitRest visits, segment by segment (best first), the classes not
// visited yet whose bound reaches the page, in one pass in document order.
func (v *classVisit) visitRest(ctx context.Context) error {
	best := v.restBounds()
	order := make([]int, len(v.searches))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(best[b], best[a]) })
	for _, si := range order {
		theta := v.c.threshold()
		if best[si] < theta {
			continue
		}
		if u := v.restDocs(si, theta); u != nil {
			if err := v.searches[si].visit(ctx, u, nil, 0, v.c); err != nil {
				return err
			}
		}
	}
	return nil
}

// restBounds returns, per search, the best bound of its classes not
// visited yet (-Inf if none).
func (v *classVisit) restBounds() []float64 {
	best := make([]float64, len(v.searches))
	for i := range best {
		best[i] = math.Inf(-1)
	}
	for ci, cl := range v.classes {
		if !v.done[ci] {
			best[cl.search] = max(best[cl.search], cl.bound)
		}
	}
	return best
}

// restDocs returns the documents of search si's classes not visited yet
// whose bound reaches theta; nil if none.
func (v *classVisit) restDocs(si int, theta float64) *roaring.Bitmap {
	var parts []*roaring.Bitmap
	for ci, cl := range v.classes {
		if cl.search != si || v.done[ci] || cl.bound < theta {
			continue
		}
		if docs := v.searches[si].classDocs(cl.pattern); docs != nil {
			parts = append(parts, docs)
		}
	}
	return or(parts...)
}

// visitTitlesFirst visits, segment by segment, the documents with a query
// term in their title, then, if their bound reaches the page, the others.
func (q *topkQuery) visitTitlesFirst(ctx context.Context, searches []*segmentSearch, c *topkCollector) error {
	rest := make([]*roaring.Bitmap, len(searches))
	for i, s := range searches {
		t := s.titleMatches()
		if t == nil {
			rest[i] = s.m
			continue
		}
		if err := s.visit(ctx, t, nil, 0, c); err != nil {
			return err
		}
		rest[i] = roaring.AndNot(s.m, t)
	}
	if bound := q.nonTitleBound(); bound >= c.threshold() {
		for i, s := range searches {
			if rest[i] == nil || rest[i].IsEmpty() {
				continue
			}
			if err := s.visit(ctx, rest[i], nil, 0, c); err != nil {
				return err
			}
		}
	}
	return nil
}

// titleMatches returns the matching documents of the segment with a query
// term in their title, nil if none.
func (s *segmentSearch) titleMatches() *roaring.Bitmap {
	var titles []*roaring.Bitmap
	for ti := range s.q.terms {
		titles = append(titles, s.bm[ti][s.q.titleOf[ti]])
	}
	return and(s.m, or(titles...))
}

// segmentFilter returns the documents of a segment that pass p's filters
// (filtered is false if p has none), save those of edge: documents in the
// partial hours at unaligned bounds of p's time range, which pass or not
// by their exact time (see exactTime).
func (p plan) segmentFilter(ss *scorch.SegmentSnapshot) (bm, edge *roaring.Bitmap, filtered bool, err error) {
	first := true
	add := func(b *roaring.Bitmap) {
		if first {
			bm, first = b, false
			return
		}
		bm = and(bm, b)
	}
	for _, kw := range p.keywordTerms {
		b, _, err := livePostings(ss, kw[0], kw[1])
		if err != nil {
			return nil, nil, true, err
		}
		add(b)
		if bm == nil {
			return nil, nil, true, nil
		}
	}
	if !p.from.IsZero() || !p.to.IsZero() {
		b, e, err := timeBitmap(ss, p.from, p.to)
		if err != nil {
			return nil, nil, true, err
		}
		add(b)
		edge = e
	}
	return bm, edge, !first, nil
}

// timeBitmap returns the live documents of a segment published in the
// hours of [from, to) (a zero bound is open), found by their hour's terms,
// and, of those, the ones in the partial hours at unaligned bounds, whose
// exact time decides (see timeRange, its query).
func timeBitmap(ss *scorch.SegmentSnapshot, from, to time.Time) (all, edge *roaring.Bitmap, err error) {
	aligned := func(t time.Time) bool { return t.IsZero() || t.Truncate(time.Hour).Equal(t) }
	coreFrom, coreTo := from, to
	var edges []time.Time
	if !aligned(from) {
		h := from.Truncate(time.Hour)
		coreFrom = h.Add(time.Hour)
		edges = append(edges, h)
	}
	if !aligned(to) {
		h := to.Truncate(time.Hour)
		coreTo = h
		if aligned(from) || !h.Equal(from.Truncate(time.Hour)) {
			edges = append(edges, h)
		}
	}
	var core *roaring.Bitmap
	if coreTo.IsZero() || coreFrom.Before(coreTo) {
		if core, err = hourBitmap(ss, coreFrom, coreTo); err != nil {
			return nil, nil, err
		}
	}
	var parts []*roaring.Bitmap
	for _, h := range edges {
		bm, err := hourBitmap(ss, h, h.Add(time.Hour))
		if err != nil {
			return nil, nil, err
		}
		parts = append(parts, bm)
	}
	edge = or(parts...)
	return or(core, edge), edge, nil
}

// exactTime returns the documents of docs (of segment ss) not published
// in [lo, hi) (Unix ns), by their published key's doc values.
func exactTime(ss *scorch.SegmentSnapshot, docs *roaring.Bitmap, lo, hi int64) (*roaring.Bitmap, error) {
	dv, ok := ss.Segment().(segment.DocValueVisitable)
	if !ok {
		return nil, errNotTopK
	}
	out := roaring.New()
	var state segment.DocVisitState
	fields := []string{fieldPublished}
	it := docs.Iterator()
	for it.HasNext() {
		d := it.Next()
		var ns int64
		var found bool
		var err error
		state, err = dv.VisitDocValues(uint64(d), fields, func(_ string, term []byte) {
			ns, found = parsePublishedKey(string(term))
		}, state)
		if err != nil {
			return nil, err
		}
		if !found || ns < lo || ns >= hi {
			out.Add(d)
		}
	}
	return out, nil
}

// bounds returns p's time range in Unix ns, [lo, hi).
func (p plan) bounds() (lo, hi int64) {
	lo, hi = math.MinInt64, math.MaxInt64
	if !p.from.IsZero() {
		lo = p.from.UnixNano()
	}
	if !p.to.IsZero() {
		hi = p.to.UnixNano()
	}
	return lo, hi
}

// hourBitmap returns the live documents of a segment whose published hour
// is in [from, to), both on the hour (zero: open), from the date field's
// terms: the fewest prefix-coded terms that cover the range, as Bleve's
// numeric range search chooses them.
func hourBitmap(ss *scorch.SegmentSnapshot, from, to time.Time) (*roaring.Bitmap, error) {
	lo, hi := minTime.UnixNano(), maxTime.UnixNano() // every indexed time is within
	if !from.IsZero() {
		lo = max(lo, from.UnixNano())
	}
	if !to.IsZero() {
		hi = min(hi, to.UnixNano()-1)
	}
	if lo > hi {
		return nil, nil
	}
	dict, err := ss.Segment().Dictionary(fieldPublishedHour)
	if err != nil {
		return nil, err
	}
	var parts []*roaring.Bitmap
	for _, tr := range splitInt64Range(lo, hi, 4) {
		end := append(slices.Clip(tr.end), 0) // the key right after tr.end
		it := dict.AutomatonIterator(matchAll{}, tr.start, end)
		for {
			e, err := it.Next()
			if err != nil {
				return nil, err
			}
			if e == nil {
				break
			}
			pl, err := dict.PostingsList([]byte(e.Term), ss.Deleted(), nil)
			if err != nil {
				return nil, err
			}
			bm, err := postingsBitmap(pl)
			if err != nil {
				return nil, err
			}
			if bm != nil {
				parts = append(parts, bm)
			}
		}
	}
	return or(parts...), nil
}

// termRange is the prefix-coded terms from start to end, both included, at
// one shift.
type termRange struct{ start, end []byte }

// splitInt64Range covers [lo, hi] with ranges of prefix-coded terms at
// increasing shifts (precision step bits each), coarser ranges in the
// middle: Lucene's splitRange, as Bleve's numeric range search uses it.
func splitInt64Range(lo, hi int64, precisionStep uint) []termRange {
	var rv []termRange
	add := func(lo, hi int64, shift uint) {
		hi |= int64(1)<<shift - 1
		rv = append(rv, termRange{numeric.MustNewPrefixCodedInt64(lo, shift), numeric.MustNewPrefixCodedInt64(hi, shift)})
	}
	if lo > hi {
		return nil
	}
	for shift := uint(0); ; shift += precisionStep {
		diff := int64(1) << (shift + precisionStep)
		mask := (int64(1)<<precisionStep - 1) << shift
		hasLower := lo&mask != 0
		hasUpper := hi&mask != mask
		nextLo := lo &^ mask
		if hasLower {
			nextLo = (lo + diff) &^ mask
		}
		nextHi := hi &^ mask
		if hasUpper {
			nextHi = (hi - diff) &^ mask
		}
		if shift+precisionStep >= 64 || nextLo > nextHi || nextLo < lo || nextHi > hi {
			add(lo, hi, shift)
			return rv
		}
		if hasLower {
			add(lo, lo|mask, shift)
		}
		if hasUpper {
			add(hi&^mask, hi, shift)
		}
		lo, hi = nextLo, nextHi
	}
}

// matchAll is the automaton that accepts every key.
type matchAll struct{}

func (matchAll) Start() int               { return 0 }
func (matchAll) IsMatch(int) bool         { return true }
func (matchAll) CanMatch(int) bool        { return true }
func (matchAll) WillAlwaysMatch(int) bool { return true }
func (matchAll) Accept(int, byte) int     { return 0 }

// finishPage returns the collector's page and the total, unless ctx was
// cancelled meanwhile.
func finishPage(ctx context.Context, c *topkCollector, total uint64) ([]*bsearch.DocumentMatch, uint64, error) {
	if err := ctx.Err(); err != nil {
		return nil, 0, err
	}
	dms, err := c.page()
	if err != nil {
		return nil, 0, err
	}
	return dms, total, nil
}
