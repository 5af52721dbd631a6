package story

import (
	"cmp"
	"container/heap"
	"errors"
	"fmt"
	"iter"
	"math"
	"slices"
	"time"

	"github.com/newsflow/newsflow/internal/option"
	"github.com/newsflow/newsflow/operators/internal/features"
	"github.com/newsflow/newsflow/operators/story/model"
)

// ClusterOptions tune the story-level clustering.
//
// Similarities are cosines between an article's TF-IDF vector and a story's
// centroid, multiplied by exp(-Decay·h), where h is the number of hours
// between the article and the story's latest article. Thresholds depend on
// how long the article's text is: short texts (headlines) share few words
// with anything, long ones share many, so each threshold is interpolated on
// a log scale between its value at ShortTerms distinct terms and at
// LongTerms.
type ClusterOptions struct {
	// Threshold is the least decayed similarity for an article to join a
	// story (defaults 0.1 for headlines, 0.3 for full texts).
	Threshold     float64 `yaml:"threshold"`
	ThresholdLong float64 `yaml:"threshold_long"`
	// Bridge is the least decayed similarity of an article to a second
	// story for that story to be considered for merging with the one the
	// article joined (defaults 0.2 and 0.4).
	Bridge     float64 `yaml:"-"`
	BridgeLong float64 `yaml:"-"`
	// Merge is the least cosine between the two stories' centroids, decayed
	// by the time between their latest articles, for them to merge
	// (defaults 0.25 and 0.4).
	Merge     float64 `yaml:"-"`
	MergeLong float64 `yaml:"-"`
	// ShortTerms and LongTerms are the distinct-term counts where the short
	// and long thresholds apply (defaults 10 and 150).
	ShortTerms int `yaml:"-"`
	LongTerms  int `yaml:"-"`
	// SmallBoost is added to the join threshold of a story of one article,
	// and SmallBoost/n to one of n articles (default 0.15).
	SmallBoost float64 `yaml:"-"`
	// Decay is the similarity decay per hour of distance in event time
	// (default 0.1, the decay rate of a regular story).
	Decay float64 `yaml:"decay"`
	// TitleWeight multiplies term frequencies of title words (default 2).
	TitleWeight float64 `yaml:"-"`
	// GenericWeight multiplies the term frequencies of generic words:
	// headline boilerplate ("live updates", "what we know", "explainer",
	// "opinion") and common words that say little about an event (default
	// 0.3; 1 weighs them as any word).
	GenericWeight float64 `yaml:"-"`
	// MinShared is the least number of words other than generic ones that
	// an article must share with a story of at most SmallStory articles to
	// join it (defaults 2 and 3), and that an article's story and another
	// must share for the article to merge them: one shared name is not
	// enough to found a story together. A larger story is joined by
	// similarity to its centroid, which many articles define.
	MinShared  int `yaml:"-"`
	SmallStory int `yaml:"-"`
	// MaxTerms caps an article vector to its highest-weighted terms
	// (default 48); StoryTerms caps a story centroid (default 64).
	MaxTerms   int `yaml:"-"`
	StoryTerms int `yaml:"-"`
	// ProbeTerms is how many of an article's highest-weighted terms are
	// looked up to find candidate stories (default 8), and ProbeDepth how
	// many of the newest stories holding each term are considered (default
	// 50). Together they bound the cost of an assignment whatever the
	// number of active stories.
	ProbeTerms int `yaml:"-"`
	ProbeDepth int `yaml:"-"`
	// Window is how long a story stays open for new articles after its
	// latest one (default 72h); older stories are closed.
	Window time.Duration `yaml:"window"`
	// Model is the learned story model (learned.go) that decides instead
	// of Threshold and Bridge; nil decides by the thresholds. A
	// clusterer's state records the model it was built by, and a restore
	// with another refuses it (ErrModelChanged).
	Model *model.Model `yaml:"-"`
}

// DefaultClusterOptions returns the defaults the zero value stands for.
func DefaultClusterOptions() ClusterOptions {
	return ClusterOptions{
		Threshold: 0.1, ThresholdLong: 0.3,
		Bridge: 0.2, BridgeLong: 0.4,
		Merge: 0.25, MergeLong: 0.4,
		ShortTerms: 10, LongTerms: 150,
		SmallBoost:  0.15,
		Decay:       0.1,
		TitleWeight: 2, GenericWeight: 0.3,
		MinShared: 2, SmallStory: 3,
		MaxTerms: 48, StoryTerms: 64,
		ProbeTerms: 8, ProbeDepth: 50,
		Window: 72 * time.Hour,
	}
}

// Validate reports invalid option values.
func (o ClusterOptions) Validate() error {
	for _, v := range []float64{o.Threshold, o.ThresholdLong, o.Bridge, o.BridgeLong, o.Merge, o.MergeLong} {
		if v < 0 || v > 1 || math.IsNaN(v) {
			return fmt.Errorf("story: similarity thresholds must be from 0 to 1, got %v", v)
		}
	}
	switch {
	case o.Decay < 0 || math.IsNaN(o.Decay):
		return errors.New("story: decay must not be negative")
	case o.TitleWeight < 0 || o.GenericWeight < 0 || o.GenericWeight > 1 || math.IsNaN(o.GenericWeight):
		return errors.New("story: title weight must not be negative, generic weight must be from 0 to 1")
	case o.MinShared < 0 || o.SmallStory < 0:
		return errors.New("story: min shared and small story must not be negative")
	case o.ShortTerms < 0 || o.LongTerms < 0 || (o.LongTerms != 0 && o.ShortTerms >= o.LongTerms):
		return errors.New("story: short terms must be below long terms")
	case o.MaxTerms < 0 || o.StoryTerms < 0 || o.ProbeTerms < 0 || o.ProbeDepth < 0:
		return errors.New("story: term and probe limits must not be negative")
	case o.Window < 0:
		return errors.New("story: window must not be negative")
	}
	if o.Model != nil {
		return CheckStageModel(o.Model)
	}
	return nil
}

// term is one weighted dimension of a sparse vector. Vectors are sorted by
// term id, so dot products are merge joins and sums are deterministic.
type term struct {
	ID uint32
	W  float32
}

// centroid is the clustering state of one open story.
type centroid struct {
	num    uint64 // story number: creation order, used for ordering
	terms  []term // sum of member unit vectors, pruned to StoryTerms
	normSq float64
	size   int
	last   int64 // event time of the latest article, ms
	// first and mean are the event times of the earliest article and the
	// mean of all (ms).
	first, mean int64
	seen        uint64 // Clusterer.epoch when last scored
	// names are the term ids of its members' names (names.go; parts and
	// weak ones with partName or weakName set) that its terms still hold, ascending, at most
	// maxNames.
	names []uint32
}

// maxNames bounds a story's names: the heaviest in its centroid stay.
const maxNames = 32

// Clusterer assigns articles to stories, online and deterministically: the
// same articles in the same order always give the same stories, and a
// Clusterer restored from its Snapshot continues exactly as the original.
// It is not safe for concurrent use.
type Clusterer struct {
	opts ClusterOptions

	// The vocabulary and document frequencies cover two generations of
	// Window each: the current one, which began at gen, and the one
	// before. When the watermark enters a new generation, the counts
	// shift back and a term counted in neither generation is forgotten
	// unless an open story's centroid holds it; its id is free for the
	// next new term (the lowest free id first). So both stay bounded by
	// the words of the last two windows, however long the stream.
	vocab    map[string]uint32
	words    []string // id → word; "" for a free id
	generic  []bool   // id → generic(word)
	df       []uint32 // documents containing each term, current generation
	dfPrev   []uint32 // the same, previous generation
	docs     uint64   // documents, current generation
	docsPrev uint64
	gen      int64    // start of the current generation (event time, ms); 0 before the first article
	freeIDs  []uint32 // free ids, ascending
	// forgotten lists the terms forgotten since the last Persist.
	forgotten []uint32
	// lastVec is the vector Vectorize returned last, until Assign or
	// Join takes it: a rotation they make first keeps its terms.
	lastVec Vector

	open     openSet
	postings map[uint32][]uint64 // term → story numbers, ascending
	nextNum  uint64
	epoch    uint64    // candidates calls, for centroid.seen
	dense    []float32 // the current article's weights by term id, else 0
	byLast   lastHeap  // open stories by latest article time
	wm       int64     // watermark: the latest event time seen

	// dirty records what changed since the last TakeChanges.
	dirtyTerms   map[uint32]struct{}
	dirtyStories map[uint64]struct{}
	closed       []uint64

	// scratch
	terms features.TermCounter
	cands []candidate
	// explaining makes Assign record explained (explain.go).
	explaining bool
	explained  Explanation
	// With a model (learned.go): scratch of its scores, and observe, when
	// set (in training), sees each choice the model makes.
	scored  []scored
	featBuf []float64
	decBuf  []float64
	bridges []candidate
	observe func(ss []scored, join float64)
}

// candidate is an open story scored against an article: sim is its
// cosine with the story's centroid decayed by the time between them, cos
// the cosine itself, shared the words other than generic ones they share.
type candidate struct {
	num    uint64
	sim    float64
	cos    float64
	shared int
}

// NewClusterer returns an empty clusterer.
func NewClusterer(opts ClusterOptions) (*Clusterer, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	option.Fill(&opts, DefaultClusterOptions())
	return &Clusterer{
		opts:         opts,
		vocab:        map[string]uint32{},
		postings:     map[uint32][]uint64{},
		dirtyTerms:   map[uint32]struct{}{},
		dirtyStories: map[uint64]struct{}{},
	}, nil
}

// Text is what the clusterer reads of an article.
type Text struct {
	Title, Body string
	// Time is the article's event time in ms since the epoch.
	Time int64
}

// Assignment is the clusterer's decision for one article.
type Assignment struct {
	// Story is the number of the story the article joined; New reports
	// that the article founded it.
	Story uint64
	New   bool
	// Merged lists stories merged into Story because the article bridged
	// them, in ascending order. They no longer exist.
	Merged []uint64
	// Similarity is the decayed similarity to Story (0 for a new story).
	Similarity float64
}

// Vector is an article's TF-IDF vector, as computed by Vectorize.
type Vector []term

// Vectorize computes the article's unit TF-IDF vector and counts it in the
// document frequencies. Call it once per article, before Assign or Join.
func (c *Clusterer) Vectorize(t Text) Vector {
	return c.VectorizeTerms(c.terms.Terms(t.Title, t.Body), t.Time)
}

// VectorizeTerms is Vectorize for the index terms of an article's title and
// body with their counts, in order of first occurrence (features.Term, as
// features.TermCounter counts them: the articles operator computes them
// for the record), and its event time. Given the terms of a text, it
// returns what Vectorize returns for the text, and changes the clusterer
// alike.
func (c *Clusterer) VectorizeTerms(terms []features.Term, now int64) Vector {
	// Into the generation of the article first, so that it counts there;
	// rotate also keeps the terms of the vector returned last, until the
	// next.
	c.expire(now)
	v := make(Vector, 0, len(terms))
	for _, t := range terms {
		// New terms get ids in order of first occurrence.
		id := c.termID(t.Word)
		// The frequency adds the word's weight once per occurrence, the
		// title's first: the float64 sum of the text's tokens in order.
		w := c.wordWeight(id)
		tw := c.opts.TitleWeight * w
		var n float64
		for range t.Title {
			n += tw
		}
		for range t.Summary {
			n += w
		}
		v = append(v, term{ID: id, W: float32(n)})
	}
	// Weight in a fixed order. A word listed twice (terms are distinct
	// unless a record's producer erred) counts once in the frequencies.
	slices.SortFunc(v, func(a, b term) int { return cmp.Compare(a.ID, b.ID) })
	v = slices.CompactFunc(v, func(a, b term) bool { return a.ID == b.ID })
	c.docs++
	for _, e := range v {
		c.df[e.ID]++
		c.dirtyTerms[e.ID] = struct{}{}
	}
	for i := range v {
		// Sublinear in the frequency above 1, linear below (a generic word
		// seen once weighs GenericWeight).
		tf := float64(v[i].W)
		if tf > 1 {
			tf = 1 + math.Log(tf)
		}
		v[i].W = float32(tf * c.idf(v[i].ID))
	}
	if len(v) > c.opts.MaxTerms {
		slices.SortFunc(v, byWeightDesc)
		v = v[:c.opts.MaxTerms]
		slices.SortFunc(v, func(a, b term) int { return cmp.Compare(a.ID, b.ID) })
	}
	var n float64
	for _, e := range v {
		n += float64(e.W) * float64(e.W)
	}
	if n > 0 {
		inv := 1 / math.Sqrt(n)
		for i := range v {
			v[i].W = float32(float64(v[i].W) * inv)
		}
	}
	c.lastVec = v
	return v
}

func (c *Clusterer) wordWeight(id uint32) float64 {
	if c.generic[id] {
		return c.opts.GenericWeight
	}
	return 1
}

func byWeightDesc(a, b term) int {
	switch {
	case a.W > b.W:
		return -1
	case a.W < b.W:
		return 1
	}
	return cmp.Compare(a.ID, b.ID)
}

// termID returns the id of an index term, giving a new one the next id.
func (c *Clusterer) termID(b []byte) uint32 {
	if id, ok := c.vocab[string(b)]; ok {
		return id
	}
	w := string(b)
	if len(c.freeIDs) > 0 {
		id := c.freeIDs[0]
		c.freeIDs = c.freeIDs[1:]
		c.vocab[w] = id
		c.words[id], c.generic[id], c.df[id], c.dfPrev[id] = w, generic(w), 0, 0
		return id
	}
	id := uint32(len(c.words))
	c.vocab[w] = id
	c.words = append(c.words, w)
	c.generic = append(c.generic, generic(w))
	c.df = append(c.df, 0)
	c.dfPrev = append(c.dfPrev, 0)
	return id
}

func (c *Clusterer) idf(id uint32) float64 {
	return math.Log(float64(c.docs+c.docsPrev+1)/float64(c.df[id]+c.dfPrev[id]+1)) + 1
}

// Terms reports the number of terms in the vocabulary.
func (c *Clusterer) Terms() int { return len(c.vocab) }

// rotate moves the document frequencies into the generation that holds
// the watermark, forgetting the terms that neither generation counts and
// no open story holds.
func (c *Clusterer) rotate() {
	window := c.opts.Window.Milliseconds()
	if c.gen == 0 {
		c.gen = c.wm
		return
	}
	if c.wm < c.gen+window {
		return
	}
	passed := (c.wm - c.gen) / window
	c.gen += passed * window
	if passed == 1 {
		c.docsPrev, c.docs = c.docs, 0
	} else {
		c.docsPrev, c.docs = 0, 0
	}
	held := make([]bool, len(c.words))
	for _, e := range c.lastVec {
		held[e.ID] = true
	}
	for _, st := range c.open.items {
		if st != nil {
			for _, e := range st.terms {
				held[e.ID] = true
			}
		}
	}
	c.freeIDs = c.freeIDs[:0]
	for id, w := range c.words {
		if w == "" {
			c.freeIDs = append(c.freeIDs, uint32(id))
			continue
		}
		prev := c.df[id]
		if passed > 1 {
			prev = 0
		}
		if prev == c.dfPrev[id] && c.df[id] == 0 {
			// Unchanged (both zero): nothing to write.
		} else {
			c.dirtyTerms[uint32(id)] = struct{}{}
		}
		c.dfPrev[id], c.df[id] = prev, 0
		if prev == 0 && !held[id] {
			delete(c.vocab, w)
			delete(c.postings, uint32(id))
			delete(c.dirtyTerms, uint32(id))
			c.words[id], c.generic[id] = "", false
			c.freeIDs = append(c.freeIDs, uint32(id))
			c.forgotten = append(c.forgotten, uint32(id))
		}
	}
}

// threshold interpolates between a short-text and a long-text value.
func (c *Clusterer) threshold(v Vector, short, long float64) float64 {
	n := float64(len(v))
	lo, hi := float64(c.opts.ShortTerms), float64(c.opts.LongTerms)
	switch {
	case n <= lo:
		return short
	case n >= hi:
		return long
	}
	f := math.Log(n/lo) / math.Log(hi/lo)
	return short + f*(long-short)
}

func (c *Clusterer) decay(a, b int64) float64 {
	h := math.Abs(float64(a-b)) / float64(time.Hour/time.Millisecond)
	return math.Exp(-c.opts.Decay * h)
}

// Assign puts an article into the most similar open story, or a new one,
// and merges stories the article bridges. now is the article's event time.
func (c *Clusterer) Assign(v Vector, now int64) Assignment { return c.AssignNames(v, nil, now) }

// Names returns the term ids of the names of an article's title and body
// (names.go) among the terms of its vector v, weak ones with weakName set,
// for AssignNames and JoinNames.
func (c *Clusterer) Names(v Vector, title, body string) []uint32 {
	strong, parts, weak := nameTokens(title, body)
	var ids []uint32
	for i, toks := range [][]string{strong, parts, weak} {
		for _, tok := range toks {
			if id, ok := c.vocab[tok]; ok && hasTerm(v, id) {
				ids = append(ids, id|[]uint32{0, partName, weakName}[i])
			}
		}
	}
	return normNames(ids)
}

// partName and weakName mark the term id of a part of a name and of a weak
// name (names.go); term ids are below both.
const (
	partName = 1 << 30
	weakName = 1 << 31
	nameKind = partName | weakName
)

// normNames sorts names and drops repeats, keeping each word's strongest
// kind (strong, then part, then weak).
func normNames(ids []uint32) []uint32 {
	slices.Sort(ids)
	ids = slices.Compact(ids)
	return slices.DeleteFunc(ids, func(n uint32) bool {
		id := n &^ nameKind
		return n&weakName != 0 && (hasName(ids, id) || hasName(ids, id|partName)) || n&partName != 0 && hasName(ids, id)
	})
}

// hasName reports whether the sorted names hold n (a term id with its kind).
func hasName(names []uint32, n uint32) bool {
	_, ok := slices.BinarySearch(names, n)
	return ok
}

// AssignNames is Assign for an article that names names (Names): it joins
// no story, and bridges no stories, whose names it shares none of
// (namesApart).
func (c *Clusterer) AssignNames(v Vector, names []uint32, now int64) Assignment {
	c.expire(now)
	c.lastVec = nil // assigned: its terms count as the story's now
	cands := c.candidates(v, now)
	th := c.threshold(v, c.opts.Threshold, c.opts.ThresholdLong)
	var a Assignment
	a.New = true
	if c.opts.Model != nil {
		if k := c.chooseLearned(v, names, cands, now); k >= 0 {
			a.Story, a.Similarity, a.New = c.scored[k].num, c.scored[k].sim, false
		}
	} else {
		for _, cd := range cands {
			if cd.sim >= c.joinThreshold(th, c.open.get(cd.num).size) && !namesApart(names, v, c.open.get(cd.num)) {
				a.Story, a.Similarity, a.New = cd.num, cd.sim, false
				break
			}
		}
	}
	if c.explaining { // before the article changes its story
		c.explainCandidates(v, now, cands, th)
	}
	if a.New {
		a.Story = c.newStory()
	}
	st := c.open.get(a.Story)
	c.add(st, v, now)
	c.addNames(st, names)
	if a.New {
		if c.explaining {
			c.explainDecision(a, nil, 0)
		}
		// An article that joined no story bridges nothing: merging its new
		// story would let it into a story it was not similar enough to join.
		return a
	}
	bridge := c.threshold(v, c.opts.Bridge, c.opts.BridgeLong)
	merge := c.threshold(v, c.opts.Merge, c.opts.MergeLong)
	var mergedAt map[uint64]float64 // for explained
	for _, cd := range c.bridgeCandidates(cands) {
		if cd.num == a.Story || c.opts.Model == nil && cd.sim < bridge {
			continue
		}
		o := c.open.get(cd.num)
		if o == nil {
			continue
		}
		cs := dot(o.terms, st.terms) / math.Sqrt(o.normSq*st.normSq)
		if c.opts.Model == nil { // a model weighs time in the decision
			cs *= c.decay(o.last, st.last)
		}
		if cs < merge || c.sharedWords(o.terms, st.terms) < c.opts.MinShared || namesApart(o.names, o.terms, st) {
			continue
		}
		// The older story survives, so story ids stay those of the first
		// article.
		if c.explaining {
			if mergedAt == nil {
				mergedAt = map[uint64]float64{}
			}
			mergedAt[min(o.num, st.num)], mergedAt[max(o.num, st.num)] = cs, cs
		}
		if o.num < st.num {
			o, st = st, o
			a.Merged = append(a.Merged, a.Story)
			a.Story = st.num
		} else {
			a.Merged = append(a.Merged, o.num)
		}
		c.absorb(st, o)
	}
	slices.Sort(a.Merged)
	if c.explaining {
		c.explainDecision(a, mergedAt, merge)
	}
	return a
}

// joinThreshold raises the threshold th for small stories: a centroid of
// one or two articles matches a headline on a single shared word, while a
// centroid of many is diffuse and matches on less. Size 1 needs SmallBoost
// more, falling as 1/size.
func (c *Clusterer) joinThreshold(th float64, size int) float64 {
	return th + c.opts.SmallBoost/float64(max(1, size))
}

// Join adds an article to a given open story (a near-duplicate of one of
// its articles) without searching. It reports false if the story is closed.
func (c *Clusterer) Join(num uint64, v Vector, now int64) bool { return c.JoinNames(num, v, nil, now) }

// JoinNames is Join for an article that names names (Names).
func (c *Clusterer) JoinNames(num uint64, v Vector, names []uint32, now int64) bool {
	c.expire(now)
	c.lastVec = nil
	st := c.open.get(num)
	if c.explaining {
		c.explained = Explanation{Joined: num}
	}
	if st == nil {
		return false
	}
	c.add(st, v, now)
	c.addNames(st, names)
	return true
}

// namesApart reports whether an article (or a story) with names and terms
// and story st are about different things for all their shared words:
// both name something, and none of their names is shared: a strong name
// when the other holds it among its terms, a part when the other names it
// too, a weak one when the other names it as a strong name or a part.
func namesApart(names []uint32, terms []term, st *centroid) bool {
	if len(names) == 0 || len(st.names) == 0 {
		return false
	}
	shared := func(n uint32, otherTerms []term, otherNames []uint32) bool {
		id := n &^ nameKind
		switch {
		case n&weakName != 0:
			return hasName(otherNames, id) || hasName(otherNames, id|partName)
		case n&partName != 0:
			return hasName(otherNames, id) || hasName(otherNames, id|partName) || hasName(otherNames, id|weakName)
		}
		return hasTerm(otherTerms, id)
	}
	for _, n := range names {
		if shared(n, st.terms, st.names) {
			return false
		}
	}
	for _, n := range st.names {
		if shared(n, terms, names) {
			return false
		}
	}
	return true
}

// addNames adds names to st's, then keeps those its terms still hold, at
// most maxNames, the heaviest.
func (c *Clusterer) addNames(st *centroid, names []uint32) {
	all := normNames(append(slices.Clip(st.names), names...))
	kept := all[:0]
	for _, n := range all {
		if hasTerm(st.terms, n&^nameKind) {
			kept = append(kept, n)
		}
	}
	if len(kept) > maxNames {
		weight := func(n uint32) float32 {
			i, _ := slices.BinarySearchFunc(st.terms, n&^nameKind, func(t term, id uint32) int { return cmp.Compare(t.ID, id) })
			return st.terms[i].W
		}
		slices.SortStableFunc(kept, func(a, b uint32) int { return cmp.Compare(weight(b), weight(a)) })
		kept = kept[:maxNames]
		slices.Sort(kept)
	}
	if !slices.Equal(kept, st.names) {
		st.names = slices.Clone(kept)
		c.dirtyStories[st.num] = struct{}{}
	}
}

// candidates scores the open stories sharing one of the article's most
// distinctive terms, best first. Its filters (live postings within the
// probe depth, an age past which decay alone is below the thresholds, the
// shared evidence of small stories, the score floor) run in the order
// that makes the cheap ones run first. It is the clustering's hot loop:
// beyond the buffers it keeps (c.dense, c.cands), it allocates only a
// long article's probe terms.
func (c *Clusterer) candidates(v Vector, now int64) []candidate {
	probe := c.probeTerms(v)
	lim := c.probeLimits(v, now)
	c.epoch++
	c.cands = c.cands[:0]
	c.spread(v)
	defer c.unspread(v)
	for _, e := range probe {
		c.probePostings(e.ID, &lim)
	}
	slices.SortFunc(c.cands, bySimDesc)
	return c.cands
}

// probeTerms returns the ProbeTerms heaviest terms of v, or v itself when
// it has no more.
func (c *Clusterer) probeTerms(v Vector) Vector {
	if len(v) <= c.opts.ProbeTerms {
		return v
	}
	probe := slices.Clone(v)
	slices.SortFunc(probe, byWeightDesc)
	return probe[:c.opts.ProbeTerms]
}

// limits bound the stories candidates scores for an article at time now.
type limits struct {
	now int64
	// lo is the lowest similarity a candidate is used at; stories older
	// than maxAge (ms) have a decay below it.
	lo     float64
	maxAge int64
}

// probeLimits returns the limits of article v's candidates at time now.
func (c *Clusterer) probeLimits(v Vector, now int64) limits {
	// Candidates below both the join and the bridge threshold are never
	// used; cosines are at most 1, so a story whose decay alone is below
	// them needs no dot product.
	lim := limits{now: now, maxAge: math.MaxInt64}
	lim.lo = min(c.threshold(v, c.opts.Threshold, c.opts.ThresholdLong), c.threshold(v, c.opts.Bridge, c.opts.BridgeLong))
	if c.opts.Model != nil {
		lim.lo = 0 // the model weighs time itself; learnedFloor bounds the cosine
	}
	if c.opts.Decay > 0 && lim.lo > 0 {
		lim.maxAge = int64(-math.Log(lim.lo) / c.opts.Decay * float64(time.Hour/time.Millisecond))
	}
	return lim
}

// spread writes v's weights into c.dense, by term id; unspread clears
// them.
func (c *Clusterer) spread(v Vector) {
	if len(c.dense) < len(c.words) {
		c.dense = make([]float32, len(c.words)+len(c.words)/4)
	}
	for _, t := range v {
		c.dense[t.ID] = t.W
	}
}

func (c *Clusterer) unspread(v Vector) {
	for _, t := range v {
		c.dense[t.ID] = 0
	}
}

// probePostings scores the newest stories posted under term id, up to
// ProbeDepth live ones, and compacts the postings when most entries it
// passed were dead.
func (c *Clusterer) probePostings(id uint32, lim *limits) {
	// Postings may hold closed stories and stories that pruned the term;
	// only live entries count towards ProbeDepth, so the result does not
	// depend on when postings were last compacted.
	ps := c.postings[id]
	live, dead := 0, 0
	for i := len(ps) - 1; i >= 0 && live < c.opts.ProbeDepth; i-- {
		if c.probeStory(c.open.get(ps[i]), id, lim) {
			live++
		} else {
			dead++
		}
	}
	if dead > 64 && dead > len(ps)/2 {
		c.compact(id)
	}
}

// probeStory reports whether story st, found under term id's postings, is
// live: open and still holding the term. A live story not yet seen this
// epoch is scored, unless it is older than the limits' maxAge, and added
// to the candidates when it passes them.
func (c *Clusterer) probeStory(st *centroid, id uint32, lim *limits) bool {
	switch {
	case st == nil:
		return false
	case st.seen == c.epoch:
		return hasTerm(st.terms, id)
	case abs(lim.now-st.last) > lim.maxAge:
		if !hasTerm(st.terms, id) {
			return false
		}
		st.seen = c.epoch
		return true
	}
	d, has, shared := c.overlap(st, id)
	if !has {
		return false
	}
	st.seen = c.epoch
	cos := d / math.Sqrt(st.normSq)
	sim := cos * c.decay(lim.now, st.last)
	if c.admits(st, sim, cos, shared, lim.lo) {
		c.cands = append(c.cands, candidate{num: st.num, sim: sim, cos: cos, shared: shared})
	}
	return true
}

// overlap returns the dot product of st's terms with the article's (in
// c.dense), whether st holds term id, and how many of the article's terms
// other than generic words st holds.
func (c *Clusterer) overlap(st *centroid, id uint32) (d float64, has bool, shared int) {
	for _, t := range st.terms {
		w := c.dense[t.ID]
		d += float64(w) * float64(t.W)
		has = has || t.ID == id
		if w > 0 && !c.generic[t.ID] {
			shared++
		}
	}
	return d, has, shared
}

// admits reports whether story st, at similarity sim and cosine cos with
// shared words in common with the article, is a candidate: not below lo,
// with the shared evidence a small story needs, and, with a model, above
// learnedFloor with a shared word.
func (c *Clusterer) admits(st *centroid, sim, cos float64, shared int, lo float64) bool {
	if sim < lo || (st.size <= c.opts.SmallStory && shared < c.opts.MinShared) {
		return false
	}
	if c.opts.Model != nil && (cos < learnedFloor || shared == 0) {
		return false
	}
	return true
}

// bySimDesc orders candidates by similarity, highest first, then by story
// number.
func bySimDesc(a, b candidate) int {
	switch {
	case a.sim > b.sim:
		return -1
	case a.sim < b.sim:
		return 1
	case a.num < b.num:
		return -1
	case a.num > b.num:
		return 1
	}
	return 0
}

func hasTerm(ts []term, id uint32) bool {
	_, ok := slices.BinarySearchFunc(ts, id, func(t term, id uint32) int { return cmp.Compare(t.ID, id) })
	return ok
}

// compact drops closed stories and stories without the term from a
// posting list.
func (c *Clusterer) compact(id uint32) {
	ps := c.postings[id]
	k := 0
	for _, num := range ps {
		if st := c.open.get(num); st != nil && hasTerm(st.terms, id) {
			ps[k] = num
			k++
		}
	}
	if k == 0 {
		delete(c.postings, id)
		return
	}
	c.postings[id] = slices.Clip(ps[:k])
}

// sharedWords counts the terms other than generic words that a and b
// both hold.
func (c *Clusterer) sharedWords(a, b []term) int {
	n := 0
	for x := range sharedTerms(a, b) {
		if !c.generic[x.ID] {
			n++
		}
	}
	return n
}

func dot(a, b []term) float64 {
	var s float64
	for x, y := range sharedTerms(a, b) {
		s += float64(x.W) * float64(y.W)
	}
	return s
}

// sharedTerms yields the terms of a and b, both sorted by id, that have
// the same id: a's and b's, in id order.
func sharedTerms(a, b []term) iter.Seq2[term, term] {
	return func(yield func(term, term) bool) {
		i, j := 0, 0
		for i < len(a) && j < len(b) {
			switch {
			case a[i].ID < b[j].ID:
				i++
			case a[i].ID > b[j].ID:
				j++
			default:
				if !yield(a[i], b[j]) {
					return
				}
				i++
				j++
			}
		}
	}
}

func (c *Clusterer) newStory() uint64 {
	num := c.nextNum
	c.nextNum++
	c.open.put(&centroid{num: num})
	return num
}

// add folds unit vector v into the story's centroid.
func (c *Clusterer) add(st *centroid, v Vector, now int64) {
	a, b := []term(st.terms), []term(v)
	if st.size > 0 {
		a, b = c.align(a, st.last, b, now)
	}
	st.terms = c.sum(st, a, b)
	st.size++
	if st.size == 1 {
		st.first, st.mean = now, now
	} else {
		st.first = min(st.first, now)
		st.mean += (now - st.mean) / int64(st.size)
	}
	c.touch(st, now)
}

// touch moves the story's latest time forward and marks it changed.
func (c *Clusterer) touch(st *centroid, t int64) {
	if t > st.last || st.size == 1 {
		st.last = max(st.last, t)
		heap.Push(&c.byLast, lastEntry{last: st.last, num: st.num})
	}
	c.dirtyStories[st.num] = struct{}{}
}

// absorb merges story o into st and closes o.
func (c *Clusterer) absorb(st, o *centroid) {
	a, b := c.align(st.terms, st.last, o.terms, o.last)
	st.terms = c.sum(st, a, b)
	c.addNames(st, o.names)
	st.first = min(st.first, o.first)
	st.mean += (o.mean - st.mean) * int64(o.size) / int64(st.size+o.size)
	st.size += o.size
	c.touch(st, o.last)
	c.close(o.num)
}

// sum returns a+b pruned to StoryTerms, recomputes st's norm and posts st
// under terms it did not have.
func (c *Clusterer) sum(st *centroid, a, b []term) []term {
	out := make([]term, 0, len(a)+len(b))
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case j == len(b) || (i < len(a) && a[i].ID < b[j].ID):
			out = append(out, a[i])
			i++
		case i == len(a) || b[j].ID < a[i].ID:
			out = append(out, b[j])
			j++
		default:
			out = append(out, term{ID: a[i].ID, W: a[i].W + b[j].W})
			i++
			j++
		}
	}
	if len(out) > c.opts.StoryTerms {
		slices.SortFunc(out, byWeightDesc)
		out = out[:c.opts.StoryTerms]
		slices.SortFunc(out, func(x, y term) int { return cmp.Compare(x.ID, y.ID) })
	}
	// Post under new terms; terms pruned away stay posted and are
	// skipped by dot products (their weight is gone).
	k := 0
	for _, e := range out {
		for k < len(a) && a[k].ID < e.ID {
			k++
		}
		if k < len(a) && a[k].ID == e.ID {
			continue
		}
		c.post(e.ID, st.num)
	}
	var n float64
	for _, e := range out {
		n += float64(e.W) * float64(e.W)
	}
	st.normSq = n
	return out
}

func (c *Clusterer) post(id uint32, num uint64) {
	ps := c.postings[id]
	i, found := slices.BinarySearch(ps, num)
	if found {
		return
	}
	c.postings[id] = slices.Insert(ps, i, num)
}

// close removes a story from the open set.
func (c *Clusterer) close(num uint64) {
	c.open.remove(num)
	delete(c.dirtyStories, num)
	c.closed = append(c.closed, num)
}

// expire closes stories whose latest article is older than Window before
// now, oldest first.
//
// Event times may arrive out of order, so expiry follows the watermark,
// the latest event time seen, never moving back.
func (c *Clusterer) expire(now int64) {
	c.wm = max(c.wm, now)
	defer c.rotate() // after closing: a closed story holds no term
	limit := c.wm - c.opts.Window.Milliseconds()
	for len(c.byLast) > 0 && c.byLast[0].last < limit {
		e := heap.Pop(&c.byLast).(lastEntry)
		if st := c.open.get(e.num); st != nil && st.last == e.last {
			c.close(e.num)
		}
	}
}

// lastEntry records that story num had its latest article at last; entries
// made stale by later articles are skipped when popped.
type lastEntry struct {
	last int64
	num  uint64
}

type lastHeap []lastEntry

func (h lastHeap) Len() int { return len(h) }
func (h lastHeap) Less(i, j int) bool {
	if h[i].last != h[j].last {
		return h[i].last < h[j].last
	}
	return h[i].num < h[j].num
}
func (h lastHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *lastHeap) Push(x any)   { *h = append(*h, x.(lastEntry)) }
func (h *lastHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

// Advance moves the watermark to now, if later, and closes the stories
// that expire with it.
func (c *Clusterer) Advance(now int64) { c.expire(now) }

// Open reports the number of open stories.
func (c *Clusterer) Open() int { return c.open.n }

// openSet holds the open stories by number. Story numbers are dense and
// increasing, and stories close roughly in the order they opened, so a
// slice from the lowest open number is smaller and much faster to look up
// than a map; candidate scoring does hundreds of lookups per article.
type openSet struct {
	base  uint64 // number of items[0]
	items []*centroid
	n     int
}

func (s *openSet) get(num uint64) *centroid {
	if num < s.base || num-s.base >= uint64(len(s.items)) {
		return nil
	}
	return s.items[num-s.base]
}

// put adds a story; its number is above every number added before.
func (s *openSet) put(st *centroid) {
	if s.n == 0 {
		s.base, s.items = st.num, s.items[:0]
	}
	for s.base+uint64(len(s.items)) < st.num {
		s.items = append(s.items, nil)
	}
	s.items = append(s.items, st)
	s.n++
}

func (s *openSet) remove(num uint64) {
	if s.get(num) == nil {
		return
	}
	s.items[num-s.base] = nil
	s.n--
	// Drop closed stories from the front; move the rest down now and then
	// so the backing array does not grow forever.
	i := 0
	for i < len(s.items) && s.items[i] == nil {
		i++
	}
	if i > 0 {
		s.base += uint64(i)
		s.items = s.items[i:]
		if cap(s.items) > 1024 && len(s.items) < cap(s.items)/4 {
			s.items = append([]*centroid(nil), s.items...)
		}
	}
}
