package story

import (
	"container/heap"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"

	"github.com/newsflow/newsflow/state"
)

// Clusterer state keys, under the prefix the caller gives:
//
//	m          → docs, next story number (uvarints), watermark (varint),
//	             generation start (varint), previous generation's docs (uvarint),
//	             the story model's SHA-256 (uvarint length, then hex; empty
//	             without a model; absent before models: none)
//	t <id:4>   → df, previous generation's df (uvarints), word
//	s <num:8>  → size, last (uvarints), then (term id uvarint, weight float32 bits) pairs,
//	             then its names: term ids with nameFlag set, and partName or weakName for their kind (uvarints),
//	             then timesMark, first and mean event times (varints)
//
// State written before generations has a meta of three fields and terms
// of one count (df, word): it restores as a current generation starting
// at the watermark, and the next Persist rewrites every term.
const (
	keyMeta  = 'm'
	keyTerm  = 't'
	keyStory = 's'
)

// nameFlag marks a name's term id in a story record (term ids are 32-bit);
// a story stored before names has none. timesMark, last, is followed by
// the story's first and mean event times (varints); a story stored before
// them restores with both at its latest time.
const (
	nameFlag  = 1 << 32
	timesMark = 1 << 33
)

// Persist stages every change since the last Persist into w, with keys
// under prefix.
func (c *Clusterer) Persist(w state.Writer, prefix []byte) error {
	var buf []byte
	// Deletions first: a forgotten term's id may hold a new term already.
	for _, id := range c.forgotten {
		k := append(append(slices.Clip(prefix), keyTerm), 0, 0, 0, 0)
		binary.BigEndian.PutUint32(k[len(k)-4:], id)
		if err := w.Delete(k); err != nil {
			return err
		}
	}
	c.forgotten = c.forgotten[:0]
	for _, id := range slices.Sorted(maps.Keys(c.dirtyTerms)) {
		k := append(append(slices.Clip(prefix), keyTerm), 0, 0, 0, 0)
		binary.BigEndian.PutUint32(k[len(k)-4:], id)
		buf = binary.AppendUvarint(buf[:0], uint64(c.df[id]))
		buf = binary.AppendUvarint(buf, uint64(c.dfPrev[id]))
		buf = append(buf, c.words[id]...)
		if err := w.Set(k, buf); err != nil {
			return err
		}
	}
	clear(c.dirtyTerms)
	for _, num := range c.closed {
		k := storyKey(prefix, num)
		if err := w.Delete(k); err != nil {
			return err
		}
	}
	c.closed = c.closed[:0]
	for _, num := range slices.Sorted(maps.Keys(c.dirtyStories)) {
		st := c.open.get(num)
		buf = binary.AppendUvarint(buf[:0], uint64(st.size))
		buf = binary.AppendUvarint(buf, uint64(st.last))
		for _, e := range st.terms {
			buf = binary.AppendUvarint(buf, uint64(e.ID))
			buf = binary.LittleEndian.AppendUint32(buf, math.Float32bits(e.W))
		}
		for _, id := range st.names {
			buf = binary.AppendUvarint(buf, uint64(id)|nameFlag)
		}
		buf = binary.AppendUvarint(buf, timesMark)
		buf = binary.AppendVarint(buf, st.first)
		buf = binary.AppendVarint(buf, st.mean)
		if err := w.Set(storyKey(prefix, num), buf); err != nil {
			return err
		}
	}
	clear(c.dirtyStories)
	buf = binary.AppendUvarint(buf[:0], c.docs)
	buf = binary.AppendUvarint(buf, c.nextNum)
	buf = binary.AppendVarint(buf, c.wm)
	buf = binary.AppendVarint(buf, c.gen)
	buf = binary.AppendUvarint(buf, c.docsPrev)
	buf = binary.AppendUvarint(buf, uint64(len(c.opts.modelHash())))
	buf = append(buf, c.opts.modelHash()...)
	return w.Set(append(slices.Clip(prefix), keyMeta), buf)
}

// restoreTerm adds the stored term id with record v (in the format before
// generations unless generations is set). Terms come in ascending id order;
// the ids skipped are free.
func (c *Clusterer) restoreTerm(id uint32, v []byte, generations bool) error {
	df, n := binary.Uvarint(v)
	if n <= 0 || int(id) < len(c.words) {
		return fmt.Errorf("%w: term %d out of order", errCorrupt, id)
	}
	v = v[n:]
	var prev uint64
	if generations {
		if prev, n = binary.Uvarint(v); n <= 0 {
			return errCorrupt
		}
		v = v[n:]
	} else {
		c.dirtyTerms[id] = struct{}{} // rewritten in the current format
	}
	for uint32(len(c.words)) < id { // a forgotten term's id
		c.freeIDs = append(c.freeIDs, uint32(len(c.words)))
		c.words, c.generic = append(c.words, ""), append(c.generic, false)
		c.df, c.dfPrev = append(c.df, 0), append(c.dfPrev, 0)
	}
	w := string(v)
	if w == "" {
		return fmt.Errorf("%w: term %d without a word", errCorrupt, id)
	}
	c.vocab[w] = id
	c.words = append(c.words, w)
	c.generic = append(c.generic, generic(w))
	c.df, c.dfPrev = append(c.df, uint32(df)), append(c.dfPrev, uint32(prev))
	return nil
}

func storyKey(prefix []byte, num uint64) []byte {
	k := append(slices.Clip(prefix), keyStory)
	return binary.BigEndian.AppendUint64(k, num)
}

var errCorrupt = errors.New("story: corrupt clusterer state")

// RestoreClusterer rebuilds a clusterer from the state Persist wrote under
// prefix. It continues exactly as the clusterer that wrote it would have.
func RestoreClusterer(opts ClusterOptions, r state.Reader, prefix []byte) (*Clusterer, error) {
	c, err := NewClusterer(opts)
	if err != nil {
		return nil, err
	}
	meta, ok, err := r.Get(append(slices.Clip(prefix), keyMeta))
	if err != nil || !ok {
		return c, err
	}
	generations, stored, err := c.restoreMeta(meta)
	if err != nil {
		return nil, err
	}
	if want := opts.modelHash(); stored != want {
		return nil, fmt.Errorf("%w: they were built by %s and the node is given %s; %s",
			ErrModelChanged, modelName(stored), modelName(want), modelReplayHint)
	}
	if err := c.restoreTerms(r, prefix, generations); err != nil {
		return nil, err
	}
	if err := c.restoreStories(r, prefix); err != nil {
		return nil, err
	}
	heap.Init(&c.byLast)
	return c, nil
}

// restoreMeta sets the counts and times of meta record v. It reports
// whether v was written with generations (a meta written before has three
// fields, and the current generation starts at the watermark), and returns
// the story model's hash it records ("" without a model).
func (c *Clusterer) restoreMeta(v []byte) (generations bool, model string, err error) {
	var n int
	if c.docs, n = binary.Uvarint(v); n <= 0 {
		return false, "", errCorrupt
	}
	v = v[n:]
	if c.nextNum, n = binary.Uvarint(v); n <= 0 {
		return false, "", errCorrupt
	}
	v = v[n:]
	if c.wm, n = binary.Varint(v); n <= 0 {
		return false, "", errCorrupt
	}
	v = v[n:]
	generations = len(v) > 0
	if !generations {
		c.gen = c.wm
		return false, "", nil
	}
	if c.gen, n = binary.Varint(v); n <= 0 {
		return false, "", errCorrupt
	}
	v = v[n:]
	if c.docsPrev, n = binary.Uvarint(v); n <= 0 {
		return false, "", errCorrupt
	}
	v = v[n:]
	if len(v) == 0 {
		return true, "", nil // written before models
	}
	l, n := binary.Uvarint(v)
	if n <= 0 || uint64(len(v)-n) < l {
		return false, "", errCorrupt
	}
	return true, string(v[n : n+int(l)]), nil
}

// restoreTerms adds the stored terms under prefix (see restoreTerm).
func (c *Clusterer) restoreTerms(r state.Reader, prefix []byte, generations bool) error {
	lo := append(slices.Clip(prefix), keyTerm)
	return r.Scan(lo, state.PrefixEnd(lo), func(k, v []byte) error {
		if len(k) != len(lo)+4 {
			return errCorrupt
		}
		return c.restoreTerm(binary.BigEndian.Uint32(k[len(lo):]), v, generations)
	})
}

// restoreStories adds the stored open stories under prefix, with their
// postings and their entries in the latest-time heap (not yet a heap).
func (c *Clusterer) restoreStories(r state.Reader, prefix []byte) error {
	lo := append(slices.Clip(prefix), keyStory)
	return r.Scan(lo, state.PrefixEnd(lo), func(k, v []byte) error {
		if len(k) != len(lo)+8 {
			return errCorrupt
		}
		st, err := c.decodeStory(binary.BigEndian.Uint64(k[len(lo):]), v)
		if err != nil {
			return err
		}
		for _, e := range st.terms {
			st.normSq += float64(e.W) * float64(e.W)
			// Scanned in ascending story order: appends keep postings sorted.
			c.postings[e.ID] = append(c.postings[e.ID], st.num)
		}
		c.open.put(st)
		c.byLast = append(c.byLast, lastEntry{last: st.last, num: st.num})
		return nil
	})
}

// decodeStory decodes the record v of story num: its size and latest
// time, its terms and names, which must be known term ids, and its first
// and mean times (its latest time in a record stored before them).
func (c *Clusterer) decodeStory(num uint64, v []byte) (*centroid, error) {
	st := &centroid{num: num}
	size, n := binary.Uvarint(v)
	if n <= 0 {
		return nil, errCorrupt
	}
	v = v[n:]
	last, n := binary.Uvarint(v)
	if n <= 0 {
		return nil, errCorrupt
	}
	v = v[n:]
	st.size, st.last = int(size), int64(last)
	st.first, st.mean = st.last, st.last
	for len(v) > 0 {
		id, n := binary.Uvarint(v)
		switch {
		case n > 0 && id == timesMark:
			var ok bool
			if st.first, st.mean, ok = decodeTimes(v[n:]); !ok {
				return nil, errCorrupt
			}
			return st, nil
		case n > 0 && id&nameFlag != 0:
			if id &^= nameFlag; id&^nameKind >= uint64(len(c.words)) {
				return nil, errCorrupt
			}
			st.names = append(st.names, uint32(id))
			v = v[n:]
		default:
			if n <= 0 || len(v) < n+4 || id >= uint64(len(c.words)) {
				return nil, errCorrupt
			}
			w := math.Float32frombits(binary.LittleEndian.Uint32(v[n:]))
			st.terms = append(st.terms, term{ID: uint32(id), W: w})
			v = v[n+4:]
		}
	}
	return st, nil
}

// decodeTimes decodes the first and mean times that end a story record,
// after its timesMark: ok is false unless they are exactly what v holds.
func decodeTimes(v []byte) (first, mean int64, ok bool) {
	first, n := binary.Varint(v)
	if n <= 0 {
		return 0, 0, false
	}
	v = v[n:]
	mean, n = binary.Varint(v)
	if n <= 0 || len(v) != n {
		return 0, 0, false
	}
	return first, mean, true
}
